"""分析 page (AppTest): the four sections show the seeded store's numbers, the provider filter narrows
them, and every table has a CSV download in UTF-8 with a BOM."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core import analytics
from core.store import get_store
from core.text.jst import jst
from tests.core.test_analytics import OPERATOR_ID, call, conversation, diag_chat, faq_chat, knowledge_chat

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "analytics.py")
TABLES = 12  # every st.dataframe on the page has its own download


@pytest.fixture
def seeded():
    store = get_store()
    k1 = conversation(store, "knowledge", knowledge_chat(("collect_case",), ("draft_knowledge",),
                                                         ("review_knowledge", "finalize")), provider="openai")
    (entry,) = store.record_knowledge(k1, [{"knowledge_title": "損害賠償の上限"}], OPERATOR_ID)
    store.set_entry_status(entry, "confirm", OPERATOR_ID)
    conversation(store, "knowledge", knowledge_chat(("collect_case",), "fail"), provider="offline")
    d1 = conversation(store, "diagnosis", diag_chat(("vehicle_id", 0), ("reservation", 2), ("done", 0)),
                      provider="openai", state={"session": {"urgency_level": "high"}})
    store.create_booking(d1, booking_type="visit", contact={"name": "客"}, urgency="high", actor=OPERATOR_ID)
    conversation(store, "faq", faq_chat(("answered", "オイル交換の目安は？", 1),
                                        ("not_found", "保証は何年？ 連絡先 090-1234-5678", 0),
                                        ("not_found", "保証は何年？ 連絡先 090-1234-5678", 0),
                                        ("handoff", "担当者と話したい", 0)), provider="offline")
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    call(store, k1, "knowledge", "turn", "openai", 1, "call", "schema_error", "structured_output", 100, "v1", time=now)
    call(store, k1, "knowledge", "turn", "openai", 2, "repair", "ok", "structured_output", 300, "v1", time=now)
    return store


def page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.run()
    assert not at.exception
    return at


def table(at: AppTest, column: str):
    """The first table on the page with ``column``."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_the_page_shows_each_sections_numbers(seeded, deferred):
    at = page()
    assert [t.label for t in at.tabs] == ["📝 インタビュー", "🤖 モデル品質", "🚗 車両問診", "❓ FAQ"]
    assert {"インタビューのファネル", "タスク・プロバイダー・プロンプト版ごとの品質", "緊急度別の結果", "結果の内訳"} <= {
        s.value for s in at.subheader}
    funnel = table(at, "段階").set_index("段階")["会話数"]
    assert funnel["開始"] == 2 and funnel["ナレッジ草案作成"] == 1 and funnel["ナレッジ確定"] == 1
    quality = table(at, "初回で有効")
    assert quality.iloc[0][["タスク", "プロバイダー", "プロンプト版", "タスク数", "呼び出し数", "初回で有効"]].tolist() == [
        "契約ナレッジ・ターン", "OpenAI 互換 API", "v1", 1, 2, 0.0]
    # internal words stay in the debug views: methods, tasks and error types are in Japanese here
    mix = table(at, "ネイティブ JSON Schema")
    assert mix.iloc[0].tolist() == ["契約ナレッジ・ターン", 1]
    assert table(at, "エラー種別").iloc[0]["エラー種別"] == "スキーマ違反"
    assert table(at, "緊急度").set_index("緊急度").loc["高", "予約率"] == 1.0
    assert {m.label: m.value for m in at.metric} == {"問診の会話": "1", "予約率": "100.0%", "回答あたりの引用数": "2.00"}
    rates = table(at, "やり取り数").set_index("結果")["やり取り数"]
    assert rates["該当記事なし"] == 2 and rates["回答（根拠あり）"] == 1 and rates["担当者へ引き継ぎ"] == 1
    missed = table(at, "質問（マスク済み）")
    assert missed.iloc[0].tolist()[:2] == ["保証は何年？ 連絡先 [電話番号]", 2]
    asked = analytics.faq_top_not_found(analytics.load_frames(seeded))["last_asked"][0]  # stored in UTC
    assert missed.iloc[0]["最終質問日時"] == jst(asked)  # shown in Japan time

    labels = [b.label for b in at.get("download_button")]
    assert labels == ["CSV をダウンロード"] * TABLES and len(at.dataframe) == TABLES
    downloads = {name: make() for name, make in deferred.items()}  # each CSV is made when its button is clicked
    assert len(downloads) == TABLES
    csv = next(data for name, data in downloads.items() if name.startswith("faq_not_found_"))
    assert csv.startswith(b"\xef\xbb\xbf") and "090" not in csv.decode("utf-8-sig")
    assert csv.decode("utf-8-sig").splitlines()[0] == "質問（マスク済み）,件数,最終質問日時"


