"""Every SQL statement of the library, named and documented, in one package.

Nothing outside this package writes SQL, with two exceptions: the Alembic migrations
in ``migrations/`` (they are the schema) and the reads of ADK's own
``DatabaseSessionService`` tables, which :mod:`adk_sqlstore.adk.database_import` makes
through ADK's own ORM models. Functions take an open connection (inside the caller's
transaction, unless they say otherwise) and plain values, and return plain values:
nothing here validates input, builds models or decides what an outcome means. Every
statement on a user's rows filters by ``(app_name, user_id)`` itself.

- :mod:`.constructs`: the one statement form whose syntax the dialects spell
  differently in SQLAlchemy (the upsert), and batching;
- :mod:`.sessions`: sessions, events and the three state scopes;
- :mod:`.hot_paths`: an append and a session load, each one database round trip;
- :mod:`.retention`: pruning old sessions and forgetting a user;
- :mod:`.memory`: memories, ingestion records, idle sessions;
- :mod:`.ingest`: a session's memories replaced in one round trip;
- :mod:`.search`: the reads of a memory search, per dialect;
- :mod:`.maintenance`: purging deleted text (SQLite's index and write-ahead log,
  PostgreSQL's statistics);
- :mod:`.connection`: per-connection settings and transaction starts;
- :mod:`.schema_version`: the Alembic version table and the migration lock;
- :mod:`.adk_source`: reads of ADK's own session databases (for importing them);
- :mod:`.sqlite_thread`: running a batch of statements in aiosqlite's thread.
"""

__all__: list[str] = []
