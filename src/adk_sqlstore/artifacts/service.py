"""Artifacts in the store's database: versions and bytes, whatever the part's model.

:class:`ArtifactStorage` stores a part (as JSON, without its bytes) and its bytes (in
1 MiB chunks, once per user and SHA-256), and reads them back, a few chunks at a time
when streaming. The ADK class (:class:`adk_sqlstore.adk.SqlArtifactService`) turns
``google.genai`` parts into these and back; the command line reads them directly.

Scopes follow ADK's artifact services: a filename starting with ``user:`` belongs to
the user (every session of the user sees it; it is stored with ``session_id`` ``""``),
any other to one session, which must be given.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import (
    ConcurrencyConflictError,
    DatabaseUnavailableError,
    InvalidArgumentError,
    InvalidArtifactError,
)
from ..sql import artifact_paths
from ..sql import artifacts as sql
from ..sql.artifacts import CHUNK_BYTES, PENDING_PREFIX, ArtifactKey, ArtifactRow
from ..sql.users import lock_user
from ..store import Store, finish_before_cancel
from ..validation import MAX_STATE_KEY_BYTES, check_count, check_identifier, check_json_value
from .chunking import CHUNKS_PER_STATEMENT, as_chunks, batches

__all__ = [
    "DEFAULT_MAX_ARTIFACT_BYTES",
    "ArtifactStorage",
    "StoredArtifact",
    "artifact_key",
    "canonical_uri",
]

DEFAULT_MAX_ARTIFACT_BYTES = 1 << 30
"""Largest artifact accepted by default (1 GiB of bytes); ``max_artifact_bytes`` of the
service changes it."""
_SAVE_ATTEMPTS = 50  # a save that lost its version number to another save tries again
T = TypeVar("T")


class _VersionTaken(DatabaseUnavailableError):
    """Saves of one artifact at once kept taking the version number a save wanted (or
    storing the same new bytes): raised after :data:`_SAVE_ATTEMPTS` tries."""


class _StreamForgotten(ConcurrencyConflictError):
    """A stream's chunks were deleted under it (its user forgotten): running the last
    step again cannot bring them back, so it is not run again."""


async def _retrying(attempt: Callable[[], Awaitable[T]]) -> T:
    """``attempt()`` again (after a random pause, growing to 64 ms) while another save
    takes the version number it wanted (on PostgreSQL a one-statement save reads the
    newest version before it waits for the user lock), or it loses a race
    (:class:`~adk_sqlstore.errors.ConcurrencyConflictError`); the version it got."""
    for n in range(_SAVE_ATTEMPTS):
        try:
            return await attempt()
        except (_VersionTaken, ConcurrencyConflictError) as exc:
            if n == _SAVE_ATTEMPTS - 1 or isinstance(exc, _StreamForgotten):
                raise
            await asyncio.sleep(random.uniform(0, 0.001) * min(2**n, 64))  # at most 64 ms
    raise AssertionError("unreachable")  # pragma: no cover


async def _lock(conn: Any, key: ArtifactKey, *, create: bool = False) -> None:
    """The user lock of an artifact writer (``"exclusive"``: a user's artifact writers
    take turns; :mod:`adk_sqlstore.sql.users`), the user's row made with ``create``."""
    user = {"app_name": key.app_name, "user_id": key.user_id}
    await lock_user(conn, **user, mode="exclusive", create=create, now=time.time())


def artifact_key(app_name: str, user_id: str, filename: str, session_id: str | None) -> ArtifactKey:
    """Where an artifact's versions are, its arguments checked.

    Raises:
        InvalidIdentifierError: ``app_name``, ``user_id`` or ``session_id`` is not an
            identifier.
        InvalidArgumentError: ``filename`` is not a name, or a session-scoped one comes
            without ``session_id``.
    """
    check_identifier("app_name", app_name)
    check_identifier("user_id", user_id)
    if not isinstance(filename, str) or not filename or "\x00" in filename:
        raise InvalidArgumentError(
            f"filename must be a non-empty str without NUL: {filename!r:.80}"
        )
    try:
        size = len(filename.encode())
    except UnicodeEncodeError:
        raise InvalidArgumentError("filename contains a lone surrogate") from None
    if size > MAX_STATE_KEY_BYTES:
        raise InvalidArgumentError(
            f"filename is {size:,} bytes long; the limit is {MAX_STATE_KEY_BYTES:,} UTF-8 bytes"
        )
    if filename.startswith("user:"):
        return ArtifactKey(app_name, user_id, "", filename)
    if session_id is None:
        raise InvalidArgumentError(
            f"artifact {filename!r} belongs to a session: give session_id (or name it"
            " user:... to share it with every session of the user)"
        )
    check_identifier("session_id", session_id)
    return ArtifactKey(app_name, user_id, session_id, filename)