def test_the_provider_filter_narrows_every_section(seeded):
    at = page()
    at.multiselect(key="an_providers").set_value(["offline"]).run()
    assert not at.exception
    funnel = table(at, "段階").set_index("段階")["会話数"]
    assert funnel["開始"] == 1 and funnel["ナレッジ確定"] == 0
    assert table(at, "初回で有効").empty
    assert {m.label: m.value for m in at.metric}["問診の会話"] == "0"
    assert table(at, "やり取り数").set_index("結果")["やり取り数"]["該当記事なし"] == 2


def test_an_empty_store_renders_every_section_without_errors():
    at = page()
    assert any("モデル呼び出しの記録はありません" in i.value for i in at.info)
    assert table(at, "段階")["会話数"].sum() == 0
    assert len(at.get("download_button")) == TABLES


def bookkeeping(statement: str) -> bool:
    """A look at the rollups' log and versions (what a rerun with nothing new reads)."""
    return "rollup_dirty" in statement or "rollup_versions" in statement


def test_a_rerun_reads_only_the_rollup_versions_until_a_new_turn_is_stored(seeded):
    """The period's figures are cached (shared by every session) until the rollups change: a rerun with
    nothing new runs no query but the log's and the versions'; a new turn shows up on the next rerun,
    recounted alone (core.store.rollups), and the figures are read from the rollups."""
    from sqlalchemy import event

    at = page()
    statements: list[str] = []
    event.listen(seeded.engine, "before_cursor_execute",
                 lambda *args: statements.append(args[2]) if args[2] != "BEGIN" else None)
    at.run()
    assert not at.exception and statements and all(bookkeeping(s) for s in statements), statements
    before = table(at, "段階").set_index("段階")["会話数"]["開始"]
    conversation(seeded, "knowledge", knowledge_chat(("collect_case",)), provider="openai")
    statements.clear()
    at.run()
    assert table(at, "段階").set_index("段階")["会話数"]["開始"] == before + 1
    assert any("GROUP BY" in s and "turns" in s for s in statements)  # the new conversation, counted
    assert any("FROM rollup_conversations" in s for s in statements)  # the figures: from the rollups
    assert not any("calls AS" in s for s in statements)  # no model call was written: no day recounted
    other = page()  # another browser session: the same cached figures, nothing recomputed
    statements.clear()
    other.run()
    assert all(bookkeeping(s) for s in statements)


def test_a_chat_turn_recomputes_only_the_figures_it_feeds(seeded, monkeypatch):
    """Each table is cached by its own inputs (core.analytics.piece_sources): an FAQ exchange written by
    another user recomputes the FAQ tables and leaves the interview, diagnosis and model-call tables as
    they were, and only the frames the FAQ tables read are made (counted, not timed)."""
    import streamlit as st

    st.cache_data.clear()  # a figure is cached by its inputs' digest: the same seeded store, the same key
    st.cache_resource.clear()
    computed: list[str] = []
    real = analytics.figure
    monkeypatch.setattr(analytics, "figure", lambda frames, name: computed.append(name) or real(frames, name))
    at = page()
    assert not at.exception and "interview_funnel" in computed
    computed.clear()
    made: list[str] = []  # the conversations' frames made (core.analytics.PartFrames: only those read)
    for name, make in list(analytics.CONVERSATION_FRAMES.items()):
        monkeypatch.setitem(analytics.CONVERSATION_FRAMES, name,
                            lambda raws, name=name, make=make: made.append(name) or make(raws))
    conversation(seeded, "faq", faq_chat(("not_found", "営業時間は？", 0)), provider="offline")
    at.run()
    assert not at.exception
    assert sorted(computed) == ["faq_rates", "faq_top_not_found"]
    assert sorted(made) == ["not_found"]  # faq_rates: straight from the pieces; not the kinds nor the entries
    assert table(at, "やり取り数").set_index("結果")["やり取り数"]["該当記事なし"] == 3  # 2 seeded + the new one


