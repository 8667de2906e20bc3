"""The ``fake_openai`` fixture: a started :class:`FakeOpenAI` on 127.0.0.1, stopped after the test."""
from __future__ import annotations

import pytest

from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
def fake_openai():
    with FakeOpenAI() as server:
        yield server
