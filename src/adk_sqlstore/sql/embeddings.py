"""Statements on memory embeddings (hybrid search): their storage type, writes, and
the nearest vectors of one user.

The ``embedding`` column is a BLOB of little-endian float32 on SQLite, pgvector's
``vector`` on PostgreSQL where the extension is installed, else ``bytea`` (then no
vector is written or read: search is lexical). Every statement filters by
``(app_name, user_id)``, and reads only vectors of one ``model``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from .constructs import chunks

__all__ = [
    "VectorStorage",
    "count_to_embed",
    "count_vectors",
    "delete_embeddings",
    "embedding_shas",
    "enable_pgvector",
    "ensure_hnsw",
    "hnsw_exists",
    "memories_to_embed",
    "memory_pks",
    "nearest_hnsw",
    "nearest_pgvector",
    "previous_of",
    "previous_text",
    "scores_pgvector",
    "upsert_embeddings",
    "user_vectors",
    "vector_fingerprint",
    "vector_param",
    "vector_storage",
]

VectorStorage = Literal["blob", "pgvector", "none"]
"""How a database stores vectors: SQLite BLOBs searched by an exact scan, pgvector, or
not at all (PostgreSQL without pgvector)."""

_TABLE = "sqlstore_memory_embeddings"


def vector_param(vector: np.ndarray, storage: VectorStorage) -> bytes | str:
    """A float32 vector as bound to a statement: little-endian bytes (``blob``), or
    pgvector's text form (``pgvector``)."""
    if storage == "pgvector":
        return "[" + ",".join(repr(float(x)) for x in vector) + "]"
    return vector.astype("<f4").tobytes()


async def previous_of(conn: AsyncConnection, row: dict[str, Any]) -> str | None:
    """:func:`previous_text` of a memory row (``app_name``, ``user_id``,
    ``session_id``, ``timestamp``); ``None`` for a memory of no session."""
    if row["session_id"] is None:
        return None
    return await previous_text(
        conn,
        app_name=row["app_name"],
        user_id=row["user_id"],
        session_id=row["session_id"],
        timestamp=row["timestamp"],
    )


_PG_COLUMN_TYPE = text(
    "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
    " WHERE a.attrelid = to_regclass(:table) AND a.attname = 'embedding'"
)


async def vector_storage(conn: AsyncConnection) -> VectorStorage:
    """How this database stores vectors (see :data:`VectorStorage`)."""
    if conn.dialect.name != "postgresql":
        return "blob"
    column_type = (await conn.execute(_PG_COLUMN_TYPE, {"table": _TABLE})).scalar()
    return "pgvector" if column_type == "vector" else "none"


async def enable_pgvector(conn: AsyncConnection) -> bool:
    """Make the ``embedding`` column pgvector's ``vector``: create the extension if the
    server has it, then change the column's type (its rows, unusable ``bytea``, are
    deleted first). Returns whether the column is ``vector`` now.

    Raises:
        sqlalchemy.exc.DBAPIError: the extension is on the server but this role may not
            create it.
    """
    if await vector_storage(conn) == "pgvector":
        return True
    available = await conn.execute(
        text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    )
    if available.first() is None:
        return False
    await conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    await conn.execute(text(f"DELETE FROM {_TABLE}"))
    await conn.execute(text(f"ALTER TABLE {_TABLE} ALTER COLUMN embedding TYPE vector USING NULL"))
    return True


_SHAS = text(
    "SELECT m.id, e.text_sha256 FROM sqlstore_memories m"
    f" JOIN {_TABLE} e ON e.memory_pk = m.pk"
    " WHERE m.app_name = :app_name AND m.user_id = :user_id AND m.id IN :ids"
    " AND e.model = :model AND e.dimensions = :dimensions"
).bindparams(bindparam("ids", expanding=True))


async def embedding_shas(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    model: str,
    dimensions: int,
    ids: Sequence[str],
) -> dict[str, str]:
    """Memory id to the SHA-256 of what was embedded, for those of ``ids`` that have a
    vector of ``model``."""
    found: dict[str, str] = {}
    for chunk in chunks(list(ids)):
        params = {
            "app_name": app_name,
            "user_id": user_id,
            "model": model,
            "dimensions": dimensions,
            "ids": chunk,
        }
        found.update((str(i), str(s)) for i, s in (await conn.execute(_SHAS, params)).all())
    return found