def test_the_charts_are_plain_vega_lite_specs_built_without_altair(seeded, monkeypatch):
    """Every chart of the page is a Vega-Lite spec that validates against the schema Streamlit's charts use,
    and none is built through Altair (whose schema validation of every spec was most of the first run after
    a write, issue #25): counted, not timed."""
    import json

    import altair
    import jsonschema
    from altair.utils import schemapi

    built: list[str] = []
    real = schemapi.SchemaBase.to_dict
    monkeypatch.setattr(schemapi.SchemaBase, "to_dict", lambda self, *a, **k: built.append(type(self).__name__)
                        or real(self, *a, **k))
    at = page()
    charts = at.get("vega_lite_chart")
    assert len(charts) == 7 and built == []  # funnel, drop-off, quality over time, methods, outcomes, end steps, FAQ
    validator = jsonschema.Draft7Validator(altair.vegalite.v6.schema.core.load_schema())
    for chart in charts:
        spec = {"data": {"values": []}, **json.loads(chart.proto.spec)}  # the data travels beside the spec
        assert not list(validator.iter_errors(spec)), spec


def test_tables_and_charts_are_sent_as_arrow_tables(seeded, monkeypatch):
    """Every table and chart of the page reaches Streamlit as an Arrow table, which it serialises as it is: a
    pandas DataFrame it converts first, most of the cost of drawing a small table after a write (issue #25).
    Counted, not timed."""
    import pyarrow as pa
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()
    sent: list[type] = []
    for name in ("dataframe", "vega_lite_chart"):
        real = getattr(st, name)
        monkeypatch.setattr(st, name, lambda data, *a, real=real, **kw: sent.append(type(data)) or real(data, *a, **kw))
    at = page()
    assert len(sent) == TABLES + 7 and set(sent) == {pa.Table}
    assert table(at, "やり取り数")["結果"].tolist()[0] == "回答（根拠あり）"  # labelled as before


def test_a_shown_table_keeps_every_text_cell_as_data_and_a_missing_value_empty():
    import pyarrow as pa

    from ui import tables

    shown = tables.shown({"=名前": ["=1+1", None, float("nan"), 3, "普通"],
                          "件数": pd.Series([1.0, None, 2.0, 3.0, 4.0])})
    assert isinstance(shown, pa.Table) and shown.column_names == ["'=名前", "件数"]
    assert shown.column("'=名前").to_pylist() == ["'=1+1", None, None, "3", "普通"]
    assert shown.column("件数").to_pylist() == [1.0, None, 2.0, 3.0, 4.0]


def test_a_column_name_with_a_dot_is_one_field_not_a_path():
    from ui import charts

    mix = charts.table(pd.DataFrame({"v1.2": [1], "v2": [2]}, index=pd.Index(["FAQ"], name="タスク")))
    assert charts.bar(mix, horizontal=True)["transform"] == [{"fold": ["v1\\.2", "v2"],
                                                             "as": [charts.SERIES, charts.VALUE]}]
    over_time = pd.DataFrame({"FAQ · v1.2": [0.5]}, index=pd.DatetimeIndex(["2026-01-01"], name="日付"))
    data, spec = charts.spec("line", over_time)
    assert spec["transform"] == [{"fold": ["FAQ · v1\\.2"], "as": [charts.SERIES, charts.VALUE]}]
    assert data.column_names == ["日付", "FAQ · v1.2"]


