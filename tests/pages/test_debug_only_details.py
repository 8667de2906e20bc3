"""Internal details only in debug mode (issue #10): the knowledge page's method / attempts / schema
caption and a failed turn's error type, errors and raw output; the diagnosis page's 「判定: …」
caption. Without debug, a failed knowledge turn shows seed 003's plain temporary-error message and
the resend button."""
import json

from core.llm.scripted import ScriptedClient

GOOD = {"control": {"schema_version": "1.0", "mode": "interview"},
        "state": {"phase": "collect_case", "missing_info": []}, "assistant_message": "再送で成功", "knowledge_json": None}
PLAIN = "一時的なエラーが発生しました"


def captions(at):
    return [c.value for c in at.caption]


def fail_once(app, debug):
    app.session_state["debug_enabled"] = debug
    app.session_state["llm_client"] = ScriptedClient(["壊れた出力 {", "まだ壊れている", "最後も壊れている",
                                                      json.dumps(GOOD, ensure_ascii=False)])
    app.chat_input[0].set_value("この入力は失われない").run()
    assert not app.exception
    return app


def test_without_debug_a_failed_turn_shows_the_plain_message_and_the_resend_button(app):
    fail_once(app, debug=False)
    errors = [e.value for e in app.error]
    assert any(PLAIN in e for e in errors)
    assert not any("parse_error" in e for e in errors)
    assert not any("最後も壊れている" in c.value for c in app.code)  # no raw output
    assert not app.expander or all("生出力" not in e.label for e in app.expander)
    app.button(key=f"resend_{app.session_state.chat[0]['id']}").click().run()
    assert app.session_state.chat[-1]["content"] == "再送で成功"
    assert not any(c.startswith("方式:") for c in captions(app))


def test_with_debug_the_failure_details_and_captions_show(app):
    fail_once(app, debug=True)
    assert any("parse_error" in e.value for e in app.error)
    assert any("最後も壊れている" in c.value for c in app.code)
    assert not any(PLAIN in e.value for e in app.error)
    app.button(key=f"resend_{app.session_state.chat[0]['id']}").click().run()
    assert any(c.startswith("方式: ") and "スキーマ 1.0" in c for c in captions(app))


def test_the_diagnosis_judgment_caption_only_in_debug_mode(app):
    app.switch_page("pages/diagnosis.py").run()
    assert not app.exception
    judged = "入力を選択肢「はい」として受け付けました（判定: 構造化出力）"
    app.session_state["diag_transcript"] = [{"role": "assistant", "step": "symptom", "message": "症状を教えてください。",
                                             "sources": [], "judgment": judged}]
    app.session_state["debug_enabled"] = False
    app.run()
    assert not app.exception and judged not in captions(app)
    app.session_state["debug_enabled"] = True
    app.run()
    assert judged in captions(app)
