"""Diagnosis test fixtures: contexts and services over fake retrievers, and the real manual
retriever built once per test session."""
from __future__ import annotations

import pytest
from diagnosis_fakes import MIRAI, FakeRetriever, KeywordManualRetriever, TaskClient

from core.diagnosis import ChatRequest, ChatService, ChatStep, DiagnosisContext, SessionState
from core.diagnosis.session_store import InMemorySessionStore
from core.llm.offline import OfflineClient


@pytest.fixture(scope="session")
def keyword_retriever():
    return KeywordManualRetriever()


@pytest.fixture(scope="session")
def real_retriever():
    """The production retriever (persisted index under var/chroma; built on the first run)."""
    from core.rag import get_manual_retriever

    return get_manual_retriever()


@pytest.fixture
def make_ctx():
    def build(client=None, retriever=None, log=None, **kwargs):
        return DiagnosisContext(client=client or OfflineClient(), retriever=retriever if retriever is not None
                                else FakeRetriever(), log=log, **kwargs)
    return build


@pytest.fixture
def session_at():
    """A session already at ``step`` with the Miraiba selected and a symptom."""
    def build(step: ChatStep = ChatStep.DIAGNOSING, symptom: str = "走行中に異音がする", **fields):
        session = SessionState(session_id="s-test", current_step=step, vehicle_id=MIRAI, make="カイワ自動車",
                               model="ミライバ ハイブリッド", year=2022, symptom_text=symptom)
        for key, value in fields.items():
            setattr(session, key, value)
        return session
    return build


class Driver:
    """A ChatService plus the session id, with one-liners for messages and buttons."""

    def __init__(self, service: ChatService):
        self.service = service
        self.last = service.start()
        self.sid = self.last.session_id

    def msg(self, text: str):
        self.last = self.service.process(ChatRequest(session_id=self.sid, message=text))
        return self.last

    def act(self, action: str, value=None):
        self.last = self.service.process(ChatRequest(session_id=self.sid, action=action, action_value=value))
        return self.last

    def rewind(self, turn: int):
        self.last = self.service.process(ChatRequest(session_id=self.sid, rewind_to_turn=turn))
        return self.last

    @property
    def session(self) -> SessionState:
        return self.service.get_session(self.sid)

    def to_symptom(self, vehicle: str = MIRAI):
        self.act("select_vehicle", vehicle)
        self.act("confirm_photo", "yes")
        return self.last


@pytest.fixture
def driver():
    def build(client=None, retriever=None, log=None, store=None, **kwargs):
        service = ChatService(client or OfflineClient(), retriever=retriever if retriever is not None else FakeRetriever(),
                              log=log, store=store if store is not None else InMemorySessionStore(), **kwargs)
        return Driver(service)
    return build


@pytest.fixture
def task_client():
    return TaskClient
