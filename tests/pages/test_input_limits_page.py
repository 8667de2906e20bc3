"""Input limits on the pages: an over-long message gets the Japanese "too long" answer without a
model call, and the user's text stays in the chat; input with no Japanese gets a gentle request."""
from core.text.pii import MAX_MESSAGE_CHARS
from tests.core.diagnosis.diagnosis_fakes import MIRAI

LONG = "契約" * (MAX_MESSAGE_CHARS // 2 + 1)


def test_knowledge_over_long_input_is_answered_in_japanese_and_kept(app):
    app.chat_input[0].set_value(LONG).run()
    assert not app.exception
    user, reply = app.session_state.chat[-2:]
    assert user["user_text"] == LONG and reply["error_type"] == "input_too_long"  # nothing typed is lost
    assert any(e.label.startswith("送信しなかった全文") for e in app.expander)
    assert "入力が長すぎます" in reply["content"]
    assert any(s.label == "入力が長すぎるため送信しませんでした" for s in app.status)
    assert not app.session_state.debug_logs  # no model call was made


def test_faq_over_long_input_makes_no_model_call(app):
    app.switch_page("pages/faq.py").run()
    app.chat_input(key="faq_input").set_value(LONG).run()
    assert not app.exception
    turn = app.session_state.faq_chat[-1]
    assert "長すぎ" in turn["message"] and not app.session_state.debug_logs


def test_diagnosis_english_symptom_asks_for_japanese(app):
    app.switch_page("pages/diagnosis.py").run()
    app.button(key=f"diag_vehicle_{MIRAI}").click().run()
    app.button(key="diag_choice_yes").click().run()
    app.chat_input(key="diag_input").set_value("my car makes a strange noise").run()
    assert not app.exception
    assert any("日本語で入力してください" in i.value for i in app.chat_message[-1].info)
