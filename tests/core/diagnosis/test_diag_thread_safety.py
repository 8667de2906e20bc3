"""Flow services shared by threads: no session's text reaches another session's debug log or client.

Each of 10 threads runs its own session through one shared service with its own client and log;
the user's text carries a session tag, the client waits a little inside every call (so requests
really overlap) and remembers the tags it was sent. Before the per-request context, 7–8 of 10
sessions found another session's tag in their log.
"""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from diagnosis_fakes import MIRAI, FakeRetriever, Hit

from core.diagnosis import ChatRequest, ChatService, InMemorySessionStore
from core.llm.base import LLMRequest, LLMResponse
from core.llm.offline import OfflineClient

N = 10


def tag(i: int) -> str:
    return f"SESSION{i:02d}TAG"


class SlowTaggedClient:
    """The offline policies, after a short pause; records the session tags in what it was sent."""

    name = "offline"
    model = "rules-v1"

    def __init__(self):
        self.inner = OfflineClient()
        self.seen: set[str] = set()

    def complete(self, request: LLMRequest) -> LLMResponse:
        text = json.dumps([request.messages, getattr(request, "context", None)], ensure_ascii=False, default=str)
        self.seen |= {tag(i) for i in range(N) if tag(i) in text}
        time.sleep(0.005)
        return self.inner.complete(request)


def foreign_tags(i: int, blob: str) -> set[str]:
    return {tag(j) for j in range(N) if j != i and tag(j) in blob}


def test_shared_chat_service_keeps_sessions_apart():
    retriever = FakeRetriever([Hit(section_id=f"{MIRAI}:s001", section="エアコン", score=0.6)])
    service = ChatService(OfflineClient(), retriever=retriever, store=InMemorySessionStore())
    barrier = threading.Barrier(N)
    logs = [[] for _ in range(N)]
    clients = [SlowTaggedClient() for _ in range(N)]

    def run(i: int) -> str:
        kw = {"client": clients[i], "log": logs[i]}
        barrier.wait()
        sid = service.start(**kw).session_id
        barrier.wait()
        service.process(ChatRequest(session_id=sid, action="select_vehicle", action_value=MIRAI), **kw)
        barrier.wait()
        service.process(ChatRequest(session_id=sid, action="confirm_photo", action_value="yes"), **kw)
        barrier.wait()
        service.process(ChatRequest(session_id=sid, message=f"エアコンの風が弱い {tag(i)}"), **kw)
        barrier.wait()
        service.process(ChatRequest(session_id=sid, message=f"ずっと弱いままです {tag(i)}"), **kw)
        return sid

    with ThreadPoolExecutor(N) as pool:
        sids = list(pool.map(run, range(N), timeout=120))
    assert len(set(sids)) == N
    leaked = {i: foreign_tags(i, json.dumps(logs[i], ensure_ascii=False, default=str)) for i in range(N)}
    assert leaked == {i: set() for i in range(N)}
    for i in range(N):
        assert logs[i], f"session {i} logged nothing"
        assert tag(i) in json.dumps(logs[i], ensure_ascii=False, default=str)
        assert all(r.get("session_id") in (None, "", sids[i]) for r in logs[i])
        assert clients[i].seen == {tag(i)}, f"client {i} was sent {clients[i].seen}"
        assert tag(i) in service.get_session(sids[i]).symptom_text


def test_per_call_client_and_log_do_not_stick():
    """A client / log passed to one call is not used by a later call that passes none."""
    default_log: list = []
    service = ChatService(OfflineClient(), retriever=FakeRetriever(), log=default_log)
    r = service.start()
    mine: list = []
    other = SlowTaggedClient()
    service.process(ChatRequest(session_id=r.session_id, action="select_vehicle", action_value=MIRAI),
                    client=other, log=mine)
    service.process(ChatRequest(session_id=r.session_id, action="confirm_photo", action_value="yes"))
    n_mine = len(mine)
    service.process(ChatRequest(session_id=r.session_id, message=f"エアコンの風が弱い {tag(1)}"))
    assert len(mine) == n_mine and other.seen == set()
    assert tag(1) in json.dumps(default_log, ensure_ascii=False, default=str)
    assert service.ctx.log is default_log and service.ctx.rag_cache == {}


def test_retriever_is_built_once_for_concurrent_requests():
    built = []

    def factory():
        time.sleep(0.05)
        built.append(1)
        return FakeRetriever()

    service = ChatService(OfflineClient(), retriever_factory=factory)

    def run(i: int) -> None:
        r = service.start()
        service.process(ChatRequest(session_id=r.session_id, action="select_vehicle", action_value=MIRAI))
        service.process(ChatRequest(session_id=r.session_id, action="confirm_photo", action_value="yes"))
        service.process(ChatRequest(session_id=r.session_id, message=f"エアコンの風が弱い {tag(i)}"))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(run, range(4), timeout=120))
    assert len(built) == 1


@pytest.mark.parametrize("flow", ["faq", "knowledge"])
def test_faq_and_knowledge_turns_keep_sessions_apart(flow):
    """The FAQ and knowledge flows build their context per call; one shared client is safe too."""
    from core.faq.flow import ask, start_session
    from core.knowledge.session import submit_turn

    client = SlowTaggedClient()
    barrier = threading.Barrier(N)
    logs = [[] for _ in range(N)]

    def run(i: int) -> None:
        barrier.wait()
        if flow == "faq":
            ask(start_session(f"faq-{i}"), f"オイル交換の目安を教えて {tag(i)}", client=client, log=logs[i])
        else:
            submit_turn([], [], f"解約の条件をまとめたい {tag(i)}", [], client, log=logs[i], session_id=f"k-{i}")

    with ThreadPoolExecutor(N) as pool:
        list(pool.map(run, range(N), timeout=120))
    for i in range(N):
        blob = json.dumps(logs[i], ensure_ascii=False, default=str)
        assert logs[i] and not foreign_tags(i, blob), (i, foreign_tags(i, blob))
