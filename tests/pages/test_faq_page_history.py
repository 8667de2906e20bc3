"""FAQ page with a long history: the newest five exchanges drawn, the earlier ones on request
(``ui.history``), one trace chart and table (the latest turn's), others on demand, so a rerun does not grow
with the number of past turns; a rating given before an answer went out of view is still there after."""
import copy

from ui.history import SHOWN_EXCHANGES


def _twenty_turns(at):
    at.switch_page("pages/faq.py").run()
    for text in ("オイル交換の目安は？", "車検の費用はどのくらい？"):
        at.chat_input(key="faq_input").set_value(text).run()
        assert not at.exception
    at.session_state["faq_chat"] = [copy.deepcopy(at.session_state["faq_chat"][i % 2]) for i in range(20)]
    at.run()
    assert not at.exception
    return at


def test_twenty_turn_history_draws_the_newest_five_and_the_rest_on_request(app):
    at = _twenty_turns(app)
    assert len(at.chat_message) == 2 * SHOWN_EXCHANGES  # the newest five questions and answers
    shown_first = 20 - SHOWN_EXCHANGES
    assert [t.label for t in at.toggle if t.key == "faq_history_all"] == [f"以前のやり取り {shown_first} 件を表示"]
    assert len(at.get("vega_lite_chart")) == 1 and len(at.dataframe) == 1
    latest = at.chat_message[-1].expander[-1]
    assert latest.label.startswith("🔎 トレース") and len(latest.get("vega_lite_chart")) == 1
    older = at.chat_message[1].expander[-1]  # the oldest answer drawn: a one-line summary
    assert older.label.startswith("🔎 トレース") and not older.get("vega_lite_chart")
    assert any("API" in c.value and " ms" in c.value for c in older.caption)
    at.toggle(key="faq_history_all").set_value(True).run()  # the whole history
    assert len(at.chat_message) == 40 and len(at.get("vega_lite_chart")) == 1
    at.toggle(key="faq_trace_show_0").set_value(True).run()  # an old turn's chart on demand
    assert len(at.get("vega_lite_chart")) == 2 and len(at.dataframe) == 2


def test_a_rating_is_still_shown_after_its_answer_was_out_of_view(app, monkeypatch):
    monkeypatch.setenv("KAIWA_REVIEW_SAMPLE", "0")
    at = app.switch_page("pages/faq.py").run()
    at.chat_input(key="faq_input").set_value("オイル交換の目安は？").run()
    cid = at.session_state["faq_conversation_id"]
    at.feedback(key=f"fb_faq_{cid}_0").set_value(1).run()  # 👍 on the first answer
    at.session_state["faq_chat"] = at.session_state["faq_chat"] * 20  # the first answer now out of view
    at.run()
    assert f"fb_faq_{cid}_0" not in [f.key for f in at.feedback]
    at.toggle(key="faq_history_all").set_value(True).run()
    assert at.feedback(key=f"fb_faq_{cid}_0").value == 1  # Streamlit dropped the widget's value; it is back


def test_the_trace_chart_is_a_plain_vega_lite_spec_built_without_altair(app, monkeypatch):
    """The latest turn's trace chart is drawn on every rerun: a plain Vega-Lite spec (``ui.charts``: one
    horizontal bar per node, no legend), not a chart built and schema-validated through Altair each time."""
    import json

    import altair
    import jsonschema
    from altair.utils import schemapi

    built: list[str] = []
    real = schemapi.SchemaBase.to_dict
    monkeypatch.setattr(schemapi.SchemaBase, "to_dict", lambda self, *a, **k: built.append(type(self).__name__)
                        or real(self, *a, **k))
    at = app.switch_page("pages/faq.py").run()
    at.chat_input(key="faq_input").set_value("オイル交換の目安は？").run()
    (chart,) = at.get("vega_lite_chart")
    spec = json.loads(chart.proto.spec)
    assert built == [] and spec["encoding"]["y"]["field"] == "step" and "color" not in spec["encoding"]
    validator = jsonschema.Draft7Validator(altair.vegalite.v6.schema.core.load_schema())
    assert not list(validator.iter_errors({"data": {"values": []}, **spec}))
