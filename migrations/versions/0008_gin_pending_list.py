"""PostgreSQL: the full-text GIN index takes new entries through a small pending list.

With ``fastupdate`` off (0002 to 0006) every entry of a new memory went into the index
on its own: on the benchmark's sessions (50 events, 15-25 terms each) that was most of
``add_session_to_memory``'s time on the server. With ``fastupdate`` on, entries wait in
a pending list that the insert which fills it merges into the index in one sorted pass,
and that every search scans meanwhile. PostgreSQL's default list (4 MB) made searches
several times slower after a burst of ingestion; this one holds 64 kB
(``gin_pending_list_limit``, in kB): ingestion 3,200 -> 3,900 events/s on a busy 2-vCPU
machine (256 kB gave no more), and a search scans at most 64 kB of pending entries
(``benchmarks/RESULTS.md``: search p95 right after bulk loads). SQLite is unchanged.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING_LIST_KB = 64


def upgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "ALTER INDEX ix_sqlstore_memories_search"
            f" SET (fastupdate = on, gin_pending_list_limit = {PENDING_LIST_KB})"
        )


def downgrade() -> None:
    if op.get_context().dialect.name == "mysql":  # 0009 makes its schema whole
        return
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER INDEX ix_sqlstore_memories_search SET (fastupdate = off)")
        op.execute("ALTER INDEX ix_sqlstore_memories_search RESET (gin_pending_list_limit)")
        # What waits in the pending list goes into the index now (VACUUM would later).
        op.execute("SELECT gin_clean_pending_list('ix_sqlstore_memories_search')")
