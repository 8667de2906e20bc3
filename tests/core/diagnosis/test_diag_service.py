"""ChatService: session get/create, TTL expiry, crash safety, restart, done."""
from __future__ import annotations

from diagnosis_fakes import MIRAI, FakeRetriever, TaskClient

from core.diagnosis import ChatRequest, ChatService, InMemorySessionStore, state_machine
from core.diagnosis.steps.common import NOT_TAKEN_MESSAGE


class Clock:
    now = 0.0

    def __call__(self):
        return self.now


def test_start_creates_a_stored_session():
    store = InMemorySessionStore()
    service = ChatService(TaskClient(), store=store, retriever=FakeRetriever())
    r = service.start()
    assert r.current_step == "vehicle_id" and store.get(r.session_id) is not None


def test_expired_session_starts_over_with_notice():
    clock = Clock()
    service = ChatService(TaskClient(), store=InMemorySessionStore(ttl_seconds=30, clock=clock), retriever=FakeRetriever())
    r = service.start()
    service.process(ChatRequest(session_id=r.session_id, action="select_vehicle", action_value=MIRAI))
    clock.now += 31
    r2 = service.process(ChatRequest(session_id=r.session_id, action="confirm_photo", action_value="yes"))
    assert r2.session_id != r.session_id and r2.current_step == "vehicle_id" and "有効期限" in r2.notice


def test_an_unknown_session_id_is_said_to_be_unknown_not_expired():
    service = ChatService(TaskClient(), store=InMemorySessionStore(), retriever=FakeRetriever())
    r = service.process(ChatRequest(session_id="never-issued", message="ブレーキが効かない"))
    assert r.session_id != "never-issued" and r.current_step == "vehicle_id"
    assert "見つかりません" in r.notice and "有効期限" not in r.notice


def test_request_without_session_id_but_with_an_action_is_processed():
    service = ChatService(TaskClient(), retriever=FakeRetriever())
    r = service.process(ChatRequest(action="select_vehicle", action_value=MIRAI))
    assert r.current_step == "photo_confirm"


def test_handler_crash_returns_fallback_and_keeps_stored_session(monkeypatch):
    service = ChatService(TaskClient(), retriever=FakeRetriever())
    r = service.start()
    service.process(ChatRequest(session_id=r.session_id, action="select_vehicle", action_value=MIRAI))
    before = service.get_session(r.session_id).model_dump(exclude={"updated_at"})

    def boom(session, request, ctx):
        session.vehicle_id = "corrupted"
        raise RuntimeError("bug")

    monkeypatch.setitem(state_machine.STEP_HANDLERS, state_machine.ChatStep.PHOTO_CONFIRM, boom)
    r2 = service.process(ChatRequest(session_id=r.session_id, action="confirm_photo", action_value="yes"))
    assert r2.fallback and r2.prompt.message == NOT_TAKEN_MESSAGE and r2.current_step == "photo_confirm"
    assert service.get_session(r.session_id).model_dump(exclude={"updated_at"}) == before


def test_retriever_failure_is_not_a_crash(driver):
    d = driver(client=TaskClient(), retriever=FakeRetriever(error=True))
    d.to_symptom()
    r = d.msg("エアコンの風が弱い")
    assert r.current_step == "diagnosing" and not r.fallback and r.rag_sources == []
    assert r.manual_coverage == "not_covered" and "ディーラーでの点検を推奨" in r.prompt.message


def test_done_and_restart(driver):
    d = driver(client=TaskClient(), retriever=FakeRetriever())
    d.to_symptom()
    r = d.msg("ブレーキがきかない")
    r = d.act("reserve", "skip")
    assert r.current_step == "done"
    r = d.msg("ありがとう")
    assert r.current_step == "done" and r.prompt.action == "restart"
    sid = d.sid
    r = d.act("restart")
    assert r.current_step == "vehicle_id" and r.session_id != sid  # a new diagnosis is a new session
    old = d.session
    assert old.current_step.value == "done" and old.symptom_text == "ブレーキがきかない"  # left as it was
    d.sid = r.session_id
    s = d.session
    assert s.symptom_text == "" and s.urgency_level is None and s.conversation_history[-1]["role"] == "assistant"


def test_client_and_log_can_be_swapped_per_request():
    service = ChatService(TaskClient(), retriever=FakeRetriever())
    r = service.start()
    log: list = []
    other = TaskClient()
    service.process(ChatRequest(session_id=r.session_id, message="トレック"), client=other, log=log)
    assert other.tasks() == ["choice_judgment"] and log and log[0]["session_id"] == r.session_id


def test_typed_restart_at_done(driver):
    d = driver(client=TaskClient(), retriever=FakeRetriever())
    d.to_symptom()
    d.msg("ブレーキがきかない")
    d.act("reserve", "skip")
    r = d.msg("新しい問診を始めたい")
    assert r.current_step == "vehicle_id" and r.judgment.value == "restart"
    assert r.session_id != d.sid and d.session.current_step.value == "done"


def test_rewind_points(driver):
    from diagnosis_fakes import diag

    d = driver(client=TaskClient({"diagnostic_response": [diag(), diag(message="次は？", question_topic="音の状況")]}),
               retriever=FakeRetriever())
    d.to_symptom()
    assert d.service.rewind_points(d.sid) == []
    d.msg("音がする")
    d.act("answer", "加速するとき")
    assert d.service.rewind_points(d.sid) == [1, 2]
    assert d.service.rewind_points("unknown") == []
