"""契約ナレッジ作成 uploads through AppTest: the stated size limit, an over-limit file named with the
text held, duplicate file names, one extraction per upload across reruns, repeated missing_info."""
import json
from pathlib import Path

import pytest

from core.documents import MAX_UPLOAD_BYTES
from core.documents import cache as extraction_cache
from core.llm.scripted import ScriptedClient
from tests.helpers.documents import make_docx

LOCKED = Path(__file__).resolve().parents[3] / "shared/testdata/pdf-samples/libreoffice-writer-password.pdf"


@pytest.fixture(autouse=True)
def _fresh_cache():
    extraction_cache.clear_cache()
    yield
    extraction_cache.clear_cache()


@pytest.fixture
def extractions(monkeypatch):
    """Names passed to the real extractor (the cache calls it only on a miss)."""
    seen: list[str] = []
    real = extraction_cache.extract_document

    def counting(name, data, password=None, **kwargs):
        seen.append(name)
        return real(name, data, password, **kwargs)

    monkeypatch.setattr(extraction_cache, "extract_document", counting)
    return seen


def turn(message: str, missing: list[str]) -> str:
    return json.dumps({"control": {"schema_version": "1.0", "mode": "interview"},
                       "state": {"phase": "collect_case", "missing_info": missing},
                       "assistant_message": message, "knowledge_json": None}, ensure_ascii=False)


def test_size_limit_is_stated_in_japanese(app):
    assert any("1 ファイル 10 MB まで" in c.value for c in app.caption)
    assert MAX_UPLOAD_BYTES == 10 * 1024 * 1024


def test_streamlit_accepts_a_little_more_than_our_limit_so_our_message_shows():
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit/config.toml").read_text())
    limit_mb = config["server"]["maxUploadSize"]
    from core.rag.manual_admin import MAX_UPLOAD_BYTES as MANUAL_MAX

    # above both our limits, so a file over them reaches our Japanese message instead of Streamlit's own
    assert max(MAX_UPLOAD_BYTES, MANUAL_MAX) < limit_mb * 1024 * 1024 <= MANUAL_MAX + 10 * 1024 * 1024


def test_over_limit_file_is_named_and_the_message_is_held(app):
    small = make_docx(["第8条（損害賠償）乙は一切の損害を賠償する。"], [["項目", "金額"], ["委託料", "月額50万円"]], [])
    big = b"a" * (MAX_UPLOAD_BYTES + 1)
    app.chat_input[0].set_value("この本文は失われない").upload("huge.txt", big).upload("small.docx", small).run()
    assert not app.exception
    assert any("huge.txt" in e.value and "大きすぎ" in e.value and "10 MB" in e.value for e in app.error)
    assert app.session_state.chat == []
    pending = app.session_state.pending_submission
    assert pending["text"] == "この本文は失われない" and [n for n, _ in pending["files"]] == ["small.docx"]
    assert pending["refused"] == [{"name": "huge.txt", "size": MAX_UPLOAD_BYTES + 1}]  # its bytes are not kept
    app.run()  # a rerun keeps it all
    assert app.session_state.pending_submission["text"] == "この本文は失われない"
    assert any("huge.txt" in e.value for e in app.error)
    app.button(key="pending_drop_refused").click().run()
    assert not app.exception and app.session_state.pending_submission is None
    user = app.session_state.chat[-2]
    assert user["content"] == "この本文は失われない" and [a["name"] for a in user["attachments"]] == ["small.docx"]
    assert "月額50万円" in user["payload"]


def test_over_limit_submission_can_be_cancelled(app):
    app.chat_input[0].set_value("取り消す").upload("huge.pdf", b"%PDF" + b"0" * MAX_UPLOAD_BYTES).run()
    assert any("huge.pdf" in e.value for e in app.error)
    app.button(key="pending_cancel").click().run()
    assert app.session_state.pending_submission is None and app.session_state.chat == []
    assert not any("huge.pdf" in e.value for e in app.error)


def test_two_uploads_with_the_same_name_are_both_sent(app):
    first = make_docx(["第1条（目的）一通目の契約書。"], [["a", "b"]], [])
    second = make_docx(["第2条（定義）二通目の契約書。"], [["c", "d"]], [])
    app.chat_input[0].set_value("同名の二通").upload("契約書.docx", first).upload("契約書.docx", second).run()
    assert not app.exception
    user = app.session_state.chat[-2]
    assert [a["name"] for a in user["attachments"]] == ["契約書.docx", "契約書.docx"]
    assert "一通目" in user["payload"] and "二通目" in user["payload"]


def test_two_locked_pdfs_with_the_same_name_get_their_own_password_fields(app):
    locked = LOCKED.read_bytes()
    app.chat_input[0].set_value("同名の暗号化 PDF").upload("locked.pdf", locked).upload("locked.pdf", locked).run()
    assert not app.exception
    keys = [t.key for t in app.text_input]
    assert len(keys) == 2 and len(set(keys)) == 2
    for field in app.text_input:
        field.input("openpassword")
    app.button[0].click().run()
    assert not app.exception
    user = app.session_state.chat[-2]
    assert user["content"] == "同名の暗号化 PDF" and len(user["attachments"]) == 2
    assert user["payload"].count("Lorem ipsum") >= 2


def test_upload_is_extracted_once_across_reruns_of_the_password_form(app, extractions):
    app.chat_input[0].set_value("パスワード付きです").upload("locked.pdf", LOCKED.read_bytes()).run()
    app.run()
    app.run()
    assert extractions == ["locked.pdf"]  # three runs, one extraction
    app.text_input(key="pw_locked.pdf").input("wrong")
    app.button[0].click().run()
    assert any("違います" in e.value for e in app.error)
    app.run()
    assert extractions == ["locked.pdf", "locked.pdf"]  # the wrong password once
    app.text_input(key="pw_locked.pdf").input("openpassword")
    app.button[0].click().run()
    assert "Lorem ipsum" in app.session_state.chat[-2]["payload"]
    assert len(extractions) == 3


def test_repeated_missing_info_items_do_not_crash(app):
    app.session_state["llm_client"] = ScriptedClient([
        turn("まだ情報が必要です", ["契約類型", "契約類型", "対象条項", "契約類型"]),
        turn("ありがとうございます", ["対象条項", "対象条項"]),
    ])
    app.chat_input[0].set_value("業務委託契約です").run()
    assert not app.exception
    assert [c.label for c in app.checkbox] == ["契約類型", "契約類型", "対象条項", "契約類型"]
    app.chat_input[0].set_value("第8条です").run()
    assert not app.exception
    assert [c.label for c in app.checkbox] == ["対象条項", "対象条項"]
