"""Store conformance for the pages that stay fast as the store grows (issue #17), on SQLite and PostgreSQL:
the library's full-text search (character bigrams), pages and counts of entries, bookings and debug
records, every debug-log filter, the filters' option lists, change stamps, the migration that backfills
the new columns and index, and query plans that use an index for every filter."""
from __future__ import annotations

import json

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text

from core.store import stamps
from core.store.db import MIGRATIONS
from core.store.debug_records import DebugQuery
from core.store.store import Store
from core.store.tables import DEBUG_FILTER_COLUMNS

ENTRIES = [
    {"knowledge_title": "損害賠償の上限", "contract_type": "業務委託契約", "target_clause": "第8条（損害賠償）",
     "review_points": "上限額が委託料総額を超えないか", "action_plan": "上限を設ける", "clause_sample": "乙の賠償額は…"},
    {"knowledge_title": "秘密情報の範囲", "contract_type": "秘密保持契約", "target_clause": "第2条（定義）",
     "review_points": "口頭の情報を含むか", "action_plan": "書面で特定する", "clause_sample": "ＡＢＣ Corp. の情報"},
    {"knowledge_title": "契約解除の条件", "contract_type": "業務委託契約", "target_clause": "第15条（解除）",
     "review_points": "催告の要否", "action_plan": "30日前の通知", "clause_sample": "100%の責任"},
]


def titles(entries: list[dict]) -> set[str]:
    return {e["knowledge_title"] for e in entries}


# ---- the library's full-text search ---------------------------------------------------------------------
@pytest.mark.parametrize("query, expected", [
    ("賠償", {"損害賠償の上限"}),                        # two characters: the commonest Japanese search
    ("賠", {"損害賠償の上限"}),                          # one character: a prefix of the bigrams
    ("損害賠償の上限", {"損害賠償の上限"}),               # a phrase of several bigrams, in order
    ("上限の賠償", set()),                              # the same bigrams out of order do not match
    ("秘密 定義", {"秘密情報の範囲"}),                     # every word, each in any field
    ("秘密 解除", set()),
    ("契約", {"損害賠償の上限", "秘密情報の範囲", "契約解除の条件"}),
    ("abc", {"秘密情報の範囲"}),                         # width and case folded (ＡＢＣ)
    ("ＣＯＲＰ", {"秘密情報の範囲"}),
    ("第15条", {"契約解除の条件"}),
    ("100%", {"契約解除の条件"}),                        # letters and digits by the index…
    ("%", {"契約解除の条件"}),                           # …a word without any, as plain text (no wildcard)
    ("_", set()),
    ("限委", set()),                                   # never across two fields (上限 | 委託…)
])
def test_full_text_search_finds_words_of_any_length(store, operator, query, expected):
    store.record_knowledge(None, ENTRIES, operator)
    assert titles(store.list_entries(query=query, status=None)) == expected
    assert store.count_entries(query=query) == len(expected)


def test_the_index_follows_edits_and_model_updates(store, operator):
    cid = store.create_conversation("knowledge", operator)
    [eid] = store.record_knowledge(cid, ENTRIES[:1], operator)
    store.record_knowledge(cid, [{**ENTRIES[0], "review_points": "免責の範囲"}], operator)  # the model updates the draft
    assert [e["id"] for e in store.list_entries(query="免責")] == [eid] and store.list_entries(query="上限額") == []
    store.edit_entry(eid, {"knowledge_title": "責任制限"}, operator)
    assert store.list_entries(query="損害賠償の上限") == []
    assert [e["id"] for e in store.list_entries(query="責任制限")] == [eid]
    with store.engine.connect() as conn:  # the index is exactly what a rebuild writes
        before = conn.execute(text("SELECT COUNT(*) FROM knowledge_search")).scalar()
    assert store.rebuild_search_index() == 1 and before == 1
    assert [e["id"] for e in store.list_entries(query="責任制限")] == [eid]


def test_entries_page_count_and_position(store, operator):
    ids = [store.record_knowledge(None, [{**ENTRIES[i % 3], "target_clause": f"第{i}条"}], operator)[0]
           for i in range(25)]
    newest_first = ids[::-1]
    assert [e["id"] for e in store.list_entries(limit=10, offset=10)] == newest_first[10:20]
    assert store.count_entries() == 25 and store.count_entries(contract_type=["秘密保持契約"]) == 8
    assert store.entry_position(ids[0]) == 24 and store.entry_position(ids[24]) == 0
    assert store.entry_position(ids[1], contract_type=["秘密保持契約"]) == 7
    assert store.entry_position(ids[0], contract_type=["秘密保持契約"]) is None  # the filters leave it out
    assert store.contract_types() == ["業務委託契約", "秘密保持契約"]


