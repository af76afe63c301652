"""Drop-in session and memory services for Google ADK (extra ``adk``).

``pip install "adk-sqlstore[adk]"``, then replace ADK's in-memory services (on
PostgreSQL, MySQL/MariaDB or SQLite: any URL of :func:`adk_sqlstore.urls.resolve_url`)::

    from adk_sqlstore.adk import SqlMemoryService, SqlSessionService

    session_service = SqlSessionService.from_url("postgresql://user:pass@host/agents")
    memory_service = SqlMemoryService(store=session_service.store)
    runner = Runner(agent=agent, app_name="lunch-app", session_service=session_service,
                    memory_service=memory_service)

:class:`SqlSessionService` subclasses ``google.adk.sessions.BaseSessionService`` and
:class:`SqlMemoryService` subclasses ``google.adk.memory.BaseMemoryService``. Both take
and return ADK's own types (``Session``, ``Event``, ``GetSessionConfig``,
``ListSessionsResponse``, ``MemoryEntry``, ``SearchMemoryResponse``) and raise ADK's own
errors (``google.adk.errors.AlreadyExistsError``, ``SessionNotFoundError``,
``StaleSessionError``), chained to adk-sqlstore's. All the logic is the core services'
(:class:`adk_sqlstore.SqlSessionService`, :class:`adk_sqlstore.SqlMemoryService`), run
with ADK's models (:mod:`.models`); this package only adapts types and errors.

- :mod:`.sessions`, :mod:`.memory`, :mod:`.artifacts`: the services (the artifact
  service subclasses ``google.adk.artifacts.BaseArtifactService``);
- :mod:`.models`: ADK's types as the core services' session models;
- :mod:`.uri`: the store behind an ADK service URI;
- :mod:`.database_import`: copying ADK's own session databases in.

For ADK's command line, both classes accept ``uri=`` (the ``services.yaml``
convention; ``adk-sqlstore services-yaml`` prints the file, shipped in this package as
``adk_sqlstore/services.yaml``): ``sqlstore+postgresql://...``,
``sqlstore+sqlite:///relative/to/cwd.db``, ``sqlstore+sqlite:////absolute/path.db`` or
``sqlstore://`` (``$ADK_SQLSTORE_DATABASE_URL``, else the embedded SQLite file); add
``?auto_migrate=true`` to let a PostgreSQL database be migrated on first use. Plain
database URLs work too (every spelling of :mod:`adk_sqlstore.urls`). Each class logs
where its data lives when it is created (the absolute path of an SQLite file).
"""

from .artifacts import SqlArtifactService
from .memory import SqlMemoryService
from .models import PagedListSessionsResponse
from .sessions import SqlSessionService

__all__ = [
    "PagedListSessionsResponse",
    "SqlArtifactService",
    "SqlMemoryService",
    "SqlSessionService",
]
