"""``SqlSessionService``: durable ADK-style sessions on PostgreSQL or SQLite.

A session ``(app_name, user_id, id)`` holds an append-only list of events; each event
may carry ``actions.state_delta`` and session state is the fold of those deltas,
materialised per key so that loading a session is a lookup, not a replay. Keys
prefixed ``app:`` are shared by every user of the app, ``user:`` by every session of
one user, ``temp:`` never leave the current invocation (ADK's ``State`` scopes; see
``google.adk.sessions.base_session_service`` for the append semantics followed here).

Every write is one transaction. Appends use optimistic concurrency on an integer
revision: an append built on a stale read raises :class:`StaleSessionError` and
writes nothing, whichever process made the other append.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import gc
import json
import logging
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, ParamSpec, Self, TypeVar

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from . import queries, telemetry
from .dialect import (
    AppendRow,
    append_row,
    is_unique_violation,
    load_session_rows,
    purge_deleted_text,
    truncate_wal,
)
from .engine import configure_engine, create_engine, dispose_engine, engine_for_loop, engine_views
from .errors import (
    AlreadyExistsError,
    DatabaseUnavailableError,
    InvalidArgumentError,
    InvalidEventError,
    InvalidStateError,
    SchemaNotMigratedError,
    SessionNotFoundError,
    StaleSessionError,
)
from .failures import database_error, driver_error
from .migration import HEAD_REVISION, check_schema, current_revision, upgrade
from .models import Event, GetSessionConfig, ListSessionsResponse, Session
from .state import ScopedDelta, drop_temp, merge_state, split_delta
from .store import ClosedOnExit
from .urls import resolve_url
from .validation import (
    DEFAULT_MAX_EVENT_BYTES,
    DEFAULT_MAX_STATE_VALUE_BYTES,
    check_age,
    check_argument,
    check_count,
    check_event_fields,
    check_identifier,
    check_session,
    check_size_limit,
    check_state_delta,
    dump_json_value,
    json_size,
)

if TYPE_CHECKING:
    from .memory import MemoryCheckpoint

__all__ = ["SqlSessionService"]

# Set on engines made by from_url: whether services on that engine migrate it themselves.
AUTO_MIGRATE_MARK = "_adk_sqlstore_auto_migrate"

# A num_recent_events at least this large means "all events".
_ALL_EVENTS = 2**31

logger = logging.getLogger(__name__)

_EVENT_LIST = TypeAdapter(list[Event])


def _config(config: object) -> GetSessionConfig | None:
    """``config`` as a :class:`GetSessionConfig` (ADK's has the same fields; a dict of
    them is validated).

    Raises:
        InvalidArgumentError: it is none of these, or its limits are not numbers.
    """
    if config is None:
        return None
    fields = ("num_recent_events", "after_timestamp")
    if isinstance(config, Mapping):
        values = dict(config)
    elif all(hasattr(config, name) for name in fields):
        values = {name: getattr(config, name) for name in fields}
    else:
        raise InvalidArgumentError(
            f"config must be a GetSessionConfig, not {type(config).__name__}"
        )
    try:
        checked = GetSessionConfig.model_validate(values, strict=True)
    except ValidationError as exc:
        raise InvalidArgumentError(f"config: {exc.errors()[0]['msg']}") from None
    if checked.num_recent_events is not None:
        check_count("config.num_recent_events", checked.num_recent_events, least=0)
    return checked


def _encode_page_token(update_time: float, user_id: str, session_id: str) -> str:
    raw = json.dumps([update_time, user_id, session_id], ensure_ascii=False)
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode_page_token(token: str) -> tuple[float, str, str]:
    try:
        update_time, user_id, session_id = json.loads(base64.urlsafe_b64decode(token))
        if isinstance(update_time, bool) or not isinstance(update_time, int | float):
            raise TypeError
        return float(update_time), str(user_id), str(session_id)
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError("page_token is not a token list_sessions returned") from exc


P = ParamSpec("P")
T = TypeVar("T")


async def finish_before_cancel(work: Awaitable[T]) -> T:
    """Await ``work`` to its end even if the caller is cancelled meanwhile, then pass
    the cancellation on.

    A write cancelled halfway would leave its connection in a transaction (SQLAlchemy
    then discards the connection, and an SQLite write lock can outlive it). Writes are
    short, so they finish (commit or roll back) first; the caller still gets
    ``CancelledError``, and what it holds is never ahead of storage.
    """
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller hears of
        raise


def write_completes(
    method: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Decorate a write method with :func:`finish_before_cancel`."""

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        return await finish_before_cancel(method(*args, **kwargs))

    return wrapper


