"""SQLite: the full-text index splits terms at spaces only, backslashes included.

The FTS5 tables of 0004 and 0006 were created through SQLAlchemy's ``text()``, which
reads ``\\:`` as an escaped colon: the tokenizer's ``tokenchars`` lost the backslash, so
a term holding one (``a\\b``, a Windows path, ``0\\0``) was split by FTS5 into several
tokens and a search for it failed ("fts5: phrase queries are not supported"). The
table is made again with every connector character of ``adk_sqlstore.search.analysis``
(the backslash placed where ``text()`` keeps it) and filled from ``sqlstore_memories``;
the triggers of 0006 stay as they are. PostgreSQL is unchanged (its index is built from
the terms by ``array_to_tsvector``, which splits nothing).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FTS = {
    # The backslash before a hyphen: text() unescapes only a backslash before a colon.
    "fixed": "tokenize=\"ascii tokenchars '_.@/:\\-+#~%=?&'\"",
    # What 0006 made (its backslash lost).
    "0006": "tokenize=\"ascii tokenchars '_.@/:-+#~%=?&'\"",
}


def _revision_0006() -> ModuleType:
    """0006's module, for its (frozen) definition of the index's rows."""
    path = Path(__file__).with_name("0006_term_frequencies.py")
    spec = importlib.util.spec_from_file_location("_adk_sqlstore_migration_0006", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _remake(tokens: str) -> None:
    row = _revision_0006()._sqlite_fts_row("m", "classed")
    op.execute("DROP TABLE sqlstore_memories_fts")
    op.execute(
        "CREATE VIRTUAL TABLE sqlstore_memories_fts USING fts5(tokens,"
        f" content='', detail=none, {tokens})"
    )
    op.execute(
        f"INSERT INTO sqlstore_memories_fts(rowid, tokens) SELECT {row} FROM sqlstore_memories AS m"
    )


def upgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    if op.get_bind().dialect.name == "sqlite":
        _remake(_FTS["fixed"])


def downgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    if op.get_bind().dialect.name == "sqlite":
        _remake(_FTS["0006"])
