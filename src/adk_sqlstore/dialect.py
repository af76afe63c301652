"""The one seam where PostgreSQL and SQLite differ.

Everything else is written once in SQLAlchemy Core; a statement whose syntax differs
between the two dialects is built here, one function per statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.dml import Insert

__all__ = ["upsert"]


def upsert(
    dialect: Dialect,
    table: Table,
    rows: Sequence[dict[str, Any]],
    *,
    key: Sequence[str],
    update: Sequence[str],
) -> Insert:
    """``INSERT ... ON CONFLICT (key) DO UPDATE SET update = excluded.update``.

    Both PostgreSQL and SQLite (3.24+) support this statement; SQLAlchemy builds it
    with each dialect's own ``insert`` construct.
    """
    module: Any
    if dialect.name == "postgresql":
        module = postgresql
    elif dialect.name == "sqlite":
        module = sqlite
    else:  # pragma: no cover - engine.normalize_url refuses other databases
        raise NotImplementedError(dialect.name)
    stmt = module.insert(table).values(list(rows))
    return stmt.on_conflict_do_update(  # type: ignore[no-any-return]
        index_elements=list(key),
        set_={name: stmt.excluded[name] for name in update},
    )