def _encode_scoped(
    scoped: ScopedDelta, max_bytes: int
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """Each scope's values as JSON text.

    Raises:
        InvalidStateError: a value is longer than ``max_bytes`` as JSON.
    """
    encoded = []
    for prefix, values in (("app:", scoped.app), ("user:", scoped.user), ("", scoped.session)):
        texts = {k: dump_json_value(v) for k, v in values.items()}
        for k, text in texts.items():
            if len(text) * 4 > max_bytes and (size := json_size(text)) > max_bytes:
                raise InvalidStateError(
                    f"state key {prefix + k!r}: the value is {size:,} bytes as JSON; the limit"
                    f" is {max_bytes:,} (max_state_value_bytes)",
                    key=prefix + k,
                )
        encoded.append(texts)
    return encoded[0], encoded[1], encoded[2]


@dataclass
class _AppendLock:
    """The in-process lock of one session object and how many tasks use it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


@dataclass
class PruneReport:
    """What :meth:`SqlSessionService.prune` deleted (or would delete, ``dry_run``).

    Attributes:
        cutoff: sessions last updated before this time were pruned (seconds since the
            epoch, UTC).
        sessions, events, session_state_keys, memory_ingestions: rows deleted.
        memories: memories deleted (always 0 without ``with_memories``).
    """

    cutoff: float
    dry_run: bool = False
    with_memories: bool = False
    sessions: int = 0
    events: int = 0
    session_state_keys: int = 0
    memory_ingestions: int = 0
    memories: int = 0

    def add(self, counts: Mapping[str, int]) -> None:
        for name, n in counts.items():
            setattr(self, name, getattr(self, name) + n)


class SqlSessionService(ClosedOnExit):
    """Sessions, events and scoped state in a SQL database.

    Create it with :meth:`from_url` (it then owns and closes its engine) or pass an
    :class:`~sqlalchemy.ext.asyncio.AsyncEngine` you manage yourself. Use it as an
    async context manager, or call :meth:`close`.

    The schema is managed by Alembic. The first call checks that the database is at
    the revision this version needs and raises
    :class:`~adk_sqlstore.errors.SchemaNotMigratedError` otherwise, unless
    ``auto_migrate`` is true, in which case it upgrades the database itself.

    Identifiers (``app_name``, ``user_id``, session and event ids) are non-empty
    strings of at most 255 UTF-8 bytes without NUL; every method refuses others with
    :class:`~adk_sqlstore.errors.InvalidIdentifierError` before touching the database.

    Args:
        engine: an asyncio engine (asyncpg or aiosqlite). For SQLite, the
            connection settings of :func:`adk_sqlstore.engine.configure_engine`
            (WAL, busy timeout, foreign keys, ``BEGIN IMMEDIATE`` for writes) are
            installed on it.
        auto_migrate: upgrade the schema to the newest revision on first use.
            ``None`` (the default): only if the engine was made by a ``from_url``
            that chose to (SQLite); your own engines: no.
        memory_checkpoint: ingest sessions into memory every N appended events
            (:class:`~adk_sqlstore.MemoryCheckpoint`).
        max_event_bytes: the largest event accepted, in UTF-8 bytes of its stored
            JSON (default 8 MiB); a bigger one raises ``InvalidEventError``.
        max_state_value_bytes: the largest state value accepted, in UTF-8 bytes of its
            JSON (default 1 MiB); a bigger one raises ``InvalidStateError`` naming the
            key.
    """

    #: The model events are decoded into; a subclass may use another pydantic
    #: model with ADK's field names.
    event_model: ClassVar[type[Any]] = Event
    #: Refuse an event that would not read back equal (True), or only one that would
    #: not read back at all (False: values JSON lacks are stored as their JSON form).
    exact_events: ClassVar[bool] = True

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        auto_migrate: bool | None = None,
        memory_checkpoint: MemoryCheckpoint | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_state_value_bytes: int = DEFAULT_MAX_STATE_VALUE_BYTES,
    ) -> None:
        self._max_event_bytes = check_size_limit("max_event_bytes", max_event_bytes)
        self._max_state_value_bytes = check_size_limit(
            "max_state_value_bytes", max_state_value_bytes
        )
        configure_engine(engine)
        self._engine = engine
        self._owns_engine = False
        self._checkpoint = memory_checkpoint
        self._append_locks: dict[int, _AppendLock] = {}
        if auto_migrate is None:  # as decided by the from_url that made the engine
            auto_migrate = bool(getattr(engine.sync_engine, AUTO_MIGRATE_MARK, False))
        check_argument("auto_migrate", auto_migrate, bool, "True, False or None")
        self._auto_migrate = auto_migrate
        self._ready = False
        self._schema_reported = False
        # One per event loop: an asyncio.Lock belongs to the loop that first waits on it.
        self._ready_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._events_adapter: TypeAdapter[list[Any]] = (
            _EVENT_LIST if self.event_model is Event else TypeAdapter(list[self.event_model])  # type: ignore[name-defined]
        )

    @classmethod
    def from_url(
        cls,
        url: str | URL | None = None,
        *,
        auto_migrate: bool | None = None,
        memory_checkpoint: MemoryCheckpoint | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_state_value_bytes: int = DEFAULT_MAX_STATE_VALUE_BYTES,
        **engine_kwargs: Any,
    ) -> Self:
        """Create a service with its own engine.

        Args:
            url: database URL; defaults to ``$ADK_SQLSTORE_DATABASE_URL``, else the
                embedded SQLite file. ``postgresql://`` and ``sqlite:///`` URLs are
                mapped to asyncpg and aiosqlite; ADK's service-URI forms
                (``sqlstore://``, ``sqlstore+postgresql://...``) and an
                ``auto_migrate=true|false`` parameter are accepted too (see
                :func:`adk_sqlstore.engine.resolve_url`).
            auto_migrate: upgrade the schema on first use. ``None`` (the default)
                means: as the URL's ``auto_migrate`` parameter says, else for SQLite
                (the embedded default or a file) yes; a PostgreSQL database is never
                altered unless asked. Other services built on this service's engine
                make the same choice.
            memory_checkpoint, max_event_bytes, max_state_value_bytes: see the class
                arguments.
            **engine_kwargs: passed to ``create_async_engine`` (e.g. ``pool_size``).

        Raises:
            ValueError: the URL is invalid, names an unsupported database, or needs a
                driver that is not installed (the message hides the password).
        """
        if auto_migrate is not None:
            check_argument("auto_migrate", auto_migrate, bool, "True, False or None")
        target = resolve_url(url)
        engine = create_engine(target.url, **engine_kwargs)
        auto = target.migrates_itself if auto_migrate is None else auto_migrate
        setattr(engine.sync_engine, AUTO_MIGRATE_MARK, auto)
        service = cls(
            engine,
            auto_migrate=auto,
            memory_checkpoint=memory_checkpoint,
            max_event_bytes=max_event_bytes,
            max_state_value_bytes=max_state_value_bytes,
        )
        service._owns_engine = True
        return service

    @property
    def engine(self) -> AsyncEngine:
        """The engine this service runs on, for the running event loop: a service may be
        used from several loops (``asyncio.run`` twice, threads with loops of their
        own), each with a pool of its own (see :func:`adk_sqlstore.engine.engine_for_loop`)."""
        return engine_for_loop(self._engine)

    @property
    def auto_migrate(self) -> bool:
        """Whether this service upgrades the schema by itself on first use."""
        return self._auto_migrate

    async def close(self) -> None:
        """Dispose of the engine if this service created it (``from_url``), with the
        pools made for other event loops."""
        if self._wal_purge_pending:
            with contextlib.suppress(DatabaseUnavailableError):
                await self._retry_wal_purge()
        if self._owns_engine:
            await dispose_engine(self._engine)

    # -- transactions -------------------------------------------------------------

    async def ensure_schema(self) -> None:
        """Check (or, with ``auto_migrate``, upgrade) the schema once per service.

        Raises:
            SchemaNotMigratedError: the database is not at the needed revision (also
                logged, once per service, at ERROR on the ``adk_sqlstore`` logger
                family: a server shows the command to run at its first request).
            DatabaseUnavailableError: the database cannot be reached.
        """
        if self._ready:
            return
        lock = self._ready_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            if self._ready:
                return
            try:
                async with self._database_errors():
                    # At head, auto_migrate takes no lock: a service starting beside a
                    # busy SQLite writer does not wait for its write lock.
                    if self._auto_migrate and await current_revision(self.engine) != HEAD_REVISION:
                        await upgrade(self.engine)
                    await check_schema(self.engine)
            except SchemaNotMigratedError as exc:
                if not self._schema_reported:  # one line, not one per request of a server
                    self._schema_reported = True
                    logger.error("adk-sqlstore: %s", exc)
                raise
            self._ready = True

    @asynccontextmanager
    async def _database_errors(self, *, integrity_errors: bool = False) -> AsyncIterator[None]:
        """Re-raise driver and network errors as :class:`DatabaseUnavailableError`.

        With ``integrity_errors``, ``IntegrityError`` passes through: the caller turns
        it into a precise error.
        """
        try:
            yield
        except IntegrityError as exc:
            if integrity_errors:
                raise
            raise database_error(self._engine.url, exc) from exc
        except Exception as exc:
            typed = driver_error(self._engine, exc)
            if typed is None:
                raise
            raise typed from exc

    @asynccontextmanager
    async def _direct(self, *, integrity_errors: bool = False) -> AsyncIterator[AsyncConnection]:
        """A connection outside any transaction, for the hot paths of
        :mod:`adk_sqlstore.dialect`: one atomic statement on PostgreSQL (AUTOCOMMIT), one
        transaction in aiosqlite's thread on SQLite. ``integrity_errors``: let
        ``IntegrityError`` through, for a caller that turns it into a precise error."""
        await self.ensure_schema()
        views = engine_views(self._engine)
        async with (
            self._database_errors(integrity_errors=integrity_errors),
            views.direct.begin() if views.direct_begins else views.direct.connect() as conn,
        ):
            yield conn

    @asynccontextmanager
    async def _transaction(
        self, *, write: bool, integrity_errors: bool = False
    ) -> AsyncIterator[AsyncConnection]:
        """One transaction: ``BEGIN IMMEDIATE`` on SQLite for writes, a read-only
        repeatable-read snapshot on PostgreSQL for reads. Rolled back on any error;
        driver errors raised as :class:`DatabaseUnavailableError` (``IntegrityError``
        let through with ``integrity_errors``, as for :meth:`_direct`)."""
        await self.ensure_schema()
        views = engine_views(self._engine)
        engine = views.write if write else views.read
        async with self._database_errors(integrity_errors=integrity_errors), engine.begin() as conn:
            yield conn
        if write and self._wal_purge_pending:
            await self._retry_wal_purge()

    # Kept on the engine: every service on it (a memory service has a session service
    # of its own) retries after its writes.
    _WAL_PURGE = "_adk_sqlstore_wal_purge_pending"

    @property
    def _wal_purge_pending(self) -> bool:
        """Whether forget_user could not empty SQLite's write-ahead log yet."""
        return bool(self._engine.sync_engine.__dict__.get(self._WAL_PURGE, False))

    @_wal_purge_pending.setter
    def _wal_purge_pending(self, pending: bool) -> None:
        self._engine.sync_engine.__dict__[self._WAL_PURGE] = pending

    async def _retry_wal_purge(self) -> None:
        """Empty SQLite's write-ahead log of text ``forget_user`` deleted, once no
        reader of an older snapshot is left (no wait)."""
        async with self._database_errors(), engine_views(self._engine).direct.connect() as conn:
            if await truncate_wal(conn):
                self._wal_purge_pending = False

    # -- sessions -----------------------------------------------------------------

    @telemetry.traced("create_session", rows=telemetry.one)
    @write_completes
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session, seeding its state.

        ``user:`` and ``app:`` keys of ``state`` go to the user and app scopes (and
        overwrite what was there), ``temp:`` keys are dropped, the rest is session
        state.

        Args:
            app_name: the application.
            user_id: the user; a security boundary, from your authentication.
            state: initial state (JSON values).
            session_id: the id to use; a UUID4 string is generated when ``None``.

        Returns:
            The session with its merged state, no events, revision 0 and
            ``last_update_time`` set to now (seconds since the epoch, UTC).

        Raises:
            AlreadyExistsError: the id is taken for this app and user, also when two
                creates race.
            InvalidIdentifierError: an identifier is empty, too long or contains NUL.
            InvalidStateError: a state value is not JSON; nothing is written.
        """
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        if session_id is None:
            session_id = str(uuid.uuid4())
        check_identifier("session_id", session_id)
        check_state_delta(state)
        scoped = split_delta(state)
        app_json, user_json, session_json = _encode_scoped(scoped, self._max_state_value_bytes)
        key = {"app_name": app_name, "user_id": user_id, "session_id": session_id}
        now = time.time()
        incarnation = uuid.uuid4().hex
        try:
            async with self._transaction(write=True, integrity_errors=True) as conn:
                await queries.insert_session(
                    conn,
                    app_name=app_name,
                    user_id=user_id,
                    session_id=session_id,
                    create_time=now,
                    update_time=now,
                    incarnation=incarnation,
                )
                await queries.write_state(
                    conn, **key, app=app_json, user=user_json, session=session_json, now=now
                )
                app = await queries.load_app_state(conn, app_name=app_name)
                users = await queries.load_user_states(conn, app_name=app_name, user_id=user_id)
        except IntegrityError as exc:
            if not is_unique_violation(exc):
                raise database_error(self._engine.url, exc) from exc
            raise AlreadyExistsError(
                f"session {session_id!r} already exists for app {app_name!r} and user {user_id!r}"
            ) from exc
        row = queries.SessionRow(app_name, user_id, session_id, 0, now, incarnation)
        return self._build_session(
            row, merge_state(app, users.get(user_id, {}), scoped.session), []
        )

    @telemetry.traced("get_session", rows=telemetry.events_of)
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """Load a session with its merged state and events (oldest first).

        The session row, its state and its events are read from one snapshot.

        Args:
            config: ``num_recent_events`` returns only the newest N events (0 returns
                none; the query reads N rows whatever the history length);
                ``after_timestamp`` only events with ``timestamp >= after_timestamp``
                (seconds since the epoch); both combine.

        Returns:
            The session, or ``None`` when it does not exist for this app and user
            (an id of another user or app is never returned). State is the whole
            fold whatever ``config`` limits.
        """
        key = self._key(app_name, user_id, session_id)
        config = _config(config)
        async with self._direct() as conn:
            return await self._read_session(conn, key, config)

    async def _read_session(
        self, conn: AsyncConnection, key: dict[str, str], config: GetSessionConfig | None = None
    ) -> Session | None:
        """:meth:`get_session` on ``conn`` (e.g. inside a write transaction)."""
        num_recent = config.num_recent_events if config else None
        if num_recent is not None and num_recent >= _ALL_EVENTS:
            num_recent = None
        rows = await load_session_rows(
            conn,
            **key,
            num_recent_events=num_recent,
            after_timestamp=config.after_timestamp if config else None,
        )
        if not rows or rows[0][0] != 0:
            return None
        _, incarnation, _, revision, update_time = rows[0]
        scopes: tuple[dict[str, Any], ...] = ({}, {}, {})
        texts: list[str] = []
        for part, k, v, _, _ in rows[1:]:
            if part == 4:
                texts.append(v)
            else:
                scopes[part - 1][k] = json.loads(v)
        row = queries.SessionRow(
            key["app_name"], key["user_id"], key["session_id"], revision, update_time, incarnation
        )
        return self._build_session(row, merge_state(*scopes), self._decode_events(texts))

    @staticmethod
    def _key(app_name: str, user_id: str, session_id: str) -> dict[str, str]:
        return {
            "app_name": check_identifier("app_name", app_name),
            "user_id": check_identifier("user_id", user_id),
            "session_id": check_identifier("session_id", session_id),
        }

    def _decode_events(self, texts: list[str]) -> list[Any]:
        """Validate stored events in one pass. The garbage collector is paused meanwhile:
        thousands of new model objects would otherwise set off full collections that
        scan the whole heap and take most of the time (about 3x here)."""
        if not texts:
            return []
        paused = len(texts) > 64 and gc.isenabled()
        if paused:
            gc.disable()
        try:
            return self._events_adapter.validate_json("[" + ",".join(texts) + "]")
        finally:
            if paused:
                gc.enable()

    # Hooks for a subclass whose session model differs (the ADK drop-in classes).

    def _build_session(
        self, row: queries.SessionRow, state: dict[str, Any], events: list[Any]
    ) -> Session:
        session = Session(
            id=row.id,
            app_name=row.app_name,
            user_id=row.user_id,
            state=state,
            events=events,
            last_update_time=row.update_time,
            revision=row.revision,
        )
        session._incarnation = row.incarnation
        return session

    def _list_response(self, sessions: list[Any], next_page_token: str | None) -> Any:
        return ListSessionsResponse(sessions=sessions, next_page_token=next_page_token)

    def _token_of(self, session: Any) -> tuple[int, str | None]:
        """(revision, incarnation) the session object was loaded at; ``None`` for an
        object not made by this store (only its revision is checked then)."""
        return int(session.revision), getattr(session, "_incarnation", None)

    def _set_token(self, session: Any, revision: int, incarnation: str | None) -> None:
        session.revision = revision

    @telemetry.traced("list_sessions", rows=telemetry.listed)
    async def list_sessions(
        self,
        *,
        app_name: str,
        user_id: str | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> ListSessionsResponse:
        """List sessions without their events, oldest ``last_update_time`` first.

        Ties are broken by ``user_id`` then session id. Each session carries its
        merged state and revision. Without ``limit`` every session is returned (ADK's
        call); with it, one page, and ``next_page_token`` fetches the next (keyset
        pagination: pages stay right while sessions are added, and a session updated
        meanwhile may show up again later in the order).

        Args:
            user_id: one user's sessions; ``None`` lists every user of the app.
            limit: the most sessions to return (a positive number), or ``None``.
            page_token: ``next_page_token`` of the previous page.

        Raises:
            ValueError: ``limit`` is not positive, or ``page_token`` is not one this
                method made.
        """
        check_identifier("app_name", app_name)
        if user_id is not None:
            check_identifier("user_id", user_id)
        if limit is not None:
            check_count("limit", limit, least=1)
        after = _decode_page_token(page_token) if page_token is not None else None
        async with self._transaction(write=False) as conn:
            rows, session_states = await queries.list_sessions(
                conn,
                app_name=app_name,
                user_id=user_id,
                after=after,
                limit=None if limit is None else limit + 1,
            )
            more = limit is not None and len(rows) > limit
            rows = rows[:limit]
            app = await queries.load_app_state(conn, app_name=app_name)
            if user_id is not None or limit is None:
                users = await queries.load_user_states(conn, app_name=app_name, user_id=user_id)
            else:  # one page of every user's sessions: the state of those users only
                users = await queries.load_user_states(
                    conn, app_name=app_name, user_id=None, user_ids={r.user_id for r in rows}
                )
        sessions = [
            self._build_session(
                row,
                merge_state(
                    app, users.get(row.user_id, {}), session_states.get((row.user_id, row.id), {})
                ),
                [],
            )
            for row in rows
        ]
        last = rows[-1] if more else None
        token = _encode_page_token(last.update_time, last.user_id, last.id) if last else None
        response: ListSessionsResponse = self._list_response(sessions, token)
        return response

    async def iter_sessions(
        self, *, app_name: str, user_id: str | None = None, page_size: int = 500
    ) -> AsyncIterator[Any]:
        """Every session of :meth:`list_sessions`, read ``page_size`` at a time, so
        that memory use does not grow with their number."""
        token: str | None = None
        while True:
            page = await self.list_sessions(
                app_name=app_name, user_id=user_id, limit=page_size, page_token=token
            )
            for session in page.sessions:
                yield session
            token = page.next_page_token
            if token is None:
                return

    @telemetry.traced("delete_session")
    @write_completes
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete a session with its events and session state (no-op if absent).

        User and app state stay: they belong to the user and the app. Memories made
        from the session stay too (use ``SqlMemoryService.delete_memories``).
        """
        key = self._key(app_name, user_id, session_id)
        async with self._transaction(write=True) as conn:
            await queries.delete_session(conn, **key)

    @telemetry.traced("forget_user", rows=telemetry.counted)
    @write_completes
    async def forget_user(self, *, app_name: str, user_id: str) -> dict[str, int]:
        """Delete everything stored for one user of one app, in one transaction.

        From the design notes (000): "Deletion has to reach every copy: the user: map,
        every stored session, the memory index and any extracted facts." Removes the
        user's sessions with their events and session state, the user's state, and
        every memory (events and facts) with its index entries. App state and other
        users' rows are untouched. The deleted text is then purged where the database
        leaves copies (:func:`adk_sqlstore.dialect.purge_deleted_text`).

        Where copies remain afterwards, and for how long:

        - SQLite: the FTS index is merged, freed pages are zeroed and the write-ahead
          log is checkpointed and emptied before this returns: no file holds the text.
          Unless another connection is in the middle of a read of an older snapshot,
          which still needs the old pages: then it waits up to 1 s for that read to
          end, returns, logs a warning, and the file and its log keep the old pages
          until that read ends and this service (or any on the engine) writes or
          :meth:`close` s (or SQLite's own next full checkpoint).
        - PostgreSQL: the statistics of the user tables are refreshed (ANALYZE), so
          ``pg_stats`` no longer holds the user's id or words. A table left with no
          rows keeps its old statistics (ANALYZE does not change an empty table's):
          they are deleted when the role is a superuser, else a warning names the
          tables. The deleted rows stay in the table files (and the server's WAL)
          until (auto)VACUUM reuses the space.

        Returns:
            Rows deleted by kind: ``sessions``, ``events``, ``session_state_keys``,
            ``user_state_keys``, ``memories``, ``memory_ingestions``,
            ``memory_stats``.
        """
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        async with self._transaction(write=True) as conn:
            counts = await queries.forget_user(conn, app_name=app_name, user_id=user_id)
        if any(counts.values()):
            async with self._direct() as conn:
                purged = await purge_deleted_text(conn)
            if purged.wal_pending:
                self._wal_purge_pending = True
                logger.warning(
                    "forget_user (app %r): another connection is reading an older snapshot"
                    " of the SQLite file, so the file and its write-ahead log keep the"
                    " forgotten text until that read ends; this service empties the log"
                    " at its next write or close()",
                    app_name,
                )
            if purged.stale_statistics:
                logger.warning(
                    "forget_user (app %r): %s have no rows left, and PostgreSQL keeps an"
                    " empty table's old statistics (pg_stats) until rows come back and"
                    " ANALYZE runs; a superuser may clear them with DELETE FROM"
                    " pg_statistic WHERE starelid = '<table>'::regclass",
                    app_name,
                    ", ".join(purged.stale_statistics),
                )
        return counts

    @telemetry.traced("prune", rows=telemetry.counted)
    async def prune(
        self,
        *,
        older_than: timedelta | float,
        app_name: str | None = None,
        with_memories: bool = False,
        dry_run: bool = False,
        batch_size: int = 1000,
        on_batch: Callable[[PruneReport], None] | None = None,
    ) -> PruneReport:
        """Delete sessions not updated for ``older_than`` (a retention policy).

        Sessions whose ``last_update_time`` is more than ``older_than`` ago are deleted
        with their events, their session state and their memory ingestion records,
        oldest first, ``batch_size`` sessions per transaction: an interrupted prune
        leaves whole sessions, never half of one. User and app state are never touched:
        they belong to the user and the app, not to a session. Memories made from the
        sessions stay (long-term memory is meant to outlive sessions) unless
        ``with_memories``. A session appended to while a batch runs is either kept
        or its append fails with ``SessionNotFoundError``.

        Args:
            older_than: age as a ``timedelta`` or in seconds (>= 0).
            app_name: only this app's sessions; every app when ``None``.
            with_memories: also delete the memories ingested from the deleted sessions
                (facts added with ``add_memory`` have no session and stay).
            dry_run: count what would be deleted, delete nothing.
            batch_size: sessions per transaction (1 to 100,000).
            on_batch: called after each committed batch with that batch's counts.

        Returns:
            The rows deleted (or, with ``dry_run``, that would be) and the cutoff.

        Raises:
            ValueError: ``older_than`` is negative or not finite, or ``batch_size`` is
                out of range.
            InvalidIdentifierError: ``app_name`` is not a valid identifier.
            DatabaseUnavailableError: the database failed; the batches already
                committed stay deleted.
        """
        seconds = check_age("older_than", older_than)
        check_count("batch_size", batch_size, least=1, most=100_000)
        check_argument("with_memories", with_memories, bool, "True or False")
        check_argument("dry_run", dry_run, bool, "True or False")
        if app_name is not None:
            check_identifier("app_name", app_name)
        cutoff = time.time() - seconds
        report = PruneReport(cutoff=cutoff, dry_run=dry_run, with_memories=with_memories)
        options: dict[str, Any] = {
            "cutoff": cutoff,
            "app_name": app_name,
            "with_memories": with_memories,
        }
        if dry_run:
            async with self._transaction(write=False) as conn:
                report.add(await queries.prune_counts(conn, **options))
            return report
        while True:
            counts = await finish_before_cancel(self._prune_batch(options, batch_size))
            batch = PruneReport(cutoff=cutoff, with_memories=with_memories)
            batch.add(counts)
            report.add(counts)
            if on_batch is not None and batch.sessions:
                on_batch(batch)
            if batch.sessions < batch_size:
                return report

    async def _prune_batch(self, options: dict[str, Any], batch_size: int) -> dict[str, int]:
        async with self._transaction(write=True) as conn:
            return await queries.prune_batch(conn, **options, limit=batch_size)

    @telemetry.traced("get_user_state", rows=len)
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state: keys without the ``user:`` prefix (``{}`` when none)."""
        check_identifier("app_name", app_name)
        check_identifier("user_id", user_id)
        async with self._transaction(write=False) as conn:
            users = await queries.load_user_states(conn, app_name=app_name, user_id=user_id)
        return users.get(user_id, {})

    @telemetry.traced("get_app_state", rows=len)
    async def get_app_state(self, *, app_name: str) -> dict[str, Any]:
        """The app's state: keys without the ``app:`` prefix (``{}`` when none)."""
        check_identifier("app_name", app_name)
        async with self._transaction(write=False) as conn:
            return await queries.load_app_state(conn, app_name=app_name)

    # -- appends ------------------------------------------------------------------

    @telemetry.traced("append_event", rows=telemetry.one)
    async def append_event(self, session: Any, event: Any) -> Any:
        """Append ``event`` to ``session`` in storage, then to the session object.

        Follows ADK's ``BaseSessionService.append_event``:

        * a partial event (``event.partial``) is returned as is and not stored;
        * ``temp:`` keys of ``event.actions.state_delta`` are applied to
          ``session.state`` but never stored, not even inside the stored event (they
          are removed from the event's delta, as ADK does);
        * the rest of the delta is split by scope and written key by key in the same
          transaction as the event, so concurrent writers of different ``user:`` or
          ``app:`` keys lose nothing;
        * ``session.last_update_time`` becomes ``event.timestamp``.

        Appends through one session object from several tasks at once run one after
        another, each on the object as the previous one left it (as ADK's own
        services do); a different object of the session, loaded before another
        writer appended, is stale.

        The event is checked before anything is written: it must read back equal to
        itself, so values JSON cannot carry exactly (NaN, infinities, sets, tuples,
        datetimes, objects, integers of thousands of digits, nesting deeper than the
        JSON parser's limit) are refused rather than stored changed or unreadable.
        The session object (state, events, revision) changes only after the
        transaction committed.

        Args:
            session: a session loaded from (or created by) this service.
            event: the event; its ``id`` must be new in the session.

        Returns:
            The event as stored (without ``temp:`` keys in its delta).

        Raises:
            StaleSessionError: another writer appended since ``session`` was loaded
                (its revision is behind storage), or the session was deleted and
                created again since; nothing was written. Reload and retry.
            SessionNotFoundError: the session was deleted (or never stored).
            InvalidEventError: the event's id already exists in the session
                (rejected, never stored twice), or the event cannot be stored exactly
                (see above), or its timestamp is not a time between the years 1 and
                9999 in seconds.
            InvalidStateError: a non-``temp:`` delta value is not JSON.
            asyncio.CancelledError: the call was cancelled (or timed out). The write is
                not interrupted: it commits or fails first, and it may have been
                stored. Reload the session to know: the event is stored if its id is
                among the events. The wait is bounded by the database's own lock
                wait (SQLite's busy timeout, 30 s by default; on PostgreSQL, another
                transaction holding the session row).
        """
        check_session(session)
        event = self._event(event)
        if event.partial:
            return event
        async with self._appending(session):
            return await finish_before_cancel(self._append(session, event))

    def _event(self, event: Any) -> Any:
        """``event`` as the event model (a dict of one is validated), or
        :class:`InvalidEventError`."""
        if isinstance(event, Mapping):
            try:
                return self.event_model.model_validate(event)
            except ValidationError as exc:
                raise InvalidEventError(
                    f"event is not a valid event: {exc.errors()[0]['msg']}"
                ) from None
        if not all(hasattr(event, name) for name in ("id", "author", "actions", "timestamp")):
            raise InvalidEventError(f"event must be an Event, not {type(event).__name__}")
        return event

    @asynccontextmanager
    async def _appending(self, session: Any) -> AsyncIterator[None]:
        """Hold the in-process lock of this session object (created on first use,
        dropped when no task holds or awaits it)."""
        entry = self._append_locks.setdefault(id(session), _AppendLock())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if not entry.users:
                del self._append_locks[id(session)]

    async def _append(self, session: Any, event: Any) -> Any:
        delta: dict[str, Any] = dict(check_state_delta(event.actions.state_delta))
        stored_delta = drop_temp(delta)
        if len(stored_delta) != len(delta):
            actions = event.actions.model_copy(update={"state_delta": stored_delta})
            stored_event = event.model_copy(update={"actions": actions})
        else:
            stored_event = event
        data = self._encode_event(stored_event)
        scoped = split_delta(stored_delta)
        app_json, user_json, session_json = _encode_scoped(scoped, self._max_state_value_bytes)
        expected, incarnation = self._token_of(session)
        key = self._key(session.app_name, session.user_id, session.id)
        row = AppendRow(
            **key,
            expected_revision=expected,
            expected_incarnation=incarnation,
            update_time=float(event.timestamp),
            event_id=event.id,
            invocation_id=event.invocation_id or "",
            author=event.author or "",
            timestamp=float(event.timestamp),
            data=data,
            session_state=sorted(session_json.items()),
            user_state=sorted(user_json.items()),
            app_state=sorted(app_json.items()),
            now=time.time(),
        )
        try:
            async with self._direct(integrity_errors=True) as conn:
                revision = await append_row(conn, row)
                if revision is None:
                    raise await self._stale_or_missing(conn, key, expected, incarnation)
        except IntegrityError as exc:
            if not is_unique_violation(exc):
                raise database_error(self._engine.url, exc) from exc
            raise InvalidEventError(
                f"event id {event.id!r} already exists in session {session.id!r};"
                " an event is stored once"
            ) from exc
        # Committed: now bring the caller's object up to date.
        if len(stored_delta) != len(delta):
            event.actions.state_delta = stored_delta
        for k, v in delta.items():
            session.state[k] = v
        session.events.append(event)
        session.last_update_time = event.timestamp
        self._set_token(session, revision, incarnation)
        if self._checkpoint is not None:
            await self._checkpoint.after_append(session, revision)
        return event

    async def _stale_or_missing(
        self, conn: AsyncConnection, key: dict[str, str], expected: int, incarnation: str | None
    ) -> Exception:
        """The error for an append whose revision guard matched no row."""
        row = await queries.load_session(conn, **key)
        if row is None:
            return SessionNotFoundError(
                f"session {key['session_id']!r} of app {key['app_name']!r} and user"
                f" {key['user_id']!r} does not exist (deleted?)"
            )
        if incarnation is not None and row.incarnation != incarnation:
            why = "was deleted and created again since it was loaded"
        else:
            why = (
                f"was modified in storage since it was loaded (loaded revision {expected},"
                f" stored revision {row.revision})"
            )
        return StaleSessionError(
            f"session {key['session_id']!r} {why}; reload it with get_session and retry",
            expected_revision=expected,
            stored_revision=row.revision,
        )

    # -- bulk copy ----------------------------------------------------------------

    @telemetry.traced("import_session", rows=telemetry.counted)
    @write_completes
    async def import_session(self, session: Any, *, replace: bool = False) -> bool:
        """Store a whole session (events and state) as it is, in one transaction.

        For bringing sessions over from elsewhere (ADK session JSON, another store).
        Events keep their ids, timestamps and order; ``session.state`` is split by
        scope: un-prefixed keys become session state, ``user:`` and ``app:`` keys go
        to the user and app state where the store does not have them yet (a dump's
        copy of them is older than what the store holds; ``replace`` overwrites
        them), ``temp:`` keys are dropped. The stored revision is the number of
        events. ``last_update_time`` is kept (0 means: the newest event's timestamp,
        else now).

        Args:
            session: a :class:`Session` (or ADK ``Session``).
            replace: delete an existing session with the same id first, and
                overwrite the ``user:`` and ``app:`` keys the store has; otherwise an
                existing session is left untouched.

        Returns:
            True if the session was written, False if it existed and was kept.

        Raises:
            InvalidStateError, InvalidEventError, InvalidIdentifierError: the session
                cannot be stored; nothing was written.
        """
        check_session(session)
        check_argument("replace", replace, bool, "True or False")
        key = self._key(session.app_name, session.user_id, session.id)
        check_state_delta(session.state)
        rows = []
        seen: set[str] = set()
        for seq, event in enumerate(session.events, start=1):
            check_state_delta(event.actions.state_delta)
            if event.id in seen:
                raise InvalidEventError(
                    f"session {session.id!r} cannot be imported: two of its events have the"
                    f" id {event.id!r}"
                )
            seen.add(event.id)
            rows.append(
                {
                    **key,
                    "seq": seq,
                    "id": event.id,
                    "invocation_id": event.invocation_id or "",
                    "author": event.author or "",
                    "timestamp": float(event.timestamp),
                    "data": self._encode_event(event),
                }
            )
        now = time.time()
        update_time = session.last_update_time or (
            session.events[-1].timestamp if session.events else now
        )
        create_time = min([update_time, *(e.timestamp for e in session.events[:1])])
        app_json, user_json, session_json = _encode_scoped(
            split_delta(session.state), self._max_state_value_bytes
        )
        async with self._transaction(write=True) as conn:
            if await queries.session_revision(conn, **key) is not None:
                if not replace:
                    return False
                await queries.delete_session(conn, **key)
            if not replace:
                states = await queries.load_states(conn, **key)
                app_json = {k: v for k, v in app_json.items() if k not in states.app}
                user_json = {k: v for k, v in user_json.items() if k not in states.user}
            await queries.insert_session(
                conn,
                **key,
                create_time=create_time,
                update_time=update_time,
                revision=len(rows),
                incarnation=uuid.uuid4().hex,
            )
            await queries.insert_events(conn, rows)
            await queries.write_state(
                conn, **key, app=app_json, user=user_json, session=session_json, now=now
            )
        return True

    @telemetry.traced("import_state", rows=telemetry.counted)
    @write_completes
    async def import_state(
        self,
        *,
        app_name: str,
        user_id: str | None,
        state: Mapping[str, Any],
        replace: bool = False,
    ) -> int:
        """Write app state (``user_id=None``) or one user's state, keys without prefix,
        in one transaction. Keys the store already has are kept unless ``replace``.

        Returns:
            How many keys were written.

        Raises:
            InvalidStateError, InvalidIdentifierError: nothing was written.
        """
        check_identifier("app_name", app_name)
        if user_id is not None:
            check_identifier("user_id", user_id)
        check_state_delta(state)
        check_argument("replace", replace, bool, "True or False")
        scope = ScopedDelta(app=dict(state)) if user_id is None else ScopedDelta(user=dict(state))
        app_json, user_json, _ = _encode_scoped(scope, self._max_state_value_bytes)
        encoded = app_json if user_id is None else user_json
        async with self._transaction(write=True) as conn:
            if not replace:
                existing = (
                    await queries.load_app_state(conn, app_name=app_name)
                    if user_id is None
                    else (
                        await queries.load_user_states(conn, app_name=app_name, user_id=user_id)
                    ).get(user_id, {})
                )
                encoded = {k: v for k, v in encoded.items() if k not in existing}
            await queries.write_state(
                conn,
                app_name=app_name,
                user_id=user_id or "",
                session_id="",
                app=encoded if user_id is None else {},
                user=encoded if user_id is not None else {},
                session={},
                now=time.time(),
            )
        return len(encoded)

    def _encode_event(self, event: Any) -> str:
        """The event as JSON, after checking that it reads back (and, with
        ``exact_events``, that it reads back equal to itself).

        Raises:
            InvalidEventError, InvalidIdentifierError: naming the event and the problem.
        """
        check_event_fields(event)
        try:
            # exclude_none, as ADK's own services write events: exclude_defaults would
            # also drop default-valued fields of objects a tool returned (a function
            # response's {"memories": []} read back as {}).
            data = str(event.model_dump_json(exclude_none=True))
        except (PydanticSerializationError, ValueError) as exc:
            raise InvalidEventError(f"event {event.id!r} cannot be written as JSON: {exc}") from exc
        limit = self._max_event_bytes
        if len(data) * 4 > limit and (size := json_size(data)) > limit:
            raise InvalidEventError(
                f"event {event.id!r} is {size:,} bytes as JSON; the limit is"
                f" {limit:,} (max_event_bytes)"
            )
        try:
            (decoded,) = self._events_adapter.validate_json("[" + data + "]")
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(p) for p in problem["loc"][1:]) or "the event"
            raise InvalidEventError(
                f"event {event.id!r} cannot be stored: {where} would not read back"
                f" ({problem['msg']})"
            ) from exc
        # Field by field rather than ==, so that an instance of a subclass of the event
        # model passes when it carries nothing more.
        if self.exact_events and (
            decoded.__dict__ != event.__dict__
            or decoded.__pydantic_extra__ != getattr(event, "__pydantic_extra__", None)
        ):
            raise InvalidEventError(
                f"event {event.id!r} cannot be stored exactly: a value in it is not JSON (NaN"
                " or infinite numbers, sets, tuples, bytes outside inline_data, datetimes or"
                " other objects would come back changed); convert it first"
            )
        return data
