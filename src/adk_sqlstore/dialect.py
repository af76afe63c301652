"""The one seam where PostgreSQL and SQLite differ.

Everything else is written once in SQLAlchemy Core; a statement whose syntax differs
between the two dialects is built here, one function per statement: the upsert, and
full-text search over memories.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from sqlalchemy import Table, bindparam, or_, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect, Row
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import Insert

from .engine import given_url
from .text import MAX_QUERY_CHARS, query_terms, search_scope, valid_unicode

__all__ = [
    "BM25_B",
    "BM25_K1",
    "Purge",
    "is_unique_violation",
    "purge_deleted_text",
    "search_memories",
    "truncate_wal",
    "upsert",
]

T = TypeVar("T")

BM25_K1 = 1.2
MAX_SEARCH_RESULTS = 1000
"""Most memories one search returns, whatever ``limit`` asks for."""
BM25_B = 0.75


def upsert(
    dialect: Dialect,
    table: Table,
    *,
    key: Sequence[str],
    update: Sequence[str],
    only_if_changed: Sequence[str] | None = None,
) -> Insert:
    """``INSERT ... ON CONFLICT (key) DO UPDATE SET update = excluded.update``.

    Both PostgreSQL and SQLite (3.24+) support this statement; SQLAlchemy builds it
    with each dialect's own ``insert`` construct. Execute it with a list of row dicts
    (an executemany: the statement is compiled once and cached).

    Args:
        only_if_changed: update a conflicting row only when one of these columns
            differs from the new value (``IS DISTINCT FROM``).
    """
    module: Any
    if dialect.name == "postgresql":
        module = postgresql
    elif dialect.name == "sqlite":
        module = sqlite
    else:  # pragma: no cover - engine.normalize_url refuses other databases
        raise NotImplementedError(dialect.name)
    stmt = module.insert(table)
    where = None
    if only_if_changed:
        where = or_(*(table.c[c].is_distinct_from(stmt.excluded[c]) for c in only_if_changed))
    return stmt.on_conflict_do_update(  # type: ignore[no-any-return]
        index_elements=list(key),
        set_={name: stmt.excluded[name] for name in update},
        where=where,
    )


# -- memory search ----------------------------------------------------------------------
#
# Ranking is BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and
# Beyond", 2009) with term frequency taken as 1 (memories are short turns) and statistics
# over the user's own memories only:
#     score(d) = sum over query terms t in d of  idf(t) * (k1 + 1) / (1 + k1 * norm(d))
#     idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)),  norm(d) = 1 - b + b * dl(d) / avgdl
# N and avgdl come from sqlstore_memory_stats; df(t) is counted among the user's memories
# (SQLite: by FTS5; PostgreSQL: through the GIN index up to _EXACT_DF, estimated past it,
# see _PostgresSearch.terms). Terms
# are the dialect's own: PostgreSQL's english stemmer and stop words, SQLite FTS5's Porter
# stemmer with the same stop words dropped from the query.
#
# Any term may match. On PostgreSQL, to keep a user with 100,000 memories fast,
# candidates are read MaxScore-style (Turtle & Flood, "Query evaluation: strategies and
# optimizations", 1995): first the memories holding the rarest terms, scored exactly on
# every term; more terms are added only while a memory holding none of the terms read so
# far could still beat the k-th score found. The result is the exact top k; a query made
# only of very common words still reads every memory that holds one of them. SQLite
# scores every match in one statement (see _SqliteSearch).

_TERMS_PER_QUERY = 64  # the rarest distinct terms of a query count
_FIRST_READ = 2_000  # candidates read in the first round, by summed document frequency


@dataclass
class _Term:
    text: str
    df: int
    idf: float = 0.0


@dataclass
class _Candidate:
    pk: int
    timestamp: float
    dl: int
    flags: list[bool]


class _SearchBackend:
    """The dialect-specific reads of a search."""

    async def terms(self) -> tuple[list[_Term], float, float] | None:
        """The query's terms with their document frequency, N and avgdl."""
        raise NotImplementedError

    async def best(
        self, wanted: list[_Term], seen: list[_Term], terms: list[_Term], avgdl: float, limit: int
    ) -> list[tuple[float, float, int]]:
        """The top ``limit`` as (score, timestamp, pk), best first, of the memories
        holding a ``wanted`` term but no ``seen`` one, scored on all ``terms``."""
        raise NotImplementedError

    async def rows(self, pks: list[int]) -> dict[int, Row[Any]]:
        raise NotImplementedError

    async def rank(
        self, terms: list[_Term], avgdl: float, limit: int
    ) -> list[tuple[float, float, int]]:
        """The top ``limit`` as (score, timestamp, pk), best first: MaxScore over
        :meth:`best` (terms are sorted rarest first).

        A term held by more than half of the user's memories (idf < ln 2) scores the
        memories found through the query's other terms but finds none itself, unless
        the query has no other term: such a word says little (it adds at most 1.17 to a
        score where a rare word adds 10), and reading all its memories is what would
        make a search over 100,000 of them slow.
        """
        # A term adds at most idf * (k1 + 1) / (1 + k1 * (1 - b)) to a memory's score.
        ceiling = [t.idf * (BM25_K1 + 1) / (1 + BM25_K1 * (1 - BM25_B)) for t in terms]
        finding = [t for t in terms if t.idf >= math.log(2)] or terms
        read = 1
        while read < len(finding) and sum(t.df for t in finding[: read + 1]) <= _FIRST_READ:
            read += 1
        scored: list[tuple[float, float, int]] = []
        seen: list[_Term] = []
        while True:
            scored += await self.best(finding[len(seen) : read], seen, terms, avgdl, limit)
            seen = finding[:read]
            scored.sort(reverse=True)
            del scored[limit:]
            unread = sum(ceiling[read : len(finding)])
            if read == len(finding) or (len(scored) == limit and unread < scored[-1][0]):
                return scored
            read += 1


