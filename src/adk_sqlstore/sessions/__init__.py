"""Sessions: durable ADK-style conversations with scoped state.

A session ``(app_name, user_id, id)`` holds an append-only list of events; each event
may carry ``actions.state_delta`` and session state is the fold of those deltas,
materialised per key so that loading a session is a lookup, not a replay. Keys
prefixed ``app:`` are shared by every user of the app, ``user:`` by every session of
one user, ``temp:`` never leave the current invocation (ADK's ``State`` scopes; see
``google.adk.sessions.base_session_service`` for the append semantics followed here).
Every write is one transaction; appends use optimistic concurrency on an integer
revision.

- :mod:`.service`: :class:`SqlSessionService`, the public API;
- :mod:`.codec`: the models a service reads and writes (this library's or ADK's),
  event and state encoding, page tokens;
- :mod:`.reading`: loading a session, listing sessions;
- :mod:`.appending`: the append;
- :mod:`.retention`: pruning old sessions, forgetting a user;
- :mod:`.importing`: copying whole sessions and state in;
- :mod:`.json_files`: ADK session JSON files (import and export).
"""

from .appending import AfterAppend
from .codec import CORE_MODELS, CoreModels, SessionModels, Token
from .retention import PruneReport
from .service import SqlSessionService

__all__ = [
    "CORE_MODELS",
    "AfterAppend",
    "CoreModels",
    "PruneReport",
    "SessionModels",
    "SqlSessionService",
    "Token",
]
