"""The API's client is checked against its server when it is built: /healthz says which model the server
serves, its context size, and a notice when the configured model is not among them."""
from __future__ import annotations

from fastapi.testclient import TestClient

from api.main import app, get_client, get_settings
from core.llm.registry import ProviderRegistry
from core.llm.settings import load_settings


def test_healthz_reports_the_model_check(fake_openai, monkeypatch, tmp_path):
    monkeypatch.setenv("KAIWA_DB_URL", f"sqlite:///{tmp_path / 'api.db'}")
    fake_openai.served, fake_openai.owned_by, fake_openai.n_ctx = ["served-model"], "vllm", 8192
    settings = load_settings({"OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_MODEL": "configured-model"})
    client = ProviderRegistry(settings).get_active()
    app.dependency_overrides.update({get_client: lambda: client, get_settings: lambda: settings})
    try:
        body = TestClient(app).get("/healthz").json()
    finally:
        app.dependency_overrides.clear()
    assert body["model"] == "configured-model" and body["served_model"] == "served-model"
    assert body["context_tokens"] == 8192 and "configured-model" in body["model_notice"]
