"""core.analytics on a seeded store with known counts: every figure asserted exactly, on SQLite and
PostgreSQL (``KAIWA_TEST_PG_URL``, as the store conformance suite). The figures are the ones the pandas
implementation produced before #17 moved the aggregation into the database."""
from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import create_engine

import core.store.base as store_base
from core import analytics as a
from core.identity import OPERATOR, Identity
from core.store.base import SYSTEM
from core.store.chat_sync import sync_chat
from core.store.rollups import EARLIER
from core.store.store import Store
from tests.core.store.conftest import _pg_database_url

DAY1 = "2025-06-10T03:00:00.000+00:00"   # 12:00 JST
DAY2 = "2025-06-11T16:00:00.000+00:00"   # 2025-06-12 01:00 JST
OLD = "2025-05-01T03:00:00.000+00:00"    # outside the range every test reads
RANGE = {"since": "2025-06-01", "until": "2025-06-30"}
OPERATOR_ID = Identity(name="山田", email="yamada@example.jp", source="proxy", roles=frozenset({OPERATOR}))


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    url = f"sqlite:///{tmp_path / 'analytics.db'}" if request.param == "sqlite" else _pg_database_url()
    s = Store(url)
    yield s
    s.dispose()


@pytest.fixture
def clock(monkeypatch):
    """The store's timestamps, set by the test."""
    now = {"iso": DAY1}
    monkeypatch.setattr(store_base, "now_iso", lambda: now["iso"])
    return now


@pytest.fixture
def counted_on_day1(monkeypatch):
    """The rollups counted as on DAY1 (12:00 Japan time): that day per hour, as a refresh counts today."""
    from core.store import rollups

    monkeypatch.setattr(rollups, "japan_now", lambda: datetime.fromisoformat(DAY1).astimezone(rollups.DAY_TZ))


@pytest.fixture(params=["day1 per hour", "every day whole"])
def counted(request, monkeypatch):
    """The rollups counted as on DAY1 (its calls per hour), or as today (every day of the seed whole: a cut
    within a day counted whole still adds up)."""
    if request.param == "day1 per hour":
        request.getfixturevalue("counted_on_day1")


# ---- seeding helpers (entries shaped as each page keeps them; written through chat_sync like the pages) -----
def k_turn(phase: str, mode: str = "interview") -> dict:
    return {"control": {"schema_version": "1.0", "mode": mode}, "state": {"phase": phase, "missing_info": []},
            "assistant_message": "続けてください。", "knowledge_json": None}


def knowledge_chat(*steps) -> list[dict]:
    """``steps``: (phase, mode) for a successful exchange, ``"fail"`` for a failed one."""
    chat: list[dict] = []
    for i, step in enumerate(steps):
        if step == "fail":
            chat += [{"role": "user", "content": f"入力{i}", "user_text": f"入力{i}", "failed": True},
                     {"role": "assistant", "failed": True, "content": "応答を解釈できませんでした", "error_type": "parse_error",
                      "attempts": 3}]
        else:
            chat += [{"role": "user", "content": f"入力{i}", "user_text": f"入力{i}"},
                     {"role": "assistant", "content": "了解です", "turn": k_turn(*step), "method": "structured_output",
                      "attempts": 1}]
    return chat


def diag_chat(*steps) -> list[dict]:
    """``steps``: (step, number of cited sources); a user input goes between two assistant entries."""
    chat: list[dict] = []
    for i, (step, sources) in enumerate(steps):
        if i:
            chat.append({"role": "user", "text": f"選択{i}", "turn": i})
        chat.append({"role": "assistant", "step": step, "message": "…", "fallback": False,
                     "sources": [{"section_id": f"s{n}", "section": "ブレーキ", "page": n + 1, "score": 0.5}
                                 for n in range(sources)]})
    return chat


def faq_chat(*exchanges) -> list[dict]:
    """``exchanges``: (outcome, question, number of citations)."""
    return [{"user": question, "message": "回答", "outcome": outcome, "citations": [f"kb-{n}" for n in range(cites)]}
            for outcome, question, cites in exchanges]


def conversation(store: Store, flow: str, chat: list[dict], *, provider: str | None = None, state=None) -> str:
    cid = store.create_conversation(flow, OPERATOR_ID, state=state)
    sync_chat(store, cid, chat, flow=flow, author=OPERATOR_ID, provider=provider, model="m" if provider else None)
    return cid


def call(store: Store, session: str, flow: str, step: str, provider: str, attempt: int, kind: str, outcome: str,
         strategy: str, latency: float, version: str | None = None, time: str = DAY1) -> None:
    record = {"time": time, "session_id": session, "flow": flow, "step": step, "prompt": f"{flow}_prompt",
              "provider": provider, "model": "m", "strategy": strategy, "attempt": attempt, "kind": kind,
              "outcome": outcome, "latency_ms": latency, "messages": [{"role": "user", "content": "x" * 50}]}
    if version is not None:
        record["prompt_version"] = version
    store.add_debug_record(record, OPERATOR_ID)