# ---- bookings ---------------------------------------------------------------------------------------------
def test_bookings_page_and_count(store):
    numbers = [store.create_booking(None, booking_type="visit", contact={"name": f"客{i}"},
                                    urgency="critical" if i % 2 else "low") for i in range(7)]
    assert [b["number"] for b in store.list_bookings(limit=3, offset=3)] == numbers[::-1][3:6]
    assert store.count_bookings() == 7 and store.count_bookings(urgency=["critical"]) == 3
    assert store.count_bookings(status=["cancelled"]) == 0


# ---- debug records ----------------------------------------------------------------------------------------
def record(i: int) -> dict:
    failed = i % 3 == 0
    return {"time": f"2025-06-{1 + i:02d}T16:00:00.000+00:00", "session_id": f"conv-{i % 2}-abc",
            "flow": "faq" if i % 2 else "knowledge", "step": f"s{i % 2}", "provider": "openai" if i < 4 else "offline",
            "model": f"m{i % 3}", "strategy": "tool_call" if i == 5 else "structured_output", "attempt": 1 + i % 2,
            "kind": "repair" if i % 2 else "call", "task": "choice_tag" if i == 7 else f"task{i % 2}",
            "outcome": ("provider_error:timeout" if i == 6 else "schema_error") if failed else "ok",
            "errors": [f"必須 {i}"] if failed else [], "raw_output": f"出力 {i}", "prompt_version": f"v{i % 2}",
            "latency_ms": 10.0 * i, "messages": [{"role": "user", "content": "x"}]}


@pytest.fixture
def debug(store):
    return [store.add_debug_record(record(i), "u") for i in range(8)]


@pytest.mark.parametrize("query, picked", [
    (DebugQuery(), range(8)),
    (DebugQuery(flows=("faq",)), [1, 3, 5, 7]),
    (DebugQuery(steps=("s0",)), [0, 2, 4, 6]),
    (DebugQuery(tasks=("task1", "choice_tag")), [1, 3, 5, 7]),
    (DebugQuery(providers=("openai",)), [0, 1, 2, 3]),
    (DebugQuery(models=("m2",)), [2, 5]),
    (DebugQuery(methods=("tool_call",)), [5]),
    (DebugQuery(methods=("tag_fallback",)), [7]),           # the seed-004 stage a task stands for
    (DebugQuery(outcomes=("schema_error",)), [0, 3]),
    (DebugQuery(error_types=("timeout",)), [6]),
    (DebugQuery(failed_only=True), [0, 3, 6]),
    (DebugQuery(conversation="conv-1-abc"), [1, 3, 5, 7]),  # a whole id (by its index)…
    (DebugQuery(conversation="1-ab"), [1, 3, 5, 7]),        # …or a part of one
    (DebugQuery(conversation="nope"), []),
    (DebugQuery(since="2025-06-03T00:00:00.000+00:00", until="2025-06-05T00:00:00.000+00:00"), [2, 3]),
    (DebugQuery(text="必須 3"), [3]),                         # the validation errors…
    (DebugQuery(text="出力 5"), [5]),                         # …and the raw output
    (DebugQuery(text="100%"), []),
    (DebugQuery(flows=("faq",), failed_only=True, text="必須"), [3]),
])
def test_every_debug_filter_is_answered_by_the_store(store, debug, query, picked):
    expected = [debug[i] for i in picked]
    assert [r["id"] for r in store.debug_page(query, limit=50)] == expected  # oldest first
    assert store.count_debug_records(query=query) == len(expected)
    assert store.debug_ids(query, limit=2) == expected[::-1][:2]


def test_debug_pages_values_and_records_by_id(store, debug):
    assert [r["id"] for r in store.debug_page(DebugQuery(), limit=3, offset=2)] == debug[3:6]
    assert store.debug_values("model") == ["m0", "m1", "m2"]
    assert store.debug_values("error_type") == ["schema_error", "timeout"]  # "" (ok) is no option
    assert store.debug_values("method") == ["structured_output", "tag_fallback", "tool_call"]
    got = store.get_debug_records([debug[2], debug[5], 999_999])
    assert set(got) == {debug[2], debug[5]} and got[debug[5]]["raw_output"] == "出力 5" and got[debug[5]]["owner"] == "u"
    store.annotate_debug_record(debug[1], {"task": "choice_evaluation"})  # columns follow the record
    assert store.debug_page(DebugQuery(methods=("ai_judge",)))[0]["id"] == debug[1]
    with pytest.raises(ValueError):
        store.debug_values("record")


