"""A user turn of several model calls (FAQ graph, diagnosis step) shares one deadline: a stalled
server cannot make a turn take one deadline per call (the FAQ test counts the requests: without the
shared deadline each of its calls would still be sent). Bounds are deliberately wide."""
import time

from core.diagnosis import ChatRequest, ChatService
from core.faq.flow import ask, start_session
from tests.core.diagnosis.diagnosis_fakes import MIRAI, FakeRetriever


def test_a_faq_turn_shares_one_deadline_across_its_calls(fake_openai):
    fake_openai.set("stall", seconds=30)
    client = fake_openai.client(timeout=30, turn_deadline=1)
    started = time.monotonic()
    result = ask(start_session("s1"), "オイル交換の目安は？", client=client)
    assert time.monotonic() - started < 10
    assert result.outcome == "fallback" and result.message
    assert fake_openai.count == 1  # once the turn's deadline passed, no later call was even sent


def test_a_diagnosis_step_shares_one_deadline_across_its_calls(fake_openai):
    fake_openai.set("stall", seconds=30)
    client = fake_openai.client(timeout=30, turn_deadline=1)
    service = ChatService(client, retriever=FakeRetriever())
    sid = service.start().session_id
    service.process(ChatRequest(session_id=sid, action="select_vehicle", action_value=MIRAI))
    service.process(ChatRequest(session_id=sid, action="confirm_photo", action_value="yes"))
    started = time.monotonic()
    response = service.process(ChatRequest(session_id=sid, message="走行中に異音がする"))
    assert time.monotonic() - started < 10
    assert response.prompt.message and response.fallback  # a safe answer, not a hang or a traceback