@pytest.fixture
def seeded(store, clock):
    """Knowledge K1–K5 (+ one old), diagnosis D1–D4, FAQ F1–F2, and the model calls of five tasks."""
    ids: dict[str, str] = {}
    # K1: every phase, finalize on the 4th exchange; two entries confirmed, one of them then archived.
    ids["K1"] = conversation(store, "knowledge", knowledge_chat(("collect_case",), ("organize_risks",),
                                                                ("draft_knowledge",), ("review_knowledge", "finalize")),
                             provider="openai")
    e1, e2 = store.record_knowledge(ids["K1"], [{"knowledge_title": "上限"}, {"knowledge_title": "期間"}], OPERATOR_ID)
    store.set_entry_status(e1, "confirm", OPERATOR_ID)
    store.set_entry_status(e2, "confirm", OPERATOR_ID)
    store.set_entry_status(e2, "archive", SYSTEM)  # system-internal: said explicitly
    # K2: stops at organize_risks after a failed turn (offline provider).
    ids["K2"] = conversation(store, "knowledge", knowledge_chat(("collect_case",), ("organize_risks",), "fail"),
                             provider="offline")
    # K3: jumps to a draft on the 2nd exchange and stops there; its entry stays a draft.
    ids["K3"] = conversation(store, "knowledge", knowledge_chat(("collect_case",), ("draft_knowledge",)),
                             provider="openai")
    store.record_knowledge(ids["K3"], [{"knowledge_title": "下書き"}], OPERATOR_ID)
    # K4: opened, nothing said (not counted). K5: only a failed turn.
    ids["K4"] = store.create_conversation("knowledge", OPERATOR_ID)
    ids["K5"] = conversation(store, "knowledge", knowledge_chat("fail"), provider="openai")

    # D1: booked (visit), urgency high, provider known only from its debug records.
    ids["D1"] = conversation(store, "diagnosis", diag_chat(("vehicle_id", 0), ("free_text", 0), ("reservation", 3),
                                                           ("booking_info", 0), ("done", 0)),
                             state={"session": {"urgency_level": "high", "current_step": "done"}})
    store.create_booking(ids["D1"], booking_type="visit", contact={"name": "客"}, urgency="high", actor=OPERATOR_ID)
    # D2: still diagnosing, urgency low, no booking; one answer cut by a rewind (superseded).
    chat = diag_chat(("vehicle_id", 0), ("free_text", 0), ("diagnosing", 2), ("diagnosing", 0), ("diagnosing", 4))
    ids["D2"] = conversation(store, "diagnosis", chat, provider="offline",
                             state={"session": {"urgency_level": "low", "current_step": "diagnosing"}})
    del chat[-2:]
    sync_chat(store, ids["D2"], chat, flow="diagnosis", provider="offline")
    # D3: only the welcome message. D4: dispatch booking, urgency only on the booking.
    ids["D3"] = conversation(store, "diagnosis", diag_chat(("vehicle_id", 0)))
    ids["D4"] = conversation(store, "diagnosis", diag_chat(("vehicle_id", 0), ("reservation", 1), ("done", 0)),
                             state={"session": {"urgency_level": None}})
    store.create_booking(ids["D4"], booking_type="dispatch", contact={"name": "客"}, urgency="critical",
                         actor=OPERATOR_ID)

    # FAQ: 9 exchanges; the same not-found question twice (differently spaced, with a phone number).
    ids["F1"] = conversation(store, "faq", faq_chat(("answered", "オイル交換の目安は？", 2),
                                                    ("not_found", "保証期間は何年ですか 電話 090-1234-5678", 0),
                                                    ("not_found", "保証期間は何年ですか  電話 090-1234-5678 ", 0),
                                                    ("answered", "タイヤの空気圧は？", 1)), provider="openai")
    ids["F2"] = conversation(store, "faq", faq_chat(("not_found", "営業時間を教えて", 0), ("fallback", "予約したい", 0),
                                                    ("refused", "個人情報を教えて", 0), ("handoff", "担当者と話したい", 0),
                                                    ("smalltalk", "こんにちは", 0)), provider="offline")

    # Model calls: task A ok first; B repaired once; C (v2) ok; D retried after a timeout; E repaired twice.
    call(store, ids["K1"], "knowledge", "turn", "openai", 1, "call", "ok", "structured_output", 100, "v1")
    call(store, ids["K1"], "knowledge", "turn", "openai", 1, "call", "schema_error", "structured_output", 200, "v1")
    call(store, ids["K1"], "knowledge", "turn", "openai", 2, "repair", "ok", "structured_output", 300, "v1")
    call(store, ids["K2"], "knowledge", "turn", "openai", 1, "call", "ok", "tool_call", 400, "v2", time=DAY2)
    call(store, ids["K2"], "knowledge", "turn", "offline", 1, "call", "provider_error:timeout", "prompt_extract", 50)
    call(store, ids["K2"], "knowledge", "turn", "offline", 2, "retry", "ok", "prompt_extract", 150)
    call(store, ids["D1"], "diagnosis", "diagnosing", "openai", 1, "call", "parse_error", "structured_output", 500,
         "v1")
    call(store, ids["D1"], "diagnosis", "diagnosing", "openai", 2, "repair", "schema_error", "structured_output", 600,
         "v1")
    call(store, ids["D1"], "diagnosis", "diagnosing", "openai", 3, "repair", "ok", "structured_output", 700, "v1")
    call(store, "old", "knowledge", "turn", "openai", 1, "call", "parse_error", "structured_output", 9, "v0", time=OLD)

    # Outside the range: an old knowledge conversation that finalized, with a confirmed entry.
    clock["iso"] = OLD
    ids["OLD"] = conversation(store, "knowledge", knowledge_chat(("review_knowledge", "finalize")), provider="openai")
    (old_entry,) = store.record_knowledge(ids["OLD"], [{"knowledge_title": "旧"}], OPERATOR_ID)
    store.set_entry_status(old_entry, "confirm", OPERATOR_ID)
    clock["iso"] = DAY1
    return ids


