"""Search on SQLite: FTS5 over classed terms (a contentless table, migration 0006), for
the reads of :mod:`.planner`.

A read matches its index tokens through FTS5, restricted to the user's rows by their
scope token in the MATCH expression (no other user's postings are read), and scores
each memory over all the query's terms from its ``terms`` column.

Each statement runs in aiosqlite's thread through sqlite3 itself
(:mod:`..sql.sqlite_thread`): one hop there and back instead of about four through
SQLAlchemy's adapter. A search without vectors is one batch in all
(:func:`search_now`): its own read transaction, the terms, every wave of the plan
and the memories' rows, with the planner (:func:`.planner.rank_now`) between the
statements, in that thread. For a user with 10 memories that took a search from about
3.9 to 0.8 ms at the median on a quiet 2-vCPU machine (1,000 users, 2026-12-02).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..sql.search import fts5_match, sqlite_memory_rows, sqlite_term_stats, sqlite_wave
from ..sql.sqlite_thread import execute, fetch_all, rollback_quietly, run_batch
from .lexical import (
    CLASS_TERMS,
    Read,
    ReadRow,
    Scored,
    Stats,
    Term,
    UserMemories,
    rounded,
    stats_of,
    token_groups,
    weigh,
)
from .planner import rank_now

__all__ = ["MemoryRow", "SqliteSearch", "search_now"]


class MemoryRow(NamedTuple):
    """A memory a search returns (the columns of :data:`~..sql.search.MEMORY_ROWS`)."""

    pk: int
    id: str
    session_id: str | None
    event_id: str | None
    author: str | None
    timestamp: float
    content: str
    custom_metadata: str


class SqliteSearch(UserMemories):
    """One search on SQLite (see the module docstring), each statement one hop."""

    def terms_now(self, db: Any) -> Stats | None:
        """:meth:`terms` on sqlite3 connection ``db``."""
        wanted = [*self.query_terms, *CLASS_TERMS]
        params = {**self.params, **{f"term_{i}": t for i, t in enumerate(wanted)}}
        return stats_of(self.query_terms, fetch_all(db, sqlite_term_stats(len(wanted)), params))

    def read_now(
        self, db: Any, terms: list[Term], avgdl: float, reads: Sequence[Read], limit: int
    ) -> list[ReadRow]:
        """:meth:`read` on sqlite3 connection ``db``."""
        params = self.read_params(terms, avgdl, limit)
        for r, read in enumerate(reads):
            params[f"match_{r}"] = fts5_match(self.scope, token_groups(read, terms))
        statement = sqlite_wave([read.absent for read in reads], len(terms)).text
        return [
            ReadRow(rounded(score), ts, pk) for score, ts, pk in fetch_all(db, statement, params)
        ]

    def rows_now(self, db: Any, pks: list[int]) -> dict[int, MemoryRow]:
        """:meth:`rows` on sqlite3 connection ``db``."""
        params = {**self.params, **{f"pk_{i}": pk for i, pk in enumerate(pks)}}
        found = fetch_all(db, sqlite_memory_rows(len(pks)), params)
        return {row[0]: MemoryRow(*row) for row in found}

    async def terms(self) -> Stats | None:
        return await run_batch(self.conn, self.terms_now)

    async def read(
        self, terms: list[Term], avgdl: float, reads: Sequence[Read], limit: int
    ) -> list[ReadRow]:
        return await run_batch(self.conn, self.read_now, terms, avgdl, reads, limit)

    async def rows(self, pks: list[int]) -> dict[int, Any]:
        return await run_batch(self.conn, self.rows_now, pks)


def search_now(db: Any, search: SqliteSearch, limit: int) -> list[tuple[Scored, MemoryRow]]:
    """A whole BM25 search (no vectors) as one batch on sqlite3 connection ``db``, in a
    read transaction of its own: the best ``limit`` as ((score, timestamp, pk), row),
    best first."""
    execute(db, "BEGIN")
    try:
        stats = search.terms_now(db)
        terms = [] if stats is None else weigh(stats.terms, stats.n)
        found: list[Scored] = []
        if stats is not None and terms:

            def read(reads: Sequence[Read], wanted: int) -> list[ReadRow]:
                return search.read_now(db, terms, stats.avgdl, reads, wanted)

            found = rank_now(terms, stats.n, stats.avgdl, stats.class_sizes, limit, read)
        rows = search.rows_now(db, [pk for _, _, pk in found]) if found else {}
        execute(db, "COMMIT")
    except BaseException:
        rollback_quietly(db)
        raise
    return [(scored, rows[scored[2]]) for scored in found if scored[2] in rows]
