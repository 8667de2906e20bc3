"""The knowledge base over HTTP (api/knowledge.py): GET /api/knowledge and POST /api/knowledge/ask through
TestClient, their Japanese 4xx for bad input, and the same under a real uvicorn on SQLite and PostgreSQL —
where an entry confirmed by another process is found on the server's next request."""
from __future__ import annotations

import httpx
import pytest
from fastapi.testclient import TestClient

from api import knowledge as api_knowledge
from api.main import app
from bench.knowledge_recall import REVIEWER, load_library
from core.knowledge.ask import FAILED, NO_KNOWLEDGE
from core.llm.offline import OfflineClient
from core.llm.scripted import ScriptedClient
from core.store.db import create_scratch_database, drop_database
from core.store.store import Store
from tests.helpers.pg import shared_pg_url
from tests.helpers.processes import uvicorn_api

ONE_SIDED = "相手だけがいつでも契約を打ち切れる条項には、普段どう返している？"
SOURCE_KEYS = {"entry_id", "title", "contract_type", "score"}


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('api-knowledge') / 'library.db'}")
    ids = load_library(store)
    conversation = store.create_conversation("knowledge", REVIEWER)
    [draft] = store.record_knowledge(conversation, [{
        "contract_type": "業務委託契約", "knowledge_title": "下書きの再委託ナレッジ", "target_clause": "第10条",
        "review_points": "・連絡先 090-1234-5678 に確認する", "action_plan": "・再委託は承諾制", "clause_sample": ""}], REVIEWER)
    yield store, ids, draft
    store.engine.dispose()


@pytest.fixture
def api(library):
    store = library[0]
    app.dependency_overrides[api_knowledge.get_store] = lambda: store
    app.dependency_overrides[api_knowledge.get_client] = OfflineClient
    client = TestClient(app, raise_server_exceptions=False)
    client.overrides = app.dependency_overrides
    yield client
    app.dependency_overrides.clear()


def test_list_gives_confirmed_entries_unless_a_status_is_given(api, library):
    _, ids, draft = library
    body = api.get("/api/knowledge").json()
    assert body["count"] == 20 and all(e["status"] == "confirmed" for e in body["entries"])
    assert draft not in [e["entry_id"] for e in api.get("/api/knowledge", params={"limit": 100}).json()["entries"]]
    drafts = api.get("/api/knowledge", params={"status": "draft"}).json()["entries"]
    assert [e["entry_id"] for e in drafts] == [draft]
    assert "090-1234-5678" not in drafts[0]["review_points"]  # personal data leaves masked
    typed = api.get("/api/knowledge", params={"contract_type": "秘密保持契約", "limit": 100}).json()["entries"]
    assert {e["entry_id"] for e in typed} == {ids["nda-term"], ids["nda-definition"], ids["nda-return"]}


def test_search_ranks_the_confirmed_entries_with_a_score(api, library):
    _, ids, draft = library
    hits = api.get("/api/knowledge", params={"q": "口頭で伝えたことまで秘密扱いにされる"}).json()["entries"]
    assert hits[0]["entry_id"] == ids["nda-definition"] and 0.3 <= hits[0]["score"] <= 1.0
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    typed = api.get("/api/knowledge", params={"q": "損害賠償の上限", "contract_type": "売買契約"}).json()["entries"]
    assert typed and {e["contract_type"] for e in typed} == {"売買契約"}
    assert api.get("/api/knowledge", params={"q": "有給休暇の申請"}).json() == {"entries": [], "count": 0}
    drafts = api.get("/api/knowledge", params={"q": "再委託", "status": "draft"}).json()["entries"]
    assert [e["entry_id"] for e in drafts] == [draft] and drafts[0]["score"] is None


def test_ask_answers_from_the_entries_with_sources_most_relevant_first(api, library):
    _, ids, _ = library
    r = api.post("/api/knowledge/ask", json={"question": ONE_SIDED})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"answer", "sources", "fallback"} and body["fallback"] is False
    assert body["sources"][0]["entry_id"] == ids["outsourcing-termination-convenience"]
    assert all(set(s) == SOURCE_KEYS for s in body["sources"])
    assert [s["score"] for s in body["sources"]] == sorted((s["score"] for s in body["sources"]), reverse=True)
    assert "90日前" in body["answer"]
    none = api.post("/api/knowledge/ask", json={"question": "会議室の予約はどうすればいい？"}).json()
    assert none == {"answer": NO_KNOWLEDGE, "sources": [], "fallback": False}



def test_a_knowledge_search_and_question_are_counted_as_requests_in_flight(api, monkeypatch):
    """Like a chat turn, a search or a question is one of the worker's requests in flight while it embeds
    (``core.rag.embeddings.REQUESTS``): a lone one's query vector may take both cores, never beside another."""
    from core.rag.embeddings import REQUESTS

    seen: list[int] = []
    search, ask = api_knowledge.KnowledgeIndex.search, api_knowledge.ask
    monkeypatch.setattr(api_knowledge.KnowledgeIndex, "search",
                        lambda self, *a, **k: seen.append(REQUESTS.count()) or search(self, *a, **k))
    monkeypatch.setattr(api_knowledge, "ask", lambda *a, **k: seen.append(REQUESTS.count()) or ask(*a, **k))
    assert api.get("/api/knowledge", params={"q": "損害賠償の上限"}).status_code == 200
    assert api.post("/api/knowledge/ask", json={"question": ONE_SIDED}).status_code == 200
    assert seen[0] == 1 and seen[1] == 1 and REQUESTS.count() == 0