_MEMORY_ROWS = text(
    "SELECT pk, id, session_id, event_id, author, timestamp, content, custom_metadata"
    " FROM sqlstore_memories WHERE app_name = :app_name AND user_id = :user_id"
    " AND pk IN :pks"
).bindparams(bindparam("pks", expanding=True))


class _Scope:
    def __init__(self, conn: AsyncConnection, app_name: str, user_id: str, query: str) -> None:
        self.conn = conn
        self.params: dict[str, Any] = {"app_name": app_name, "user_id": user_id}
        self.query = query

    async def rows(self, pks: list[int]) -> dict[int, Row[Any]]:
        result = await self.conn.execute(_MEMORY_ROWS, {**self.params, "pks": pks})
        return {row.pk: row for row in result.all()}

    async def stats(self) -> tuple[float, float] | None:
        row = (
            await self.conn.execute(
                text(
                    "SELECT doc_count, lexeme_count FROM sqlstore_memory_stats"
                    " WHERE app_name = :app_name AND user_id = :user_id"
                ),
                self.params,
            )
        ).first()
        if row is None or row.doc_count <= 0:
            return None
        return float(row.doc_count), max(row.lexeme_count / row.doc_count, 1.0)


def _tsquery_lexeme(term: str) -> str:
    """A lexeme as tsquery text: quoted, so that no character is query syntax."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


_EXACT_DF = 2_000  # PostgreSQL counts a term's documents exactly up to this many

# Lexemes, each with its matches among the user's memories counted up to
# :cap (the GIN index holds the user's scope token: only the user's postings are read).
_PG_TERMS = text(r"""
SELECT t.term, (
    SELECT count(*) FROM (
        SELECT 1 FROM sqlstore_memories m
        WHERE m.app_name = :app_name AND m.user_id = :user_id
          AND m.search_scope = :search_scope
          AND m.search_vector @@ CAST(
              '''' || replace(replace(t.term, '\', '\\'), '''', '''''') || '''' AS tsquery)
        LIMIT :cap
    ) AS hits
) AS df
FROM unnest(CAST(:terms AS TEXT[])) AS t(term)
""")

_PG_LEXEMES = text("SELECT DISTINCT lexeme FROM unnest(to_tsvector('english'::regconfig, :query))")

# The commonest lexemes of the column and their share of rows (kept by ANALYZE).
_PG_COMMON = text(
    "SELECT CAST(CAST(s.most_common_elems AS TEXT) AS TEXT[]), s.most_common_elem_freqs"
    " FROM pg_stats s WHERE s.tablename = 'sqlstore_memories' AND s.attname = 'search_vector'"
    # the table the search_path resolves to, not a namesake in another schema
    " AND s.schemaname = (SELECT n.nspname FROM pg_class c JOIN pg_namespace n"
    " ON n.oid = c.relnamespace WHERE c.oid = CAST('sqlstore_memories' AS regclass))"
)
_COMMON_TTL = 300.0  # seconds a process keeps those statistics
_common_cache: dict[str, tuple[float, dict[str, float]]] = {}


async def _common_lexemes(conn: AsyncConnection) -> dict[str, float]:
    """Lexeme -> share of memories holding it, for the commonest lexemes (cached)."""
    key = given_url(conn.engine).render_as_string(hide_password=True)  # with search_path
    cached = _common_cache.get(key)
    if cached and cached[0] > time.monotonic():
        return cached[1]
    row = (await conn.execute(_PG_COMMON)).first()
    shares: dict[str, float] = {}
    if row is not None and row[0] is not None:
        shares = dict(zip(row[0], row[1], strict=False))
    _common_cache[key] = (time.monotonic() + _COMMON_TTL, shares)
    return shares


_PG_CANDIDATES = text("""
SELECT m.pk, m.timestamp, length(m.search_vector) AS dl,
       ARRAY(SELECT m.search_vector @@ CAST(x.q AS tsquery)
             FROM unnest(CAST(:all_terms AS TEXT[])) WITH ORDINALITY AS x(q, i)
             ORDER BY x.i) AS flags
FROM sqlstore_memories m
WHERE m.app_name = :app_name AND m.user_id = :user_id AND m.search_scope = :search_scope
  AND m.search_vector @@ CAST(:wanted AS tsquery)
""")


# The best :limit of the memories holding a :wanted lexeme and no :seen one (BM25 above).
_PG_BEST = f"""
SELECT score, m.timestamp, m.pk
FROM sqlstore_memories m,
LATERAL (
    SELECT (
        SELECT sum(x.idf) FROM unnest(CAST(:all_terms AS TEXT[]), CAST(:idfs AS FLOAT8[]))
            AS x(q, idf)
        WHERE m.search_vector @@ CAST(x.q AS tsquery)
    ) * ({BM25_K1} + 1)
    / (1 + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * length(m.search_vector) / :avgdl)) AS score
) AS s
WHERE m.app_name = :app_name AND m.user_id = :user_id AND m.search_scope = :search_scope
  AND m.search_vector @@ CAST(:wanted AS tsquery) {{seen}}
