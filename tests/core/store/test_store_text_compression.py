"""Migration 0014: on PostgreSQL the store's text columns compress with lz4 (a chat turn's state and its model
calls' records are compressed by the database server on the request's path; pglz took twice as long), on a
real cluster; SQLite is left as it is."""
from __future__ import annotations

import importlib.util

from sqlalchemy import create_engine, text

from core.store.db import MIGRATIONS, create_scratch_database
from core.store.store import Store
from tests.core.store.test_people_names import _alembic
from tests.helpers.pg import shared_pg_url

_COLUMNS = """SELECT c.relname, a.attname, a.attcompression FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relkind = 'r' AND a.atttypid = 'text'::regtype
      AND a.attnum > 0 AND NOT a.attisdropped AND c.relname <> 'alembic_version'"""
_STATE_METHOD = "SELECT pg_column_compression(state) FROM conversations WHERE id = :i"
_RECORD_METHOD = "SELECT pg_column_compression(record) FROM debug_records WHERE id = :i"
LONG = "".join(f"ブレーキを踏むとキーキー音がする（{i}回目）。" for i in range(300))  # compressed: > 2 kB


def _methods(store: Store, cid: str, record_id: int) -> tuple[str, str]:
    with store.engine.connect() as conn:
        return (conn.execute(text(_STATE_METHOD), {"i": cid}).scalar(),
                conn.execute(text(_RECORD_METHOD), {"i": record_id}).scalar())


def _write(store: Store, n: int) -> tuple[str, int]:
    """A conversation whose state, and a model-call record, large enough to be compressed."""
    cid = store.create_conversation("diagnosis", "u", state={"history": LONG, "n": n})
    record_id = store.add_debug_record({"messages": [{"role": "user", "content": LONG}], "outcome": "ok",
                                        "session_id": cid, "flow": "diagnosis"})
    return cid, record_id


def _column_methods(url: str) -> list[tuple[str, str, str]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(text(_COLUMNS))]
    finally:
        engine.dispose()


def test_postgresql_text_columns_compress_with_lz4_and_the_downgrade_gives_them_back_the_default():
    url = create_scratch_database(shared_pg_url())
    engine = create_engine(url)
    with engine.begin() as conn:  # another application's table in the same database and schema
        conn.execute(text("CREATE TABLE other_app_notes (id serial PRIMARY KEY, body text)"))
    engine.dispose()
    store = Store(url)
    columns = _column_methods(url)
    assert {(t, c) for t, c, _ in columns} >= {("conversations", "state"), ("debug_records", "record"),
                                                ("turns", "entry"), ("turns", "turn_json")}
    assert [(t, c) for t, c, method in columns if method != "l"] == [("other_app_notes", "body")]  # ours: lz4
    cid, record_id = _write(store, 1)
    assert _methods(store, cid, record_id) == ("lz4", "lz4")
    assert store.get_conversation(cid)["state"] == {"history": LONG, "n": 1}
    store.engine.dispose()

    _alembic(url, "0013", down=True)
    assert {method for _, _, method in _column_methods(url)} == {""}  # the server's default (pglz) again
    store = Store(url)  # opening migrates to head again
    assert [(t, c) for t, c, method in _column_methods(url) if method != "l"] == [("other_app_notes", "body")]
    assert _methods(store, cid, record_id) == ("lz4", "lz4")  # stored values are not rewritten
    store.engine.dispose()


def test_a_value_written_before_the_migration_stays_pglz_reads_back_whole_and_is_lz4_once_rewritten():
    url = create_scratch_database(shared_pg_url())
    Store(url).engine.dispose()
    _alembic(url, "0013", down=True)
    engine = create_engine(url)  # written as a store at 0013 did: the column's default method
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO conversations (id, flow, title, status, owner, owner_label, created_at, "
                          "updated_at, state, state_version) VALUES ('c-old', 'diagnosis', '', 'active', 'u', "
                          "'u', '2026-11-27T00:00:00', '2026-11-27T00:00:00', :s, 0)"),
                     {"s": '{"history": "' + LONG + '"}'})
    engine.dispose()
    store = Store(url)  # migrates to head
    with store.engine.connect() as conn:
        assert conn.execute(text(_STATE_METHOD), {"i": "c-old"}).scalar() == "pglz"
    assert store.get_conversation("c-old")["state"] == {"history": LONG}
    store.update_conversation("c-old", merge_state={"more": 1})  # the state rewritten: lz4 now
    with store.engine.connect() as conn:
        assert conn.execute(text(_STATE_METHOD), {"i": "c-old"}).scalar() == "lz4"
    assert store.get_conversation("c-old")["state"] == {"history": LONG, "more": 1}
    store.engine.dispose()


def test_sqlite_has_no_lz4_to_set_and_its_store_keeps_long_values(tmp_path):
    spec = importlib.util.spec_from_file_location("text_lz4", MIGRATIONS / "versions" / "0014_text_lz4.py")
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    store = Store(f"sqlite:///{tmp_path / 'kaiwa.db'}")  # migrated to head, 0014 included
    with store.engine.connect() as conn:
        assert migration.has_lz4(conn) is False
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() >= "0014"  # it ran
    cid, record_id = _write(store, 3)
    assert store.get_conversation(cid)["state"]["history"] == LONG
    assert store.get_debug_records([record_id])[record_id]["messages"][0]["content"] == LONG
    store.engine.dispose()