# ---- change stamps ----------------------------------------------------------------------------------------
def test_change_stamps_move_with_every_write_of_their_table_and_only_then(store_url, operator, admin):
    store, replica = Store(store_url), Store(store_url)
    try:
        def moved(action) -> set[str]:
            before = dict(replica.change_stamp())
            action()
            after = dict(replica.change_stamp())
            return {name for name in after if after[name] != before[name]}

        cid = store.create_conversation("faq", operator)
        assert moved(lambda: store.list_turns(cid)) == set()  # reads move nothing
        assert moved(lambda: store.append_turn(cid, {"user": "q"}, role="exchange")) == {"turns", "conversations"}
        assert moved(lambda: store.supersede_turns(cid, [store.list_turns(cid)[0]["entry_id"]])) == {"turns"}
        assert moved(lambda: store.add_debug_record({"session_id": cid}, operator)) == {"debug_records"}
        assert moved(lambda: store.clear_debug_records(admin)) == {"debug_records"}
        assert moved(lambda: store.record_knowledge(cid, ENTRIES[:1], operator)) == {"knowledge_entries",
                                                                                     "entry_history"}
        assert moved(lambda: store.create_booking(cid, booking_type="visit", contact={})) == {"bookings"}
        assert moved(lambda: store.update_conversation(cid, title="t")) == {"conversations"}
    finally:
        store.engine.dispose()
        replica.engine.dispose()


def test_a_migration_that_drops_the_stamp_triggers_gets_them_back_on_open(store_url):
    first = Store(store_url)
    with first._write() as conn:
        stamps.drop(conn)
        if first.dialect == "postgresql":
            conn.exec_driver_sql("CREATE SEQUENCE stamp_turns")  # as a table copy would leave it: no trigger
    first.engine.dispose()
    again = Store(store_url)
    cid = again.create_conversation("faq", "u")
    before = dict(again.change_stamp())["turns"]
    again.append_turn(cid, {"user": "q"}, role="exchange")
    assert dict(again.change_stamp())["turns"] > before
    again.engine.dispose()


# ---- the migration ----------------------------------------------------------------------------------------
def _upgrade(url: str, revision: str, *, down: bool = False) -> None:
    engine = create_engine(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.connect() as conn:
        config.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(config, revision)
        conn.commit()
    engine.dispose()


def test_the_migration_backfills_columns_and_the_search_index_of_an_existing_store(store_url):
    _upgrade(store_url, "0002")
    engine = create_engine(store_url)
    stamp = "2025-06-10T03:00:00.000+00:00"
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO conversations (id, flow, title, status, owner, owner_label, created_at, "
                          "updated_at, state_version) VALUES ('c1', 'knowledge', '', 'active', '', '', :s, :s, 0)"),
                     {"s": stamp})
        for seq, (turn, entry) in enumerate([({"control": {"mode": "finalize"}}, {}),
                                             (None, {"sources": [1, 2]}), ({"citations": ["a"]}, {})], start=1):
            conn.execute(text("INSERT INTO turns (conversation_id, seq, entry_id, superseded, role, created_at, "
                              "turn_json, ok, entry, author) VALUES ('c1', :seq, :e, false, 'assistant', :s, :t, "
                              "true, :entry, '')"),
                         {"seq": seq, "e": f"e{seq}", "s": stamp, "t": json.dumps(turn) if turn else None,
                          "entry": json.dumps(entry)})
        conn.execute(text("INSERT INTO debug_records (created_at, owner, outcome, record) VALUES (:s, '', "
                          "'provider_error:timeout', :r)"),
                     {"s": stamp, "r": json.dumps({"task": "choice_tag", "attempt": 2, "kind": "retry",
                                                   "latency_ms": 12.5, "prompt_version": "abc",
                                                   "outcome": "provider_error:timeout"})})
        conn.execute(text("INSERT INTO knowledge_entries (slot, status, knowledge_title, contract_type, target_clause, "
                          "review_points, action_plan, clause_sample, version, created_by, created_by_label, "
                          "created_at, updated_by, updated_by_label, updated_at) VALUES (0, 'draft', "
                          "'損害賠償の上限', '', '', '', '', '', 1, '', '', :s, '', '', :s)"), {"s": stamp})
    engine.dispose()
    store = Store(store_url)  # opening the store runs the rest of the migrations
    try:
        turns = store.list_turns("c1")
        assert [(t["mode"], t["citations"]) for t in turns] == [("finalize", 0), (None, 2), (None, 1)]
        [row] = store.debug_page(DebugQuery(methods=("tag_fallback",), error_types=("timeout",)))
        assert row["attempt"] == 2
        with store.engine.connect() as conn:
            cols = conn.execute(text("SELECT task, kind, attempt, latency_ms, prompt_version FROM debug_records")).one()
        assert tuple(cols) == ("choice_tag", "retry", 2, 12.5, "abc")
        assert titles(store.list_entries(query="賠償")) == {"損害賠償の上限"}
        assert store.change_stamp() is not None
    finally:
        store.engine.dispose()
    _upgrade(store_url, "0002", down=True)  # the migration goes back cleanly…
    again = Store(store_url)  # …and forward again
    try:
        assert titles(again.list_entries(query="賠償")) == {"損害賠償の上限"}
        assert [t["citations"] for t in again.list_turns("c1")] == [0, 2, 1]
    finally:
        again.engine.dispose()


