"""The tests clean up after themselves in the shared PostgreSQL cluster: each scratch database a test makes is
recorded and dropped when its module ends (a full run made hundreds and filled a CI machine's disk), and a
database this process did not make (a benchmark's in the same cluster) is never dropped."""
from __future__ import annotations

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from core.store.db import create_scratch_database
from tests.helpers.pg import CREATED, drop_created_since, shared_pg_url


def _names(admin_url: str) -> set[str]:
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            return set(conn.execute(text("SELECT datname FROM pg_database")).scalars())
    finally:
        admin.dispose()


def test_a_scratch_database_is_recorded_and_dropped_and_another_processs_is_kept():
    admin_url = shared_pg_url()
    others = make_url(admin_url).set(database="kaiwa_bench_not_ours")
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:  # made as another process would: not through create_scratch_database
        conn.execute(text('DROP DATABASE IF EXISTS "kaiwa_bench_not_ours"'))
        conn.execute(text('CREATE DATABASE "kaiwa_bench_not_ours"'))
    mark = len(CREATED)
    url = create_scratch_database(admin_url)
    engine = create_engine(url)
    held = engine.connect()  # a test's engine still holding a connection does not stop the drop
    held.execute(text("SELECT 1"))
    assert CREATED[mark:] == [(admin_url, url)]
    assert make_url(url).database in _names(admin_url)
    drop_created_since(mark)
    held.invalidate()  # the server closed it
    engine.dispose()
    names = _names(admin_url)
    assert make_url(url).database not in names and CREATED[mark:] == []
    assert others.database in names
    with admin.connect() as conn:
        conn.execute(text('DROP DATABASE "kaiwa_bench_not_ours"'))
    admin.dispose()
