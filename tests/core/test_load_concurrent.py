"""Load: 50 concurrent sessions across the three flows, over the real openai SDK, against the fake
OpenAI-compatible server with 10 % random faults and 0–200 ms latency, all writing to one store.

The server answers each task with the offline provider's own answer for it (recorded once), and puts
the session's marker from the request into the knowledge turn's message, so crossed wires show up.
Checked: no exception escapes, no session's data (stored turns, debug records) holds another session's
marker, no invalid turn is stored as accepted, and every user turn is stored with an answer or a
clearly typed failure. Bounded: a fixed number of turns, each with its own deadline.
"""
from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from core.diagnosis.conversation import DiagnosisConversations
from core.diagnosis.models import ChatRequest, ChatResponse
from core.faq.conversation import FAQConversations
from core.faq.flow import OUTCOMES
from core.faq.kb import KnowledgeBase
from core.knowledge.conversation import KnowledgeConversations
from core.knowledge.turn import entry_schema, turn_schema
from core.llm.offline import OfflineClient
from core.llm.strategies import STRUCTURED_OUTPUT, TOOL_CALL
from core.store import get_store
from core.store.debug_sink import StoredDebugLog
from core.validation import parse_and_validate_turn
from tests.core.diagnosis.diagnosis_fakes import MIRAI, KeywordManualRetriever
from tests.core.faq.faq_fakes import ARTICLES, FakeRetriever
from tests.fakes.openai_server import Fault, FakeOpenAI

SESSIONS = 50
FAULT_RATE = 0.10
MARKER = re.compile(r"SESSION-(\d+)-Z")
FAULTS = [Fault("server_error"), Fault("rate_limit", {"retry_after": 0}), Fault("unavailable", {"retry_after": 0}),
          Fault("html"), Fault("empty_choices"), Fault("not_chat"), Fault("length"), Fault("refusal_null")]


class RecordingOffline(OfflineClient):
    """The offline provider, keeping its first answer per task (what the fake server will reply)."""

    def __init__(self):
        super().__init__()
        self.answers: dict[str, str] = {}

    def complete(self, request):
        response = super().complete(request)
        self.answers.setdefault(request.task, response.content or response.tool_arguments or "")
        return response


class FaultyServer(FakeOpenAI):
    """Answers like the offline provider, 0–200 ms late, with a random fault on ``rate`` of requests."""

    def __init__(self, answers: dict[str, str], *, rate: float, seed: int = 20261122):
        super().__init__(reply=self._reply)
        self.answers = answers
        self.rate = rate
        self.rng = random.Random(seed)
        self.rng_lock = threading.Lock()
        self.faults: Counter[str] = Counter()

    def _reply(self, body: dict) -> str:
        fmt = (body.get("response_format") or {}).get("json_schema") or {}
        name = fmt.get("name") or ((body.get("tools") or [{}])[0].get("function") or {}).get("name", "")
        text = self.answers.get(name, "{}")  # a task the recording never met: an invalid answer
        if name == "knowledge_llm_turn":
            said = " ".join(str(m.get("content") or "") for m in body.get("messages", []) if m.get("role") == "user")
            markers = MARKER.findall(said)
            data = json.loads(text)
            data["assistant_message"] = f"SESSION-{markers[-1]}-Z について承りました。" if markers else "承りました。"
            text = json.dumps(data, ensure_ascii=False)
        return text

    def _answer(self, handler, fault, body):
        with self.rng_lock:
            delay = self.rng.uniform(0.0, 0.2)
            if self.rng.random() < self.rate:
                fault = self.rng.choice(FAULTS)
        self.faults[fault.kind] += 1
        time.sleep(delay)
        return super()._answer(handler, fault, body)


def _record_offline_answers(kb) -> dict[str, str]:
    recorder = RecordingOffline()
    store = get_store()
    knowledge = KnowledgeConversations(store, "recorder")
    cid = knowledge.new()
    chat, outputs = [], []
    knowledge.submit(cid, chat, outputs, "業務委託契約の第8条（損害賠償）で上限がない点が問題でした。", [], recorder)
    faq = FAQConversations(store, "recorder")
    fid, state = faq.new()
    faq.ask(fid, state, [], "オイル交換の目安は？", client=recorder, kb=kb)
    diag = DiagnosisConversations(store, client=recorder, retriever=KeywordManualRetriever(), owner="recorder")
    transcript: list = []
    r = diag.start(transcript)
    for req in (dict(action="select_vehicle", action_value=MIRAI), dict(action="confirm_photo", action_value="yes"),
                dict(message="走行中にカラカラと異音がする"), dict(message="はい")):
        r = diag.send(transcript, ChatRequest(session_id=r.session_id, **req), prompt=r.prompt, client=recorder)
    return recorder.answers


