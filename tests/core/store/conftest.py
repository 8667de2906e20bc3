"""The store's one conformance suite runs against every backend: a fresh SQLite file per test, and a
fresh database per test in the PostgreSQL cluster named by ``KAIWA_TEST_PG_URL`` (``.ci/run`` starts a
throwaway one with ``.ci/pg-start``). In CI a missing PostgreSQL is a failure, not a skip."""
from __future__ import annotations

import pytest

from core.identity import ADMIN, OPERATOR, Identity
from core.store.db import create_scratch_database
from core.store.store import Store
from tests.helpers.pg import shared_pg_url


def _pg_database_url() -> str:
    return create_scratch_database(shared_pg_url())


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'kaiwa.db'}"
    return _pg_database_url()


@pytest.fixture
def store(store_url):
    s = Store(store_url)
    yield s
    s.engine.dispose()


@pytest.fixture
def operator() -> Identity:
    return Identity(name="山田", email="yamada@example.jp", source="proxy", roles=frozenset({OPERATOR}))


@pytest.fixture
def admin() -> Identity:
    return Identity(name="管理者", email="admin@example.jp", source="proxy", roles=frozenset({OPERATOR, ADMIN}))