def rows(frame: pd.DataFrame, key: str) -> dict:
    return frame.set_index(key).to_dict("index")


def metrics(frame: pd.DataFrame) -> dict:
    return dict(zip(frame["metric"], frame["value"]))


# ---- tests -----------------------------------------------------------------------------------------------
def test_load_frames_reads_the_range_and_counts_only_conversations_where_someone_spoke(store, seeded):
    frames = a.load_frames(store, **RANGE)
    conversations = frames.conversations.set_index("id")
    assert seeded["OLD"] not in conversations.index
    assert set(conversations.index[conversations["started"]]) == {
        seeded[k] for k in ("K1", "K2", "K3", "K5", "D1", "D2", "D4", "F1", "F2")}
    assert conversations.loc[seeded["D1"], "provider"] == "openai"  # from its debug records
    assert conversations.loc[seeded["D4"], "provider"] == a.UNKNOWN
    assert frames.calls == 9  # the old call is outside the range
    assert a.provider_options(store, **RANGE) == ["offline", "openai", a.UNKNOWN]
    everything = a.load_frames(store)
    assert seeded["OLD"] in set(everything.conversations["id"]) and everything.calls == 10


def test_interview_funnel(store, seeded):
    funnel = rows(a.interview_funnel(a.load_frames(store, **RANGE)), "stage")
    assert {k: v["conversations"] for k, v in funnel.items()} == {
        "started": 4, "collect_case": 3, "organize_risks": 3, "draft_knowledge": 2, "review_knowledge": 1,
        "finalize": 1, "confirmed": 1}
    assert funnel["draft_knowledge"]["share"] == 0.5 and funnel["collect_case"]["share"] == 0.75


def test_turns_to_draft_and_finalize(store, seeded):
    table = rows(a.turns_to_phase(a.load_frames(store, **RANGE)), "target")
    assert table["draft_knowledge"] == {"conversations": 2, "mean": 2.5, "median": 2.5, "min": 2.0, "max": 3.0}
    assert table["finalize"] == {"conversations": 1, "mean": 4.0, "median": 4.0, "min": 4.0, "max": 4.0}


def test_phase_dropoff(store, seeded):
    table = rows(a.phase_dropoff(a.load_frames(store, **RANGE)), "phase")
    assert {k: (v["reached"], v["ended_here"], v["dropoff_rate"]) for k, v in table.items()} == {
        "none": (4, 1, 0.25), "collect_case": (3, 0, 0.0), "organize_risks": (3, 1, 0.333),
        "draft_knowledge": (2, 1, 0.5), "review_knowledge": (1, 0, 0.0)}


def test_entries_confirmed_counts_ever_confirmed_and_current_status(store, seeded):
    assert metrics(a.entries_confirmed(a.load_frames(store, **RANGE))) == {
        "entries": 3, "status_draft": 1, "status_confirmed": 1, "status_archived": 1, "ever_confirmed": 2,
        "conversations_with_confirmed": 1}


