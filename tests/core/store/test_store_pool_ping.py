"""Issue #25: a pooled PostgreSQL connection is pinged before use only after it sat idle
(``core.store.db.PING_AFTER_IDLE_S``), not on every checkout (a round trip before each of a chat turn's
transactions); a dead one that waited is still found and replaced. Counted, never timed."""
from __future__ import annotations

from sqlalchemy import create_engine, text

from core.store import db
from core.store.db import create_scratch_database
from core.store.store import Store
from tests.helpers.pg import shared_pg_url


def _counting_pings(store: Store) -> list[int]:
    pings: list[int] = []
    real = store.engine.dialect.do_ping

    def do_ping(dbapi_connection):
        pings.append(1)
        return real(dbapi_connection)

    store.engine.dialect.do_ping = do_ping  # type: ignore[method-assign]
    return pings


def test_a_busy_connection_is_not_pinged_on_every_checkout():
    store = Store(create_scratch_database(shared_pg_url()))
    try:
        pings = _counting_pings(store)
        for _ in range(20):  # twenty transactions one after the other: the pool hands back a connection just used
            with store.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        assert len(pings) <= 1  # only a connection the pool opened anew is pinged
    finally:
        store.engine.dispose()


def test_a_connection_that_waited_and_died_is_replaced(monkeypatch):
    url = create_scratch_database(shared_pg_url())
    store = Store(url)
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with store.engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        with admin.connect() as conn:  # the server drops the pooled connection while it waits
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        monkeypatch.setattr(db, "PING_AFTER_IDLE_S", 0.0)  # it waited long enough to be pinged
        pings = _counting_pings(store)
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar() != pid
        assert len(pings) >= 1
    finally:
        admin.dispose()
        store.engine.dispose()
