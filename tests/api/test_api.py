"""The HTTP API (seed 000 §1, §8) over the shared store: the whole flow, what the console sees of an
API session, the error rules (422 / 404 / 413 / fallback, never a traceback) and a real uvicorn."""
from __future__ import annotations

import json
import logging

import httpx
import pytest
from fastapi.testclient import TestClient

from api import main as api_main
from api.main import FAILURE_MESSAGE, NOT_TAKEN_MESSAGE, app, get_client, get_retriever, get_settings, get_store
from core.llm.offline import OfflineClient
from core.llm.settings import Settings
from core.store.store import Store
from tests.core.diagnosis.diagnosis_fakes import MIRAI, KeywordManualRetriever
from tests.helpers.processes import uvicorn_api

SEED_RESPONSE_FIELDS = {"session_id", "current_step", "prompt", "urgency", "rag_sources", "manual_coverage",
                        "diagnostic_turn", "rewound_to_turn"}
SEED_PROMPT_FIELDS = {"type", "message", "choices", "booking_type", "booking_fields", "booking_summary"}
FORM = {"name": "山田 太郎", "phone": "090-1234-5678", "address": "東京都テスト区1-2-3"}
TRACEBACK_MARKS = ("Traceback", 'File "')


class ExplodingClient:
    """A model client whose every call fails with a message that looks like a traceback."""

    name = "exploding"
    model = "exploding-1"

    def complete(self, request):
        raise RuntimeError('Traceback (most recent call last):\n  File "/srv/secret.py", line 1, in <module>')


@pytest.fixture(scope="module")
def retriever():
    return KeywordManualRetriever()


@pytest.fixture
def db_url(tmp_path, monkeypatch) -> str:
    url = f"sqlite:///{tmp_path / 'api.db'}"
    monkeypatch.setenv("KAIWA_DB_URL", url)
    return url


@pytest.fixture
def api(db_url, retriever):
    """A TestClient over the app with this test's store, the offline client and a fast retriever;
    ``api.overrides`` replaces more dependencies."""
    app.dependency_overrides[get_retriever] = lambda: retriever
    app.dependency_overrides[get_client] = OfflineClient
    client = TestClient(app, raise_server_exceptions=False)
    client.overrides = app.dependency_overrides
    yield client
    app.dependency_overrides.clear()