ORDER BY score DESC, m.timestamp DESC, m.pk DESC
LIMIT :limit
"""


class _PostgresSearch(_Scope, _SearchBackend):
    """A user with at most ``_EXACT_DF`` memories: every memory matching a query term
    is read once, with a flag per term, which gives the exact document frequencies and
    all the scores. A bigger user: document frequencies counted (and estimated past
    ``_EXACT_DF``), then MaxScore reads (:meth:`_SearchBackend.rank`)."""

    def __init__(self, conn: AsyncConnection, app_name: str, user_id: str, query: str) -> None:
        super().__init__(conn, app_name, user_id, query)
        self._every_match: list[_Candidate] | None = None
        self._read_terms: list[str] = []

    async def terms(self) -> tuple[list[_Term], float, float] | None:
        stats = await self.stats()
        if stats is None:
            return None
        n = stats[0]
        if n <= _EXACT_DF:
            rows = await self.conn.execute(_PG_LEXEMES, {"query": self.query})
            terms = [_Term(term, 0) for (term,) in rows]
            if terms:
                self._every_match = await self._every_match_of(terms)
                self._read_terms = [t.text for t in terms]
                for i, t in enumerate(terms):
                    t.df = sum(c.flags[i] for c in self._every_match)
            return terms, *stats
        return await self._counted_terms(n), *stats

    async def _counted_terms(self, n: float) -> list[_Term]:
        """Document frequencies counted exactly up to ``_EXACT_DF``, or estimated.

        A term that ANALYZE lists among the column's commonest lexemes gets N times
        its share of rows when that comes to ``_EXACT_DF`` or more: it is not counted,
        as counting reads its whole posting list (78,000 entries for a common word of
        a user with 100,000 memories). A term counted up to the cap gets the larger of
        the cap and that estimate. Either estimate only moves the weight of very
        common words, which is small either way.
        """
        shares = await _common_lexemes(self.conn)
        lexemes = [term for (term,) in await self.conn.execute(_PG_LEXEMES, {"query": self.query})]
        estimated = {t: round(shares.get(t, 0.0) * n) for t in lexemes}
        to_count = [t for t in lexemes if estimated[t] < _EXACT_DF]
        counted: dict[str, int] = {}
        if to_count:
            params = {
                **self.params,
                "terms": to_count,
                "cap": _EXACT_DF,
                "search_scope": search_scope(self.params["app_name"], self.params["user_id"]),
            }
            counted = {t: int(df) for t, df in await self.conn.execute(_PG_TERMS, params)}
        terms = []
        for t in lexemes:
            df = counted.get(t, _EXACT_DF)
            if df >= _EXACT_DF:
                df = min(int(n), max(_EXACT_DF, estimated[t]))
            terms.append(_Term(t, df))
        return terms

    async def rank(
        self, terms: list[_Term], avgdl: float, limit: int
    ) -> list[tuple[float, float, int]]:
        if self._every_match is None:
            return await super().rank(terms, avgdl, limit)
        order = [self._read_terms.index(t.text) for t in terms]
        scored = []
        for c in self._every_match:
            flags = [c.flags[i] for i in order]
            if any(flags):
                scored.append(
                    (
                        _bm25(_Candidate(c.pk, c.timestamp, c.dl, flags), terms, avgdl),
                        c.timestamp,
                        c.pk,
                    )
                )
        scored.sort(reverse=True)
        return scored[:limit]

    async def _every_match_of(self, terms: list[_Term]) -> list[_Candidate]:
        """Every memory holding one of ``terms``, with a flag per term."""
        lexemes = [_tsquery_lexeme(t.text) for t in terms]
        params = {
            **self.params,
            "search_scope": search_scope(self.params["app_name"], self.params["user_id"]),
            "all_terms": lexemes,
            "wanted": " | ".join(lexemes),
        }
        result = await self.conn.execute(_PG_CANDIDATES, params)
        return [_Candidate(pk, ts, dl, list(flags)) for pk, ts, dl, flags in result.all()]

    async def best(
        self, wanted: list[_Term], seen: list[_Term], terms: list[_Term], avgdl: float, limit: int
    ) -> list[tuple[float, float, int]]:
        params = {
            **self.params,
            "search_scope": search_scope(self.params["app_name"], self.params["user_id"]),
            "all_terms": [_tsquery_lexeme(t.text) for t in terms],
            "idfs": [t.idf for t in terms],
            "wanted": " | ".join(_tsquery_lexeme(t.text) for t in wanted),
            "avgdl": avgdl,
            "limit": limit,
        }
        seen_sql = ""
        if seen:
            seen_sql = "AND NOT m.search_vector @@ CAST(:seen AS tsquery)"
            params["seen"] = " | ".join(_tsquery_lexeme(t.text) for t in seen)
        result = await self.conn.execute(text(_PG_BEST.format(seen=seen_sql)), params)
        return [(float(score), ts, pk) for score, ts, pk in result.all()]


def _fts5_string(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


class _SqliteSearch(_Scope, _SearchBackend):
    """FTS5 reads restricted to the user's rows by their scope token in the MATCH
    expression (so no other user's postings are read). All matching rows are scored in
    one statement: FTS5 cannot say cheaply which of a few rows hold a common word, so
    MaxScore's second reads would cost more than they save; a user with 100,000 memories
    pays for the postings of the query's words (see benchmarks/RESULTS.md)."""

    def _match(self, term: str) -> str:
        scope = _fts5_string(search_scope(self.params["app_name"], self.params["user_id"]))
        return f"search_scope : {scope} AND text : {_fts5_string(term)}"

    async def terms(self) -> tuple[list[_Term], float, float] | None:
        stats = await self.stats()
        if stats is None:
            return None
        words = query_terms(self.query)
        found: list[_Term] = []
        for start in range(0, len(words), 400):  # SQLite: at most 500 terms in a compound
            chunk = words[start : start + 400]
            sql = " UNION ALL ".join(
                f"SELECT {i}, count(*) FROM sqlstore_memories_fts"
                f" WHERE sqlstore_memories_fts MATCH :m{i}"
                for i in range(len(chunk))
            )
            counts = await self.conn.execute(
                text(sql), {f"m{i}": self._match(w) for i, w in enumerate(chunk)}
            )
            found += [_Term(chunk[i], int(df)) for i, df in counts.all()]
        return found, *stats

    async def rank(
        self, terms: list[_Term], avgdl: float, limit: int
    ) -> list[tuple[float, float, int]]:
        hits = " UNION ALL ".join(
            f"SELECT rowid AS pk, :w{i} AS w FROM sqlstore_memories_fts"
            f" WHERE sqlstore_memories_fts MATCH :m{i}"
            for i in range(len(terms))
        )
        sql = f"""
            WITH hits AS ({hits})
            SELECT sum(hits.w) * ({BM25_K1} + 1)
                   / (1 + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * m.token_count / :avgdl))
                   AS score, m.timestamp, m.pk
            FROM hits JOIN sqlstore_memories m ON m.pk = hits.pk
            WHERE m.app_name = :app_name AND m.user_id = :user_id
            GROUP BY m.pk
            ORDER BY score DESC, m.timestamp DESC, m.pk DESC
            LIMIT :limit
        """
        params: dict[str, Any] = {**self.params, "limit": limit, "avgdl": avgdl}
        for i, term in enumerate(terms):
            params[f"w{i}"] = term.idf
            params[f"m{i}"] = self._match(term.text)
        return [(score, ts, pk) for score, ts, pk in (await self.conn.execute(text(sql), params))]


def _bm25(candidate: _Candidate, terms: list[_Term], avgdl: float) -> float:
    norm = 1 - BM25_B + BM25_B * candidate.dl / avgdl
    weight = (BM25_K1 + 1) / (1 + BM25_K1 * norm)
    return weight * sum(t.idf for t, hit in zip(terms, candidate.flags, strict=True) if hit)


async def search_memories(
    conn: AsyncConnection, *, app_name: str, user_id: str, query: str, limit: int
) -> list[tuple[Row[Any], float]]:
    """Rank one user's memories against a natural-language query, best first.

    Any query term may match; stop words are ignored; no input raises (the query is
    never parsed as search syntax). Returns (row, score) pairs; rows have pk, id,
    session_id, event_id, author, timestamp, content, custom_metadata; the score is
    BM25, higher is better.
    """
    query = valid_unicode(query[:MAX_QUERY_CHARS]).replace("\x00", " ")
    limit = min(limit, MAX_SEARCH_RESULTS)
    if not query_terms(query) or limit <= 0:
        return []
    backend: _SearchBackend = (
        _PostgresSearch(conn, app_name, user_id, query)
        if conn.dialect.name == "postgresql"
        else _SqliteSearch(conn, app_name, user_id, query)
    )
    found = await backend.terms()
    if found is None:
        return []
    terms, n, avgdl = found
    terms = [t for t in terms if t.df > 0]
    for t in terms:
        t.idf = math.log(1 + (n - t.df + 0.5) / (t.df + 0.5))
    terms = sorted(terms, key=lambda t: (-t.idf, t.text))[:_TERMS_PER_QUERY]
    if not terms:
        return []
    scored = await backend.rank(terms, avgdl, limit)
    rows = await backend.rows([pk for _, _, pk in scored])
    return [(rows[pk], score) for score, _, pk in scored if pk in rows]


def is_unique_violation(exc: IntegrityError) -> bool:
    """Whether an ``IntegrityError`` is a duplicate key (and not, say, a NOT NULL or
    foreign key violation): SQLSTATE 23505 on PostgreSQL, "UNIQUE constraint failed"
    or "PRIMARY KEY" on SQLite."""
    orig = exc.orig
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if sqlstate is not None:
        return bool(sqlstate == "23505")
    message = str(orig)
    return "UNIQUE constraint failed" in message or "PRIMARY KEY must be unique" in message


# -- the hot paths: one append, one session load ----------------------------------------
#
# An append and a load are each one database round trip on PostgreSQL (a single statement
# outside an explicit transaction, which PostgreSQL runs atomically on one snapshot) and
# one hop to aiosqlite's worker thread on SQLite (the whole transaction runs there on the
# sqlite3 connection). Both write and read exactly what the generic queries in
# queries.py would; the parameter names are shared (SQLAlchemy's :name and sqlite3's
# named style agree).


@dataclass(frozen=True)
class AppendRow:
    """Everything one append writes: the revision guard, the event row, state keys
    (sorted, values already JSON text)."""

    app_name: str
    user_id: str
    session_id: str
    expected_revision: int
    expected_incarnation: str | None
    update_time: float
    event_id: str
    invocation_id: str
    author: str
    timestamp: float
    data: str
    session_state: list[tuple[str, str]]
    user_state: list[tuple[str, str]]
    app_state: list[tuple[str, str]]
    now: float

    def params(self) -> dict[str, Any]:
        return {
            "app_name": self.app_name,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "expected_revision": self.expected_revision,
            "expected_incarnation": self.expected_incarnation,
            "update_time": self.update_time,
            "event_id": self.event_id,
            "invocation_id": self.invocation_id,
            "author": self.author,
            "timestamp": self.timestamp,
            "data": self.data,
            "now": self.now,
        }


_BUMP = """
    UPDATE sqlstore_sessions SET revision = revision + 1, update_time = :update_time
    WHERE app_name = :app_name AND user_id = :user_id AND id = :session_id
      AND revision = :expected_revision
      AND (CAST(:expected_incarnation AS TEXT) IS NULL OR incarnation = :expected_incarnation)
    RETURNING revision
"""

_POSTGRES_APPEND = text(f"""
WITH bumped AS ({_BUMP}),
new_event AS (
    INSERT INTO sqlstore_events
        (app_name, user_id, session_id, seq, id, invocation_id, author, timestamp, data)
    SELECT :app_name, :user_id, :session_id, revision, :event_id, :invocation_id, :author,
           :timestamp, :data
    FROM bumped
),
new_session_state AS (
    INSERT INTO sqlstore_session_state (app_name, user_id, session_id, key, value)
    SELECT :app_name, :user_id, :session_id, s.key, s.value
    FROM bumped, unnest(CAST(:session_keys AS TEXT[]), CAST(:session_values AS TEXT[]))
         AS s(key, value)
    ON CONFLICT (app_name, user_id, session_id, key) DO UPDATE SET value = EXCLUDED.value
),
new_user_state AS (
    INSERT INTO sqlstore_user_state (app_name, user_id, key, value, update_time)
    SELECT :app_name, :user_id, s.key, s.value, :now
    FROM bumped, unnest(CAST(:user_keys AS TEXT[]), CAST(:user_values AS TEXT[])) AS s(key, value)
    ON CONFLICT (app_name, user_id, key)
    DO UPDATE SET value = EXCLUDED.value, update_time = EXCLUDED.update_time
),
new_app_state AS (
    INSERT INTO sqlstore_app_state (app_name, key, value, update_time)
    SELECT :app_name, s.key, s.value, :now
    FROM bumped, unnest(CAST(:app_keys AS TEXT[]), CAST(:app_values AS TEXT[])) AS s(key, value)
    ON CONFLICT (app_name, key)
    DO UPDATE SET value = EXCLUDED.value, update_time = EXCLUDED.update_time
)
SELECT revision FROM bumped
""")

_SQLITE_INSERT_EVENT = """
    INSERT INTO sqlstore_events
        (app_name, user_id, session_id, seq, id, invocation_id, author, timestamp, data)
    VALUES (:app_name, :user_id, :session_id, :seq, :event_id, :invocation_id, :author,
            :timestamp, :data)
"""
_SQLITE_SESSION_STATE = """
    INSERT INTO sqlstore_session_state (app_name, user_id, session_id, key, value)
    VALUES (:app_name, :user_id, :session_id, :key, :value)
    ON CONFLICT (app_name, user_id, session_id, key) DO UPDATE SET value = excluded.value
"""
_SQLITE_USER_STATE = """
    INSERT INTO sqlstore_user_state (app_name, user_id, key, value, update_time)
    VALUES (:app_name, :user_id, :key, :value, :now)
    ON CONFLICT (app_name, user_id, key)
    DO UPDATE SET value = excluded.value, update_time = excluded.update_time
"""
_SQLITE_APP_STATE = """
    INSERT INTO sqlstore_app_state (app_name, key, value, update_time)
    VALUES (:app_name, :key, :value, :now)
    ON CONFLICT (app_name, key)
    DO UPDATE SET value = excluded.value, update_time = excluded.update_time
"""


def _sqlite_append(db: sqlite3.Connection, row: AppendRow) -> int | None:
    """One append as one SQLite transaction, run in aiosqlite's worker thread."""
    params = row.params()
    db.execute("BEGIN IMMEDIATE")
    try:
        bumped = db.execute(_BUMP, params).fetchone()
        if bumped is None:
            db.execute("ROLLBACK")
            return None
        revision = int(bumped[0])
        db.execute(_SQLITE_INSERT_EVENT, {**params, "seq": revision})
        for sql, items in (
            (_SQLITE_SESSION_STATE, row.session_state),
            (_SQLITE_USER_STATE, row.user_state),
            (_SQLITE_APP_STATE, row.app_state),
        ):
            if items:
                db.executemany(sql, [{**params, "key": k, "value": v} for k, v in items])
        db.execute("COMMIT")
        return revision
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


async def _in_sqlite_thread(conn: AsyncConnection, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(sqlite3_connection, *args)`` in aiosqlite's worker thread: however many
    statements ``fn`` runs, it is one hop. sqlite3 errors come back wrapped as
    SQLAlchemy's (``IntegrityError``, ``OperationalError``, ...)."""
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection
    try:
        run = driver._execute  # aiosqlite: queue a function for its connection thread
        return cast(T, await run(fn, driver._conn, *args))
    except sqlite3.Error as exc:
        raise DBAPIError.instance(fn.__name__, None, exc, sqlite3.Error) from exc


WAL_PURGE_WAIT = 1.0
"""Seconds ``forget_user`` waits for SQLite readers of an older snapshot to finish, so
that the write-ahead log can be emptied (see :func:`purge_deleted_text`)."""

# Tables whose PostgreSQL statistics (pg_stats: most common values and elements) name
# users and their words; refreshed after a user is forgotten.
_USER_TABLES = (
    "sqlstore_sessions",
    "sqlstore_events",
    "sqlstore_session_state",
    "sqlstore_user_state",
    "sqlstore_memories",
    "sqlstore_memory_stats",
    "sqlstore_memory_ingestions",
)


def _sqlite_truncate_wal(db: sqlite3.Connection, wait: float) -> bool:
    """Checkpoint the whole write-ahead log into the database and truncate it, waiting
    at most ``wait`` seconds for readers of older snapshots; whether it was done."""
    (previous,) = db.execute("PRAGMA busy_timeout").fetchone()
    db.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
    try:
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(previous)}")
    return bool(busy == 0)


def _sqlite_purge(db: sqlite3.Connection, wait: float) -> bool:
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("INSERT INTO sqlstore_memories_fts(sqlstore_memories_fts) VALUES ('optimize')")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return _sqlite_truncate_wal(db, wait)


@dataclass
class Purge:
    """What :func:`purge_deleted_text` could not clear yet.

    Attributes:
        wal_pending: SQLite: a reader of an older snapshot kept the old pages, in the
            write-ahead log and the file, until it ends (see :func:`truncate_wal`).
        stale_statistics: PostgreSQL: tables left with no rows whose old statistics
            remain in ``pg_stats`` (ANALYZE leaves an empty table's statistics as they
            were, and only a superuser may delete them).
    """

    wal_pending: bool = False
    stale_statistics: list[str] = field(default_factory=list)


async def purge_deleted_text(conn: AsyncConnection, *, wait: float = WAL_PURGE_WAIT) -> Purge:
    """Make deleted text unrecoverable where the database leaves it behind (after a
    user is forgotten; ``conn`` outside any transaction).

    SQLite: FTS5 deletes only mark index entries until segments merge, so the index is
    merged ("optimize", which rewrites the whole index: 0.08 s for 100,000 short
    memories on a 2-vCPU machine); with ``secure_delete`` on (every connection) the
    freed pages are zeroed; then the write-ahead log, which still holds the pages as
    they were, is checkpointed into the file and truncated. A reader of an older
    snapshot (another connection inside a read) still needs those pages: the log is
    emptied at once when there is none, after up to ``wait`` seconds when one ends
    meanwhile, and otherwise not now (``wal_pending``; until then the old pages are in
    the log and the file: call :func:`truncate_wal` again later).

    PostgreSQL: the statistics of the user tables are refreshed (ANALYZE), so that
    ``pg_stats`` no longer lists the user's id or words among the most common values.
    ANALYZE leaves the statistics of a table that has no rows left as they were: those
    are deleted where the role may (a superuser), else reported (``stale_statistics``).
    The deleted rows themselves stay in the table files until (auto)VACUUM.
    """
    if conn.dialect.name == "sqlite":
        return Purge(wal_pending=not await _in_sqlite_thread(conn, _sqlite_purge, wait))
    # Statements on whole tables (maintenance, reading no user's rows) say so: on a
    # distributed database they run on every shard (docs/scaling.md).
    await conn.execute(text(f"/* statistics */ ANALYZE {', '.join(_USER_TABLES)}"))
    empty = [
        table
        for table in _USER_TABLES
        if not (
            await conn.execute(text(f"/* statistics */ SELECT EXISTS (SELECT 1 FROM {table})"))
        ).scalar()
    ]
    if not empty:
        return Purge()
    may_delete = (
        await conn.execute(text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"))
    ).scalar()
    if not may_delete:
        return Purge(stale_statistics=empty)
    await conn.execute(
        text(
            "DELETE FROM pg_catalog.pg_statistic"
            " WHERE starelid = ANY (CAST(CAST(:tables AS TEXT[]) AS regclass[]))"
        ),
        {"tables": empty},
    )
    return Purge()


async def truncate_wal(conn: AsyncConnection, *, wait: float = 0.0) -> bool:
    """SQLite: checkpoint and truncate the write-ahead log if no reader of an older
    snapshot is left (waiting at most ``wait`` seconds); whether it was done. Other
    databases: ``True``."""
    if conn.dialect.name != "sqlite":
        return True
    return await _in_sqlite_thread(conn, _sqlite_truncate_wal, wait)


async def append_row(conn: AsyncConnection, row: AppendRow) -> int | None:
    """Append one event under the revision guard, with its state keys, atomically.

    ``conn`` must be outside any transaction (PostgreSQL: in AUTOCOMMIT mode).

    Returns:
        The new revision, or ``None`` when the guard matched no row (stale or absent).

    Raises:
        sqlalchemy.exc.IntegrityError: the event id is taken (nothing was written).
    """
    if conn.dialect.name == "postgresql":
        params = row.params()
        for scope in ("session", "user", "app"):
            items = getattr(row, f"{scope}_state")
            params[f"{scope}_keys"] = [k for k, _ in items]
            params[f"{scope}_values"] = [v for _, v in items]
        revision: int | None = (await conn.execute(_POSTGRES_APPEND, params)).scalar_one_or_none()
        return revision
    return await _in_sqlite_thread(conn, _sqlite_append, row)


_LOAD_SESSION = """
SELECT 0 AS part, incarnation AS k, CAST(NULL AS TEXT) AS v, revision AS n, update_time AS t
FROM sqlstore_sessions WHERE app_name = :app_name AND user_id = :user_id AND id = :session_id
UNION ALL
SELECT 1, key, value, NULL, NULL FROM sqlstore_app_state WHERE app_name = :app_name
UNION ALL
SELECT 2, key, value, NULL, NULL FROM sqlstore_user_state
WHERE app_name = :app_name AND user_id = :user_id
UNION ALL
SELECT 3, key, value, NULL, NULL FROM sqlstore_session_state
WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
UNION ALL
SELECT 4, NULL, data, seq, NULL FROM (
    SELECT data, seq FROM sqlstore_events
    WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id
      AND timestamp >= :after_timestamp
    ORDER BY seq DESC LIMIT :num_recent_events
) recent
ORDER BY part, n
"""
_POSTGRES_LOAD_SESSION = text(_LOAD_SESSION)


def _sqlite_load(db: sqlite3.Connection, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    return db.execute(_LOAD_SESSION, params).fetchall()


async def load_session_rows(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    num_recent_events: int | None,
    after_timestamp: float | None,
) -> list[tuple[Any, ...]]:
    """A session's row, state and events in one statement (one snapshot).

    Rows are ``(part, k, v, n, t)``: part 0 the session (k incarnation, n revision, t
    update_time; absent if the session is), 1-3 app, user and session state (k key, v
    JSON text), 4 the events (v JSON text, n seq) oldest first.
    """
    params = {
        "app_name": app_name,
        "user_id": user_id,
        "session_id": session_id,
        "num_recent_events": 2**62 if num_recent_events is None else num_recent_events,
        "after_timestamp": -math.inf if after_timestamp is None else after_timestamp,
    }
    if conn.dialect.name == "postgresql":
        return [tuple(r) for r in (await conn.execute(_POSTGRES_LOAD_SESSION, params)).all()]
    return await _in_sqlite_thread(conn, _sqlite_load, params)
