"""Generated facts that hold up: both times of an invalidation, equal facts found by
hash, add_memory's metadata kept, and a watermark that belongs to one incarnation of
its session.

- ``sqlstore_facts``: ``invalidate_time`` (when the store learned the fact stopped
  being true; ``invalid_at`` is now when it stopped being true, as Graphiti keeps
  ``invalid_at`` and ``expired_at``), ``invalidated_by`` (the fact that contradicted
  it), ``text_hash`` (SHA-256 of the text's normal form: equal facts are one) and
  ``custom_metadata`` (``add_memory``'s, merged into the fact's memory's);
- ``sqlstore_fact_revisions``: ``invalid_at`` and ``by_fact_id`` of an invalidation
  (and of a restore, when the fact that contradicted one is deleted);
- ``sqlstore_fact_sources``: ``incarnation``, the session's incarnation the watermark
  belongs to. A record older than its session (the session was deleted and made
  again) is deleted; the others are bound to their session's incarnation.

Existing invalidated facts keep ``invalid_at`` (the time the contradiction was
processed) and get it as ``invalidate_time`` too. Offline (``alembic upgrade --sql``)
the existing facts' hashes are left NULL: a new fact equal to one of them is then
found by the consolidation call instead.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SURROGATE = re.compile("[\ud800-\udfff]")
_SPACE = re.compile(r"\s+")


def _text_hash(text: str) -> str:
    """adk_sqlstore.search.text.text_hash as of this revision (a copy: a
    migration does not change with the library)."""
    cleaned = _SURROGATE.sub("\ufffd", text.replace("\x00", ""))
    folded = unicodedata.normalize("NFKC", cleaned).casefold()
    normal = _SPACE.sub(" ", folded).strip().rstrip(".!。！．").strip()
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()


def _key(length: int) -> Any:
    return sa.Text().with_variant(mysql.VARBINARY(length), "mysql")


def upgrade() -> None:
    identifier = _key(255)
    text = sa.Text().with_variant(mysql.LONGTEXT(), "mysql")
    with op.batch_alter_table("sqlstore_facts") as batch:
        batch.add_column(sa.Column("invalidate_time", sa.Double(), nullable=True))
        batch.add_column(sa.Column("invalidated_by", identifier, nullable=True))
        batch.add_column(sa.Column("text_hash", _key(64), nullable=True))
        batch.add_column(sa.Column("custom_metadata", text, nullable=True))
    with op.batch_alter_table("sqlstore_fact_revisions") as batch:
        batch.add_column(sa.Column("invalid_at", sa.Double(), nullable=True))
        batch.add_column(sa.Column("by_fact_id", identifier, nullable=True))
    with op.batch_alter_table("sqlstore_fact_sources") as batch:
        batch.add_column(sa.Column("incarnation", identifier, nullable=True))

    op.execute(
        "UPDATE sqlstore_facts SET invalidate_time = invalid_at WHERE invalid_at IS NOT NULL"
    )
    if op.get_context().as_sql:  # offline SQL: the same, in statements (no hashes)
        session = (
            "SELECT {} FROM sqlstore_sessions s WHERE s.app_name = sqlstore_fact_sources.app_name"
            " AND s.user_id = sqlstore_fact_sources.user_id"
            " AND s.id = sqlstore_fact_sources.session_id"
        )
        op.execute(
            "DELETE FROM sqlstore_fact_sources WHERE update_time < ("
            + session.format("s.create_time")
            + ")"
        )
        op.execute(
            "UPDATE sqlstore_fact_sources SET incarnation = ("
            + session.format("s.incarnation")
            + ")"
        )
        return
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT app_name, user_id, id, text FROM sqlstore_facts")).all()
    set_hash = sa.text(
        "UPDATE sqlstore_facts SET text_hash = :h WHERE app_name = :a AND user_id = :u AND id = :i"
    )
    for app_name, user_id, fact_id, fact_text in rows:
        conn.execute(
            set_hash, {"h": _text_hash(fact_text), "a": app_name, "u": user_id, "i": fact_id}
        )
    sources = conn.execute(
        sa.text(
            "SELECT f.app_name, f.user_id, f.session_id, f.update_time, s.create_time,"
            " s.incarnation FROM sqlstore_fact_sources f JOIN sqlstore_sessions s"
            " ON s.app_name = f.app_name AND s.user_id = f.user_id AND s.id = f.session_id"
        )
    ).all()
    where = " WHERE app_name = :a AND user_id = :u AND session_id = :s"
    for app_name, user_id, session_id, updated, created, incarnation in sources:
        key = {"a": app_name, "u": user_id, "s": session_id}
        if updated < created:  # the record of an earlier session of that id
            conn.execute(sa.text("DELETE FROM sqlstore_fact_sources" + where), key)
        else:
            conn.execute(
                sa.text("UPDATE sqlstore_fact_sources SET incarnation = :n" + where),
                {**key, "n": incarnation},
            )


def downgrade() -> None:
    with op.batch_alter_table("sqlstore_fact_sources") as batch:
        batch.drop_column("incarnation")
    with op.batch_alter_table("sqlstore_fact_revisions") as batch:
        batch.drop_column("by_fact_id")
        batch.drop_column("invalid_at")
    with op.batch_alter_table("sqlstore_facts") as batch:
        batch.drop_column("custom_metadata")
        batch.drop_column("text_hash")
        batch.drop_column("invalidated_by")
        batch.drop_column("invalidate_time")
