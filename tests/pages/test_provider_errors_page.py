"""Provider failures on the page: a connection error is headed as a failed model call, not as a
validation failure; the sidebar never shows an unconfigured online provider as active (🟢)."""
import httpx
import openai
from streamlit.testing.v1 import AppTest

from core.llm.scripted import ScriptedClient
from tests.pages.conftest import APP

REQ = httpx.Request("POST", "http://llm.local/v1/chat/completions")


def test_connection_error_is_a_failed_model_call_not_a_validation_failure(app):
    app.session_state["llm_client"] = ScriptedClient([openai.APIConnectionError(request=REQ)] * 3)
    app.chat_input[0].set_value("NDA の件です").run()
    assert not app.exception
    labels = [s.label for s in app.status]
    assert "モデルの呼び出しに失敗しました（接続エラー）" in labels
    assert "応答の検証に失敗しました" not in labels
    assert app.status[0].state == "error"
    assert app.session_state["llm_client"].remaining == 0  # retried, then given up


def test_sidebar_shows_no_green_for_openai_without_key_or_base_url(monkeypatch):
    monkeypatch.setenv("KAIWA_PROVIDER", "openai")
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    assert not at.exception
    assert at.session_state["llm_client"].name == "openai"
    sidebar = [m.value for m in at.sidebar.markdown]
    assert not any("🟢" in m for m in sidebar)
    assert any(m.startswith("🔴") and "未設定" in m for m in sidebar)


def test_sidebar_shows_green_for_a_configured_openai(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    assert not at.exception
    assert any(m.value.startswith("🟢") for m in at.sidebar.markdown)
