"""bench.pages.scratch_copies: a run that writes measures copies of the seeded stores, removed after it."""
from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bench.pages import scratch_copies
from core.store.store import Store
from tests.core.store.conftest import _pg_database_url


@pytest.fixture(params=["sqlite", "postgresql"])
def seeded_url(request, tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'seeded.db'}" if request.param == "sqlite" else _pg_database_url()
    store = Store(url)
    store.create_conversation("faq", "bench")
    store.engine.dispose()  # nothing may stay connected to the database a PostgreSQL copy is made from
    return url


def conversations(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM conversations")).scalar()
    finally:
        engine.dispose()


def test_writes_to_the_copies_leave_the_seeded_stores_as_they_were_and_the_copies_go(seeded_url, tmp_path):
    if make_url(seeded_url).get_backend_name() == "sqlite":  # a copy left by a killed run
        (tmp_path / "scratch-7.db-wal").write_bytes(b"left over")
    with scratch_copies({7: seeded_url}) as copies:
        assert copies[7] != seeded_url and conversations(copies[7]) == 1
        store = Store(copies[7])
        store.create_conversation("faq", "bench")
        store.engine.dispose()
        assert conversations(copies[7]) == 2 and conversations(seeded_url) == 1
    copy = make_url(copies[7])
    if copy.get_backend_name() == "sqlite":
        assert sorted(p.name for p in tmp_path.iterdir()) == ["seeded.db"]
    else:
        admin = create_engine(copy.set(database="postgres"))
        try:
            with admin.connect() as conn:
                assert conn.execute(text("SELECT count(*) FROM pg_database WHERE datname = :n"),
                                    {"n": copy.database}).scalar() == 0
        finally:
            admin.dispose()


def test_a_seeded_store_is_settled_once_its_marks_counted_and_on_postgresql_their_table_vacuumed(seeded_url):
    from bench.pages import _settled

    engine = create_engine(seeded_url)
    try:
        with engine.begin() as conn:  # marks of conversations a seed wrote, not counted yet
            conn.execute(text("INSERT INTO rollup_dirty (conversation_id) VALUES (:c)"),
                         [{"c": f"seeded-{i}"} for i in range(3000)])
        postgresql = engine.dialect.name == "postgresql"
        size = "SELECT pg_relation_size('rollup_dirty')" if postgresql else "SELECT 0"
        with engine.connect() as conn:
            before = conn.execute(text(size)).scalar()
        assert _settled(seeded_url) == seeded_url
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM rollup_dirty")).scalar() == 0
            assert conn.execute(text("SELECT value FROM rollup_versions WHERE name = 'conversations'")).scalar() > 0
            if postgresql:  # vacuumed: the emptied table's pages given back, not scanned by every look for marks
                assert before > 8192 and conn.execute(text(size)).scalar() == 0
            versions = dict(conn.execute(text("SELECT name, value FROM rollup_versions")).all())
        with engine.begin() as conn:  # a mark written since: the next measured run counts it, not the settling
            conn.execute(text("INSERT INTO rollup_dirty (conversation_id) VALUES ('later')"))
        assert _settled(seeded_url) == seeded_url  # settled already: left as it is
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM rollup_dirty")).scalar() == 1
            assert dict(conn.execute(text("SELECT name, value FROM rollup_versions")).all()) == versions
    finally:
        engine.dispose()