def canonical_uri(key: ArtifactKey, version: int) -> str:
    """The version's address, as ADK's services write theirs (``sqlstore://``)."""
    session = f"/sessions/{key.session_id}" if key.session_id else ""
    return (
        f"sqlstore://apps/{key.app_name}/users/{key.user_id}{session}"
        f"/artifacts/{key.filename}/versions/{version}"
    )


@dataclass(frozen=True)
class StoredArtifact:
    """One version as stored: its number, MIME type, custom metadata, creation time
    (seconds since the epoch, UTC), the part as JSON without its bytes, and the size and
    SHA-256 of its bytes (``None`` for a part without bytes)."""

    version: int
    mime_type: str | None
    custom_metadata: dict[str, Any]
    create_time: float
    part: dict[str, Any]
    size: int | None
    sha256: str | None

    @classmethod
    def of(cls, row: ArtifactRow) -> StoredArtifact:
        return cls(
            row.version,
            row.mime_type,
            json.loads(row.custom_metadata),
            row.create_time,
            json.loads(row.part),
            row.size,
            row.content_sha256,
        )


def _metadata_json(custom_metadata: Mapping[str, Any] | None) -> str:
    if custom_metadata is not None and not isinstance(custom_metadata, Mapping):
        raise InvalidArgumentError(
            f"custom_metadata must be a dict, not {type(custom_metadata).__name__}"
        )
    metadata = dict(custom_metadata or {})
    check_json_value("custom_metadata", metadata, "artifact field")
    return json.dumps(metadata, ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True)
class _Version:
    """What a save stores beside the bytes: the part as JSON, the MIME type, the
    metadata as JSON; for a restore, its number, creation time and the (SHA-256, size)
    its bytes must have."""

    part: str
    mime_type: str | None
    metadata: str
    number: int | None = None
    create_time: float | None = None
    expected: tuple[str | None, int | None] | None = None


