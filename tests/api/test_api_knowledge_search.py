"""``GET /api/knowledge?q=`` finds what the library's search finds (issue #24): a word only in an entry's
clause sample, and 「ＮＤＡ」 as 「NDA」 for an entry whose text says 秘密保持契約（NDA）."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api import knowledge as api_knowledge
from api.main import app
from bench.knowledge_recall import REVIEWER
from core.llm.offline import OfflineClient
from core.store.store import Store

ENTRY = {"contract_type": "ソフトウェア開発契約", "knowledge_title": "秘密保持契約（NDA）を兼ねる開発契約の注意点",
         "target_clause": "第5条（秘密保持）", "review_points": "・秘密保持義務の範囲を確認する",
         "action_plan": "・秘密保持契約（NDA）と同じ水準を求める",
         "clause_sample": "成果物の著作権は、委託料の完済時に乙から甲に移転する。"}


@pytest.fixture
def api(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'library.db'}")
    cid = store.create_conversation("knowledge", REVIEWER)
    [entry_id] = store.record_knowledge(cid, [ENTRY], REVIEWER)
    store.set_entry_status(entry_id, "confirm", REVIEWER)
    app.dependency_overrides[api_knowledge.get_store] = lambda: store
    app.dependency_overrides[api_knowledge.get_client] = OfflineClient
    yield TestClient(app, raise_server_exceptions=False), store, entry_id
    app.dependency_overrides.clear()
    store.engine.dispose()


@pytest.mark.parametrize("q", ["著作権", "NDA", "ＮＤＡ", "秘密保持契約"])
def test_the_api_finds_what_the_library_search_finds(api, q):
    client, store, entry_id = api
    library = [e["id"] for e in store.list_entries(status="confirmed", query=q)]
    assert entry_id in library
    response = client.get("/api/knowledge", params={"q": q})
    assert response.status_code == 200
    assert entry_id in [e["entry_id"] for e in response.json()["entries"]]
