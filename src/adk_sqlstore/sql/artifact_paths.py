"""The two hot paths of artifacts, one round trip each: saving a version whose bytes
fit one chunk, and loading a version with its bytes (``load_artifact``).

SQLite runs each as one batch in aiosqlite's thread (one hop, where each statement
through SQLAlchemy's adapter is one); PostgreSQL runs each as one statement (the save:
data-modifying CTEs), outside any transaction, atomic on its own; MySQL and MariaDB
load in one statement and save through :mod:`.artifacts`' statements in a transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Integer, LargeBinary, and_, bindparam, func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from ..schema import artifact_chunks, artifact_contents, artifacts
from .artifacts import (
    CHUNK_BYTES,
    VERSION_COLUMNS,
    ArtifactKey,
    ArtifactRow,
    address_clause,
    address_params,
)
from .citus import on_citus
from .sqlite_thread import execute, fetch_one, rollback_quietly, run_batch
from .users import SQLITE_CREATE_USER, pg_user_lock

__all__ = ["read_version_bytes", "save_whole", "saves_whole"]


async def read_version_bytes(
    conn: AsyncConnection, key: ArtifactKey, version: int | None
) -> tuple[ArtifactRow, list[bytes]] | None:
    """The version ``version`` of ``key`` (``None``: the newest) and its chunks in
    order, in one statement (atomic without a transaction), or ``None``. On SQLite
    it runs as a batch in aiosqlite's thread (one hop)."""
    if conn.dialect.name == "sqlite":
        rows: Sequence[Any] = await run_batch(conn, _sqlite_read, key, version)
    else:
        params = address_params(key)
        if version is None:
            rows = (await conn.execute(_READ_NEWEST, params)).all()
        else:
            rows = (await conn.execute(_READ_VERSION, {**params, "version": version})).all()
    if not rows:
        return None
    pieces = [bytes(row[-1]) for row in rows if row[-1] is not None]
    return ArtifactRow(*rows[0][:-1]), pieces


def _read_statement(newest: bool) -> Any:
    """:func:`read_version_bytes`'s statement, as SQLAlchemy Core, with the address
    and version as bound parameters (built once: building it costs more than running
    it)."""
    address = address_clause()
    if newest:
        number: Any = select(func.max(artifacts.c.version)).where(address).scalar_subquery()
    else:
        number = bindparam("version")
    chunk_of = and_(
        artifact_chunks.c.app_name == artifacts.c.app_name,
        artifact_chunks.c.user_id == artifacts.c.user_id,
        artifact_chunks.c.sha256 == artifacts.c.content_sha256,
    )
    return (
        select(*VERSION_COLUMNS, artifact_chunks.c.data)
        .select_from(artifacts.outerjoin(artifact_chunks, chunk_of))
        .where(address, artifacts.c.version == number)
        .order_by(artifact_chunks.c.seq)
    )


_READ_NEWEST, _READ_VERSION = _read_statement(True), _read_statement(False)


_SQLITE_READ = (
    "SELECT v.version, v.mime_type, v.custom_metadata, v.create_time, v.part,"
    f" v.content_sha256, v.size, c.data FROM {artifacts.name} AS v"
    f" LEFT OUTER JOIN {artifact_chunks.name} AS c ON c.app_name = v.app_name"
    " AND c.user_id = v.user_id AND c.sha256 = v.content_sha256"
    " WHERE v.app_name = ? AND v.user_id = ? AND v.session_id = ? AND v.filename = ?"
    " AND v.version = {version} ORDER BY c.seq"
)
_SQLITE_NEWEST = (
    f"(SELECT max(version) FROM {artifacts.name} WHERE app_name = ? AND user_id = ?"
    " AND session_id = ? AND filename = ?)"
)


def _sqlite_read(db: Any, key: ArtifactKey, version: int | None) -> list[tuple[Any, ...]]:
    """:func:`read_version_bytes`'s statement, on SQLite's own connection."""
    address = (key.app_name, key.user_id, key.session_id, key.filename)
    if version is None:
        statement = _SQLITE_READ.format(version=_SQLITE_NEWEST)
        params: tuple[Any, ...] = (*address, *address)
    else:
        statement, params = _SQLITE_READ.format(version="?"), (*address, version)
    return [tuple(row) for row in execute(db, statement, params).fetchall()]


def saves_whole(bound: Any, size: int) -> bool:
    """Whether a version of ``size`` bytes is saved by :func:`save_whole` on ``bound``'s
    database (an engine or connection): SQLite and PostgreSQL, at most one chunk; not
    on Citus (:func:`.citus.on_citus`), where the transaction's plain statements are
    each routed to the user's shard."""
    return (
        bound.dialect.name in ("sqlite", "postgresql")
        and not on_citus(bound)
        and size <= CHUNK_BYTES
    )


