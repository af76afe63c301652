"""Long-term memory: searchable memories of past conversations, in the same database.

Follows ADK's ``BaseMemoryService`` and the write path of the design notes (000,
"Cross-Session Memory in ADK"): ingestion is explicit and an upsert per session
("ingesting the same session twice yields one copy"), filtered at ingestion, and every
search filters by ``(app_name, user_id)`` in its WHERE clause ("apply the app and user
filter inside the query to the index, not after retrieving the top results").

- :mod:`.service`: :class:`SqlMemoryService`, the public API;
- :mod:`.ingestion`: a session into memories, and the triggers (:class:`IngestEvery`,
  the idle scan);
- :mod:`.rows`: memory rows from events and entries;
- :mod:`.redaction`: the ingestion filter (payment card numbers, your own rules).

Search itself is :mod:`adk_sqlstore.search`.
"""

from .ingestion import IngestEvery, IngestReport, MemoryCheckpoint
from .service import SqlMemoryService

__all__ = ["IngestEvery", "IngestReport", "MemoryCheckpoint", "SqlMemoryService"]
