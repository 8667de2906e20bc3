"""The HTTP API's contract on both engines: NUL characters are refused (422), types are strict, every 4xx
has a Japanese ``detail``, a turn that cannot wait for a running one is a 409 that stored nothing, sessions
belong to their proxy-authenticated owner, a restart is a new session, and /healthz checks a write."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from api.main import app, get_client, get_retriever, get_store, get_turn_wait
from core.llm.offline import OfflineClient
from core.store.db import create_scratch_database
from core.store.store import Store
from tests.core.diagnosis.diagnosis_fakes import MIRAI, KeywordManualRetriever
from tests.helpers.pg import shared_pg_url

FORM = {"name": "山田 太郎", "phone": "090-1234-5678", "address": "東京都テスト区1-2-3"}


@pytest.fixture(scope="module")
def retriever():
    return KeywordManualRetriever()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path, monkeypatch) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'api.db'}"
    else:
        url = create_scratch_database(shared_pg_url())
    monkeypatch.setenv("KAIWA_DB_URL", url)
    return url


@pytest.fixture
def api(db_url, retriever):
    store = Store(db_url)
    app.dependency_overrides[get_retriever] = lambda: retriever
    app.dependency_overrides[get_client] = OfflineClient
    app.dependency_overrides[get_store] = lambda: store
    app.dependency_overrides[get_turn_wait] = lambda: 0.3
    client = TestClient(app, raise_server_exceptions=False)
    client.store = store
    yield client
    app.dependency_overrides.clear()
    store.engine.dispose()


def post(api, headers=None, **body) -> dict:
    response = api.post("/api/chat", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def japanese(response) -> str:
    detail = response.json()["detail"]
    assert isinstance(detail, str) and not detail.isascii(), response.text
    return detail


# ---- NUL characters ---------------------------------------------------------------------------
@pytest.mark.parametrize("body, field", [
    ({"message": "ブレーキが\x00変"}, "message"),
    ({"action": "select_vehicle", "action_value": "kaiwa\x00"}, "action_value"),
    ({"action": "submit_booking", "action_value": {"name": "山田\x00"}}, "action_value"),
    ({"action": "submit_booking", "action_value": {"na\x00me": "山田"}}, "action_value"),
    ({"session_id": "abc\x00def", "message": "こんにちは"}, "session_id"),
    ({"action": "select\x00vehicle"}, "action"),
])
def test_a_nul_character_is_refused_with_a_japanese_422_not_a_503(api, body, field):
    sid = post(api)["session_id"]
    r = api.post("/api/chat", json={"session_id": sid, **body})
    assert r.status_code == 422, r.text
    assert "NUL 文字" in japanese(r) and [e["field"] for e in r.json()["errors"]] == [field]
    assert api.get(f"/api/sessions/{sid}").json()["turns"] == 1  # nothing of it was stored


def test_a_nul_character_in_the_session_path_is_a_404(api):
    assert api.get("/api/sessions/abc%00def").status_code == 404


def test_the_store_never_hands_a_nul_to_the_database(api):
    store = api.store  # another path than the API (the console's ?session=, a typed message)
    assert store.get_conversation("abc\x00def") is None
    cid = store.create_conversation("faq", "u", title="題\x00名")
    store.append_turn(cid, {"user": "a\x00b"}, role="exchange", user_input="a\x00b")
    assert store.get_conversation(cid)["title"] == "題名" and store.list_turns(cid)[0]["user_input"] == "ab"


# ---- strict types -----------------------------------------------------------------------------
@pytest.mark.parametrize("body, field, words", [
    ({"rewind_to_turn": True}, "rewind_to_turn", "整数"),
    ({"rewind_to_turn": "0"}, "rewind_to_turn", "整数"),
    ({"rewind_to_turn": 1.0}, "rewind_to_turn", "整数"),
    ({"session_id": 12345}, "session_id", "文字列"),
    ({"message": True}, "message", "文字列"),
    ({"action": "submit_booking", "action_value": {"name": 5}}, "action_value", ""),
])
def test_types_are_strict(api, body, field, words):
    r = api.post("/api/chat", json=body)
    assert r.status_code == 422, r.text
    assert words in japanese(r) and [e["field"] for e in r.json()["errors"]] == [field]


def test_an_integer_rewind_still_works(api):
    sid = post(api)["session_id"]
    post(api, session_id=sid, action="select_vehicle", action_value=MIRAI)
    post(api, session_id=sid, action="confirm_photo", action_value="yes")
    post(api, session_id=sid, message="エアコンの風が弱い")
    assert post(api, session_id=sid, rewind_to_turn=1)["rewound_to_turn"] == 1


# ---- every 4xx in Japanese --------------------------------------------------------------------
def test_every_client_error_has_a_japanese_detail(api):
    cases = [
        api.post("/api/chat", content=b'{"message": "\xff\xfe"}', headers={"content-type": "application/json"}),
        api.post("/api/chat", content=b"\xff\xfe\x00", headers={"content-type": "application/json"}),
        api.post("/api/chat", content=b'{"message": ', headers={"content-type": "application/json"}),
        api.post("/api/chat", content=b'{"message": "x"}', headers={"content-type": "text/plain"}),
        api.post("/api/chat", content=b"", headers={"content-type": "application/json"}),
        api.get("/api/nothing"),
        api.get("/api/chat"),
        api.delete("/api/sessions/abc"),
        api.get("/api/sessions/no-such-session"),
        api.post("/api/chat", content=b"{" + b" " * 70_000 + b"}", headers={"content-type": "application/json"}),
    ]
    assert [r.status_code for r in cases] == [400, 400, 422, 422, 422, 404, 405, 405, 404, 413]
    for r in cases:
        japanese(r)
        assert "Traceback" not in r.text


# ---- one turn at a time -----------------------------------------------------------------------
def test_a_turn_while_another_runs_is_a_409_that_stored_nothing(api):
    sid = post(api)["session_id"]
    post(api, session_id=sid, action="select_vehicle", action_value=MIRAI)
    before = api.get(f"/api/sessions/{sid}").json()
    token = api.store.acquire_turn(sid, hold=60)  # another worker is in the middle of a turn
    r = api.post("/api/chat", json={"session_id": sid, "action": "confirm_photo", "action_value": "yes"})
    assert r.status_code == 409 and "処理しています" in japanese(r)
    after = api.get(f"/api/sessions/{sid}").json()
    assert after["transcript"] == before["transcript"] and after["current_step"] == "photo_confirm"
    api.store.release_turn(sid, token)
    assert post(api, session_id=sid, action="confirm_photo", action_value="yes")["current_step"] == "free_text"


# ---- ownership --------------------------------------------------------------------------------
def test_with_proxy_identity_a_session_belongs_to_its_owner(api, monkeypatch):
    monkeypatch.setenv("KAIWA_TRUST_PROXY_HEADERS", "1")
    sato = {"X-Forwarded-User": "sato", "X-Forwarded-Email": "sato@example.jp"}
    suzuki = {"X-Forwarded-User": "suzuki", "X-Forwarded-Email": "suzuki@example.jp"}
    sid = post(api, headers=sato)["session_id"]
    post(api, headers=sato, session_id=sid, action="select_vehicle", action_value=MIRAI)
    post(api, headers=sato, session_id=sid, action="confirm_photo", action_value="yes")
    post(api, headers=sato, session_id=sid, message="ブレーキペダルが床まで沈む")
    post(api, headers=sato, session_id=sid, action="reserve", action_value="dispatch")
    post(api, headers=sato, session_id=sid, action="submit_booking", action_value=FORM)
    assert api.get(f"/api/sessions/{sid}", headers=sato).status_code == 200

    read = api.get(f"/api/sessions/{sid}", headers=suzuki)
    assert read.status_code == 404 and "見つからない" in japanese(read) and "090" not in read.text
    anonymous = api.get(f"/api/sessions/{sid}")
    assert anonymous.status_code == 404
    cont = api.post("/api/chat", json={"session_id": sid, "action": "booking", "action_value": "confirm"},
                    headers=suzuki)
    assert cont.status_code == 404 and "090" not in cont.text
    assert api.store.list_bookings(conversation_id=sid) == []  # suzuki could not confirm sato's booking
    assert post(api, headers=sato, session_id=sid, action="booking", action_value="confirm")["current_step"] == "done"


def test_without_proxy_identity_every_api_caller_is_the_same_owner(api):
    sid = post(api)["session_id"]
    assert api.get(f"/api/sessions/{sid}").status_code == 200


# ---- restart ----------------------------------------------------------------------------------
def test_restart_through_the_api_is_a_new_session_and_the_old_one_stays(api):
    sid = post(api)["session_id"]
    post(api, session_id=sid, action="select_vehicle", action_value=MIRAI)
    post(api, session_id=sid, action="confirm_photo", action_value="yes")
    post(api, session_id=sid, message="ブレーキペダルが床まで沈む")
    post(api, session_id=sid, action="reserve", action_value="dispatch")
    post(api, session_id=sid, action="submit_booking", action_value=FORM)
    post(api, session_id=sid, action="booking", action_value="confirm")
    old = api.get(f"/api/sessions/{sid}").json()
    new = post(api, session_id=sid, action="restart")
    assert new["session_id"] != sid and new["current_step"] == "vehicle_id"
    again = api.get(f"/api/sessions/{sid}").json()
    assert again["current_step"] == "done" and again["transcript"] == old["transcript"]
    assert again["booking_number"] == old["booking_number"] is not None


# ---- health -----------------------------------------------------------------------------------
def test_healthz_reports_a_database_that_cannot_be_written(api, db_url):
    ok = api.get("/healthz")
    assert ok.status_code == 200 and ok.json()["db_writable"] is True and ok.json()["db_readable"] is True
    if db_url.startswith("sqlite"):
        path = make_url(db_url).database
        readonly = Store(f"sqlite:///file:{path}?mode=ro&uri=true", run_migrations=False)
    else:  # the database turned read-only (a failed-over replica, a full disk's emergency setting)
        admin = create_engine(db_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'ALTER DATABASE "{make_url(db_url).database}" SET default_transaction_read_only = on'))
        admin.dispose()
        readonly = Store(db_url, run_migrations=False)
    app.dependency_overrides[get_store] = lambda: readonly
    try:
        down = api.get("/healthz")
        assert down.status_code == 503, down.text
        assert down.json()["status"] == "error" and down.json()["db_readable"] is True
        assert down.json()["db_writable"] is False and "read" not in down.json()["status"]
    finally:
        readonly.engine.dispose()
