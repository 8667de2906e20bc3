"""FAQ page through AppTest: answer with citation, outcome badge, trace chart and table, PII view, fault injection."""
import json


def open_faq(app):
    app.switch_page("pages/faq.py").run()
    assert not app.exception
    return app


def ask(app, text):
    app.chat_input(key="faq_input").set_value(text).run()
    assert not app.exception
    return app


def test_question_is_answered_with_a_citation_and_a_trace(app):
    at = ask(open_faq(app), "電話は090-1234-5678です。オイル交換の目安は？")
    assert at.title[0].value == "❓ FAQ"
    assert [m.name for m in at.chat_message] == ["user", "assistant"]
    user, assistant = at.chat_message
    assert user.markdown[0].value == "電話は090-1234-5678です。オイル交換の目安は？"  # the user's own words
    texts = [m.value for m in assistant.markdown]
    assert ":green-badge[回答（根拠あり）]" in texts
    assert any("詳しくは「オイル交換の目安" in t and "5,000km" in t for t in texts)
    assert not any("kb:" in t for t in texts)  # the article id is internal: the citation (debug mode) shows it
    labels = [e.label for e in assistant.expander]
    assert any(label.startswith("📄 kb:007「オイル交換の目安はどのくらいですか？」") for label in labels)
    citation = next(e for e in assistant.expander if e.label.startswith("📄 kb:007"))
    assert "エンジンオイル" in citation.markdown[0].value
    trace = next(e for e in assistant.expander if e.label.startswith("🔎 トレース"))
    charts = trace.get("vega_lite_chart")
    assert len(charts) == 1 and "latency_ms" in charts[0].proto.spec
    table = trace.dataframe[0].value
    assert list(table["node"]) == ["API", "IR", "GST", "GE", "TOOL", "NLG"]
    # the flow's state and the trace only hold the masked message
    state = at.session_state["faq_state"]
    assert state["messages"][0]["content"] == "電話は[電話番号]です。オイル交換の目安は？"
    assert "090-1234-5678" not in json.dumps(at.session_state["faq_chat"][0]["trace"], ensure_ascii=False)
    records = at.session_state.debug_logs
    assert records and {r["flow"] for r in records} == {"faq"}  # the check below must see real records
    assert all("090-1234-5678" not in json.dumps(r, ensure_ascii=False) for r in records)


def test_kb_timeout_fault_injection_shows_the_fallback(app):
    at = open_faq(app)
    at.toggle(key="faq_fault_timeout").set_value(True).run()
    ask(at, "車検の費用はどのくらい？")
    assistant = at.chat_message[-1]
    texts = [m.value for m in assistant.markdown]
    assert ":red-badge[縮退応答]" in texts and any("タイムアウト" in t for t in texts)
    assert at.session_state["faq_chat"][-1]["outcome"] == "fallback"
    at.toggle(key="faq_fault_timeout").set_value(False).run()
    ask(at, "車検の費用はどのくらい？")
    assert at.session_state["faq_chat"][-1]["outcome"] == "answered"


def test_policy_handoff_badge_and_reset(app):
    at = ask(open_faq(app), "値引きはいくらまでできますか")
    assert ":violet-badge[担当者へ引き継ぎ]" in [m.value for m in at.chat_message[-1].markdown]
    assert at.session_state["faq_state"]["turn_id"] == 1
    at.button(key="faq_reset").click().run()
    assert not at.exception and at.session_state["faq_chat"] == []
    assert at.session_state["faq_state"]["turn_id"] == 0
