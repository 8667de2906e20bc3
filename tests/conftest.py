"""Test-wide switches: never talk to a real model, never sleep in backoff."""
from __future__ import annotations

import pytest

import core.engine
from tests.fakes.plugin import fake_openai  # noqa: F401 - fake OpenAI-compatible server fixture


@pytest.fixture(autouse=True)
def _offline_and_fast(monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "KAIWA_PROVIDER", "KAIWA_STRATEGIES", "CHROMA_HOST"):
        monkeypatch.delenv(var, raising=False)
    sleeps: list[float] = []
    monkeypatch.setattr(core.engine.DEFAULT_RETRY, "sleep", sleeps.append)
    yield sleeps
