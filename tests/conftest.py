"""Test-wide switches: never talk to a real model, never sleep in backoff, leave no scratch database behind."""
from __future__ import annotations

import pytest

import core.engine
import core.prompts
from tests.fakes.plugin import fake_openai  # noqa: F401 - fake OpenAI-compatible server fixture
from tests.helpers import watsonx_sdk
from tests.helpers.chroma_server import chroma_backend, chroma_server  # noqa: F401 - a real `chroma run`
from tests.helpers.pg import CREATED, drop_created_since, track_scratch_databases

track_scratch_databases()  # before any test module imports create_scratch_database
watsonx_sdk.ensure()  # the watsonx provider's SDK, from its wheel alone (its dependency list needs a source build)


@pytest.fixture(scope="module", autouse=True)
def _drop_scratch_databases():
    """Each module's scratch PostgreSQL databases are dropped when it ends: a full run makes hundreds
    (≈ 8 MB each, 3 GB in all), which filled a CI machine's disk. Only those this process made are dropped."""
    mark = len(CREATED)
    yield
    drop_created_since(mark)


@pytest.fixture(autouse=True)
def _own_store(monkeypatch, tmp_path):
    """Every test gets its own SQLite store file (never the developer's var/kaiwa.db), and prompts are read
    from the files until the test opens its store (``get_store()`` serves that store's saved versions)."""
    monkeypatch.setenv("KAIWA_DB_URL", f"sqlite:///{tmp_path / 'kaiwa-test.db'}")
    for var in ("KAIWA_ADMINS", "KAIWA_ADMIN_PASSWORD", "KAIWA_TRUST_PROXY_HEADERS", "KAIWA_REVIEWERS", "KAIWA_REVIEW_SAMPLE"):
        monkeypatch.delenv(var, raising=False)
    core.prompts.set_prompt_source(None)
    yield
    core.prompts.set_prompt_source(None)


@pytest.fixture(autouse=True)
def _offline_and_fast(monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "KAIWA_PROVIDER", "KAIWA_STRATEGIES", "CHROMA_HOST",
                "CHROMA_DATABASE"):
        monkeypatch.delenv(var, raising=False)
    sleeps: list[float] = []
    monkeypatch.setattr(core.engine.DEFAULT_RETRY, "sleep", sleeps.append)
    yield sleeps