def _knowledge_session(n: int, server: FaultyServer) -> tuple[str, str, int]:
    client = server.client(strategies=(STRUCTURED_OUTPUT, TOOL_CALL), timeout=5, turn_deadline=15)
    store = get_store()
    conv = KnowledgeConversations(store, f"user{n}")
    cid = conv.new()
    chat: list = []
    outputs: list = []
    log = StoredDebugLog(store, f"user{n}")
    texts = [f"SESSION-{n}-Z 業務委託契約の損害賠償条項について", f"SESSION-{n}-Z 上限がありませんでした",
             f"SESSION-{n}-Z 委託料総額を上限にする方針です"]
    for text in texts:
        conv.submit(cid, chat, outputs, text, [], client, log=log)
    return "knowledge", cid, len(texts)


def _faq_session(n: int, server: FaultyServer, kb) -> tuple[str, str, int]:
    client = server.client(strategies=(STRUCTURED_OUTPUT, TOOL_CALL), timeout=5, turn_deadline=15)
    store = get_store()
    conv = FAQConversations(store, f"user{n}")
    cid, state = conv.new()
    chat: list = []
    log = StoredDebugLog(store, f"user{n}")
    texts = [f"SESSION-{n}-Z オイル交換の目安は？", f"SESSION-{n}-Z タイヤの空気圧は？"]
    for text in texts:
        state = conv.ask(cid, state, chat, text, client=client, kb=kb, log=log).state
    return "faq", cid, len(texts)


def _diagnosis_session(n: int, server: FaultyServer) -> tuple[str, str, int]:
    client = server.client(strategies=(STRUCTURED_OUTPUT, TOOL_CALL), timeout=5, turn_deadline=15)
    store = get_store()
    log = StoredDebugLog(store, f"user{n}")
    conv = DiagnosisConversations(store, client=client, retriever=KeywordManualRetriever(), owner=f"user{n}")
    transcript: list = []
    r = conv.start(transcript, client=client, log=log)
    sid = r.session_id
    requests = [dict(action="select_vehicle", action_value=MIRAI), dict(action="confirm_photo", action_value="yes"),
                dict(message=f"SESSION-{n}-Z 走行中にカラカラと異音がする"), dict(message=f"SESSION-{n}-Z はい")]
    for req in requests:
        r = conv.send(transcript, ChatRequest(session_id=sid, **req), prompt=r.prompt, client=client, log=log)
        sid = r.session_id
    return "diagnosis", sid, len(requests)


@pytest.fixture
def kb():
    return KnowledgeBase(ARTICLES, retriever=FakeRetriever())


def test_fifty_concurrent_sessions_with_random_faults(kb):
    answers = _record_offline_answers(kb)
    with FaultyServer(answers, rate=FAULT_RATE) as server:
        jobs = []
        with ThreadPoolExecutor(max_workers=SESSIONS) as pool:
            for n in range(SESSIONS):
                kind = ("knowledge", "faq", "diagnosis")[n % 3]
                if kind == "knowledge":
                    jobs.append((n, pool.submit(_knowledge_session, n, server)))
                elif kind == "faq":
                    jobs.append((n, pool.submit(_faq_session, n, server, kb)))
                else:
                    jobs.append((n, pool.submit(_diagnosis_session, n, server)))
            results = {n: future.result(timeout=600) for n, future in jobs}  # an escaped exception fails here
        injected = sum(v for k, v in server.faults.items() if k != "ok")
        total = server.count

    print(f"\nload: {SESSIONS} sessions, {total} requests, {injected} faults injected {dict(server.faults)}")
    assert total > 3 * SESSIONS and injected > 0.04 * total  # the faults really happened
    store = get_store()
    for n, (flow, cid, sent) in results.items():
        own = f"SESSION-{n}-Z"
        turns = store.list_turns(cid)
        dumped = json.dumps([t["entry"] for t in turns], ensure_ascii=False)
        assert {m for m in MARKER.findall(dumped)} <= {str(n)}, f"{flow} {n} holds another session's data"
        assert own in dumped
        for record in store.list_debug_records(conversation_id=cid):
            assert {m for m in MARKER.findall(json.dumps(record, ensure_ascii=False))} <= {str(n)}
        if flow == "knowledge":
            users = [t for t in turns if t["role"] == "user"]
            answers_ = [t for t in turns if t["role"] == "assistant"]
            assert len(users) == sent and len(answers_) == sent  # every turn stored, answered or failed
            for turn in answers_:
                if turn["ok"]:  # accepted turns are valid and answer this session
                    assert parse_and_validate_turn(json.dumps(turn["turn_json"], ensure_ascii=False), turn_schema(),
                                         entry_schema()).ok
                    assert own in turn["entry"]["content"]
                else:
                    assert turn["error_type"] and turn["entry"]["content"]  # a typed, labelled failure
        elif flow == "faq":
            assert len(turns) == sent
            assert all(t["entry"]["outcome"] in OUTCOMES and t["entry"]["message"] for t in turns)
        else:
            last = store.get_conversation(cid)["state"]["last_response"]
            ChatResponse.model_validate(last)  # the stored response is a valid one
            assert sum(1 for t in turns if t["role"] == "user") >= 2  # typed turns stored (buttons too)
            assert all(t["entry"].get("message") for t in turns if t["role"] == "assistant")
