"""``adk-sqlstore``: the command line.

Every command takes ``--url``; without it the database is
``$ADK_SQLSTORE_DATABASE_URL``, else the embedded SQLite file. Passwords in URLs are
never printed.

- :mod:`.common`: the Typer apps, consoles, options, errors and exit codes;
- :mod:`.sessions`: ``sessions list``, ``sessions show``, ``import``, ``export``;
- :mod:`.memory`: ``memory search``, ``memory ingest-idle``, ``memory reindex``,
  ``memory embed``;
- :mod:`.facts`: ``memory generate``, ``memory facts list``, ``memory facts show``,
  ``memory facts failures``;
- :mod:`.artifacts`: ``artifacts list``, ``artifacts get``;
- :mod:`.admin`: ``migrate``, ``prune``, ``forget-user``, ``services-yaml``, ``demo``;
- :mod:`.import_adk`: ``import-adk``;
- :mod:`.inspect`: ``inspect`` (the memory inspector).
"""

from __future__ import annotations

from . import admin, artifacts, facts, import_adk, inspect, memory, sessions
from .common import app, make_console

__all__ = ["app", "main", "make_console"]

_COMMANDS = (
    admin,
    artifacts,
    facts,
    import_adk,
    inspect,
    memory,
    sessions,
)  # imported for the commands they add to app


def main() -> None:
    """Console-script entry point."""
    app()
