"""The store behind an ADK service URI (``--session_service_uri``,
``--memory_service_uri``, ``services.yaml``)."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from ..errors import ConfigurationError, InvalidArgumentError
from ..migration import check_schema_at_startup
from ..store import Store
from ..url_display import describe_url

__all__ = ["chosen_store", "store_for_uri"]

logger = logging.getLogger("adk_sqlstore.adk")


def chosen_store(
    kind: str,
    uri: str | Store | AsyncEngine | None,
    *,
    store: Store | AsyncEngine | None,
    engine: AsyncEngine | None,
    auto_migrate: bool | None,
    settings: dict[str, Any],
) -> tuple[Store, bool]:
    """The store an ADK class works on, and whether it owns it (closes it): the store or
    engine it was given (as ``store=``, ``engine=`` or, as the core classes take it,
    first), else one of its own for ``uri`` (:func:`store_for_uri`). As ADK's
    ``DatabaseSessionService`` takes exactly one of ``db_url`` and ``db_engine``.

    Raises:
        InvalidArgumentError: more than one of ``uri``, ``store`` and ``engine``, or
            connection settings beside a store or engine (they would be ignored).
        ConfigurationError, SchemaNotMigratedError: as :func:`store_for_uri`.
    """
    first = "uri"
    if isinstance(uri, Store | AsyncEngine):
        first = "a store or engine as the first argument"
    named = [n for n, v in ((first, uri), ("store=", store), ("engine=", engine)) if v is not None]
    if len(named) > 1:
        raise InvalidArgumentError(
            f"{kind}: give one of a URI, store= or engine=, not {' and '.join(named)}"
        )
    given = next((v for v in (store, engine, uri) if isinstance(v, Store | AsyncEngine)), None)
    if given is None:
        url = uri if isinstance(uri, str) else None
        return store_for_uri(url, auto_migrate=auto_migrate, kind=kind, settings=settings), True
    if settings:
        raise InvalidArgumentError(
            f"{kind}: {', '.join(sorted(settings))} cannot go with a store or engine you pass"
            " (it has its own settings); give them to Store.from_url(url, ...) instead"
        )
    return Store.of(given, auto_migrate=auto_migrate), False


def store_for_uri(
    uri: str | None, *, auto_migrate: bool | None, kind: str, settings: dict[str, Any]
) -> Store:
    """A store of its own for an ADK service URI, logging where the data lives (ADK's
    server shows INFO lines at start-up).

    Built by ADK's service registry (``adk web``, ``adk api_server``: it passes
    ``agents_dir``, dropped here), the schema is checked at once, so that a server on a
    database nobody migrated stops at start-up with one line naming the command to run,
    instead of answering every request with HTTP 500.

    Raises:
        SchemaNotMigratedError: built by ADK's registry, on a database that is not
            migrated and may not migrate itself.
        ConfigurationError: the URI or a setting is invalid.
    """
    by_adk_server = settings.pop("agents_dir", None) is not None
    for name in ("url", "db_url", "database_url"):
        if name in settings:  # ADK's DatabaseSessionService(db_url=...), say
            raise ConfigurationError(
                f"{kind}: {name}= is not an argument; give the database URL as the"
                f' first argument, or uri= (e.g. SqlSessionService("postgresql://...")), or'
                " use from_url(url)"
            )
    store = Store.from_url(uri, auto_migrate=auto_migrate, **settings)
    logger.info("adk-sqlstore %s: %s", kind, describe_url(store.url))
    if by_adk_server and not store.auto_migrate:
        check_schema_at_startup(store.engine)
    return store