class ArtifactStorage:
    """Artifact versions and their bytes on a :class:`~adk_sqlstore.store.Store`.

    Args:
        store: the database.
        max_artifact_bytes: the most bytes one version may hold.
    """

    def __init__(self, store: Store, *, max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES):
        self.store = store
        self.max_bytes = check_count("max_artifact_bytes", max_artifact_bytes, least=0)

    # -- writing --------------------------------------------------------------------------

    async def save(
        self,
        key: ArtifactKey,
        *,
        part: Mapping[str, Any],
        data: bytes | memoryview | None,
        mime_type: str | None,
        custom_metadata: Mapping[str, Any] | None,
    ) -> int:
        """Store a new version: ``part`` (JSON-able, without its bytes) and ``data``, its
        bytes if it has any; the version number (0 for the first, then one more each).

        Raises:
            InvalidArtifactError: ``data`` is over ``max_artifact_bytes``.
            InvalidArgumentError, InvalidStateError: the part or metadata is not JSON.
        """
        version = _Version(self._part_json(part), mime_type, _metadata_json(custom_metadata))
        if data is None:
            return await self._save_version(key, version)
        view = memoryview(data).cast("B")
        self._check_size(len(view))
        sha = hashlib.sha256(view).hexdigest()
        return await finish_before_cancel(self._save_bytes(key, version, sha, view))

    async def save_stream(
        self,
        key: ArtifactKey,
        source: AsyncIterable[bytes] | Iterable[bytes],
        *,
        part: Mapping[str, Any],
        mime_type: str | None,
        custom_metadata: Mapping[str, Any] | None,
    ) -> int:
        """:meth:`save` of bytes that come in pieces (a file read in blocks, a network
        stream): at most a few chunks are in memory at once. They are written as they
        come under a pending key, in transactions of a few chunks, then the version is
        added in one transaction; if the same bytes are already the user's, the pending
        chunks are dropped instead.

        Raises:
            InvalidArtifactError: more than ``max_artifact_bytes`` came (nothing of them
                is kept).
            ConcurrencyConflictError: the user was forgotten (``forget_user``) while the
                bytes came in: nothing of them is kept (save them again).
        """
        metadata = _metadata_json(custom_metadata)
        return await self._stream_in(
            key, source, _Version(self._part_json(part), mime_type, metadata)
        )

    async def restore(
        self,
        key: ArtifactKey,
        stored: StoredArtifact,
        source: AsyncIterable[bytes] | Iterable[bytes] | None,
        *,
        replace: bool = False,
    ) -> bool:
        """Store ``stored`` (an exported version: its number and creation time kept)
        with the bytes of ``source``; whether it was stored (a version of that number
        already there is kept unless ``replace``).

        Raises:
            InvalidArtifactError: the bytes are not the version's (size or SHA-256).
        """
        if await self.version(key, stored.version) is not None and not replace:
            return False
        version = _Version(
            self._part_json(stored.part),
            stored.mime_type,
            _metadata_json(stored.custom_metadata),
            number=stored.version,
            create_time=stored.create_time,
            expected=(stored.sha256, stored.size),
        )
        if source is None:
            await finish_before_cancel(self._restore_without_bytes(key, version))
        else:
            await self._stream_in(key, source, version)
        return True

    async def _restore_without_bytes(self, key: ArtifactKey, version: _Version) -> None:
        async def attempt() -> int:
            async with self.store.transaction(write=True) as conn:
                await _lock(conn, key, create=True)
                return await self._add_version(conn, key, version, None, None)

        await _retrying(attempt)

    async def _stream_in(
        self, key: ArtifactKey, source: AsyncIterable[bytes] | Iterable[bytes], version: _Version
    ) -> int:
        """Write ``source`` under a pending key, then add ``version`` on its bytes."""
        pending = f"{PENDING_PREFIX}{int(time.time())}-{uuid.uuid4().hex}"
        digest, size, count = hashlib.sha256(), 0, 0
        batch: list[tuple[int, bytes]] = []
        try:
            async for chunk in as_chunks(source):
                digest.update(chunk)
                size += len(chunk)
                self._check_size(size)
                batch.append((count, chunk))
                count += 1
                if len(batch) == CHUNKS_PER_STATEMENT:
                    await self._write_pending(key, pending, batch)
                    batch = []
            await self._write_pending(key, pending, batch)
            sha = digest.hexdigest()
            if version.expected is not None and version.expected != (sha, size):
                raise InvalidArtifactError(
                    f"the bytes of {key.filename!r} version {version.number} are not the"
                    f" ones it was saved with ({size:,} bytes, SHA-256 {sha})"
                )
            return await finish_before_cancel(
                self._finish_stream(key, version, pending, sha, size, count)
            )
        except BaseException:
            await finish_before_cancel(self._drop_pending(key, pending))
            raise

    def _check_size(self, size: int) -> None:
        if size > self.max_bytes:
            raise InvalidArtifactError(
                f"an artifact of {size:,} bytes or more is over max_artifact_bytes"
                f" ({self.max_bytes:,})"
            )

    @staticmethod
    def _part_json(part: Mapping[str, Any]) -> str:
        try:
            return json.dumps(dict(part), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"an artifact's part is not JSON: {exc}") from None

    async def _write_pending(
        self, key: ArtifactKey, pending: str, batch: list[tuple[int, bytes]]
    ) -> None:
        async def attempt() -> None:
            async with self.store.transaction(write=True) as conn:
                await _lock(conn, key, create=True)
                await sql.insert_chunks(conn, key.app_name, key.user_id, pending, batch)

        if batch:
            await _retrying(attempt)

    async def _drop_pending(self, key: ArtifactKey, pending: str) -> None:
        async def attempt() -> None:
            async with self.store.transaction(write=True) as conn:
                await _lock(conn, key)
                await sql.delete_chunks(conn, key.app_name, key.user_id, pending)

        await _retrying(attempt)

    async def _finish_stream(
        self, key: ArtifactKey, version: _Version, pending: str, sha: str, size: int, written: int
    ) -> int:
        count = math.ceil(size / CHUNK_BYTES)

        async def attempt() -> int:
            async with self.store.transaction(write=True, on_duplicate=_VersionTaken) as conn:
                await _lock(conn, key, create=True)
                if await sql.count_chunks(conn, key.app_name, key.user_id, pending) != written:
                    raise _StreamForgotten(
                        f"the user was forgotten while artifact {key.filename!r} was streamed"
                        " in: nothing of it is kept; save it again"
                    )
                if await sql.lock_content(conn, key.app_name, key.user_id, sha):
                    await sql.delete_chunks(conn, key.app_name, key.user_id, pending)
                else:
                    await sql.rename_chunks(conn, key.app_name, key.user_id, pending, sha)
                    await sql.insert_content(conn, key.app_name, key.user_id, sha, size, count)
                return await self._add_version(conn, key, version, sha, size)

        return await _retrying(attempt)

    async def _save_bytes(
        self, key: ArtifactKey, version: _Version, sha: str, view: memoryview
    ) -> int:
        if artifact_paths.saves_whole(self.store.engine, len(view)):
            row = ArtifactRow(
                0, version.mime_type, version.metadata, time.time(), version.part, sha, len(view)
            )

            async def one_round_trip() -> int:
                async with self.store.autocommit(on_duplicate=_VersionTaken) as conn:
                    saved = await artifact_paths.save_whole(conn, key, row, bytes(view))
                if saved is None:
                    raise ConcurrencyConflictError(
                        f"user {key.user_id!r} was forgotten while artifact {key.filename!r}"
                        " waited to be saved; nothing was written"
                    )
                return saved

            return await _retrying(one_round_trip)

        async def attempt() -> int:
            async with self.store.transaction(write=True, on_duplicate=_VersionTaken) as conn:
                await _lock(conn, key, create=True)
                if not await sql.lock_content(conn, key.app_name, key.user_id, sha):
                    count = 0
                    for batch in batches(view):
                        await sql.insert_chunks(conn, key.app_name, key.user_id, sha, batch)
                        count += len(batch)
                    await sql.insert_content(conn, key.app_name, key.user_id, sha, len(view), count)
                return await self._add_version(conn, key, version, sha, len(view))

        return await _retrying(attempt)

    async def _save_version(self, key: ArtifactKey, version: _Version) -> int:
        async def attempt() -> int:
            async with self.store.transaction(write=True, on_duplicate=_VersionTaken) as conn:
                await _lock(conn, key, create=True)
                return await self._add_version(conn, key, version, None, None)

        return await _retrying(attempt)

    @staticmethod
    async def _add_version(
        conn: Any, key: ArtifactKey, version: _Version, sha: str | None, size: int | None
    ) -> int:
        """Insert ``version`` (the next number, or its own replacing one of that number)."""
        if version.number is None:
            number = await sql.next_version(conn, key)
        else:
            number = version.number
            replaced = await sql.delete_version(conn, key, number)
            if replaced is not None and replaced != sha:
                await sql.collect_contents(conn, key.app_name, key.user_id, [replaced])
        when = time.time() if version.create_time is None else version.create_time
        row = ArtifactRow(
            number, version.mime_type, version.metadata, when, version.part, sha, size
        )
        await sql.insert_version(conn, key, row)
        return number

    async def delete(self, key: ArtifactKey) -> None:
        """Delete every version of an artifact, and the bytes no other version holds."""
        await finish_before_cancel(self._delete(key))

    async def _delete(self, key: ArtifactKey) -> None:
        async def attempt() -> None:
            async with self.store.transaction(write=True) as conn:
                await _lock(conn, key)
                shas = await sql.delete_artifact(conn, key)
                await sql.collect_contents(conn, key.app_name, key.user_id, shas)

        await _retrying(attempt)

    # -- reading --------------------------------------------------------------------------

    async def version(self, key: ArtifactKey, version: int | None) -> StoredArtifact | None:
        """A version's record (``None``: the newest), or ``None`` when there is none."""
        async with self.store.transaction(write=False) as conn:
            row = await sql.read_version(conn, key, version)
        return None if row is None else StoredArtifact.of(row)

    async def versions(self, key: ArtifactKey) -> list[StoredArtifact]:
        """Every version's record, oldest first."""
        async with self.store.transaction(write=False) as conn:
            return [StoredArtifact.of(row) for row in await sql.list_versions(conn, key)]

    async def filenames(self, app_name: str, user_id: str, session_id: str | None) -> list[str]:
        """The filenames a session sees (its own and the user's, ``user:...``), or with
        ``session_id`` ``None`` the user's own; sorted."""
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        scopes = [""]
        if session_id is not None:
            scopes.append(check_identifier("session_id", session_id))
        async with self.store.transaction(write=False) as conn:
            return await sql.list_filenames(
                conn, app_name=app_name, user_id=user_id, session_ids=scopes
            )

    async def load(
        self, key: ArtifactKey, version: int | None
    ) -> tuple[StoredArtifact, bytes | None] | None:
        """A version's record and its bytes, whole, read in one statement; ``None``
        when there is no such version."""
        async with self.store.autocommit() as conn:
            found = await artifact_paths.read_version_bytes(conn, key, version)
        if found is None:
            return None
        row, pieces = found
        data = None if row.content_sha256 is None else b"".join(pieces)
        return StoredArtifact.of(row), data

    async def read(self, key: ArtifactKey, stored: StoredArtifact) -> AsyncIterator[bytes]:
        """The bytes of a version, a few chunks per read (each its own transaction: the
        bytes of a version never change, and a version deleted meanwhile ends the
        stream early with :class:`~adk_sqlstore.errors.InvalidArtifactError`)."""
        if stored.sha256 is None or not stored.size:
            return
        total = math.ceil(stored.size / CHUNK_BYTES)
        for first in range(0, total, CHUNKS_PER_STATEMENT):
            async with self.store.transaction(write=False) as conn:
                pieces = await sql.read_chunks(
                    conn, key.app_name, key.user_id, stored.sha256, first, CHUNKS_PER_STATEMENT
                )
            if len(pieces) != min(CHUNKS_PER_STATEMENT, total - first):
                raise InvalidArtifactError(
                    f"artifact {key.filename!r} version {stored.version} was deleted while"
                    " it was read"
                )
            for piece in pieces:
                yield piece
