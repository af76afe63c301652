"""Statement forms shared by the other modules of :mod:`adk_sqlstore.sql`.

The upsert is the one statement whose SQLAlchemy construct differs by dialect
(``postgresql.insert`` and ``sqlite.insert`` each have ``on_conflict_do_update``;
both PostgreSQL and SQLite (3.24+) run the same SQL; MySQL and MariaDB have
``INSERT ... ON DUPLICATE KEY UPDATE``, ``mysql.insert``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Table, func, not_, or_
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.dml import Insert

__all__ = ["CHUNK", "PG_ARRAY_ROWS", "chunks", "upsert"]

CHUNK = 500
"""Rows per multi-row statement: far below SQLite's 32,766 bound parameters."""

PG_ARRAY_ROWS = 10_000
"""Rows per PostgreSQL statement that takes its rows as arrays (``unnest``: one bound
parameter per column, whatever the number of rows). Each such statement fires the
memory table's statement-level triggers once, which update the user's statistics and
term rows again in the same transaction (every update leaves one more row version to
walk past): one 100,000-event session in chunks of 500 took 4,939 events/s against
7,149 for 20,000; in chunks of 10,000, 9,342 and 10,284 (2-vCPU machine, 2026-12-02)."""


def chunks(rows: Sequence[Any], size: int = CHUNK) -> Iterable[Sequence[Any]]:
    """``rows`` in slices of at most ``size``."""
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def upsert(
    dialect: Dialect,
    table: Table,
    *,
    key: Sequence[str],
    update: Sequence[str],
    only_if_changed: Sequence[str] | None = None,
) -> Insert:
    """``INSERT ... ON CONFLICT (key) DO UPDATE SET update = excluded.update``.

    Execute it with a list of row dicts (an executemany: the statement is compiled
    once and cached).

    Args:
        only_if_changed: update a conflicting row only when one of these columns
            differs from the new value (``IS DISTINCT FROM``).
    """
    if dialect.name == "mysql":
        return _mysql_upsert(table, update, only_if_changed)
    stmt: postgresql.Insert | sqlite.Insert
    if dialect.name == "postgresql":
        stmt = postgresql.insert(table)
    elif dialect.name == "sqlite":
        stmt = sqlite.insert(table)
    else:  # pragma: no cover - urls.normalize_url refuses other databases
        raise NotImplementedError(dialect.name)
    where = None
    if only_if_changed:
        where = or_(*(table.c[c].is_distinct_from(stmt.excluded[c]) for c in only_if_changed))
    return stmt.on_conflict_do_update(
        index_elements=list(key),
        set_={name: stmt.excluded[name] for name in update},
        where=where,
    )


def _mysql_upsert(
    table: Table, update: Sequence[str], only_if_changed: Sequence[str] | None
) -> Insert:
    """:func:`upsert` on MySQL and MariaDB: ``ON DUPLICATE KEY UPDATE`` (on whichever
    unique key the row collides with). It has no ``WHERE``: with ``only_if_changed``,
    the other columns take their new values only ``IF`` a compared one differs
    (``<=>``, NULL-safe), and they are assigned first, because MySQL evaluates the
    assignments in order and each sees the columns assigned before it; the compared
    columns then take their new values, which leaves an unchanged row as it was."""
    stmt = mysql.insert(table)
    new = stmt.inserted
    if not only_if_changed:
        return stmt.on_duplicate_key_update([(name, new[name]) for name in update])
    changed = or_(
        *(not_(table.c[c].op("<=>", is_comparison=True)(new[c])) for c in only_if_changed)
    )
    guarded = [
        (n, func.if_(changed, new[n], table.c[n])) for n in update if n not in only_if_changed
    ]
    compared = [(n, new[n]) for n in update if n in only_if_changed]
    return stmt.on_duplicate_key_update(guarded + compared)
