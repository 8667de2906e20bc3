"""A database outage is a notice, not a traceback (``ui.outage``): Streamlit's own error details are off,
/healthz answers 503 while a real PostgreSQL (a throwaway cluster, ``tests/helpers/pg.py``) is stopped and
200 once it is started again, and an SQLite file that cannot be written keeps the FAQ question for
「再送信」. Every page with PostgreSQL stopped and started under a real browser, where ``app.py`` runs on
every rerun (AppTest reruns only the page), is ``tests/e2e/test_e2e_db_outage.py``."""
from __future__ import annotations

import tempfile
import tomllib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url
from streamlit.testing.v1 import AppTest

from api.main import app as api_app
from api.main import get_store as api_get_store
from core.store import get_store
from core.store.db import create_scratch_database, create_store_engine
from tests.helpers.pg import ThrowawayPostgres

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def cluster():
    # not under pytest's tmp dir: that is root-only, and the server runs as postgres
    pg = ThrowawayPostgres(Path(tempfile.mkdtemp(prefix="kaiwa-outage-pg-")))
    yield pg
    pg.destroy()


@pytest.fixture
def pg_url(cluster, monkeypatch):
    if not cluster.running():
        cluster.start()
    url = create_scratch_database(cluster.url)
    monkeypatch.setenv("KAIWA_DB_URL", url)
    yield url
    if not cluster.running():
        cluster.start()


def console() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def ok(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not any("Traceback" in m.value or "OperationalError" in m.value for m in at.markdown)
    return at


def button(at, label):
    return next(b for b in at.button if b.label == label)


def test_streamlit_error_details_are_not_shown_to_users():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["client"]["showErrorDetails"] == "none"


def test_healthz_is_503_while_postgres_is_down(cluster, pg_url):
    client = TestClient(api_app, raise_server_exceptions=False)
    store = get_store(pg_url)
    api_app.dependency_overrides[api_get_store] = lambda: store
    try:
        assert client.get("/healthz").status_code == 200
        cluster.stop()
        down = client.get("/healthz")
        assert down.status_code == 503 and down.json()["db_readable"] is False
        cluster.start()
        assert client.get("/healthz").status_code == 200  # reconnects by itself
    finally:
        api_app.dependency_overrides.clear()


def test_an_sqlite_file_that_cannot_be_written_keeps_the_question(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'kaiwa.db'}"
    monkeypatch.setenv("KAIWA_DB_URL", url)
    at = ok(console().switch_page("pages/faq.py").run())
    ok(at.chat_input(key="faq_input").set_value("オイル交換の目安は？").run())
    cid = at.session_state["faq_conversation_id"]
    store = get_store(url)
    writable = store._writer
    readonly = create_store_engine(f"sqlite:///file:{make_url(url).database}?mode=ro&uri=true")
    monkeypatch.setattr(store, "_writer", readonly.execution_options(kaiwa_write=True))  # the file turned read-only
    ok(at.chat_input(key="faq_input").set_value("車検の予約はできますか").run())
    assert any("データベースに接続できなかったため" in w.value for w in at.warning)
    assert any(t.value == "車検の予約はできますか" for t in at.text) and button(at, "再送信").disabled
    assert at.session_state["db_outage"] is True and len(store.chat_entries(cid)) == 1
    monkeypatch.setattr(store, "_writer", writable)  # writable again: the next rerun notices by itself
    ok(at.run())
    assert not button(at, "再送信").disabled and at.session_state["db_outage"] is False
    ok(button(at, "再送信").click().run())
    assert [e["user"] for e in store.chat_entries(cid)] == ["オイル交換の目安は？", "車検の予約はできますか"]
    assert not [b for b in at.button if b.label == "再送信"]