def test_model_quality_per_task_provider_and_prompt_version(store, seeded):
    table = a.model_quality(a.load_frames(store, **RANGE))
    got = {tuple(r[:3]): r[3:] for r in table.itertuples(index=False, name=None)}
    assert got == {
        # tasks, calls, first-try valid, valid, repairs/task, error calls, p50, p95 (ms, one call)
        ("diagnosis/diagnosing", "openai", "v1"): (1, 3, 0.0, 1.0, 2.0, 2, 600.0, 690.0),
        ("knowledge/turn", "offline", a.UNKNOWN): (1, 2, 0.0, 1.0, 0.0, 1, 100.0, 145.0),
        ("knowledge/turn", "openai", "v1"): (2, 3, 0.5, 1.0, 0.5, 1, 200.0, 290.0),
        ("knowledge/turn", "openai", "v2"): (1, 1, 1.0, 1.0, 0.0, 0, 400.0, 400.0),
    }


def test_method_mix_and_error_types(store, seeded):
    frames = a.load_frames(store, **RANGE)
    mix = rows(a.method_mix(frames), "task")
    assert mix == {"diagnosis/diagnosing": {"prompt_extract": 0, "structured_output": 1, "tool_call": 0},
                   "knowledge/turn": {"prompt_extract": 1, "structured_output": 2, "tool_call": 1}}
    errors = rows(a.error_types(frames), "error_type")
    assert errors == {"schema_error": {"calls": 2, "share_of_calls": 0.222},
                      "parse_error": {"calls": 1, "share_of_calls": 0.111},
                      "provider_error:timeout": {"calls": 1, "share_of_calls": 0.111}}


def test_a_prompt_change_shows_up_as_a_step_per_day(store, seeded):
    series = a.quality_over_time(a.load_frames(store, **RANGE, providers=["openai"]))
    assert list(series.index) == [pd.Timestamp("2025-06-10"), pd.Timestamp("2025-06-12")]  # JST days
    v1, v2 = series["knowledge/turn · openai · v1"], series["knowledge/turn · openai · v2"]
    assert v1.iloc[0] == 0.5 and pd.isna(v1.iloc[1]) and pd.isna(v2.iloc[0]) and v2.iloc[1] == 1.0


def test_diagnosis_outcomes_end_steps_and_summary(store, seeded):
    frames = a.load_frames(store, **RANGE)
    by_urgency = a.diagnosis_outcomes(frames)
    assert list(by_urgency["urgency"]) == ["critical", "high", "low"]
    assert rows(by_urgency, "urgency") == {
        "critical": {"conversations": 1, "done": 1, "booked": 1, "booking_rate": 1.0},
        "high": {"conversations": 1, "done": 1, "booked": 1, "booking_rate": 1.0},
        "low": {"conversations": 1, "done": 0, "booked": 0, "booking_rate": 0.0}}
    assert rows(a.diagnosis_end_steps(frames), "step") == {"done": {"conversations": 2, "share": 0.667},
                                                          "diagnosing": {"conversations": 1, "share": 0.333}}
    # answers: D1 reservation (3), D2 diagnosing (2) and (0) — the cut one (4) is not counted —, D4 reservation (1)
    assert metrics(a.diagnosis_summary(frames)) == {
        "conversations": 3, "booked_conversations": 2, "booking_rate": 0.667, "answers": 4,
        "citations_per_answer": 1.5, "answers_with_citations": 0.75}


def test_faq_rates_and_top_not_found_questions_masked(store, seeded):
    frames = a.load_frames(store, **RANGE)
    rates = rows(a.faq_rates(frames), "outcome")
    assert {k: v["exchanges"] for k, v in rates.items()} == {
        "answered": 2, "not_found": 3, "fallback": 1, "refused": 1, "handoff": 1, "smalltalk": 1}
    assert rates["answered"]["rate"] == 0.222 and rates["not_found"]["rate"] == 0.333
    top = a.faq_top_not_found(frames, n=5)
    assert list(zip(top["question"], top["count"])) == [("保証期間は何年ですか 電話 [電話番号]", 2), ("営業時間を教えて", 1)]
    assert not top["question"].str.contains("090").any()
    assert len(a.faq_top_not_found(frames, n=1)) == 1


def test_provider_filter_keeps_that_providers_conversations_and_calls(store, seeded):
    frames = a.load_frames(store, **RANGE, providers=["offline"])
    assert set(frames.conversations["id"]) == {seeded["K2"], seeded["D2"], seeded["F2"]}
    assert set(frames.quality["provider"]) == {"offline"} and frames.calls == 2
    assert rows(a.interview_funnel(frames), "stage")["started"]["conversations"] == 1
    assert {k: v["exchanges"] for k, v in rows(a.faq_rates(frames), "outcome").items()}["not_found"] == 1
    assert metrics(a.diagnosis_summary(frames))["conversations"] == 1
    unknown = a.load_frames(store, **RANGE, providers=[a.UNKNOWN])
    assert set(unknown.conversations["id"]) == {seeded["D3"], seeded["D4"], seeded["K4"]}


