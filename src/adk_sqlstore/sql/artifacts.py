"""Statements on artifacts: their versions (``sqlstore_artifacts``) and their bytes,
once per user and SHA-256 (``sqlstore_artifact_contents``), in chunks
(``sqlstore_artifact_chunks``, migration 0010).

Every statement names the user: ``(app_name, user_id)`` lead every key and every
condition. Writers of a user's artifacts hold the user lock in ``"exclusive"`` mode
(:mod:`.users`), so they take turns; a content is also locked (``FOR UPDATE``) by
whoever adds a version referring to it or deletes it (SQLite: the write transaction
excludes the others).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ..schema import artifact_chunks, artifact_contents, artifacts

__all__ = [
    "CHUNK_BYTES",
    "PENDING_PREFIX",
    "VERSION_COLUMNS",
    "ArtifactKey",
    "ArtifactRow",
    "address_clause",
    "address_params",
    "collect_contents",
    "count_chunks",
    "delete_artifact",
    "delete_chunks",
    "delete_version",
    "insert_chunks",
    "insert_content",
    "insert_version",
    "list_filenames",
    "list_versions",
    "lock_content",
    "next_version",
    "read_chunks",
    "read_version",
    "rename_chunks",
]

CHUNK_BYTES = 1 << 20
"""Bytes per chunk (1 MiB): a few chunks per statement stay far within MySQL's
default packet (16 MiB) and SQLite's and PostgreSQL's value limits."""

PENDING_PREFIX = "pending-"
"""The ``sha256`` of chunks still being streamed in (``pending-<epoch>-<uuid>``): not
a content yet, never collected as one, renamed to their SHA-256 when the stream ends."""


@dataclass(frozen=True)
class ArtifactKey:
    """Where an artifact's versions are: ``session_id`` is ``""`` for the user's own
    artifacts (``user:`` filenames)."""

    app_name: str
    user_id: str
    session_id: str
    filename: str

    def where(self) -> Any:
        return and_(
            artifacts.c.app_name == self.app_name,
            artifacts.c.user_id == self.user_id,
            artifacts.c.session_id == self.session_id,
            artifacts.c.filename == self.filename,
        )


@dataclass(frozen=True)
class ArtifactRow:
    """One stored version: its metadata, the part as JSON without its bytes, and the
    SHA-256 and size of its bytes (``None`` for a part without bytes)."""

    version: int
    mime_type: str | None
    custom_metadata: str
    create_time: float
    part: str
    content_sha256: str | None
    size: int | None


VERSION_COLUMNS = (
    artifacts.c.version,
    artifacts.c.mime_type,
    artifacts.c.custom_metadata,
    artifacts.c.create_time,
    artifacts.c.part,
    artifacts.c.content_sha256,
    artifacts.c.size,
)


def _of_user(table: Any, app_name: str, user_id: str) -> Any:
    return and_(table.c.app_name == app_name, table.c.user_id == user_id)


def address_clause() -> Any:
    """An artifact's address as bound parameters (``app_name``, ``user_id``,
    ``session_id``, ``filename``)."""
    return and_(
        artifacts.c.app_name == bindparam("app_name"),
        artifacts.c.user_id == bindparam("user_id"),
        artifacts.c.session_id == bindparam("session_id"),
        artifacts.c.filename == bindparam("filename"),
    )


def address_params(key: ArtifactKey) -> dict[str, Any]:
    return {
        "app_name": key.app_name,
        "user_id": key.user_id,
        "session_id": key.session_id,
        "filename": key.filename,
    }


# Statements of the hot paths, built once (building one costs about as much as running
# it), with bound parameters.
_NEWEST_VERSION = select(func.max(artifacts.c.version)).where(address_clause())
_LOCK_CONTENT = (
    select(artifact_contents.c.size)
    .where(
        artifact_contents.c.app_name == bindparam("app_name"),
        artifact_contents.c.user_id == bindparam("user_id"),
        artifact_contents.c.sha256 == bindparam("sha256"),
    )
    .with_for_update()
)


async def next_version(conn: AsyncConnection, key: ArtifactKey) -> int:
    """The version a new save of ``key`` gets: one past the newest stored, 0 for none
    (as ADK's in-memory service: after ``delete_artifact``, versions start at 0 again)."""
    newest = (await conn.execute(_NEWEST_VERSION, address_params(key))).scalar()
    return 0 if newest is None else int(newest) + 1


async def insert_version(conn: AsyncConnection, key: ArtifactKey, row: ArtifactRow) -> None:
    """Store one version. Raises ``sqlalchemy.exc.IntegrityError`` when another save
    took that version first."""
    await conn.execute(
        insert(artifacts),
        {
            **address_params(key),
            "version": row.version,
            "mime_type": row.mime_type,
            "custom_metadata": row.custom_metadata,
            "create_time": row.create_time,
            "part": row.part,
            "content_sha256": row.content_sha256,
            "size": row.size,
        },
    )


async def read_version(
    conn: AsyncConnection, key: ArtifactKey, version: int | None
) -> ArtifactRow | None:
    """The version ``version`` of ``key`` (``None``: the newest), or ``None``."""
    stmt = select(*VERSION_COLUMNS).where(key.where())
    if version is None:
        stmt = stmt.order_by(artifacts.c.version.desc()).limit(1)
    else:
        stmt = stmt.where(artifacts.c.version == version)
    found = (await conn.execute(stmt)).first()
    return None if found is None else ArtifactRow(*found)


async def list_versions(conn: AsyncConnection, key: ArtifactKey) -> list[ArtifactRow]:
    """Every stored version of ``key``, oldest first."""
    stmt = select(*VERSION_COLUMNS).where(key.where()).order_by(artifacts.c.version)
    return [ArtifactRow(*row) for row in (await conn.execute(stmt)).all()]


async def list_filenames(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_ids: Sequence[str]
) -> list[str]:
    """The filenames with a version in any of ``session_ids`` (``""``: the user's own),
    sorted."""
    stmt = (
        select(artifacts.c.filename)
        .where(_of_user(artifacts, app_name, user_id), artifacts.c.session_id.in_(session_ids))
        .distinct()
    )
    return sorted(str(name) for name in (await conn.execute(stmt)).scalars())


async def delete_artifact(conn: AsyncConnection, key: ArtifactKey) -> list[str]:
    """Delete every version of ``key``; the SHA-256 of the contents they referred to
    (for :func:`collect_contents`)."""
    shas = select(artifacts.c.content_sha256).where(
        key.where(), artifacts.c.content_sha256.is_not(None)
    )
    referred = sorted({str(sha) for sha in (await conn.execute(shas)).scalars()})
    await conn.execute(delete(artifacts).where(key.where()))
    return referred


async def delete_version(conn: AsyncConnection, key: ArtifactKey, version: int) -> str | None:
    """Delete one version of ``key`` if there; the SHA-256 of its bytes (or ``None``)."""
    where = and_(key.where(), artifacts.c.version == version)
    held = (await conn.execute(select(artifacts.c.content_sha256).where(where))).scalar()
    await conn.execute(delete(artifacts).where(where))
    return None if held is None else str(held)


async def lock_content(conn: AsyncConnection, app_name: str, user_id: str, sha256: str) -> bool:
    """Lock the user's content ``sha256`` until the transaction ends; whether it
    exists (whole: its chunks are written before its row)."""
    params = {"app_name": app_name, "user_id": user_id, "sha256": sha256}
    return (await conn.execute(_LOCK_CONTENT, params)).first() is not None


async def insert_content(
    conn: AsyncConnection, app_name: str, user_id: str, sha256: str, size: int, chunks: int
) -> None:
    """Record a content whose chunks are written."""
    await conn.execute(
        insert(artifact_contents),
        {
            "app_name": app_name,
            "user_id": user_id,
            "sha256": sha256,
            "size": size,
            "chunk_count": chunks,
        },
    )


async def insert_chunks(
    conn: AsyncConnection,
    app_name: str,
    user_id: str,
    sha256: str,
    chunks: Sequence[tuple[int, bytes]],
) -> None:
    """Write ``(seq, data)`` chunks of a content (or of a pending stream)."""
    if chunks:
        await conn.execute(
            insert(artifact_chunks),
            [
                {"app_name": app_name, "user_id": user_id, "sha256": sha256, "seq": s, "data": d}
                for s, d in chunks
            ],
        )


async def rename_chunks(
    conn: AsyncConnection, app_name: str, user_id: str, pending: str, sha256: str
) -> None:
    """Make a finished stream's chunks the chunks of content ``sha256``."""
    await conn.execute(
        update(artifact_chunks)
        .where(_of_user(artifact_chunks, app_name, user_id), artifact_chunks.c.sha256 == pending)
        .values(sha256=sha256)
    )


async def delete_chunks(conn: AsyncConnection, app_name: str, user_id: str, sha256: str) -> None:
    """Delete the chunks of ``sha256`` (a content, or a pending stream)."""
    await conn.execute(
        delete(artifact_chunks).where(
            _of_user(artifact_chunks, app_name, user_id), artifact_chunks.c.sha256 == sha256
        )
    )


async def count_chunks(conn: AsyncConnection, app_name: str, user_id: str, sha256: str) -> int:
    """How many chunks of ``sha256`` (a content, or a pending stream) are stored."""
    stmt = select(func.count()).where(
        _of_user(artifact_chunks, app_name, user_id), artifact_chunks.c.sha256 == sha256
    )
    return int((await conn.execute(stmt)).scalar_one())


async def read_chunks(
    conn: AsyncConnection, app_name: str, user_id: str, sha256: str, first: int, count: int
) -> list[bytes]:
    """Chunks ``first`` to ``first + count - 1`` of a content, in order."""
    stmt = (
        select(artifact_chunks.c.data)
        .where(
            _of_user(artifact_chunks, app_name, user_id),
            artifact_chunks.c.sha256 == sha256,
            artifact_chunks.c.seq >= first,
            artifact_chunks.c.seq < first + count,
        )
        .order_by(artifact_chunks.c.seq)
    )
    return [bytes(data) for data in (await conn.execute(stmt)).scalars()]


async def collect_contents(
    conn: AsyncConnection, app_name: str, user_id: str, shas: Sequence[str]
) -> int:
    """Delete those of the user's contents ``shas`` that no version refers to any more,
    each locked first (a save adding a version on it waits, then writes it again);
    how many were deleted."""
    deleted = 0
    for sha in shas:
        if not await lock_content(conn, app_name, user_id, sha):
            continue
        referred = select(artifacts.c.version).where(
            _of_user(artifacts, app_name, user_id), artifacts.c.content_sha256 == sha
        )
        if (await conn.execute(referred.limit(1))).first() is not None:
            continue
        await delete_chunks(conn, app_name, user_id, sha)
        await conn.execute(
            delete(artifact_contents).where(
                _of_user(artifact_contents, app_name, user_id), artifact_contents.c.sha256 == sha
            )
        )
        deleted += 1
    return deleted
