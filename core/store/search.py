"""The library's full-text search, in the database: one row of ``knowledge_search`` per entry, holding the
character bigrams of its six fields (:mod:`core.text.ngrams`, which says why bigrams).

* SQLite: an FTS5 table (rowid = entry id), ``unicode61`` tokenizer keeping letters and digits only;
  searched with ``MATCH`` (phrases of bigrams, a one-character word as a prefix).
* PostgreSQL: ``entry_id`` + a ``tsvector`` under a GIN index; searched with ``@@`` a ``tsquery``. Both
  literals are built in Python, so the server's text-search parser and locale play no part.
* Another engine: no index; the words are matched with ``LIKE`` as before.

The row is written in the same transaction as the entry (:func:`index_entry`, called by the library's
writes); :func:`rebuild` rewrites every row (the migration that creates the index runs it).
A search word without any letter or digit (「%」) is matched as plain text (``LIKE``, wildcards escaped)
among the rows the other words and filters leave.
"""
from __future__ import annotations

from typing import Any, Mapping

from sqlalchemy import and_, literal_column, or_, select, table, text

from core.store import tables as t
from core.text.ngrams import document_tokens, fts5_query, query_terms, split_words, tsquery, tsvector
from core.validation import ENTRY_FIELDS

SQLITE_TOKENIZER = "unicode61 remove_diacritics 0 categories 'L* N* Co'"


def create(conn: Any) -> None:
    """The index's table for this connection's engine (used by the migration)."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        conn.exec_driver_sql(f'CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_search USING fts5(document, '
                             f'tokenize = "{SQLITE_TOKENIZER}")')
    elif dialect == "postgresql":
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS knowledge_search (entry_id INTEGER PRIMARY KEY "
                             "REFERENCES knowledge_entries(id) ON DELETE CASCADE, document TSVECTOR NOT NULL)")
        conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_knowledge_search_document ON knowledge_search "
                             "USING gin (document)")


def drop(conn: Any) -> None:
    if conn.dialect.name in ("sqlite", "postgresql"):
        conn.exec_driver_sql("DROP TABLE IF EXISTS knowledge_search")


def entry_document(fields: Mapping[str, Any]) -> str:
    """The tokens of an entry's six fields."""
    return document_tokens(*(str(fields.get(f) or "") for f in ENTRY_FIELDS))


def index_entry(conn: Any, entry_id: int, fields: Mapping[str, Any]) -> None:
    """Write entry ``entry_id``'s row of the index (inside the caller's transaction)."""
    dialect = conn.dialect.name
    document = entry_document(fields)
    if dialect == "sqlite":
        conn.execute(text("DELETE FROM knowledge_search WHERE rowid = :id"), {"id": int(entry_id)})
        conn.execute(text("INSERT INTO knowledge_search(rowid, document) VALUES (:id, :document)"),
                     {"id": int(entry_id), "document": document})
    elif dialect == "postgresql":
        conn.execute(text("INSERT INTO knowledge_search(entry_id, document) VALUES (:id, CAST(:document AS tsvector)) "
                          "ON CONFLICT (entry_id) DO UPDATE SET document = EXCLUDED.document"),
                     {"id": int(entry_id), "document": tsvector(document)})


def rebuild(conn: Any, batch: int = 500) -> int:
    """Rewrite the whole index from ``knowledge_entries``; returns how many entries were indexed."""
    if conn.dialect.name not in ("sqlite", "postgresql"):
        return 0
    conn.exec_driver_sql("DELETE FROM knowledge_search")
    c = t.knowledge_entries.c
    done, last = 0, 0
    while True:
        rows = conn.execute(select(c.id, *[c[f] for f in ENTRY_FIELDS]).where(c.id > last).order_by(c.id)
                            .limit(batch)).all()
        if not rows:
            return done
        for row in rows:
            index_entry(conn, row.id, row._mapping)
        done += len(rows)
        last = rows[-1].id


def _like_word(word: str) -> Any:
    c = t.knowledge_entries.c
    return or_(*[c[f].contains(word, autoescape=True) for f in ENTRY_FIELDS])


def entry_condition(dialect: str, query: str) -> Any | None:
    """A WHERE clause over ``knowledge_entries`` for the search box's ``query`` (every word must match), or
    None for an empty query."""
    words = split_words(query)
    if not words:
        return None
    terms = query_terms(words)
    plain = [w for w in words if not query_terms([w])]  # no letter or digit: matched as text
    conditions = [_like_word(w) for w in plain]
    c = t.knowledge_entries.c
    if terms and dialect == "sqlite":
        matched = (select(literal_column("rowid")).select_from(table("knowledge_search"))
                   .where(text("knowledge_search MATCH :search_fts").bindparams(search_fts=fts5_query(terms))))
        conditions.insert(0, c.id.in_(matched))
    elif terms and dialect == "postgresql":
        matched = (select(t.knowledge_search.c.entry_id)
                   .where(text("knowledge_search.document @@ CAST(:search_ts AS tsquery)")
                          .bindparams(search_ts=tsquery(terms))))
        conditions.insert(0, c.id.in_(matched))
    elif terms:  # another engine: no index, the words as text
        conditions = [_like_word(w) for w in words]
    return and_(*conditions)
