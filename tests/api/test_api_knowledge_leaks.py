"""POST /api/knowledge/ask leaks nothing the library masks (issue 23): an entry saved with
「個人情報をマスクしない」 and personal data in the question leave masked, as GET /api/knowledge lists them;
an obedient model (``tests/fakes/obedient.py``) leaks no uncited entry, no system prompt, no attacker address."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api import knowledge as api_knowledge
from api.main import app
from bench.knowledge_recall import load_library
from core.llm.scripted import ScriptedClient
from core.store.store import Store
from tests.core.knowledge.test_ask_leaks import EMAIL, PHONE, QUESTION, plant
from tests.fakes.obedient import EVIL_IMAGE, EVIL_LINK, PLANTED, echo_question, obedient


@pytest.fixture
def api(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'library.db'}")
    load_library(store)
    app.dependency_overrides[api_knowledge.get_store] = lambda: store
    client = TestClient(app, raise_server_exceptions=False)
    yield client, store
    app.dependency_overrides.clear()
    store.engine.dispose()


def test_ask_masks_what_the_listing_masks(api):
    client, store = api
    plant(store, action_plan=f"・相手だけがいつでも解除できる条項には予告期間を求める\n・窓口 {PHONE} / {EMAIL}")
    listed = client.get("/api/knowledge", params={"limit": 100}).text
    assert PHONE not in listed and EMAIL not in listed
    app.dependency_overrides[api_knowledge.get_client] = lambda: ScriptedClient([echo_question])
    response = client.post("/api/knowledge/ask", json={"question": f"{QUESTION} 連絡は taro @ example.com"})
    assert response.status_code == 200
    for secret in (PHONE, EMAIL, "taro @ example.com"):
        assert secret not in response.text


def test_ask_with_an_obedient_model_returns_no_leak(api):
    client, store = api
    plant(store, review_points="・相手だけがいつでも契約を解除できる条項かを確認する\n" + PLANTED)
    app.dependency_overrides[api_knowledge.get_client] = lambda: ScriptedClient([obedient])
    body = client.post("/api/knowledge/ask", json={"question": QUESTION}).json()
    assert len(body["sources"]) == 1
    for leaked in (EVIL_IMAGE, EVIL_LINK, "![", PLANTED, "回答係です"):
        assert leaked not in body["answer"]
