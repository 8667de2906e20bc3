"""The sidebar lists every configured provider (Bedrock, Gemini, watsonx beside offline and OpenAI);
switching replaces only the client (the conversation stays); a provider whose SDK is missing says which
extra to install and the console keeps answering with the provider it had."""
from __future__ import annotations

import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

from core.llm.registry import ProviderRegistry
from core.llm.settings import load_settings

APP = str(Path(__file__).resolve().parents[2] / "app.py")
ENV = {"KAIWA_BEDROCK_MODEL": "anthropic.claude-3-5-sonnet-20240620-v1:0", "AWS_REGION": "us-east-1",
       "GEMINI_API_KEY": "AIza-sidebar-test-key-0123456789", "WATSONX_APIKEY": "wx-sidebar-test-key-0123456789",
       "WATSONX_PROJECT_ID": "proj-1"}
CHAT = [{"role": "user", "user_text": "NDA の件で相談です"}, {"role": "assistant", "content": "どの契約書ですか？"}]


def _sidebar_only():
    from ui.sidebar import render_sidebar

    render_sidebar()


def _sidebar():
    registry = ProviderRegistry(load_settings(ENV))
    at = AppTest.from_function(_sidebar_only, default_timeout=60)
    at.session_state["provider_registry"] = registry
    at.session_state["llm_client"] = registry.get_active()
    at.session_state["chat"] = list(CHAT)
    at.run()
    assert not at.exception
    return at


def test_the_app_lists_every_configured_provider(monkeypatch):
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KAIWA_PROVIDER"):
        monkeypatch.delenv(key, raising=False)
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    assert not at.exception
    assert list(at.sidebar.selectbox(key="provider_choice").options) == [
        "オフライン（ルールベース）", "OpenAI 互換 API", "Amazon Bedrock", "Google Gemini", "IBM watsonx.ai"]


def test_switching_provider_keeps_the_conversation():
    at = _sidebar()
    at.sidebar.selectbox(key="provider_choice").set_value("gemini").run()
    assert not at.exception
    assert at.session_state["llm_client"].name == "gemini"
    assert list(at.session_state["chat"]) == CHAT
    assert any("Google Gemini · gemini-2.5-flash" in m.value for m in at.sidebar.markdown)
    assert at.sidebar.text_input(key="model_name_gemini").value == "gemini-2.5-flash"
    assert ENV["GEMINI_API_KEY"] not in " ".join(m.value for m in at.sidebar.markdown)


def test_a_provider_without_its_sdk_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)
    at = _sidebar()
    at.sidebar.selectbox(key="provider_choice").set_value("bedrock").run()
    assert not at.exception
    errors = " ".join(e.value for e in at.sidebar.error)
    assert "requirements-bedrock.txt" in errors and ".[bedrock]" in errors and "インストールされていません" in errors
    assert at.session_state["llm_client"].name == "offline"  # the console keeps answering
    assert list(at.session_state["chat"]) == CHAT
