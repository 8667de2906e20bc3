"""the reviewers' loop (issue #22): feedback on answers, review items (claims, verdicts, labels), the score
configuration with its default labels, and regression cases made from reviews

Revision ID: 0008
Revises: 0007
"""
import sqlalchemy as sa
from alembic import op

from core.store import tables as t

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

TABLES = ("review_feedback", "review_items", "review_item_labels", "review_verdicts", "review_labels",
          "review_scenarios")

# The score configuration's default labels: the ways the wrong answers found so far went wrong (see docs/review.md).
DEFAULT_LABELS = (
    ("緊急度の誤り", "緊急度・走行可否の判断が状況と合っていない（安全に直結するため最優先で確認）"),
    ("根拠の誤り", "引用した取扱説明書の箇所・FAQ 記事・ナレッジが回答を支えていない"),
    ("情報不足", "必要な確認・手順・案内・項目が欠けている"),
    ("不適切な表現", "口調・断定の強さ・個人情報の扱いなどが不適切"),
    ("事実でない内容", "根拠にない事実や数値を述べている"),
)


def upgrade() -> None:
    conn = op.get_bind()
    # The tables as core/store/tables.py declares them (with their indexes), in dependency order.
    for name in TABLES:
        t.metadata.tables[name].create(conn, checkfirst=False)
    stamp = "1970-01-01T00:00:00.000+00:00"
    conn.execute(sa.insert(t.review_labels), [
        {"name": name, "description": text, "position": i, "active": True, "updated_by": "system",
         "updated_by_label": "システム", "updated_at": stamp} for i, (name, text) in enumerate(DEFAULT_LABELS)])


def downgrade() -> None:
    conn = op.get_bind()
    for name in reversed(TABLES):
        t.metadata.tables[name].drop(conn, checkfirst=True)