def test_range_bounds_dates_inclusive_datetimes_exclusive():
    assert a.utc_bound("2025-06-30", end=True) == "2025-07-01T00:00:00.000+00:00"
    assert a.utc_bound(date(2025, 6, 1)) == "2025-06-01T00:00:00.000+00:00"
    jst = timezone(timedelta(hours=9))
    assert a.utc_bound(datetime(2025, 6, 2, tzinfo=jst), end=True) == "2025-06-01T15:00:00.000+00:00"
    assert a.utc_bound(None) is None


def test_a_range_of_japan_days_differs_from_utc_days(store, seeded):
    jst = timezone(timedelta(hours=9))
    japan = a.load_frames(store, datetime(2025, 6, 10, tzinfo=jst), datetime(2025, 6, 12, tzinfo=jst))
    assert japan.calls == 8  # the call at 2025-06-12 01:00 JST is the next Japan day…
    assert a.load_frames(store, "2025-06-10", "2025-06-11").calls == 9  # …but still 2025-06-11 in UTC


def test_an_empty_store_gives_empty_tables_not_errors(store):
    frames = a.load_frames(store, **RANGE)
    assert rows(a.interview_funnel(frames), "stage")["started"]["conversations"] == 0
    assert a.model_quality(frames).empty and a.method_mix(frames).empty and a.error_types(frames).empty
    assert a.quality_over_time(frames).empty and a.diagnosis_outcomes(frames).empty
    assert metrics(a.diagnosis_summary(frames))["booking_rate"] == 0.0
    assert a.faq_rates(frames)["exchanges"].sum() == 0 and a.faq_top_not_found(frames).empty


def test_no_record_or_turn_json_is_read_into_python(store, seeded, monkeypatch):
    """The figures come from aggregate queries: no row handed to Python carries a debug record, a turn's JSON
    or a chat entry, and the tables are the size of the answer (one row per conversation, per task group)."""
    from sqlalchemy import event

    seen: list[str] = []

    def spy(conn, cursor, statement, parameters, context, executemany):
        seen.append(statement)

    event.listen(store.engine, "before_cursor_execute", spy)
    try:
        frames = a.load_frames(store, **RANGE)
    finally:
        event.remove(store.engine, "before_cursor_execute", spy)
    selects = " ".join(seen)
    for column in ("d.record", "t.turn_json", "t.entry", "record,", "turn_json,"):
        assert column not in selects
    assert len(frames.conversations) == 11 and len(frames.quality) == 4  # K1–K5, D1–D4, F1–F2 (not the old one)
    assert set(frames.quality["prompt_version"]) == {"v1", "v2", a.UNKNOWN}


def test_stored_turns_carry_mode_and_citations_for_the_figures(store, seeded):
    k1 = store.list_turns(seeded["K1"])
    assert [t["mode"] for t in k1 if t["role"] == "assistant"] == ["interview", "interview", "interview", "finalize"]
    d1 = [t["citations"] for t in store.list_turns(seeded["D1"]) if t["role"] == "assistant"]
    assert d1 == [0, 0, 3, 0, 0]  # the chat entry's sources (the page's list) when the response names none
    f1 = [t["citations"] for t in store.list_turns(seeded["F1"])]
    assert f1 == [2, 0, 0, 1]


@pytest.mark.parametrize("providers", [[], ["openai"]])
def test_whole_japan_days_from_the_day_rollups_equal_the_figures_from_the_records(store, seeded, providers):
    """What 分析 shows (whole Japan days) comes from the day rollups: the same figures as reading the
    period's debug records, latencies within 1 % (≈2 % buckets)."""
    jst = timezone(timedelta(hours=9))
    lo, hi = a.utc_bound(datetime(2025, 6, 1, tzinfo=jst)), a.utc_bound(datetime(2025, 7, 1, tzinfo=jst))
    a.refresh(store)
    with store.engine.connect() as conn:
        days = a._calls_from_rollups(conn, "2025-06-01", "2025-07-01", providers)
        records = a._calls_from_records(conn, lo, hi, providers)
    assert days["calls"] == records["calls"] == (9 if not providers else 7)
    for name in ("methods", "errors"):
        pd.testing.assert_frame_equal(days[name].sort_values(list(days[name].columns)).reset_index(drop=True),
                                      records[name].sort_values(list(records[name].columns)).reset_index(drop=True),
                                      check_dtype=False)
    quality = {name: a.model_quality(a.Frames(**{**a._EMPTY_CONVERSATIONS, **part}))
               for name, part in (("days", days), ("records", records))}
    latency = ["latency_p50_ms", "latency_p95_ms"]
    pd.testing.assert_frame_equal(quality["days"].drop(columns=latency), quality["records"].drop(columns=latency))
    assert ((quality["days"][latency] - quality["records"][latency]).abs() <= quality["records"][latency] * 0.01
            ).all().all()
    over_time = {name: a.quality_over_time(a.Frames(**{**a._EMPTY_CONVERSATIONS, **part}))
                 for name, part in (("days", days), ("records", records))}
    pd.testing.assert_frame_equal(over_time["days"], over_time["records"])


