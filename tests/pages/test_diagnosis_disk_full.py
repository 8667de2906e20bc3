"""車両問診 with SQLite writes failing (a full disk, simulated by a store whose writes raise SQLite's
"database or disk is full", ``tests/helpers/failing_writes.py``) (issue 23): the page shows the outage
notice and keeps the message, 「再送信」 is disabled while writes fail and enabled on the first rerun after
they work again, and the kept message is then stored; ``/healthz`` says 503 while writes fail."""
from __future__ import annotations

from fastapi.testclient import TestClient
from streamlit.testing.v1 import AppTest

from api.main import app as api_app
from api.main import get_store as api_get_store
from core.store import get_store
from tests.helpers.failing_writes import failing_writes
from tests.pages.conftest import APP
from tests.pages.test_diagnosis_page import MIRAI

OUTAGE = "データベースに接続できない（または書き込めない）"


def button(at, label):
    return next(b for b in at.button if b.label == label)


def ok(at):
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_full_disk_shows_the_notice_and_resend_comes_back_with_the_disk(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'kaiwa.db'}"
    monkeypatch.setenv("KAIWA_DB_URL", url)
    at = AppTest.from_file(APP, default_timeout=120)
    ok(at.run())
    ok(at.switch_page("pages/diagnosis.py").run())
    ok(at.button(key=f"diag_vehicle_{MIRAI}").click().run())
    ok(at.button(key="diag_choice_yes").click().run())
    sid = at.session_state["diagnosis_conversation_id"]
    store = get_store(url)
    before = store.chat_entries(sid)
    with failing_writes(store, ("INSERT",)) as disk:  # rows rewritten in place still work
        disk.on()
        ok(at.chat_input(key="diag_input").set_value("エアコンの風が弱い").run())
        assert any(OUTAGE in w.value for w in at.warning), [w.value for w in at.warning]
        assert any(t.value == "エアコンの風が弱い" for t in at.text) and button(at, "再送信").disabled
        assert store.chat_entries(sid) == before
        ok(at.run())  # still failing (the heartbeat row alone could be rewritten): still down, still disabled
        assert at.session_state["db_outage"] is True and button(at, "再送信").disabled
        disk.off()  # space again: the next rerun notices by itself
        ok(at.run())
        assert not button(at, "再送信").disabled and not any(OUTAGE in w.value for w in at.warning)
        ok(button(at, "再送信").click().run())
    users = [e["text"] for e in store.chat_entries(sid) if e["role"] == "user"]
    assert users[-1] == "エアコンの風が弱い" and not [b for b in at.button if b.label == "再送信"]


def test_healthz_is_503_when_the_sqlite_disk_has_no_room(tmp_path, monkeypatch):
    from core.store import base

    store = get_store(f"sqlite:///{tmp_path / 'kaiwa.db'}")
    client = TestClient(api_app, raise_server_exceptions=False)
    api_app.dependency_overrides[api_get_store] = lambda: store
    try:
        assert client.get("/healthz").status_code == 200
        monkeypatch.setattr(base.shutil, "disk_usage", lambda path: type("U", (), {"free": 4096})())
        down = client.get("/healthz")
        assert down.status_code == 503 and down.json()["db_writable"] is False
    finally:
        api_app.dependency_overrides.clear()


def test_healthz_is_503_while_writes_fail_even_when_the_probe_row_can_be_rewritten(tmp_path):
    store = get_store(f"sqlite:///{tmp_path / 'kaiwa.db'}")
    client = TestClient(api_app, raise_server_exceptions=False)
    api_app.dependency_overrides[api_get_store] = lambda: store
    try:
        assert client.get("/healthz").status_code == 200
        with failing_writes(store, ("INSERT",)) as disk:  # rows rewritten in place still work
            disk.on()
            assert client.get("/healthz").status_code == 200  # the heartbeat row alone is still rewritten…
            assert client.post("/api/chat", json={}).status_code == 503  # …but a turn cannot be stored
            down = client.get("/healthz")
            assert down.status_code == 503 and down.json()["db_writable"] is False
            disk.off()
            assert client.get("/healthz").status_code == 200
    finally:
        api_app.dependency_overrides.clear()