def post(api, **body) -> dict:
    response = api.post("/api/chat", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def to_booking_form(api) -> tuple[str, dict]:
    sid = post(api)["session_id"]
    post(api, session_id=sid, action="select_vehicle", action_value=MIRAI)
    post(api, session_id=sid, action="confirm_photo", action_value="yes")
    post(api, session_id=sid, message="ブレーキペダルが床まで沈む")
    return sid, post(api, session_id=sid, action="reserve", action_value="dispatch")


def test_start_vehicle_symptom_and_booking_through_the_api(api, db_url):
    first = post(api)
    assert SEED_RESPONSE_FIELDS <= set(first) and SEED_PROMPT_FIELDS <= set(first["prompt"])
    assert first["current_step"] == "vehicle_id" and MIRAI in [c["value"] for c in first["prompt"]["choices"]]
    sid = first["session_id"]
    assert post(api, session_id=sid, action="select_vehicle", action_value=MIRAI)["current_step"] == "photo_confirm"
    assert post(api, session_id=sid, action="confirm_photo", action_value="yes")["current_step"] == "free_text"
    symptom = post(api, session_id=sid, message="ブレーキペダルが床まで沈む")
    assert symptom["urgency"]["level"] == "critical" and symptom["urgency"]["can_drive"] is False
    form = post(api, session_id=sid, action="reserve", action_value="dispatch")
    assert form["prompt"]["type"] == "booking_form" and form["prompt"]["booking_type"] == "dispatch"
    assert {f["name"] for f in form["prompt"]["booking_fields"]} >= set(FORM)
    confirm = post(api, session_id=sid, action="submit_booking", action_value=FORM)
    assert confirm["current_step"] == "booking_confirm" and confirm["prompt"]["booking_summary"]
    done = post(api, session_id=sid, action="booking", action_value="confirm")
    assert done["current_step"] == "done"
    [booking] = Store(db_url).list_bookings()
    assert booking["conversation_id"] == sid and booking["contact"]["name"] == "山田 太郎"
    assert booking["created_by"] == "anonymous:api" and booking["urgency"] == "critical"


def test_an_api_session_is_what_the_console_shows(api, db_url):
    sid, form = to_booking_form(api)
    store = Store(db_url)
    entries = store.chat_entries(sid)  # what the console's page lists on resume
    assert [e["role"] for e in entries] == ["assistant"] + ["user", "assistant"] * 4
    assert entries[-1]["message"] == form["prompt"]["message"]
    assert any(e["role"] == "user" and e["text"] == "ブレーキペダルが床まで沈む" for e in entries)
    [listed] = [c for c in store.list_conversations(flow="diagnosis") if c["id"] == sid]
    assert listed["owner"] == "anonymous:api" and listed["turn_count"] == len(entries)

    summary = api.get(f"/api/sessions/{sid}")
    assert summary.status_code == 200
    data = summary.json()
    assert data["session_id"] == sid and data["current_step"] == "booking_info" and data["status"] == "active"
    assert data["vehicle"]["vehicle_id"] == MIRAI and data["urgency"]["level"] == "critical"
    assert data["transcript"] == entries and data["turns"] == len(entries)
    assert data["prompt"]["type"] == "booking_form" and data["updated_at"] >= data["created_at"]


def test_unknown_session_id_starts_a_new_session_saying_it_is_unknown(api, db_url):
    r = post(api, session_id="no-such-session", message="こんにちは")
    assert r["session_id"] != "no-such-session" and r["current_step"] == "vehicle_id"
    assert "見つかりません" in r["notice"] and "有効期限" not in r["notice"]  # never issued: unknown, not expired
    assert Store(db_url).get_conversation(r["session_id"])["flow"] == "diagnosis"
    assert post(api, session_id=r["session_id"], action="select_vehicle", action_value=MIRAI)["current_step"] == "photo_confirm"


def test_unknown_session_summary_is_a_japanese_404(api):
    r = api.get("/api/sessions/no-such-session")
    assert r.status_code == 404 and "有効期限" in r.json()["detail"]
    assert api.get("/api/sessions/" + "x" * 500).status_code == 404


@pytest.mark.parametrize("body, field, words", [
    ({"message": "あ" * 8001}, "message", "8000 文字以内"),
    ({"message": 5}, "message", "文字列"),
    ({"action_value": "x" * 2001}, "action_value", "2000 文字以内"),
    ({"action_value": {f"f{i}": "v" for i in range(21)}}, "action_value", "20 項目以内"),
    ({"rewind_to_turn": -1}, "rewind_to_turn", "0 以上"),
    ([1, 2], "body", "JSON オブジェクト"),
])
def test_invalid_bodies_get_a_clear_japanese_422(api, body, field, words):
    r = api.post("/api/chat", json=body)
    assert r.status_code == 422
    data = r.json()
    assert data["detail"].startswith("リクエストの内容に誤りがあります") and words in data["detail"]
    assert [e["field"] for e in data["errors"]] == [field]
    assert "あああ" not in r.text and "xxx" not in r.text  # the input is not echoed back


def test_malformed_json_and_empty_body_get_a_422(api):
    bad = api.post("/api/chat", content=b'{"message": ', headers={"content-type": "application/json"})
    assert bad.status_code == 422 and "JSON として読めません" in bad.json()["detail"]
    empty = api.post("/api/chat", content=b"", headers={"content-type": "application/json"})
    assert empty.status_code == 422 and "必須" in empty.json()["detail"]


def test_an_oversized_body_is_refused_unread(api):
    r = api.post("/api/chat", content=b"{" + b" " * 70_000 + b"}", headers={"content-type": "application/json"})
    assert r.status_code == 413 and "大きすぎます" in r.json()["detail"]

    def chunks():
        for _ in range(80):
            yield b" " * 1024

    streamed = api.post("/api/chat", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413


def test_a_failing_model_gives_the_fallback_message_not_a_traceback(api):
    sid = post(api)["session_id"]
    post(api, session_id=sid, action="select_vehicle", action_value=MIRAI)
    post(api, session_id=sid, action="confirm_photo", action_value="yes")
    api.overrides[get_client] = ExplodingClient
    r = api.post("/api/chat", json={"session_id": sid, "message": "走行中に異音がする"})
    assert r.status_code == 200
    assert r.json()["prompt"]["message"] == FAILURE_MESSAGE and r.json()["session_id"] == sid
    assert not any(mark in r.text for mark in TRACEBACK_MARKS)


def test_an_unexpected_error_is_a_503_with_the_fallback_message(api, db_url, monkeypatch, caplog):
    store = Store(db_url)

    def broken(*args, **kwargs):
        raise RuntimeError('database went away\nTraceback (most recent call last):\n  File "/srv/x.py"')

    monkeypatch.setattr(store, "get_conversation", broken)
    api.overrides[get_store] = lambda: store
    with caplog.at_level(logging.ERROR, logger=api_main.__name__):
        r = api.post("/api/chat", json={"session_id": "abc", "message": "こんにちは"})
    assert r.status_code == 503
    assert r.json()["detail"] == NOT_TAKEN_MESSAGE and r.json()["fallback"] is True
    assert not any(mark in r.text for mark in TRACEBACK_MARKS) and "database went away" not in r.text
    assert any("unhandled error on POST /api/chat" in rec.getMessage() for rec in caplog.records)


def test_healthz_checks_the_database(api, db_url, monkeypatch):
    r = api.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "db": "sqlite", "provider": "offline", "model": OfflineClient().model,
                        "db_readable": True, "db_writable": True}

    store = Store(db_url)
    monkeypatch.setattr(store.engine, "connect", lambda: (_ for _ in ()).throw(OSError("disk gone")))
    api.overrides[get_store] = lambda: store
    down = api.get("/healthz")
    assert down.status_code == 503 and down.json()["status"] == "error" and "disk gone" not in down.text


def test_the_owner_is_the_trusted_proxy_identity_only_when_trusted(api, db_url, monkeypatch):
    headers = {"X-Forwarded-User": "sato", "X-Forwarded-Email": "sato@example.jp"}
    untrusted = api.post("/api/chat", json={}, headers=headers).json()["session_id"]
    monkeypatch.setenv("KAIWA_TRUST_PROXY_HEADERS", "1")
    trusted = api.post("/api/chat", json={}, headers=headers).json()["session_id"]
    store = Store(db_url)
    assert store.get_conversation(untrusted)["owner"] == "anonymous:api"
    assert store.get_conversation(trusted)["owner"] == "sato@example.jp"
    assert api.get(f"/api/sessions/{trusted}", headers=headers).json()["owner"] == "sato"


def test_model_calls_go_to_the_shared_debug_log_when_debug_is_on(api, db_url):
    def to_symptom() -> str:
        sid = post(api)["session_id"]
        post(api, session_id=sid, action="select_vehicle", action_value=MIRAI)
        post(api, session_id=sid, action="confirm_photo", action_value="yes")
        post(api, session_id=sid, message="走行中に異音がする")
        return sid

    store = Store(db_url)
    api.overrides[get_settings] = lambda: Settings(debug=True)
    on = to_symptom()
    records = store.list_debug_records()
    assert records and all(r["owner"] == "anonymous:api" for r in records)
    assert any(r.get("session_id") == on for r in records)
    api.overrides[get_settings] = lambda: Settings(debug=False)
    before = store.count_debug_records()
    to_symptom()
    assert store.count_debug_records() == before


def test_the_real_server_answers_over_http(db_url):
    with uvicorn_api(db_url, start_timeout=60) as (base, health):
        assert health is not None, "server did not come up"
        assert health.json()["status"] == "ok" and health.json()["db"] == "sqlite"
        r = httpx.post(f"{base}/api/chat", json={}, timeout=30)
        assert r.status_code == 200 and r.json()["current_step"] == "vehicle_id"
        sid = r.json()["session_id"]
        assert Store(db_url).get_conversation(sid)["owner"] == "anonymous:api"
        assert json.loads(httpx.get(f"{base}/api/sessions/{sid}", timeout=30).text)["turns"] == 1


def test_a_second_email_header_from_the_client_does_not_open_another_users_session(api, monkeypatch):
    """Issue 23: with a proxy that appends, the caller's own X-Forwarded-Email comes first; only the last
    (the proxy's) counts, so the caller gets the 404 of someone else's session."""
    monkeypatch.setenv("KAIWA_TRUST_PROXY_HEADERS", "1")
    victim = api.post("/api/chat", json={}, headers={"X-Forwarded-Email": "victim@example.jp"}).json()["session_id"]
    forged = [("X-Forwarded-Email", "victim@example.jp"), ("X-Forwarded-Email", "mallory@example.jp")]
    assert api.get(f"/api/sessions/{victim}", headers=forged).status_code == 404
    joined = {"X-Forwarded-Email": "victim@example.jp, mallory@example.jp"}
    assert api.get(f"/api/sessions/{victim}", headers=joined).status_code == 404
    assert api.get(f"/api/sessions/{victim}", headers={"X-Forwarded-Email": "victim@example.jp"}).status_code == 200


def test_an_api_turn_reads_its_transcript_once(api, monkeypatch):
    """Issue #25: the review intake after a turn takes the transcript the turn stored instead of reading it
    again; the turn itself reads the turns once (to refresh the transcript and diff its write). Counted."""
    from core.store.store import Store

    sid = post(api)["session_id"]
    post(api, session_id=sid, action="select_vehicle", action_value=MIRAI)
    reads = []
    with monkeypatch.context() as patched:
        for name in ("chat_entries", "entry_hashes"):
            real = getattr(Store, name)
            patched.setattr(Store, name, lambda self, *a, _real=real, _name=name, **k: reads.append(_name)
                            or _real(self, *a, **k))
        body = post(api, session_id=sid, action="confirm_photo", action_value="yes")
    assert body["current_step"] == "free_text" and reads == ["chat_entries"]
    response = api.get(f"/api/sessions/{sid}")
    assert response.status_code == 200, response.text
    assert response.json()["turns"] == 5 and response.json()["current_step"] == "free_text"


def test_an_api_turn_hands_over_to_a_thread_once(api, retriever, monkeypatch):
    """Issue #25: FastAPI ran each plain ``def`` dependency and the route's response check in its thread
    pool, eleven hand-overs per ``POST /api/chat`` (each one waiting for the GIL while other turns compute);
    the dependencies run in the event loop now and the turn is handed to a thread once. Counted."""
    import anyio.to_thread

    async def fast_retriever():
        return retriever

    async def offline():
        return OfflineClient()

    api.overrides[get_retriever] = fast_retriever  # as the real dependencies are: async
    api.overrides[get_client] = offline
    sid = post(api)["session_id"]  # the first request opens the process's store (in the pool)
    handed: list[str] = []
    real = anyio.to_thread.run_sync

    async def counting(func, *args, **kwargs):
        handed.append(getattr(func, "__name__", repr(func)))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    body = post(api, session_id=sid, action="select_vehicle", action_value=MIRAI)
    assert body["current_step"] == "photo_confirm" and len(handed) == 1


def test_an_api_turn_solves_each_dependency_once_and_validates_its_body_once(api, retriever, monkeypatch):
    """Issue #25: FastAPI solves a dependency's whole sub-graph again for every route parameter that names
    it (a fresh ``Response`` each time), even when its value then comes from the request's cache: the route
    took 16 solves per turn (the store twice, the caller three times, the auth settings four). One
    dependency for the turn solves each replaceable one once: 8. The body FastAPI validated is handed to the
    flow as it is, not dumped and validated into a ``ChatRequest`` again. Counted."""
    import fastapi.dependencies.utils as fastapi_utils
    import fastapi.routing as fastapi_routing

    from core.diagnosis.models import ChatRequest

    sid = post(api)["session_id"]
    solved: list[str] = []
    real = fastapi_utils.solve_dependencies

    async def counting(*, dependant, **kwargs):
        solved.append(getattr(dependant.call, "__name__", "route"))
        return await real(dependant=dependant, **kwargs)

    validated: list[object] = []
    real_validate = ChatRequest.model_validate.__func__

    def validate(cls, obj, *args, **kwargs):
        validated.append(obj)
        return real_validate(cls, obj, *args, **kwargs)

    monkeypatch.setattr(fastapi_utils, "solve_dependencies", counting)
    monkeypatch.setattr(fastapi_routing, "solve_dependencies", counting)
    monkeypatch.setattr(ChatRequest, "model_validate", classmethod(validate))
    body = post(api, session_id=sid, action="select_vehicle", action_value=MIRAI)
    assert body["current_step"] == "photo_confirm"
    assert len(solved) == 8 and len(set(solved)) == 8, solved  # the route, the turn and its six, each once
    assert validated == []


def test_the_api_server_parses_http_with_httptools():
    """Issue #25: ``uvicorn api.main:app`` parses requests with httptools when it is installed, else with h11
    (measured 0.1-0.2 ms more CPU per request); httptools is a requirement of the project now, not only a
    package something else happened to install."""
    import uvicorn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    config = uvicorn.Config(app)  # the command's defaults: --http auto
    config.load()
    assert config.http_protocol_class is HttpToolsProtocol