async def save_whole(
    conn: AsyncConnection, key: ArtifactKey, row: ArtifactRow, data: bytes
) -> int | None:
    """Store ``row`` as the next version of ``key``, with its bytes ``data`` (at most
    one chunk; stored unless the user has them already), atomically in one round trip
    under the user lock (``"exclusive"``; the user's row made if absent), SQLite and
    PostgreSQL only; the version number it got, or ``None`` when the user was
    forgotten while the statement waited for their lock (nothing written: run it
    again). ``conn`` must be outside any transaction (``Store.autocommit``).

    Raises:
        sqlalchemy.exc.IntegrityError: another save took that version first.
    """
    assert len(data) <= CHUNK_BYTES and row.content_sha256 is not None
    if conn.dialect.name == "postgresql":
        params = {
            **address_params(key),
            "sha256": row.content_sha256,
            "size": len(data),
            "chunk_count": 1 if data else 0,
            "data": data,
            "mime_type": row.mime_type,
            "custom_metadata": row.custom_metadata,
            "create_time": row.create_time,
            "part": row.part,
            "now": row.create_time,
        }
        version = (await conn.execute(_POSTGRES_SAVE, params)).scalar()
        return None if version is None else int(version)
    return await run_batch(conn, _sqlite_save, key, row, data)


# The user lock first (every other part waits for it), the version inserted one past
# the newest, the content upserted (DO UPDATE, not DO NOTHING: the row is locked until
# the statement commits) and its chunk written only when the row is new (xmax = 0).
_LOCK, _HELD = pg_user_lock("exclusive", create=True)
_POSTGRES_SAVE = text(
    f"""
WITH {_LOCK},
content AS (
    INSERT INTO {artifact_contents.name} (app_name, user_id, sha256, size, chunk_count)
    SELECT :app_name, :user_id, :sha256, :size, :chunk_count WHERE {_HELD}
    ON CONFLICT (app_name, user_id, sha256) DO UPDATE SET size = EXCLUDED.size
    RETURNING (xmax = 0) AS fresh
), chunk AS (
    INSERT INTO {artifact_chunks.name} (app_name, user_id, sha256, seq, data)
    SELECT :app_name, :user_id, :sha256, 0, :data FROM content
    WHERE content.fresh AND :chunk_count > 0
)
INSERT INTO {artifacts.name} (app_name, user_id, session_id, filename, version,
    mime_type, custom_metadata, create_time, part, content_sha256, size)
SELECT :app_name, :user_id, :session_id, :filename, coalesce(max(version) + 1, 0),
    :mime_type, :custom_metadata, :create_time, :part, :sha256, :size
FROM {artifacts.name}
WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
    AND filename = :filename
HAVING {_HELD}
RETURNING version
"""
).bindparams(bindparam("data", type_=LargeBinary), bindparam("chunk_count", type_=Integer))


def _sqlite_save(db: Any, key: ArtifactKey, row: ArtifactRow, data: bytes) -> int:
    user = (key.app_name, key.user_id)
    execute(db, "BEGIN IMMEDIATE")
    try:
        made = {"app_name": key.app_name, "user_id": key.user_id, "now": row.create_time}
        execute(db, SQLITE_CREATE_USER, made)
        held = fetch_one(
            db,
            f"SELECT 1 FROM {artifact_contents.name}"
            " WHERE app_name = ? AND user_id = ? AND sha256 = ?",
            (*user, row.content_sha256),
        )
        if held is None:
            if data:
                execute(
                    db,
                    f"INSERT INTO {artifact_chunks.name}"
                    " (app_name, user_id, sha256, seq, data) VALUES (?, ?, ?, 0, ?)",
                    (*user, row.content_sha256, data),
                )
            execute(
                db,
                f"INSERT INTO {artifact_contents.name}"
                " (app_name, user_id, sha256, size, chunk_count) VALUES (?, ?, ?, ?, ?)",
                (*user, row.content_sha256, len(data), 1 if data else 0),
            )
        where = "app_name = ? AND user_id = ? AND session_id = ? AND filename = ?"
        address = (*user, key.session_id, key.filename)
        newest = fetch_one(db, f"SELECT max(version) FROM {artifacts.name} WHERE {where}", address)
        version = 0 if newest is None or newest[0] is None else int(newest[0]) + 1
        execute(
            db,
            f"INSERT INTO {artifacts.name} (app_name, user_id, session_id, filename, version,"
            " mime_type, custom_metadata, create_time, part, content_sha256, size)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                *address,
                version,
                row.mime_type,
                row.custom_metadata,
                row.create_time,
                row.part,
                row.content_sha256,
                row.size,
            ),
        )
        execute(db, "COMMIT")
        return version
    except BaseException:
        rollback_quietly(db)
        raise
