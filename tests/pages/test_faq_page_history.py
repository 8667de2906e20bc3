"""FAQ page with a long history: one trace chart and table (the latest turn's), others on demand,
so a rerun does not grow with the number of past turns."""
import copy


def test_twenty_turn_history_draws_one_chart_and_one_table(app):
    at = app
    at.switch_page("pages/faq.py").run()
    for text in ("オイル交換の目安は？", "車検の費用はどのくらい？"):
        at.chat_input(key="faq_input").set_value(text).run()
        assert not at.exception
    at.session_state["faq_chat"] = [copy.deepcopy(at.session_state["faq_chat"][i % 2]) for i in range(20)]
    at.run()
    assert not at.exception
    assert len(at.chat_message) == 40
    assert len(at.get("vega_lite_chart")) == 1 and len(at.dataframe) == 1
    latest = at.chat_message[-1].expander[-1]
    assert latest.label.startswith("🔎 トレース") and len(latest.get("vega_lite_chart")) == 1
    older = at.chat_message[1].expander[-1]
    assert older.label.startswith("🔎 トレース") and not older.get("vega_lite_chart")
    assert any("API" in c.value and " ms" in c.value for c in older.caption)  # a one-line summary instead
    at.toggle(key="faq_trace_show_0").set_value(True).run()  # on demand
    assert len(at.get("vega_lite_chart")) == 2 and len(at.dataframe) == 2