_PKS = text(
    "SELECT id, pk FROM sqlstore_memories"
    " WHERE app_name = :app_name AND user_id = :user_id AND id IN :ids"
).bindparams(bindparam("ids", expanding=True))


async def memory_pks(
    conn: AsyncConnection, *, app_name: str, user_id: str, ids: Sequence[str]
) -> dict[str, int]:
    """Memory id to row key, for those of ``ids`` that exist."""
    found: dict[str, int] = {}
    for chunk in chunks(list(ids)):
        params = {"app_name": app_name, "user_id": user_id, "ids": chunk}
        found.update((str(i), int(pk)) for i, pk in (await conn.execute(_PKS, params)).all())
    return found


_PREVIOUS = text(
    "SELECT text FROM sqlstore_memories"
    " WHERE app_name = :app_name AND user_id = :user_id AND session_id = :session_id"
    " AND timestamp < :timestamp ORDER BY timestamp DESC, pk DESC LIMIT 1"
)


async def previous_text(
    conn: AsyncConnection, *, app_name: str, user_id: str, session_id: str, timestamp: float
) -> str | None:
    """The indexed text of the session's last memory before ``timestamp``, if any."""
    params = {
        "app_name": app_name,
        "user_id": user_id,
        "session_id": session_id,
        "timestamp": timestamp,
    }
    return (await conn.execute(_PREVIOUS, params)).scalar()


_INSERT = (
    f"INSERT INTO {_TABLE} (memory_pk, app_name, user_id, model, dimensions, text_sha256,"
    " embedding, update_time)"
    " VALUES (:memory_pk, :app_name, :user_id, :model, :dimensions, :text_sha256, {vector},"
    " :update_time)"
)
_INSERTS = {
    "blob": text(_INSERT.format(vector=":embedding")),
    "pgvector": text(_INSERT.format(vector="CAST(:embedding AS vector)")),
}


async def upsert_embeddings(
    conn: AsyncConnection, storage: VectorStorage, rows: Sequence[dict[str, Any]]
) -> None:
    """Store embeddings, one per memory (``memory_pk``), replacing any it had: each
    user's old rows are deleted, then the new ones inserted (no ``ON CONFLICT`` on the
    memory key alone, which a table distributed by ``user_id`` could not have). A row's
    ``embedding`` is float32 bytes (``blob``) or pgvector's text form (``pgvector``)."""
    if not rows or storage == "none":
        return
    by_user: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        by_user.setdefault((row["app_name"], row["user_id"]), []).append(row["memory_pk"])
    for (app_name, user_id), pks in by_user.items():
        await delete_embeddings(conn, app_name=app_name, user_id=user_id, pks=pks)
    for chunk in chunks(list(rows)):
        await conn.execute(_INSERTS[storage], list(chunk))


async def delete_embeddings(
    conn: AsyncConnection, *, app_name: str, user_id: str, pks: Sequence[int]
) -> None:
    """Delete the vectors of the user's memories ``pks``."""
    stmt = text(
        f"DELETE FROM {_TABLE} WHERE app_name = :app_name AND user_id = :user_id"
        " AND memory_pk IN :pks"
    ).bindparams(bindparam("pks", expanding=True))
    for chunk in chunks(list(pks)):
        await conn.execute(stmt, {"app_name": app_name, "user_id": user_id, "pks": chunk})


_OF_USER_MODEL = (
    " WHERE app_name = :app_name AND user_id = :user_id AND model = :model"
    " AND dimensions = :dimensions"
)
"""The condition of the user's vectors of one model and length."""

_USER_VECTORS = text(f"SELECT memory_pk, embedding FROM {_TABLE}" + _OF_USER_MODEL)


async def user_vectors(
    conn: AsyncConnection, *, app_name: str, user_id: str, model: str, dimensions: int
) -> list[tuple[int, bytes]]:
    """Every vector of ``model`` (``dimensions`` long) the user's memories have, as
    (row key, float32 bytes)."""
    params = {"app_name": app_name, "user_id": user_id, "model": model, "dimensions": dimensions}
    return [(int(pk), bytes(v)) for pk, v in (await conn.execute(_USER_VECTORS, params)).all()]


