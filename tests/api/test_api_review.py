"""The reviewers' routes (issue #22) on SQLite and PostgreSQL: feedback on an answer of a stored session
(201 / 404 / 422), the queue and verdicts for reviewers and admins only (403 otherwise), unknown verdicts and
labels (422), claims held by another reviewer (409), the export (JSONL and a spreadsheet-safe CSV, masked),
and the identity rules of the rest of the API (proxy identity, sessions that belong to their owner)."""
from __future__ import annotations

import csv
import io
import json

import pytest
from fastapi.testclient import TestClient

from api import review as review_api
from api.main import app, get_client, get_retriever, get_store, get_turn_wait
from core.llm.offline import OfflineClient
from core.prompts import prompt_version
from core.store.db import create_scratch_database
from core.store.store import Store
from tests.core.diagnosis.diagnosis_fakes import MIRAI, KeywordManualRetriever
from tests.helpers.pg import shared_pg_url

OPERATOR = {"X-Forwarded-User": "yamada", "X-Forwarded-Email": "yamada@example.jp"}
OTHER = {"X-Forwarded-User": "tanaka", "X-Forwarded-Email": "tanaka@example.jp"}
REVIEWER = {"X-Forwarded-User": "sato", "X-Forwarded-Email": "sato@example.jp"}
ADMIN = {"X-Forwarded-User": "admin", "X-Forwarded-Email": "admin@example.jp"}


@pytest.fixture(scope="module")
def retriever():
    return KeywordManualRetriever()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path, monkeypatch) -> str:
    url = f"sqlite:///{tmp_path / 'api.db'}" if request.param == "sqlite" else create_scratch_database(shared_pg_url())
    monkeypatch.setenv("KAIWA_DB_URL", url)
    monkeypatch.setenv("KAIWA_TRUST_PROXY_HEADERS", "1")
    monkeypatch.setenv("KAIWA_REVIEWERS", "sato@example.jp, not-an-email")
    monkeypatch.setenv("KAIWA_ADMINS", "admin@example.jp")
    monkeypatch.setenv("KAIWA_REVIEW_SAMPLE", "0")
    return url


@pytest.fixture
def api(db_url, retriever):
    store = Store(db_url)
    app.dependency_overrides[get_retriever] = lambda: retriever
    app.dependency_overrides[get_client] = OfflineClient
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[review_api.get_store] = lambda: store
    app.dependency_overrides[get_turn_wait] = lambda: 0.3
    client = TestClient(app, raise_server_exceptions=False)
    client.store = store
    yield client
    app.dependency_overrides.clear()
    store.engine.dispose()


