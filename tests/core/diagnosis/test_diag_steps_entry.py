"""VEHICLE_ID, PHOTO_CONFIRM and FREE_TEXT handlers."""
from __future__ import annotations

from diagnosis_fakes import MIRAI, TREK, FakeRetriever, Hit, TaskClient, diag

from core.diagnosis import ChatRequest, ChatStep
from core.diagnosis.steps.free_text import handle_free_text
from core.llm.scripted import ScriptedClient
from core.vehicles import default_catalog


def test_start_lists_catalog_vehicles_with_picture(driver):
    d = driver()
    r = d.last
    assert r.current_step == "vehicle_id" and r.prompt.type == "single_choice" and r.prompt.action == "select_vehicle"
    catalog = default_catalog()
    assert [c.value for c in r.prompt.choices] == [v.vehicle_id for v in catalog]
    first = r.prompt.choices[0]
    assert "カイワ自動車" in first.label and "ミライバ" in first.label and "2022" in first.label
    assert first.icon == "data/vehicles/kaiwa-mirai-hv-2022.svg"


def test_select_vehicle_then_photo_confirm_shows_picture(driver):
    d = driver()
    r = d.act("select_vehicle", TREK)
    assert r.current_step == "photo_confirm"
    assert r.prompt.image == "data/vehicles/kaiwa-trek-4wd-2020.svg"
    assert "トレック" in r.prompt.message and [c.value for c in r.prompt.choices] == ["yes", "no"]
    s = d.session
    assert (s.vehicle_id, s.make, s.model, s.year) == (TREK, "カイワ自動車", "トレック 4WD", 2020)


def test_unknown_vehicle_stays_on_vehicle_id(driver):
    d = driver()
    r = d.act("select_vehicle", "no-such-car")
    assert r.current_step == "vehicle_id" and "見つかりませんでした" in r.prompt.message


def test_typed_vehicle_name_is_judged(driver):
    d = driver()
    r = d.msg("トレック")
    assert r.current_step == "photo_confirm" and d.session.vehicle_id == TREK
    assert r.judgment is not None and r.judgment.method == "structured_output"


def test_photo_no_goes_back_to_vehicle_id_and_clears_vehicle(driver):
    d = driver()
    d.act("select_vehicle", MIRAI)
    r = d.act("confirm_photo", "no")
    assert r.current_step == "vehicle_id" and d.session.vehicle_id is None and d.session.model is None


def test_photo_yes_asks_for_symptom(driver):
    d = driver()
    d.act("select_vehicle", MIRAI)
    r = d.msg("はい")
    assert r.current_step == "free_text" and r.prompt.type == "text" and "症状" in r.prompt.message
    assert r.judgment.method == "structured_output"


def test_free_text_empty_input_asks_again(driver):
    d = driver()
    d.to_symptom()
    r = d.msg("   ")
    assert r.current_step == "free_text" and d.session.symptom_text == ""


def test_free_text_critical_keyword_goes_straight_to_reservation(driver):
    retriever = FakeRetriever([Hit("a", "x")])
    client = TaskClient()
    d = driver(client=client, retriever=retriever)
    d.to_symptom()
    r = d.msg("ブレーキペダルが床まで沈む")
    assert r.current_step == "reservation" and r.prompt.type == "reservation_choice"
    assert r.urgency.level == "critical" and r.urgency.can_drive is False and r.urgency.visit_urgency == "immediate"
    assert "🚨 今すぐロードサービスまたは来場が必要です" in r.prompt.message
    assert [c.value for c in r.prompt.choices] == ["dispatch", "skip"]
    assert client.requests == []  # no model call; the manual is searched for the emergency section to cite
    assert [q for q, _ in retriever.queries][0] == "ブレーキペダルが床まで沈む"
    s = d.session
    assert s.symptom_text == "ブレーキペダルが床まで沈む" and s.collected_symptoms == ["ブレーキペダルが床まで沈む"]


SPEC_HITS = [Hit("v:s13", "シフトロック機構", "specification", False, 0.8, page=180),
             Hit("v:s12", "シフトレバーの操作", "procedure", False, 0.6, page=176)]


def test_free_text_routes_to_spec_check_when_gates_pass(make_ctx, session_at):
    spec = {"is_spec": True, "confidence": "high", "explanation": "安全のための仕様です。", "matched_section": "シフトロック機構",
            "matched_section_id": "v:s13", "page": 180}
    client = TaskClient({"spec_classification": [spec]})
    ctx = make_ctx(client=client, retriever=FakeRetriever(SPEC_HITS))
    session = session_at(ChatStep.FREE_TEXT, symptom="")
    r = handle_free_text(session, ChatRequest(message="セレクトレバーがPから動かない"), ctx)
    assert r.current_step == "spec_check" and session.spec_check_shown
    assert client.tasks() == ["spec_classification"]
    assert "（取扱説明書「シフトロック機構」p.180）" in r.prompt.message
    assert [c.value for c in r.prompt.choices] == ["resolved", "not_resolved", "already_tried"]
    assert r.rag_sources[0].section_id == "v:s13" and r.rag_sources[0].page == 180