def test_after_todays_write_only_the_days_still_written_are_read_again(seeded, monkeypatch):
    """The period's settled days (model calls before today, conversations created before yesterday, Japan
    time), yesterday's conversations, today's created before the last whole slot and today's model calls
    before the last whole hour are read once and kept until one of them changes; another user's chat turn
    makes the next run read the calls and the conversations since the cuts only, a turn in a conversation
    begun earlier today those of today before the cut too, a call in an earlier hour today's calls before
    the cut too (counted; the clock held at 12:05 Japan time, the cuts at 11:50 and 11:00)."""
    from datetime import time, timedelta

    import streamlit as st

    import core.store.base as store_base
    from core.store import rollups
    from core.text.jst import JST

    st.cache_data.clear()
    st.cache_resource.clear()  # the settled days' pieces
    today = datetime.combine(datetime.now(JST).date(), time(), JST)

    def at_noon(minutes: int) -> str:
        return (today + timedelta(hours=12, minutes=minutes)).astimezone(timezone.utc).isoformat(timespec="milliseconds")

    monkeypatch.setattr(rollups, "slot_start", lambda now=None, part="conversations": today + timedelta(hours=12))
    monkeypatch.setattr(store_base, "now_iso", lambda: at_noon(-180))  # 09:00: begun before the cut
    morning = conversation(seeded, "faq", faq_chat(("answered", "朝の質問", 1)), provider="offline")
    monkeypatch.setattr(store_base, "now_iso", lambda: at_noon(5))
    reads: list[tuple[str, datetime]] = []
    planned_once: dict[tuple[str, datetime], bool] = {}
    real = analytics.read_part

    def read_part(store, part, since, until, providers=(), planned=False):
        reads.append((part, since))
        planned_once[part, since] = planned
        return real(store, part, since, until, providers, planned=planned)

    monkeypatch.setattr(analytics, "read_part", read_part)
    at = page()
    start, yesterday, cut = today - timedelta(days=29), today - timedelta(days=1), today + timedelta(hours=11, minutes=50)
    hour = today + timedelta(hours=11)
    assert sorted(reads) == sorted([("calls", start), ("calls", today), ("calls", hour), ("conversations", start),
                                    ("conversations", yesterday), ("conversations", today), ("conversations", cut)])
    # today's pieces, read again after writes, planned once (Store.planned_read_connection); the settled days and
    # yesterday's conversations, read once an hour or once a day, planned for their range
    assert [piece for piece, once in sorted(planned_once.items()) if once] == [
        ("calls", today), ("calls", hour), ("conversations", today), ("conversations", cut)]
    reads.clear()
    conversation(seeded, "faq", faq_chat(("answered", "営業時間は？", 1)), provider="offline")
    call(seeded, "other", "faq", "answered", "offline", 1, "call", "ok", "structured_output", 80, time=at_noon(5))
    at.run()
    assert not at.exception and sorted(reads) == [("calls", hour), ("conversations", cut)]
    reads.clear()
    seeded.append_turn(morning, {"user": "続きです", "message": "回答", "outcome": "answered"}, role="exchange",
                       step="answered")
    at.run()
    assert not at.exception and sorted(reads) == [("conversations", today), ("conversations", cut)]
    reads.clear()
    call(seeded, morning, "faq", "answered", "offline", 1, "call", "ok", "structured_output", 90, time=at_noon(-180))
    at.run()
    assert not at.exception and sorted(reads) == [("calls", today), ("calls", hour), ("conversations", today),
                                                  ("conversations", cut)]  # a record marks its conversation too
    reads.clear()
    at.run()  # nothing new: nothing read
    assert not at.exception and reads == []


