"""The sidebar with a real OpenAI-compatible client (the fake server): the model check's notice, the
model and context the server reported, the timeouts and the one that fired last; a timed-out turn on
the page says which timer fired and keeps what the user typed."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def _env(monkeypatch, fake_openai, **extra):
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("OPENAI_MODEL", "gpt-x")
    for key, value in extra.items():
        monkeypatch.setenv(key, value)


def test_the_sidebar_says_when_the_configured_model_is_not_served(fake_openai, monkeypatch):
    fake_openai.served, fake_openai.owned_by, fake_openai.n_ctx = ["local-model"], "llamacpp", 4096
    _env(monkeypatch, fake_openai)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception
    warnings = [w.value for w in at.sidebar.warning]
    assert any("gpt-x" in w and "local-model" in w and "llama.cpp" in w for w in warnings)
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "サーバーの応答モデル: local-model" in captions and "コンテキスト 4096 トークン" in captions
    assert "最初のトークン" in captions and "トークン間" in captions  # the timeouts in force


def _timeouts_only():
    from ui.sidebar import render_timeouts

    render_timeouts()


def test_the_timer_that_fired_last_is_shown(fake_openai, monkeypatch):
    _env(monkeypatch, fake_openai, KAIWA_FIRST_TOKEN_TIMEOUT="1", KAIWA_TURN_DEADLINE="60")
    fake_openai.set("stall", seconds=30)
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.chat_input(key="knowledge_input").set_value("この入力は失われない").run()
    assert not at.exception
    client = at.session_state["llm_client"]
    assert client.last_timeout["timer"] == "first_token"
    failed = at.session_state["chat"][-1]
    assert failed["failed"] and at.session_state["chat"][-2]["user_text"] == "この入力は失われない"
    assert any("最初のトークン待ち" in s.label for s in at.status)  # the turn's heading names the timer
    sidebar = AppTest.from_function(_timeouts_only)
    sidebar.session_state["llm_client"] = client
    sidebar.session_state["provider_registry"] = at.session_state["provider_registry"]
    sidebar.run()
    assert any("最初のトークン待ち" in w.value and "1.0 秒" in w.value for w in sidebar.warning)
