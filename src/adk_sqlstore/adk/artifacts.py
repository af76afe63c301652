"""The ADK artifact service: ``google.adk.artifacts.BaseArtifactService`` on the
store's database (:class:`adk_sqlstore.artifacts.ArtifactStorage`).

Behaviour follows ADK 2.13's ``InMemoryArtifactService`` call by call (a test runs one
script against both): versions from 0, one more per save, starting at 0 again after
``delete_artifact``; ``user:`` filenames shared by every session of the user; the MIME
type taken from the part (``text/plain`` for text, none for an ``artifact://``
reference); references followed on load (at most 5 deep, within the caller's app, user
and session); an empty part, or the marker a session rewind saves, loading as
``None``; ADK's ``InputValidationError`` for what ADK refuses. The bytes of a version
are stored in 1 MiB chunks, once per user and SHA-256.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any, Self, cast

from sqlalchemy.ext.asyncio import AsyncEngine

from ..artifacts import DEFAULT_MAX_ARTIFACT_BYTES, ArtifactStorage, artifact_key, canonical_uri
from ..artifacts.service import StoredArtifact
from ..errors import InvalidArgumentError, InvalidIdentifierError
from ..sql.artifacts import ArtifactKey
from ..store import OnStore, Store
from ._google import (
    AdkArtifactVersion,
    AdkInputValidationError,
    BaseArtifactService,
    artifact_util,
    ensure_part,
    genai_types,
)
from .uri import chosen_store

__all__ = ["SqlArtifactService"]

_MAX_REFERENCE_DEPTH = 5  # as ADK's artifact_util._MAX_ARTIFACT_REFERENCE_DEPTH
_TOMBSTONE = genai_types.Part(
    inline_data=genai_types.Blob(mime_type="application/octet-stream", data=b"")
)
"""The part a session rewind saves to remove an artifact (ADK 2.13's
``artifact_util._new_rewind_tombstone``): every artifact service loads it as absent."""


def _check_scope(app_name: str, user_id: str, filename: str, session_id: str | None) -> ArtifactKey:
    """ADK's checks of an artifact's address (``InputValidationError``), then ours."""
    artifact_util.validate_path_segment(app_name, "app_name")
    artifact_util.validate_path_segment(user_id, "user_id")
    if not filename.startswith("user:"):
        if session_id is None:
            raise AdkInputValidationError(
                "Session ID must be provided for session-scoped artifacts."
            )
        artifact_util.validate_path_segment(session_id, "session_id")
        if session_id.replace("\\", "/").split("/")[0] == "user":
            raise AdkInputValidationError(
                "session_id must not be or start with the reserved value 'user'."
            )
    try:
        return artifact_key(app_name, user_id, filename, session_id)
    except (InvalidArgumentError, InvalidIdentifierError) as exc:
        raise AdkInputValidationError(str(exc)) from exc


def _to_adk_version(key: ArtifactKey, stored: StoredArtifact) -> AdkArtifactVersion:
    return AdkArtifactVersion(
        version=stored.version,
        canonical_uri=canonical_uri(key, stored.version),
        custom_metadata=stored.custom_metadata,
        create_time=stored.create_time,
        mime_type=stored.mime_type,
    )


class SqlArtifactService(BaseArtifactService, OnStore):
    """ADK ``BaseArtifactService`` on PostgreSQL, MySQL/MariaDB or SQLite, in the same
    database as the session and memory services (one backup, one ``forget_user``).

    Args:
        uri: as for :class:`~adk_sqlstore.adk.SqlSessionService` (``sqlstore://``,
            ``sqlstore+postgresql://...``, a database URL; ADK's
            ``--artifact_service_uri``).
        store: a :class:`~adk_sqlstore.Store` (or an engine) you manage, e.g.
            ``session_service.store``.
        engine: the same as ``store``, for an engine.
        max_artifact_bytes: the most bytes one version may hold (default 1 GiB);
            more raises :class:`~adk_sqlstore.errors.InvalidArtifactError`.
        auto_migrate: as for :class:`~adk_sqlstore.adk.SqlSessionService`.
        **settings: connection settings.

    Raises:
        InvalidArgumentError: more than one of ``uri``, ``store`` and ``engine``, or
            connection settings with a store or engine.
        SchemaNotMigratedError: as for :class:`~adk_sqlstore.adk.SqlSessionService`.
    """

    def __init__(
        self,
        uri: str | Store | AsyncEngine | None = None,
        *,
        store: Store | AsyncEngine | None = None,
        engine: AsyncEngine | None = None,
        max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES,
        auto_migrate: bool | None = None,
        **settings: Any,
    ) -> None:
        chosen, owns = chosen_store(
            "artifact service",
            uri,
            store=store,
            engine=engine,
            auto_migrate=auto_migrate,
            settings=settings,
        )
        self._use_store(chosen, owns=owns)
        self._storage = ArtifactStorage(self._store, max_artifact_bytes=max_artifact_bytes)

    @classmethod
    def from_url(cls, url: str | None = None, **kwargs: Any) -> Self:
        """The same as ``SqlArtifactService(url, **kwargs)``."""
        return cls(url, **kwargs)

    @property
    def storage(self) -> ArtifactStorage:
        """The storage doing the work."""
        return self._storage

    # -- ADK's interface ------------------------------------------------------------------

    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: genai_types.Part | dict[str, Any],
        session_id: str | None = None,
        custom_metadata: dict[str, Any] | None = None,
    ) -> int:
        """Store ``artifact`` as the next version of ``filename``; its version (0
        first). Its bytes (``inline_data``) are stored once per user whatever the number
        of versions or files holding them.

        Raises:
            InputValidationError: (ADK's) an address ADK refuses, a part of no kind
                ADK stores, or a reference outside the caller's scope.
            InvalidArtifactError: over ``max_artifact_bytes``.
        """
        key = _check_scope(app_name, user_id, filename, session_id)
        part = ensure_part(artifact)
        data: bytes | None = None
        mime_type: str | None
        if part.inline_data is not None:
            data = part.inline_data.data or b""
            mime_type = part.inline_data.mime_type
            blob = part.inline_data.model_copy(update={"data": None})
            part = part.model_copy(update={"inline_data": blob})
        elif part.text is not None:
            mime_type = "text/plain"
        elif part.file_data is not None:
            mime_type = part.file_data.mime_type
            if artifact_util.is_artifact_ref(part):
                parsed = artifact_util.parse_artifact_uri(cast(str, part.file_data.file_uri))
                if not parsed:
                    raise AdkInputValidationError(
                        f"Invalid artifact reference URI: {part.file_data.file_uri}"
                    )
                artifact_util.validate_artifact_reference_scope(
                    app_name=app_name, user_id=user_id, session_id=session_id, parsed_uri=parsed
                )
                mime_type = None  # known once the reference is followed
        else:
            raise AdkInputValidationError("Not supported artifact type.")
        return await self._storage.save(
            key,
            part=part.model_dump(mode="json", exclude_none=True),
            data=data,
            mime_type=mime_type,
            custom_metadata=custom_metadata,
        )

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> genai_types.Part | None:
        """The part saved as ``version`` (``None``: the newest), an ``artifact://``
        reference followed to its target; ``None`` when there is none (or it was
        removed by a session rewind).

        Raises:
            InputValidationError: (ADK's) an address ADK refuses, or a reference chain
                longer than 5 or outside the caller's scope.
        """
        key = _check_scope(app_name, user_id, filename, session_id)
        depth = _MAX_REFERENCE_DEPTH
        while True:
            loaded = await self._storage.load(key, version)
            if loaded is None:
                return None
            stored, data = loaded
            part = genai_types.Part.model_validate(stored.part)
            if data is not None and part.inline_data is not None:
                part.inline_data.data = data
            if not artifact_util.is_artifact_ref(part):
                break
            assert part.file_data is not None and part.file_data.file_uri is not None
            target = artifact_util.resolve_artifact_reference(
                file_uri=part.file_data.file_uri,
                app_name=app_name,
                user_id=user_id,
                session_id=session_id,
                remaining_depth=depth,
            )
            depth -= 1
            key = _check_scope(target.app_name, target.user_id, target.filename, target.session_id)
            version = target.version
        if part == genai_types.Part() or part == _TOMBSTONE:
            return None
        return part

    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        """The filenames of the session and of the user (``user:...``), sorted; of the
        user only with ``session_id`` ``None``."""
        artifact_util.validate_path_segment(app_name, "app_name")
        artifact_util.validate_path_segment(user_id, "user_id")
        if session_id is not None:
            artifact_util.validate_path_segment(session_id, "session_id")
        return await self._storage.filenames(app_name, user_id, session_id)

    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        """Delete every version of ``filename`` (a later save starts at version 0), and
        the bytes no other version of the user holds."""
        await self._storage.delete(_check_scope(app_name, user_id, filename, session_id))

    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        """The versions of ``filename``, ascending (``[]`` for none)."""
        key = _check_scope(app_name, user_id, filename, session_id)
        return [stored.version for stored in await self._storage.versions(key)]

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[AdkArtifactVersion]:
        """Every version's metadata (ADK's ``ArtifactVersion``), ascending."""
        key = _check_scope(app_name, user_id, filename, session_id)
        return [_to_adk_version(key, stored) for stored in await self._storage.versions(key)]

    async def get_artifact_version(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> AdkArtifactVersion | None:
        """One version's metadata (``None``: the newest), or ``None``."""
        key = _check_scope(app_name, user_id, filename, session_id)
        stored = await self._storage.version(key, version)
        return None if stored is None else _to_adk_version(key, stored)

    # -- streams, past ADK's interface ------------------------------------------------------

    async def save_artifact_stream(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        stream: AsyncIterable[bytes] | Iterable[bytes],
        mime_type: str,
        session_id: str | None = None,
        custom_metadata: dict[str, Any] | None = None,
    ) -> int:
        """Save bytes that come in pieces (a file read in blocks: ``iter(lambda:
        f.read(1 << 20), b"")``, an upload) as the next version of ``filename``, an
        ``inline_data`` part of ``mime_type``, holding at most a few MiB of them in
        memory at once; the version. ``load_artifact`` returns it like any other.

        Raises:
            InputValidationError: (ADK's) an address ADK refuses.
            InvalidArtifactError: more than ``max_artifact_bytes`` came.
            ConcurrencyConflictError: the user was forgotten while the bytes came in;
                nothing of them is kept (save them again).
        """
        key = _check_scope(app_name, user_id, filename, session_id)
        part = genai_types.Part(inline_data=genai_types.Blob(mime_type=mime_type))
        return await self._storage.save_stream(
            key,
            stream,
            part=part.model_dump(mode="json", exclude_none=True),
            mime_type=mime_type,
            custom_metadata=custom_metadata,
        )

    async def read_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> AsyncIterator[bytes]:
        """The bytes of a version (``None``: the newest) in chunks of up to 1 MiB,
        read a few at a time: write them to a file without holding the whole artifact.
        A version without bytes (text, a file reference) or none at all yields nothing.
        """
        key = _check_scope(app_name, user_id, filename, session_id)
        stored = await self._storage.version(key, version)
        if stored is None:
            return
        async for chunk in self._storage.read(key, stored):
            yield chunk
