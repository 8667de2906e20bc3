"""Issue #25: on PostgreSQL the store reads in autocommit (no ``BEGIN`` and ``ROLLBACK`` round trips: at READ
COMMITTED each statement took its own snapshot inside a transaction too) and writes the turn lease's one
statement so; a connection handed back by a read is a transaction again for the next write."""
from __future__ import annotations

import pytest
from sqlalchemy import create_engine, select, update

from core.store import tables as t
from core.store.db import create_scratch_database
from core.store.store import Store
from tests.helpers.pg import shared_pg_url


@pytest.fixture
def one_connection_store():
    """A PostgreSQL store whose pool holds one connection: every read and write shares it."""
    url = create_scratch_database(shared_pg_url())
    store = Store(url, engine=create_engine(url, pool_size=1, max_overflow=0))
    yield store
    store.engine.dispose()


def test_a_read_runs_in_autocommit_and_the_next_write_on_its_connection_is_a_transaction(one_connection_store):
    store = one_connection_store
    cid = store.create_conversation("faq", "op")
    with store.read_connection() as conn:
        assert conn.connection.dbapi_connection.autocommit
        assert conn.execute(select(t.conversations.c.id)).scalar() == cid
        assert conn.connection.dbapi_connection.info.transaction_status.name == "IDLE"
    with pytest.raises(RuntimeError), store._write() as conn:
        assert not conn.connection.dbapi_connection.autocommit
        conn.execute(update(t.conversations).where(t.conversations.c.id == cid).values(title="書きかけ"))
        raise RuntimeError("the turn failed half way")
    assert store.get_conversation(cid)["title"] != "書きかけ"  # rolled back: nothing of it stored


def test_the_turn_lease_is_taken_renewed_and_released_in_autocommit(one_connection_store):
    store = one_connection_store
    cid = store.create_conversation("diagnosis", "op")
    states: list[tuple[bool, str]] = []
    from sqlalchemy import event

    def after(conn, cursor, statement, parameters, context, executemany):
        dbapi = conn.connection.dbapi_connection
        states.append((dbapi.autocommit, dbapi.info.transaction_status.name))

    event.listen(store.engine, "after_cursor_execute", after)
    try:
        token = store.acquire_turn(cid, hold=30, wait=0)
        store.renew_turn(cid, token, hold=30)
        store.release_turn(cid, token)
    finally:
        event.remove(store.engine, "after_cursor_execute", after)
    assert states == [(True, "IDLE")] * 3
    assert store.get_conversation(cid)["turn_token"] is None
    assert store.acquire_turn(cid, hold=30, wait=0) is not None  # released: free to take again