def chat(api, headers=OPERATOR, **body) -> dict:
    r = api.post("/api/chat", json=body, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def session_with_answers(api) -> tuple[str, list[dict]]:
    sid = chat(api)["session_id"]
    chat(api, session_id=sid, action="select_vehicle", action_value=MIRAI)
    chat(api, session_id=sid, action="confirm_photo", action_value="yes")
    chat(api, session_id=sid, message="ブレーキを踏むとキーキー鳴る 090-1234-5678")
    transcript = api.get(f"/api/sessions/{sid}", headers=OPERATOR).json()["transcript"]
    return sid, transcript


def japanese(response) -> str:
    detail = response.json()["detail"]
    assert isinstance(detail, str) and not detail.isascii(), response.text
    return detail


def test_feedback_on_an_answer_is_stored_and_a_thumbs_down_queues_it(api):
    sid, transcript = session_with_answers(api)
    answer = max(i for i, e in enumerate(transcript) if e["role"] == "assistant")
    r = api.post("/api/feedback", json={"session_id": sid, "turn": answer, "rating": "down", "comment": "原因の説明が違う"},
                 headers=OPERATOR)
    assert r.status_code == 201, r.text
    [row] = api.store.list_feedback(sid)
    assert (row["id"], row["turn"], row["flow"], row["given_by"]) == (r.json()["feedback_id"], answer, "diagnosis",
                                                                     "yamada@example.jp")
    # the version of the prompt that wrote the answer: its turn's call (not the flow's main prompt as it is now)
    assert row["prompt_version"] == f"diagnosis_diagnostic@{prompt_version('diagnosis_diagnostic')}" and row["model"]
    queue = api.get("/api/review/queue", params={"status": "pending"}, headers=REVIEWER).json()
    assert [(i["session_id"], i["turn"], i["flow"], i["reason"]) for i in queue["items"]] == [
        (sid, answer, "diagnosis", "thumbs_down")]
    assert queue["total"] == 1
    assert api.post("/api/feedback", json={"session_id": sid, "turn": answer, "rating": "up"},
                    headers=OPERATOR).status_code == 201


@pytest.mark.parametrize("body, status, field", [
    ({"session_id": "nope", "turn": 0, "rating": "up"}, 404, None),
    ({"turn": 0, "rating": "up"}, 422, "session_id"),
    ({"session_id": "SID", "turn": "0", "rating": "up"}, 422, "turn"),
    ({"session_id": "SID", "turn": 0, "rating": "good"}, 422, "rating"),
    ({"session_id": "SID", "turn": 999, "rating": "up"}, 422, "turn"),
    ({"session_id": "SID", "turn": "USER", "rating": "up"}, 422, "turn"),
])
def test_bad_feedback_gets_a_japanese_error(api, body, status, field):
    sid, transcript = session_with_answers(api)
    user_turn = next(i for i, e in enumerate(transcript) if e["role"] == "user")
    body = {k: (sid if v == "SID" else user_turn if v == "USER" else v) for k, v in body.items()}
    r = api.post("/api/feedback", json=body, headers=OPERATOR)
    assert r.status_code == status, r.text
    japanese(r)
    if field:
        assert field in [e["field"] for e in r.json()["errors"]]
    assert api.store.list_feedback(sid) == []


def test_another_callers_session_is_unknown(api):
    sid, _ = session_with_answers(api)
    r = api.post("/api/feedback", json={"session_id": sid, "turn": 0, "rating": "down"}, headers=OTHER)
    assert r.status_code == 404 and japanese(r)


@pytest.mark.parametrize("headers", [OPERATOR, {}, {"X-Forwarded-User": "sato@example.jp"}])
def test_review_routes_are_for_reviewers_and_admins_only(api, headers):
    for method, url, kwargs in (("get", "/api/review/queue", {}), ("get", "/api/review/export", {}),
                                ("post", "/api/review/items/1", {"json": {"verdict": "correct"}})):
        r = getattr(api, method)(url, headers=headers, **kwargs)
        assert r.status_code == 403, (url, r.text)
        assert "レビュアー" in japanese(r)
    assert api.get("/api/review/queue", headers=ADMIN).status_code == 200  # admins may review too


def test_a_verdict_with_labels_and_correction_is_recorded_and_exported(api):
    sid, transcript = session_with_answers(api)
    answer = max(i for i, e in enumerate(transcript) if e["role"] == "assistant")
    api.post("/api/feedback", json={"session_id": sid, "turn": answer, "rating": "down"}, headers=OPERATOR)
    [item] = api.get("/api/review/queue", headers=REVIEWER).json()["items"]
    r = api.post(f"/api/review/items/{item['item_id']}", headers=REVIEWER,
                 json={"verdict": "incorrect", "labels": ["緊急度の誤り"], "comment": "=HYPERLINK(\"x\") 090-1234-5678",
                       "corrected_answer": "すぐに停車してください"})
    assert r.status_code == 200, r.text
    assert r.json() == {"item_id": item["item_id"], "status": "done", "verdict": "incorrect", "labels": ["緊急度の誤り"]}
    assert api.store.list_audit("review_item", item["item_id"])[0]["actor"] == "sato@example.jp"
    again = api.post(f"/api/review/items/{item['item_id']}", headers=ADMIN, json={"verdict": "correct"})
    assert again.status_code == 409 and japanese(again)
    assert api.get("/api/review/queue", params={"status": "done"}, headers=REVIEWER).json()["total"] == 1

    lines = api.get("/api/review/export", params={"format": "jsonl"}, headers=REVIEWER).text.splitlines()
    [row] = [json.loads(line) for line in lines]
    assert (row["session_id"], row["turn"], row["flow"], row["verdict"], row["labels"]) == (
        sid, answer, "diagnosis", "incorrect", ["緊急度の誤り"])
    assert row["corrected_answer"] == {"text": "すぐに停車してください"} and row["reviewer"] == "sato"
    assert "090-1234-5678" not in json.dumps(row, ensure_ascii=False)  # personal data masked
    assert row["prompt_version"].startswith("diagnosis_diagnostic@") and row["reviewed_at"].endswith("+09:00")
    body = api.get("/api/review/export", params={"format": "csv"}, headers=REVIEWER).content.decode("utf-8-sig")
    [cells] = list(csv.DictReader(io.StringIO(body)))
    assert cells["comment"].startswith("'=") and "090-1234-5678" not in body  # never a formula, masked
    assert "ブレーキを踏むとキーキー鳴る" in cells["user_message"]


@pytest.mark.parametrize("body, field", [
    ({"verdict": "wrong"}, "verdict"),
    ({"verdict": "correct", "labels": ["存在しないラベル"]}, "labels"),
    ({"verdict": "correct", "labels": "緊急度の誤り"}, "labels"),
    ({"verdict": "partial", "corrected_answer": {"urgency": "extreme"}}, "corrected_answer"),
])
def test_unknown_verdicts_and_labels_are_422(api, body, field):
    item, _ = api.store.enqueue_review("c1", 1, "faq", "sample")
    r = api.post(f"/api/review/items/{item}", json=body, headers=REVIEWER)
    assert r.status_code == 422, r.text
    assert field in [e["field"] for e in r.json()["errors"]] and japanese(r)
    assert api.store.get_review_item(item)["status"] == "pending"


def test_an_item_another_reviewer_holds_is_409_and_an_unknown_one_404(api):
    item, _ = api.store.enqueue_review("c1", 1, "faq", "sample")
    from core.identity import resolve_identity, load_auth_settings
    admin = resolve_identity(load_auth_settings(), headers=ADMIN)
    api.store.claim_review_item(item, admin)
    r = api.post(f"/api/review/items/{item}", json={"verdict": "correct"}, headers=REVIEWER)
    assert r.status_code == 409 and "作業中" in japanese(r)
    assert api.post("/api/review/items/999999", json={"verdict": "correct"}, headers=REVIEWER).status_code == 404
    assert api.get("/api/review/queue", params={"status": "claimed"}, headers=REVIEWER).json()["total"] == 1
    bad = api.get("/api/review/queue", params={"status": "open", "limit": 0}, headers=REVIEWER)
    assert bad.status_code == 422 and japanese(bad)


def test_an_api_turn_with_a_critical_answer_is_queued(api):
    sid = chat(api)["session_id"]
    chat(api, session_id=sid, action="select_vehicle", action_value=MIRAI)
    chat(api, session_id=sid, action="confirm_photo", action_value="yes")
    reply = chat(api, session_id=sid, message="ブレーキペダルが床まで沈む")
    assert reply["urgency"]["level"] == "critical"
    items = api.get("/api/review/queue", headers=REVIEWER).json()["items"]
    assert [(i["session_id"], i["reason"]) for i in items] == [(sid, "critical")]


def test_an_ask_item_corrected_over_http_becomes_a_regression_case(api):
    """ナレッジに質問 is not a stored session: its item comes from the page; a reviewer corrects it over HTTP with the
    entries it should cite (a number and a title) and 該当なし / 回答する, and the item becomes an ``ask`` case."""
    from core.identity import REVIEWER as REVIEWER_ROLE
    from core.identity import Identity
    from core.review.regression import make_regression_case
    item, _ = api.store.enqueue_review("ask-http", 0, "ask", "thumbs_down", snapshot={
        "question": "秘密保持期間は何年にしていますか", "answer": "該当するナレッジはありません。", "sources": [],
        "outcome": "not_found"})
    body = {"verdict": "incorrect", "labels": ["情報不足"],
            "corrected_answer": {"outcome": "answered", "citations": ["12", "NDA：秘密保持期間"]}}
    r = api.post(f"/api/review/items/{item}", json=body, headers=REVIEWER)
    assert r.status_code == 200, r.text
    _, scenario = make_regression_case(api.store, item, Identity(name="sato", email="sato@example.jp", source="proxy",
                                                                 roles=frozenset({REVIEWER_ROLE})))
    assert (scenario["flow"], scenario["turns"]) == ("ask", [{"message": "秘密保持期間は何年にしていますか"}])
    assert scenario["expect"] == {"outcome": "answered", "first_citation": "No.12",
                                  "citations_include": ["No.12", "NDA：秘密保持期間"]}


def test_an_answer_that_needs_no_review_is_not_read_back(api, monkeypatch):
    """Issue #25: after an /api/chat turn, an answer with no reason to review (not failed, not critical, no
    repair in the turn's own calls, not drawn for the sample) is known from the turn itself: nothing is read
    back. Drawn for the sample (rate 1), it is read and queued as before. Counted."""
    from core.review import intake

    read = []
    real = intake.answer_at
    monkeypatch.setattr(intake, "answer_at", lambda *a, **k: read.append(a[1:]) or real(*a, **k))
    sid = chat(api)["session_id"]
    chat(api, session_id=sid, action="select_vehicle", action_value=MIRAI)
    assert read == [] and api.get("/api/review/queue", headers=REVIEWER).json()["items"] == []
    monkeypatch.setenv("KAIWA_REVIEW_SAMPLE", "1")
    chat(api, session_id=sid, action="confirm_photo", action_value="yes")
    assert len(read) == 1
    items = api.get("/api/review/queue", headers=REVIEWER).json()["items"]
    assert [(i["session_id"], i["reason"]) for i in items] == [(sid, "sample")]