def test_a_period_of_japan_days_reads_the_rollups_not_the_records(store, seeded):
    from sqlalchemy import event

    a.refresh(store)
    seen: list[str] = []

    def spy(conn, cursor, statement, parameters, context, executemany):
        seen.append(statement)

    event.listen(store.engine, "before_cursor_execute", spy)
    try:
        jst = timezone(timedelta(hours=9))
        frames = a.load_frames(store, datetime(2025, 6, 1, tzinfo=jst), datetime(2025, 7, 1, tzinfo=jst))
    finally:
        event.remove(store.engine, "before_cursor_execute", spy)
    assert frames.calls == 9 and len(frames.conversations) == 11
    assert not any("debug_records" in s or " turns " in s for s in seen), seen


@pytest.mark.parametrize("providers", [[], ["offline"], [a.UNKNOWN]])
def test_conversations_summed_by_the_database_give_the_same_figures(store, seeded, providers):
    """What 分析 reads (``grouped``: one row per kind of conversation, ``n`` of them) gives every figure of
    the conversations part exactly as one row per conversation does."""
    per_row = a.load_frames(store, **RANGE, providers=providers)
    grouped = a.load_frames(store, **RANGE, providers=providers, grouped=True)
    assert "id" not in grouped.conversations and grouped.conversations["n"].sum() == len(per_row.conversations)
    for name in (*a.FIGURES["conversations"], "faq_top_not_found"):
        pd.testing.assert_frame_equal(a.figure(grouped, name), a.figure(per_row, name), obj=name)


def test_conversations_summed_by_the_database_are_as_many_rows_as_kinds_not_conversations(store, seeded):
    before = len(a.load_frames(store, **RANGE, grouped=True).conversations)
    for _ in range(5):  # five more of a kind already there (K3: a draft on the 2nd exchange, openai)
        conversation(store, "knowledge", knowledge_chat(("collect_case",), ("draft_knowledge",)), provider="openai")
    grouped = a.load_frames(store, **RANGE, grouped=True)
    assert len(grouped.conversations) == before
    assert rows(a.interview_funnel(grouped), "stage")["draft_knowledge"]["conversations"] == 2 + 5


@pytest.mark.parametrize("providers", [[], ["openai"]])
def test_the_settled_days_and_the_days_still_written_add_up_to_the_whole_periods_figures(store, counted, seeded,
                                                                                          providers):
    """What 分析 keeps (the settled days' sums, yesterday's conversations and today's before the last slot,
    today's model calls before the last whole hour, each read once per version of its own) and what it reads
    after each write (the conversations created in the last minutes, the model calls of the last hour or two)
    add up to the figures of the whole period, table for table — with the day's conversations (created 12:00
    Japan time) and model calls after the cut or before it, a task whose repair comes after the cut, and a
    failed call of a series that started no task."""
    jst = timezone(timedelta(hours=9))
    since, until = datetime(2025, 6, 1, tzinfo=jst), datetime(2025, 7, 1, tzinfo=jst)
    assert a.settled_split(since, until, "calls", now=datetime(2025, 5, 1, 9, tzinfo=jst)) == [(since, until, "calls")]
    assert a.settled_split(since, until, "calls", now=datetime(2025, 8, 1, 9, tzinfo=jst)) == [
        (since, until, "calls_settled")]
    assert a.settled_split(since, until, "conversations", now=datetime(2025, 7, 1, 0, 5, tzinfo=jst)) == [
        (since, datetime(2025, 6, 30, tzinfo=jst), "conversations_settled"),
        (datetime(2025, 6, 30, tzinfo=jst), until, "conversations_recent")]  # no slot of July 1 before the cut
    # a diagnosis task begun at 10:30 and repaired at 11:20; a failed repair at 13:40 of a prompt version that
    # began no task (its task began with v1)
    call(store, seeded["D2"], "diagnosis", "urgency_check", "openai", 1, "call", "schema_error", "structured_output",
         250, "v1", time="2025-06-10T01:30:00.000+00:00")
    call(store, seeded["D2"], "diagnosis", "urgency_check", "openai", 2, "repair", "ok", "structured_output", 350,
         "v1", time="2025-06-10T02:20:00.000+00:00")
    call(store, seeded["K1"], "knowledge", "turn", "openai", 2, "repair", "schema_error", "structured_output", 120,
         "v9", time="2025-06-10T04:40:00.000+00:00")
    a.refresh(store)
    today, yesterday = datetime(2025, 6, 10, tzinfo=jst), datetime(2025, 6, 9, tzinfo=jst)
    for now, cut, hour in ((datetime(2025, 6, 10, 12, 5, tzinfo=jst), datetime(2025, 6, 10, 11, 50, tzinfo=jst),
                            datetime(2025, 6, 10, 11, tzinfo=jst)),
                           (datetime(2025, 6, 10, 12, 29, 59, tzinfo=jst), datetime(2025, 6, 10, 12, 10, tzinfo=jst),
                            datetime(2025, 6, 10, 11, tzinfo=jst)),
                           (datetime(2025, 6, 10, 14, 10, tzinfo=jst), datetime(2025, 6, 10, 14, tzinfo=jst),
                            datetime(2025, 6, 10, 13, tzinfo=jst))):
        for part in a.FIGURES:
            split = a.settled_split(since, until, part, now=now)
            if part == "conversations":  # before yesterday, yesterday, today before the cut, after it
                assert split == [(since, yesterday, "conversations_settled"), (yesterday, today, "conversations_recent"),
                                 (today, cut, "conversations_earlier"), (cut, until, "conversations")]
            else:  # before today, today before the last whole hour, after it
                assert split == [(since, today, "calls_settled"), (today, hour, "calls_earlier"), (hour, until, "calls")]
            whole = a.shape(part, [a.read_part(store, part, since, until, providers)])
            added = a.shape(part, [a.read_part(store, part, lo, hi, providers, planned=name in (part, EARLIER[part]))
                                   for lo, hi, name in split])  # today's pieces planned once, as ui.cache reads them
            for name in a.FIGURES[part] + (("faq_top_not_found",) if part == "conversations" else ()):
                pd.testing.assert_frame_equal(a.figure(added, name), a.figure(whole, name), obj=name)
                assert not a.figure(whole, name).empty or name == "method_mix" and providers