# ---- indexes ----------------------------------------------------------------------------------------------
def _plan(store: Store, sql: str, params: dict) -> str:
    with store.engine.connect() as conn:
        if store.dialect == "sqlite":
            return " ".join(str(row[-1]) for row in conn.execute(text(f"EXPLAIN QUERY PLAN {sql}"), params))
        conn.execute(text("SET enable_seqscan = off"))  # tiny tables: ask whether an index *can* serve it
        return " ".join(row[0] for row in conn.execute(text(f"EXPLAIN {sql}"), params))


@pytest.mark.parametrize("sql, index", [
    *((f"SELECT id FROM debug_records WHERE {c} IN (:v) ORDER BY id DESC LIMIT 50", f"ix_debug_records_{c}")
      for c in DEBUG_FILTER_COLUMNS),
    ("SELECT id FROM debug_records WHERE conversation_id = :v ORDER BY id DESC LIMIT 50", "ix_debug_records_conv"),
    ("SELECT id FROM debug_records WHERE created_at >= :v ORDER BY created_at LIMIT 50", "ix_debug_records_time"),
    ("SELECT id FROM conversations WHERE created_at >= :v", "ix_conversations_created"),
    ("SELECT id FROM knowledge_entries ORDER BY updated_at DESC, id DESC LIMIT 50", "ix_entries_updated"),
    ("SELECT id FROM knowledge_entries WHERE status IN (:v) ORDER BY updated_at DESC LIMIT 50",
     ("ix_entries_status", "ix_entries_updated")),  # PostgreSQL may read the order's index of an empty table
    ("SELECT id FROM knowledge_entries WHERE contract_type IN (:v) ORDER BY updated_at DESC LIMIT 50",
     "ix_entries_contract_type"),
    ("SELECT id FROM knowledge_entries WHERE conversation_id = :v", "ix_entries_conversation"),
    ("SELECT id FROM bookings ORDER BY created_at DESC LIMIT 50", "ix_bookings_created"),
    ("SELECT id FROM bookings WHERE urgency IN (:v) ORDER BY created_at DESC LIMIT 50", "ix_bookings_urgency"),
    ("SELECT id FROM bookings WHERE status IN (:v) ORDER BY created_at DESC LIMIT 50",
     ("ix_bookings_status", "ix_bookings_created")),
    ("SELECT id FROM bookings WHERE conversation_id = :v", "ix_bookings_conversation"),
])
def test_every_filter_the_pages_offer_has_an_index(store, sql, index):
    plan = _plan(store, sql, {"v": "x"})
    assert any(name in plan for name in ((index,) if isinstance(index, str) else index)), plan


def test_a_sessions_working_copy_keeps_summaries_of_stored_records(store):
    from core.store.debug_sink import StoredDebugLog

    log = StoredDebugLog(store, "u")
    log.append({"session_id": "c", "flow": "faq", "outcome": "ok", "raw_output": "x" * 100_000,
                "messages": [{"role": "user", "content": "y" * 100_000}], "errors": ["e" * 1000]})
    [kept] = log
    assert kept["flow"] == "faq" and "messages" not in kept and "raw_output" not in kept
    assert len(repr(kept)) < 1000  # what a session holds per call
    assert store.get_debug_records([kept["_store_id"]])[kept["_store_id"]]["raw_output"] == "x" * 100_000

    class Broken:
        def add_debug_record(self, record, owner):
            raise RuntimeError("database down")

    unstored = StoredDebugLog(Broken(), "u")
    unstored.append({"flow": "faq", "raw_output": "only copy"})
    assert unstored[0]["raw_output"] == "only copy"  # nothing is lost when the store cannot take it
