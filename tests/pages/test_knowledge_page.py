"""契約ナレッジ作成 page through AppTest: offline turns, uploads, failures."""
import json

from core.llm.scripted import ScriptedClient
from tests.helpers.documents import make_docx


def messages(at):
    return [m.markdown[0].value if m.markdown else "" for m in at.chat_message]


def test_renders_with_no_key_and_shows_offline_provider(app):
    assert app.title[0].value == "📝 契約ナレッジ作成"
    assert any("オフライン" in c.value for c in app.caption)
    assert any("オフライン" in m.value for m in app.sidebar.markdown)
    for key in ("chat", "knowledge_outputs", "llm_client", "debug_logs"):
        assert key in app.session_state


def test_offline_turn_advances_the_phase(app):
    app.chat_input[0].set_value("業務委託契約の第8条（損害賠償）で、賠償の上限がない点が問題でした。").run()
    assert not app.exception
    turn = app.session_state.chat[-1]["turn"]
    assert turn["state"]["phase"] == "organize_risks"
    assert any("② リスク整理" in p.text for p in app.get("progress"))
    assert len(app.session_state.debug_logs) == 1
    app.chat_input[0].set_value("委託料総額を上限とするよう修正を求めるべきです。「賠償額は委託料総額を上限とする。」").run()
    assert app.session_state.chat[-1]["turn"]["state"]["phase"] == "draft_knowledge"
    assert app.session_state.knowledge_outputs[0]["target_clause"] == "第8条（損害賠償）"  # as typed (issue #24)
    labels = [b.label for b in app.get("download_button")]
    assert {"全件 CSV", "全件 JSON", "この JSON をダウンロード"} <= set(labels)


def test_upload_is_extracted_and_included_in_the_payload(app):
    data = make_docx(["業務委託契約書", "第8条（損害賠償）乙は一切の損害を賠償する。"], [["項目", "金額"], ["委託料", "月額50万円"]], [])
    app.chat_input[0].set_value("添付の契約書です").upload("contract.docx", data).run()
    assert not app.exception
    user = app.session_state.chat[-2]
    assert user["attachments"][0]["name"] == "contract.docx"
    assert "添付テキスト:\n<<<DOCUMENT>>>\n【contract.docx】" in user["payload"] and "委託料 | 月額50万円" in user["payload"]
    assert user["payload"].endswith("月額50万円\n<<<END DOCUMENT>>>")
    assert any("contract.docx" in c.value for c in app.caption)
    assert "第8条(損害賠償)" in messages(app)[-1]


def test_image_only_pdf_warns_and_keeps_the_text(app):
    from pathlib import Path
    scan = (Path(__file__).resolve().parents[3] / "shared/testdata/pdf-samples/imagemagick-CCITTFaxDecode.pdf").read_bytes()
    app.chat_input[0].set_value("スキャンした契約書です。業務委託契約です").upload("scan.pdf", scan).run()
    assert any("画像" in w.value for w in app.warning)
    assert app.session_state.chat[0]["content"] == "スキャンした契約書です。業務委託契約です"


def test_encrypted_pdf_asks_for_password_and_holds_the_message(app):
    from pathlib import Path
    locked = (Path(__file__).resolve().parents[3] / "shared/testdata/pdf-samples/libreoffice-writer-password.pdf").read_bytes()
    app.chat_input[0].set_value("パスワード付きです").upload("locked.pdf", locked).run()
    assert app.session_state.chat == [] and app.session_state.pending_submission["text"] == "パスワード付きです"
    app.text_input(key="pw_locked.pdf").input("wrong")
    app.button[0].click().run()
    assert any("違います" in e.value for e in app.error)
    app.text_input(key="pw_locked.pdf").input("openpassword")
    app.button[0].click().run()
    assert not app.exception
    assert "Lorem ipsum" in app.session_state.chat[0]["payload"]


def test_failure_shows_raw_output_and_resend_works(app):
    good = {"control": {"schema_version": "1.0", "mode": "interview"},
            "state": {"phase": "collect_case", "missing_info": []}, "assistant_message": "再送で成功", "knowledge_json": None}
    app.session_state["llm_client"] = ScriptedClient(["壊れた出力 {", "まだ壊れている", "最後も壊れている",
                                                      json.dumps(good, ensure_ascii=False)])
    app.chat_input[0].set_value("この入力は失われない").run()
    assert not app.exception
    assert any("parse_error" in e.value for e in app.error)
    assert any("最後も壊れている" in c.value for c in app.code)
    assert "この入力は失われない" in messages(app)
    app.button(key=f"resend_{app.session_state.chat[0]['id']}").click().run()
    assert messages(app)[-1] == "再送で成功"
    assert messages(app)[-2] == "この入力は失われない"