def test_an_unfiltered_piece_names_the_providers_the_filter_offers_for_its_days(store, counted_on_day1, seeded):
    """分析's provider filter lists the providers its pieces name (read with the figures, no query of their own):
    per piece and part, the same as ``providers_seen`` finds for those days; a filtered piece names none."""
    jst = timezone(timedelta(hours=9))
    since, until = datetime(2025, 6, 1, tzinfo=jst), datetime(2025, 7, 1, tzinfo=jst)
    a.refresh(store)
    offered = []
    for part in a.FIGURES:
        for lo, hi, _ in a.settled_split(since, until, part, now=datetime(2025, 6, 10, 12, 5, tzinfo=jst)):
            named = a.read_part(store, part, lo, hi)["providers"]
            assert a.provider_order(named) == a.provider_order(a.providers_seen(store, {part: (lo, hi)})), (part, lo)
            offered += named
            assert a.read_part(store, part, lo, hi, ["openai"])["providers"] is None
    assert a.provider_order(offered) == a.provider_options(store, since, until) == ["offline", "openai", a.UNKNOWN]


def test_a_piece_read_after_every_write_is_planned_once_per_connection(store, counted_on_day1, seeded):
    """Today's pieces (read again after every write) on PostgreSQL: each statement prepared on its first
    execution and planned once (a generic plan; planning such a read took several times as long as running it),
    on connections of their own: the store's other reads keep PostgreSQL's default. Same rows as a read planned
    for its range, on both engines."""
    jst = timezone(timedelta(hours=9))
    a.refresh(store)
    pieces = [("calls", datetime(2025, 6, 10, 11, tzinfo=jst)),
              ("conversations", datetime(2025, 6, 10, 11, 50, tzinfo=jst))]
    for _ in range(3):
        for part, cut in pieces:
            once = a.shape(part, [a.read_part(store, part, cut, datetime(2025, 7, 1, tzinfo=jst), planned=True)])
            each = a.shape(part, [a.read_part(store, part, cut, datetime(2025, 7, 1, tzinfo=jst))])
            for name in a.FIGURES[part]:
                pd.testing.assert_frame_equal(a.figure(once, name), a.figure(each, name), obj=name)
                assert not a.figure(once, name).empty or name in ("error_types", "faq_rates")
    if store.dialect != "postgresql":
        return
    reads = ("SELECT 'day' AS kind", "SELECT 'kind' AS part")  # the model calls', the conversations' (one each)
    with store.planned_read_connection() as conn:
        assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar() == "force_generic_plan"
        plans = conn.exec_driver_sql("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements").all()
    planned = [(generic, custom) for sql, generic, custom in plans if sql.lstrip().startswith(reads)]
    assert planned == [(3, 0)] * 2, plans  # each read planned once, used three times
    with store.read_connection() as conn:
        assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar() == "auto"
    handed = Store(store.url, engine=create_engine(store.url, pool_size=1, max_overflow=0,
                                                   connect_args={"prepare_threshold": None}))
    try:  # an engine handed in (here: no prepared statements, as behind a pooler) keeps its settings
        a.read_part(handed, "calls", pieces[0][1], datetime(2025, 7, 1, tzinfo=jst), planned=True)
        with handed.planned_read_connection() as conn:
            assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar() == "auto"
            assert conn.exec_driver_sql("SELECT count(*) FROM pg_prepared_statements").scalar() == 0
    finally:
        handed.dispose()


