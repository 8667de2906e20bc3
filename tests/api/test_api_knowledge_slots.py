"""Ask the knowledge base side by side within a stated limit (issue 23): questions run at once up to
``ASK_SLOTS`` (8) per process; past it ``POST /api/knowledge/ask`` answers 429 with a Japanese message (and
the page keeps the question with the same message). The latency figures: ``python -m bench.ask_concurrency``."""
from __future__ import annotations

import threading

import pytest
from fastapi.testclient import TestClient
from streamlit.testing.v1 import AppTest

from api import knowledge as api_knowledge
from api.main import app
from bench.knowledge_recall import load_library
from core.knowledge import ask_slots
from core.llm.offline import OfflineClient
from core.store import get_store
from core.store.store import Store
from tests.pages.conftest import APP

QUESTION = "相手だけがいつでも契約を解除できる条項には、普段どう対応していますか？"


class GatedIndex:
    """An index whose searches wait until ``n`` of them are in flight at once (else they time out)."""

    def __init__(self, n: int):
        self.barrier = threading.Barrier(n, timeout=20)

    def search(self, *args, **kwargs):
        self.barrier.wait()
        return []


@pytest.fixture
def api(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'library.db'}")
    app.dependency_overrides[api_knowledge.get_store] = lambda: store
    app.dependency_overrides[api_knowledge.get_client] = OfflineClient
    yield TestClient(app)
    app.dependency_overrides.clear()
    store.engine.dispose()


def test_the_limit_is_stated_and_configurable():
    assert ask_slots.ASK_SLOTS == ask_slots.DEFAULT_ASK_SLOTS == 8
    assert ask_slots.ask_slots({"KAIWA_ASK_CONCURRENCY": "3"}) == 3 and ask_slots.ask_slots({"KAIWA_ASK_CONCURRENCY": "0"}) == 8


def test_questions_run_side_by_side_up_to_the_limit(api):
    index = GatedIndex(ask_slots.ASK_SLOTS)
    app.dependency_overrides[api_knowledge.get_index] = lambda: index
    statuses: list[int] = []
    threads = [threading.Thread(target=lambda: statuses.append(api.post("/api/knowledge/ask", json={
        "question": QUESTION}).status_code)) for _ in range(ask_slots.ASK_SLOTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert statuses == [200] * ask_slots.ASK_SLOTS  # all eight were in flight at once (the barrier let them on)


def test_past_the_limit_a_question_gets_429_in_japanese(api, monkeypatch):
    monkeypatch.setattr(ask_slots, "_slots", threading.BoundedSemaphore(1))
    with ask_slots.ask_slot():  # one question in flight, the only slot
        response = api.post("/api/knowledge/ask", json={"question": QUESTION})
    assert response.status_code == 429 and "混み合っています" in response.json()["detail"]
    assert response.headers["Retry-After"] == "2"
    assert api.post("/api/knowledge/ask", json={"question": QUESTION}).status_code == 200  # the slot is free again


def test_the_page_keeps_the_question_when_every_slot_is_taken(monkeypatch):
    load_library(get_store())
    monkeypatch.setattr(ask_slots, "_slots", threading.BoundedSemaphore(1))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page("pages/ask_knowledge.py").run()
    at.text_area(key="ask_question").input(QUESTION)
    with ask_slots.ask_slot():
        at.button[0].click().run()
    assert not at.exception
    assert any("混み合っています" in w.value for w in at.warning)
    assert at.text_area(key="ask_question").value == QUESTION and "ask_last" not in at.session_state