_FINGERPRINT = text(
    "SELECT count(*), coalesce(sum(memory_pk), 0), coalesce(max(update_time), 0)"
    f" FROM {_TABLE}" + _OF_USER_MODEL
)


async def vector_fingerprint(
    conn: AsyncConnection, *, app_name: str, user_id: str, model: str, dimensions: int
) -> tuple[int, int, float]:
    """(count, sum of row keys, latest update time) of the user's vectors of ``model``:
    it changes whenever one is added, deleted or replaced (read from the index alone)."""
    params = {"app_name": app_name, "user_id": user_id, "model": model, "dimensions": dimensions}
    count, keys, latest = (await conn.execute(_FINGERPRINT, params)).one()
    return int(count), int(keys), float(latest)


_PG_NEAREST = text(
    "SELECT memory_pk, -(embedding <#> CAST(:query AS vector)) AS score"
    f" FROM {_TABLE}"
    " WHERE app_name = :app_name AND user_id = :user_id AND model = :model"
    " AND dimensions = :dimensions"
    " ORDER BY embedding <#> CAST(:query AS vector), memory_pk DESC LIMIT :limit"
)


async def nearest_pgvector(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    model: str,
    dimensions: int,
    query: str,
    limit: int,
) -> list[tuple[int, float]]:
    """The user's ``limit`` vectors of ``model`` with the largest inner product with
    ``query`` (pgvector's text form), as (row key, inner product), largest first."""
    params = {
        "app_name": app_name,
        "user_id": user_id,
        "model": model,
        "dimensions": dimensions,
        "query": query,
        "limit": limit,
    }
    return [(int(pk), float(s)) for pk, s in (await conn.execute(_PG_NEAREST, params)).all()]


_PG_SCORES = text(
    "SELECT memory_pk, -(embedding <#> CAST(:query AS vector)) AS score"
    f" FROM {_TABLE}"
    " WHERE app_name = :app_name AND user_id = :user_id AND model = :model"
    " AND dimensions = :dimensions"
    " AND memory_pk IN :pks"
).bindparams(bindparam("pks", expanding=True))


async def scores_pgvector(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    model: str,
    dimensions: int,
    query: str,
    pks: Sequence[int],
) -> dict[int, float]:
    """The inner product with ``query`` of those of the user's memories ``pks`` that
    have a vector of ``model``."""
    if not pks:
        return {}
    params = {
        "app_name": app_name,
        "user_id": user_id,
        "model": model,
        "dimensions": dimensions,
        "query": query,
        "pks": list(pks),
    }
    return {int(pk): float(s) for pk, s in (await conn.execute(_PG_SCORES, params)).all()}


def _to_embed(model: str, dimensions: int, app_name: str | None) -> str:
    where = (
        "NOT EXISTS (SELECT 1 FROM sqlstore_memory_embeddings e"
        " WHERE e.memory_pk = m.pk AND e.model = :model"
        " AND e.dimensions = :dimensions)"
    )
    return where + (" AND m.app_name = :app_name" if app_name is not None else "")


async def count_to_embed(
    conn: AsyncConnection, *, model: str, dimensions: int, app_name: str | None
) -> int:
    """How many memories (of ``app_name``, or all) have no vector of ``model``."""
    stmt = text(
        f"SELECT count(*) FROM sqlstore_memories m WHERE {_to_embed(model, dimensions, app_name)}"
    )
    params = {"model": model, "dimensions": dimensions, "app_name": app_name}
    return int((await conn.execute(stmt, params)).scalar_one())