@pytest.mark.parametrize("body, field, text", [
    ({}, "question", "必須です"),
    ({"question": "   "}, "question", "空にはできません"),
    ({"question": "あ" * 2001}, "question", "2000 文字以内"),
    ({"question": 3}, "question", "文字列で指定してください"),
    ({"question": "上限", "secret_field": "x"}, "body", "不明な項目です"),
    (["question"], "body", "JSON オブジェクト"),
])
def test_bad_bodies_get_a_japanese_422_naming_the_field(api, body, field, text):
    r = api.post("/api/knowledge/ask", json=body)
    assert r.status_code == 422
    detail = r.json()
    assert detail["detail"].startswith("リクエストの内容に誤りがあります") and text in detail["detail"]
    assert [e["field"] for e in detail["errors"]] == [field]
    assert "secret_field" not in r.text and "Traceback" not in r.text


def test_unreadable_json_too_large_and_bad_parameters(api):
    r = api.post("/api/knowledge/ask", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "JSON として読めません" in r.json()["detail"]
    r = api.post("/api/knowledge/ask", json={"question": "あ" * 40_000})
    assert r.status_code == 413 and "大きすぎます" in r.json()["detail"]
    r = api.get("/api/knowledge", params={"status": "deleted"})
    assert r.status_code == 422 and "status（状態）" in r.json()["detail"] and "draft / confirmed / archived" in r.text
    r = api.get("/api/knowledge", params={"limit": 0})
    assert r.status_code == 422 and "1 以上" in r.json()["detail"]
    r = api.get("/api/knowledge", params={"q": "あ" * 201})
    assert r.status_code == 422 and "200 文字以内" in r.json()["detail"]


def test_a_failed_model_call_is_the_japanese_fallback(api):
    api.overrides[api_knowledge.get_client] = lambda: ScriptedClient(["broken"] * 9)
    r = api.post("/api/knowledge/ask", json={"question": ONE_SIDED})
    assert r.status_code == 200 and r.json() == {"answer": FAILED, "sources": [], "fallback": True}


# ---- a real uvicorn ------------------------------------------------------------------------------
@pytest.fixture(params=["sqlite", "postgresql"])
def server_db(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'server.db'}"
        return
    pg_url = shared_pg_url()
    url = create_scratch_database(pg_url, "kaiwa_api_knowledge")
    yield url
    drop_database(pg_url, url)


def test_the_real_server_searches_and_answers_and_sees_other_processes(server_db):
    store = Store(server_db)
    ids = load_library(store)
    try:
        with uvicorn_api(server_db, start_timeout=90) as (base, health):
            assert health is not None and health.status_code == 200, "server did not come up"
            r = httpx.post(f"{base}/api/knowledge/ask", json={"question": ONE_SIDED}, timeout=120)
            assert r.status_code == 200 and r.json()["sources"][0]["entry_id"] == ids["outsourcing-termination-convenience"]
            r = httpx.post(f"{base}/api/knowledge/ask", json={}, timeout=30)
            assert r.status_code == 422 and "question（質問）（必須です）" in r.json()["detail"]
            assert httpx.get(f"{base}/api/knowledge", params={"q": "派遣社員の交代"}, timeout=60).json()["entries"][0][
                "entry_id"] == ids["dispatch"]
            # another process (this test) confirms a new entry: the server finds it on its next request
            conversation = store.create_conversation("knowledge", REVIEWER)
            [new] = store.record_knowledge(conversation, [{
                "contract_type": "請負契約", "knowledge_title": "請負契約：前払金の保全", "target_clause": "第4条(前払金)",
                "review_points": "・前払金の返還と保全措置（保証状）が定められているか確認する",
                "action_plan": "・前払金には銀行保証状の差入れを求める", "clause_sample": ""}], REVIEWER)
            drafted = httpx.get(f"{base}/api/knowledge", params={"q": "前払金の保全"}, timeout=30).json()["entries"]
            assert new not in [e["entry_id"] for e in drafted]  # a draft is not searchable
            store.set_entry_status(new, "confirm", REVIEWER)
            found = httpx.get(f"{base}/api/knowledge", params={"q": "前払金の保全"}, timeout=60).json()["entries"]
            assert found and found[0]["entry_id"] == new
            store.set_entry_status(new, "archive", REVIEWER)
            gone = httpx.get(f"{base}/api/knowledge", params={"q": "前払金の保全"}, timeout=60).json()["entries"]
            assert new not in [e["entry_id"] for e in gone]
    finally:
        store.engine.dispose()