def test_free_text_gate_blocks_spec_route_and_sets_hint(make_ctx, session_at):
    hits = [Hit("v:s13", "シフトロック機構", "specification", False, 0.8), Hit("v:s14", "解除手順", "procedure", True, 0.6)]
    client = TaskClient({"diagnostic_response": [diag()]})
    ctx = make_ctx(client=client, retriever=FakeRetriever(hits))
    session = session_at(ChatStep.FREE_TEXT, symptom="")
    r = handle_free_text(session, ChatRequest(message="セレクトレバーがPから動かない"), ctx)
    assert r.current_step == "diagnosing" and session.spec_hint is True and not session.spec_check_shown
    assert client.tasks() == ["diagnostic_response"]
    assert "仕様・正常動作として説明されている可能性" in client.requests[0].messages[-1]["content"]
    assert "spec_hint" in client.requests[0].context["flags"]


def test_free_text_without_spec_signal_goes_to_diagnosing(make_ctx, session_at):
    client = TaskClient({"diagnostic_response": [diag()]})
    ctx = make_ctx(client=client, retriever=FakeRetriever([Hit("v:s55", "異音", "general", False, 0.35)]))
    session = session_at(ChatStep.FREE_TEXT, symptom="")
    r = handle_free_text(session, ChatRequest(message="走行中にガラガラと音がする"), ctx)
    assert r.current_step == "diagnosing" and session.spec_hint is False and session.diagnostic_turn == 1
    assert session.collected_symptoms == ["走行中にガラガラと音がする"]
    assert r.prompt.type == "single_choice" and r.prompt.choices[-1].value == "free_input"


def test_free_text_spec_classification_not_high_falls_through(make_ctx, session_at):
    spec = {"is_spec": True, "confidence": "medium", "explanation": "たぶん仕様", "matched_section": None,
            "matched_section_id": None, "page": None}
    client = TaskClient({"spec_classification": [spec], "diagnostic_response": [diag()]})
    ctx = make_ctx(client=client, retriever=FakeRetriever(SPEC_HITS))
    session = session_at(ChatStep.FREE_TEXT, symptom="")
    r = handle_free_text(session, ChatRequest(message="セレクトレバーがPから動かない"), ctx)
    assert r.current_step == "diagnosing" and not session.spec_check_shown
    assert client.tasks() == ["spec_classification", "diagnostic_response"]


def test_spec_classification_failure_falls_through_too(make_ctx, session_at):
    client = TaskClient({"spec_classification": ["not json"] * 9, "diagnostic_response": [diag()]},
                        fallback=ScriptedClient([]))
    ctx = make_ctx(client=client, retriever=FakeRetriever(SPEC_HITS))
    session = session_at(ChatStep.FREE_TEXT, symptom="")
    r = handle_free_text(session, ChatRequest(message="セレクトレバーがPから動かない"), ctx)
    assert r.current_step == "diagnosing" and not r.fallback
    assert client.tasks() == ["spec_classification"] * 3 + ["diagnostic_response"]  # 1 call + 2 repairs


def test_a_symptoms_vote_vector_is_started_before_its_search_and_a_critical_one_starts_none(make_ctx, session_at,
                                                                                            monkeypatch):
    """Issue #25: the vote's vector (``prefetch_vote``) is started before the manual search embeds its own, so
    the two are computed side by side; a symptom the rules already call critical is not voted on."""
    from core.diagnosis.steps import free_text

    events: list = []

    class Recording(FakeRetriever):
        def search(self, query, vehicle_id=None, n_results=5, mode="hybrid"):
            events.append(("search", query))
            return super().search(query, vehicle_id, n_results, mode)

    monkeypatch.setattr(free_text, "prefetch_vote", lambda text: events.append(("prefetch_vote", text)))
    ctx = make_ctx(client=TaskClient({"diagnostic_response": [diag()]}), retriever=Recording([Hit("v:s1", "異音")]))
    handle_free_text(session_at(ChatStep.FREE_TEXT, symptom=""), ChatRequest(message="走行中に異音がする"), ctx)
    assert events[:2] == [("prefetch_vote", "走行中に異音がする"), ("search", "走行中に異音がする")]
    events.clear()
    handle_free_text(session_at(ChatStep.FREE_TEXT, symptom=""), ChatRequest(message="ブレーキペダルが床まで沈む"),
                     make_ctx(retriever=Recording([Hit("a", "x")])))
    assert events and not [e for e in events if e[0] == "prefetch_vote"]