def test_after_a_write_a_table_is_drawn_again_only_when_its_content_changed(seeded, monkeypatch):
    """Another model call of a series whose day share does not move recomputes the model-call tables (their
    inputs changed) but draws again only those whose content changed: the quality table (one call more), not
    the chart of first-try validity per day (still 100 % today). Counted, not timed (issue #25)."""
    import streamlit as st

    from ui import charts

    st.cache_data.clear()
    st.cache_resource.clear()
    at = page()
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    cid = conversation(seeded, "faq", faq_chat(("answered", "営業時間は？", 1)), provider="offline")
    call(seeded, cid, "faq", "answered", "offline", 1, "call", "ok", "structured_output", 80, time=now)
    at.run()  # the series is new today: everything it feeds is drawn
    computed: list[str] = []
    real_figure = analytics.figure
    monkeypatch.setattr(analytics, "figure", lambda frames, name: computed.append(name) or real_figure(frames, name))
    charted: list[str] = []
    real_spec = charts.spec
    monkeypatch.setattr(charts, "spec", lambda kind, data, **kw: charted.append(kind) or real_spec(kind, data, **kw))
    drawn: list[list[str]] = []
    real_dataframe = st.dataframe
    monkeypatch.setattr(st, "dataframe", lambda data, **kw: drawn.append(data.column_names) or real_dataframe(data, **kw))
    shaped: list[str] = []  # the pieces added up: the model calls' once (straight into their tables), no frames
    real_shape, real_pieces = analytics.shape, analytics.CallPieces
    monkeypatch.setattr(analytics, "shape", lambda part, raws: shaped.append(part) or real_shape(part, raws))
    monkeypatch.setattr(analytics, "CallPieces", lambda raws: shaped.append("calls pieces") or real_pieces(raws))
    before = [d.value for d in at.dataframe]
    call(seeded, cid, "faq", "answered", "offline", 1, "call", "ok", "structured_output", 90, time=now)
    at.run()
    assert not at.exception
    assert shaped == ["calls pieces"]  # the model calls added up once, the conversations' frames not at all
    assert {"model_quality", "quality_over_time", "method_mix", "error_types"} <= set(computed)
    assert "line" not in charted  # quality_over_time: recomputed, the same table, not drawn again
    changed = [list(b.columns) for a, b in zip(before, (d.value for d in at.dataframe)) if not a.equals(b)]
    assert changed and sorted(drawn) == sorted(changed)  # exactly the tables whose content changed
    assert len(drawn) < len(before)


def test_a_chart_is_drawn_again_only_when_what_it_draws_changed(seeded, monkeypatch):
    """A bar chart along a column is sent the columns it draws (its x and y), and is drawn again only when
    they change: another FAQ conversation with the same mix of outcomes doubles the counts (the table is
    drawn again) but leaves every rate as it was (the chart of the rates is not). Counted, not timed (issue
    #25)."""
    import streamlit as st

    from ui import charts

    st.cache_data.clear()
    st.cache_resource.clear()
    charted: list[tuple[str, list[str]]] = []
    real_spec = charts.spec
    def spec(kind, data, **kw):
        sent, made = real_spec(kind, data, **kw)
        charted.append((kind, sent.column_names))
        return sent, made

    monkeypatch.setattr(charts, "spec", spec)
    at = page()
    assert ("bar", ["結果", "率"]) in charted  # sent: not the counts beside the rates
    rates = table(at, "やり取り数").set_index("結果")
    drawn: list[list[str]] = []
    real_dataframe = st.dataframe
    monkeypatch.setattr(st, "dataframe", lambda data, **kw: drawn.append(data.column_names) or real_dataframe(data, **kw))
    charted.clear()
    conversation(seeded, "faq", faq_chat(("answered", "オイル交換の目安は？", 1),
                                         ("not_found", "保証は何年？ 連絡先 090-1234-5678", 0),
                                         ("not_found", "保証は何年？ 連絡先 090-1234-5678", 0),
                                         ("handoff", "担当者と話したい", 0)), provider="offline")
    at.run()
    assert not at.exception
    now = table(at, "やり取り数").set_index("結果")
    assert (now["やり取り数"] == 2 * rates["やり取り数"]).all() and now["率"].equals(rates["率"])
    assert ["結果", "やり取り数", "率"] in drawn  # the table: its counts moved
    assert charted == []  # the chart of the rates: the same rates, not drawn again