def test_latency_quantiles_of_added_pieces_found_at_once_equal_each_series_histogram_walked():
    """分析 finds p50 / p95 of every series at once from the pieces' bucket rows (``_quantile_values``): the
    same values as walking each series' added-up histogram (``_histogram_quantile_values``), with buckets
    in several pieces, series without calls, calls of series not shown and a histogram of 0 calls."""
    import random

    rng = random.Random(25)
    keys = [(f"faq/step{i}", rng.choice(["offline", "openai"]), "v1") for i in range(40)]
    for _ in range(20):
        raws = []
        for _ in range(rng.randint(1, 3)):
            hist = {key: {rng.randint(200, 400): rng.choice([1, 1, 2, 7, 300]) for _ in range(rng.randint(1, 30))}
                    for key in rng.sample(keys + [("other", "x", "v9")], rng.randint(0, 30))}
            if rng.random() < 0.2 and hist:
                hist[next(iter(hist))] = {250: 0}
            raws.append({"latency": hist, "latency_arrays": a._histogram_arrays(hist)})
        added = a._added_histograms(raw["latency"] for raw in raws)
        walked = [a._histogram_quantile_values(added[key]) if key in added else (float("nan"),) * 5 for key in keys]
        found = a._quantile_values(raws, keys)
        assert [repr(v) for v in found] == [repr(v) for v in walked]
        values = np.array(found, dtype=float)  # interpolated for every series at once, as one by one
        for q, lo in ((0.5, 1), (0.95, 3)):
            at_once = a._quantiles(values[:, 0], values[:, lo], values[:, lo + 1], q)
            assert [repr(float(v)) for v in at_once] == [repr(a._quantile(row[0], row[lo], row[lo + 1], q)) for row in found]


@pytest.mark.parametrize("providers", [[], ["openai"]])
def test_the_model_call_tables_made_from_the_pieces_equal_those_from_the_frames(store, seeded, providers):
    """分析 makes its four model-call tables (and the FAQ rates) straight from the pieces it read
    (``CallPieces``: sums, latency quantiles, methods, outcomes and the chart's cells added up in Python): the
    same tables, table for table, as from the frames of those pieces and of the whole period read at once."""
    jst = timezone(timedelta(hours=9))
    since, until = datetime(2025, 6, 1, tzinfo=jst), datetime(2025, 7, 1, tzinfo=jst)
    a.refresh(store)
    whole = [a.read_part(store, "calls", since, until, providers)]
    for today in (date(2025, 6, 11), date(2025, 6, 12), date(2025, 6, 20)):
        pieces = [a.read_part(store, "calls", lo, hi, providers)
                  for lo, hi, _ in a.settled_split(since, until, "calls", now=datetime.combine(today, time(9), jst))]
        for name in a.CALL_TABLES:
            made = a.figure(a.PartFrames("calls", pieces), name)
            pd.testing.assert_frame_equal(made, a.figure(a.shape("calls", pieces), name), obj=name)
            pd.testing.assert_frame_equal(made, a.figure(a.shape("calls", whole), name), obj=name)
            assert not made.empty or name == "method_mix" and providers
    empty = [a.read_part(store, "calls", datetime(2024, 1, 1, tzinfo=jst), datetime(2024, 1, 2, tzinfo=jst))]
    for name in a.CALL_TABLES:
        pd.testing.assert_frame_equal(a.figure(a.PartFrames("calls", empty), name),
                                      a.figure(a.shape("calls", empty), name), obj=name)
    # the FAQ rates likewise, from the conversations' pieces
    whole = [a.read_part(store, "conversations", since, until, providers)]
    for now in (datetime(2025, 6, 10, 12, 5, tzinfo=jst), datetime(2025, 6, 10, 12, 30, tzinfo=jst),
                datetime(2025, 6, 11, 9, tzinfo=jst)):
        pieces = [a.read_part(store, "conversations", lo, hi, providers)
                  for lo, hi, _ in a.settled_split(since, until, "conversations", now=now)]
        made = a.figure(a.PartFrames("conversations", pieces), "faq_rates")
        pd.testing.assert_frame_equal(made, a.figure(a.shape("conversations", whole), "faq_rates"))
        assert made["exchanges"].sum() > 0 or providers