async def memories_to_embed(
    conn: AsyncConnection,
    *,
    model: str,
    dimensions: int,
    app_name: str | None,
    after: int,
    limit: int,
) -> list[dict[str, Any]]:
    """Up to ``limit`` memories without a vector of ``model``, in row-key order after
    ``after`` (keyset pagination), with what embedding them needs: pk, app_name,
    user_id, session_id, timestamp and indexed text."""
    stmt = text(
        "SELECT m.pk, m.app_name, m.user_id, m.id, m.session_id, m.timestamp, m.text"
        " FROM sqlstore_memories m"
        f" WHERE {_to_embed(model, dimensions, app_name)} AND m.pk > :after"
        " ORDER BY m.pk LIMIT :limit"
    )
    params = {
        "model": model,
        "dimensions": dimensions,
        "app_name": app_name,
        "after": after,
        "limit": limit,
    }
    return [dict(row._mapping) for row in (await conn.execute(stmt, params)).all()]


# -- pgvector's HNSW index, per model --------------------------------------------------


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _hnsw_name(model: str, dimensions: int) -> str:
    digest = hashlib.sha256(f"{model}\x00{dimensions}".encode()).hexdigest()[:12]
    return f"ix_sqlstore_memory_embeddings_hnsw_{digest}"


def _hnsw_target(model: str, dimensions: int) -> tuple[str, str]:
    """The indexed expression and the partial index's condition (one index per model
    and length: pgvector indexes vectors of one length)."""
    return (
        f"CAST(embedding AS vector({int(dimensions)}))",
        f"model = {_literal(model)} AND dimensions = {int(dimensions)}",
    )


async def hnsw_exists(conn: AsyncConnection, *, model: str, dimensions: int) -> bool:
    """Whether the HNSW index of ``model`` (``dimensions`` long) exists."""
    name = _hnsw_name(model, dimensions)
    return (
        await conn.execute(text("SELECT to_regclass(:name)"), {"name": name})
    ).scalar() is not None


async def ensure_hnsw(conn: AsyncConnection, *, model: str, dimensions: int) -> None:
    """Create the HNSW index (inner product) of ``model``'s vectors unless it exists: a
    partial index on ``embedding::vector(dimensions)``. Building it over many vectors
    takes minutes (about 90 s per 100,000 of 384 dimensions on 2 cores, with
    ``maintenance_work_mem`` raised to 512 MB for the build) and blocks writes to the
    table meanwhile."""
    expression, condition = _hnsw_target(model, dimensions)
    # pgvector builds much faster when the graph fits in maintenance_work_mem (64 MB
    # by default; 100,000 vectors of 384 dimensions make a graph of about 200 MB).
    await conn.execute(text("SET LOCAL maintenance_work_mem = '512MB'"))
    await conn.execute(
        text(
            f"CREATE INDEX IF NOT EXISTS {_hnsw_name(model, dimensions)} ON {_TABLE}"
            f" USING hnsw (({expression}) vector_ip_ops) WHERE {condition}"
        )
    )


async def count_vectors(conn: AsyncConnection, *, model: str) -> int:
    """How many vectors of ``model`` are stored (every user's)."""
    stmt = text(f"SELECT count(*) FROM {_TABLE} WHERE model = :model")
    return int((await conn.execute(stmt, {"model": model})).scalar_one())


async def nearest_hnsw(
    conn: AsyncConnection,
    *,
    app_name: str,
    user_id: str,
    model: str,
    dimensions: int,
    query: str,
    limit: int,
) -> list[tuple[int, float]]:
    """As :func:`nearest_pgvector`, through the model's HNSW index (approximate: the
    index proposes ``hnsw.ef_search`` vectors, set here to twice ``limit``, and those
    of other users are filtered out afterwards: for a user holding a small share of
    the vectors, fewer than ``limit`` may come back)."""
    expression, condition = _hnsw_target(model, dimensions)
    search = max(2 * int(limit), 40)
    await conn.execute(text(f"SET LOCAL hnsw.ef_search = {min(search, 1000)}"))
    stmt = text(
        f"SELECT memory_pk, -({expression} <#> CAST(:query AS vector({int(dimensions)})))"
        f" FROM {_TABLE} WHERE app_name = :app_name AND user_id = :user_id AND {condition}"
        f" ORDER BY {expression} <#> CAST(:query AS vector({int(dimensions)})) LIMIT :limit"
    )
    params = {"app_name": app_name, "user_id": user_id, "query": query, "limit": limit}
    return [(int(pk), float(s)) for pk, s in (await conn.execute(stmt, params)).all()]
