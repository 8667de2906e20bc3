"""DIAGNOSING (seed 000 §4): rewind, resolved, empty input, and the main loop steps 1–14."""
from __future__ import annotations

from diagnosis_fakes import FakeRetriever, Hit, TaskClient, answer, diag

from core.diagnosis import ChatRequest, ChatStep
from core.diagnosis.steps.common import FAILURE_MESSAGE, FALLBACK_MESSAGE
from core.diagnosis.steps.diagnosing import (FORCE_ANSWER_LINE, NOT_COVERED_NOTE, PARTIAL_NOTE, handle_diagnosing,
                                             run_turn)
from core.llm.base import ProviderError

HITS = [Hit("v:s18", "ブレーキ鳴き", "general", True, 0.7, page=198, text="ブレーキをかけたときに音がすることがあります。"),
        Hit("v:s55", "異音・振動がするとき", "general", False, 0.5, page=464)]


def setup(make_ctx, session_at, scripts, hits=HITS, **session_fields):
    client = TaskClient({"diagnostic_response": list(scripts)})
    ctx = make_ctx(client=client, retriever=FakeRetriever(hits), log=[])
    session = session_at(ChatStep.DIAGNOSING, symptom="ブレーキを踏むと音がする", **session_fields)
    return client, ctx, session


def diag_requests(client):
    return [r for r in client.requests if r.task == "diagnostic_response"]


# --- C. empty input ----------------------------------------------------------------------------------

def test_empty_input_asks_for_symptom_without_model_call(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [])
    r = handle_diagnosing(session, ChatRequest(message="  "), ctx)
    assert r.prompt.message == "症状について教えてください。" and client.requests == [] and session.diagnostic_turn == 0


# --- D. main loop ------------------------------------------------------------------------------------

def test_turn_records_input_snapshot_and_question_with_default_choices(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag()])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert session.diagnostic_turn == 1 and session.collected_symptoms == ["ブレーキを踏むと音がする"]
    assert session.conversation_history[0] == {"role": "user", "content": "ブレーキを踏むと音がする"}
    assert session.conversation_history[-1] == {"role": "assistant", "content": "音はどんなときに聞こえますか？"}
    assert [s["turn"] for s in session.state_snapshots] == [1]
    assert session.state_snapshots[0]["state"]["diagnostic_turn"] == 0  # taken before the answer
    assert r.prompt.type == "single_choice" and r.prompt.action == "answer"
    assert [c.value for c in r.prompt.choices][-2:] == ["dont_know", "free_input"]
    assert session.asked_topics == ["異音が出るタイミング"] and session.pending_kind == "question"
    assert [s.section_id for s in r.rag_sources] == ["v:s18", "v:s55"] and r.rag_sources[0].page == 198
    prompt = client.requests[0].messages[-1]["content"]
    assert "ブレーキ鳴き p.198" in prompt and "ブレーキを踏むと音がする" in prompt
    assert ctx.log[0]["step"] == "diagnosing" and ctx.log[0]["prompt"] == "diagnosis_diagnostic"
    fmt = client.requests[0].response_format["json_schema"]
    assert fmt["name"] == "diagnostic_response" and fmt["strict"] is True
    assert "uniqueItems" not in str(fmt["schema"]) and fmt["schema"]["properties"]["choices"]["type"] == ["array", "null"]


def test_answer_buttons_dont_know_and_free_input(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag(), diag(message="どんな音ですか？", question_topic="音の種類")])
    handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    r = handle_diagnosing(session, ChatRequest(action="answer", action_value="free_input"), ctx)
    assert r.prompt.type == "text" and session.diagnostic_turn == 1 and len(diag_requests(client)) == 1
    handle_diagnosing(session, ChatRequest(action="answer", action_value="dont_know"), ctx)
    assert session.collected_symptoms[-1] == "わからない" and session.diagnostic_turn == 2


def test_snapshots_capped_at_max_turns(make_ctx, session_at):
    scripts = [diag(message=f"質問{i}ですか？", question_topic=f"音の状況{i}") for i in range(6)]
    client, ctx, session = setup(make_ctx, session_at, scripts, max_diagnostic_turns=3)
    for i in range(3):
        handle_diagnosing(session, ChatRequest(message=f"回答{i}"), ctx)
    assert [s["turn"] for s in session.state_snapshots] == [1, 2, 3]
    session.max_diagnostic_turns = 2
    handle_diagnosing(session, ChatRequest(message="回答3"), ctx)
    assert [s["turn"] for s in session.state_snapshots] == [3, 4]


def test_keyword_critical_over_all_inputs_goes_to_reservation(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag()])
    handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    r = handle_diagnosing(session, ChatRequest(message="あとペダルが床まで沈む感じ"), ctx)
    assert r.current_step == "reservation" and r.urgency.level == "critical" and r.urgency.can_drive is False
    assert len(diag_requests(client)) == 1  # no model call on the critical turn
    assert "ブレーキの効きに異常がある可能性" in r.prompt.message


def test_rag_query_uses_rewritten_query_plus_answer(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag(rewritten_query="ブレーキ 鳴き 低速"), diag(message="次？", question_topic="次")])
    handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    handle_diagnosing(session, ChatRequest(message="低速のとき"), ctx)
    queries = [q for q, _ in ctx.retriever.queries]
    assert "ブレーキ 鳴き 低速 低速のとき" in queries and "ブレーキを踏むと音がする" in queries
    assert all(v == "kaiwa-mirai-hv-2022" for _, v in ctx.retriever.queries)


def test_summary_every_three_turns(make_ctx, session_at):
    scripts = [diag(message=f"質問{i}？", question_topic=f"音の状況{i}") for i in range(4)]
    client = TaskClient({"diagnostic_response": scripts, "diagnosis_summary": ["要約: ブレーキ鳴き"]})
    ctx = make_ctx(client=client, retriever=FakeRetriever(HITS))
    session = session_at(ChatStep.DIAGNOSING)
    for i in range(4):
        handle_diagnosing(session, ChatRequest(message=f"回答{i}"), ctx)
    assert client.tasks().count("diagnosis_summary") == 1
    assert client.tasks()[:4] == ["diagnostic_response", "diagnostic_response", "diagnosis_summary", "diagnostic_response"]
    assert session.conversation_summary == "要約: ブレーキ鳴き"
    assert "要約: ブレーキ鳴き" in diag_requests(client)[3].messages[-1]["content"]


def test_offline_summary_is_extractive(make_ctx, session_at):
    client = TaskClient({"diagnostic_response": [diag(message=f"質問{i}？", question_topic=f"音の状況{i}") for i in range(3)]})
    ctx = make_ctx(client=client, retriever=FakeRetriever(HITS))
    session = session_at(ChatStep.DIAGNOSING, symptom="ブレーキを踏むと音がする")
    for text in ("ブレーキを踏むと音がする", "低速のとき", "雨の日"):
        handle_diagnosing(session, ChatRequest(message=text), ctx)
    assert "主訴: ブレーキを踏むと音がする" in session.conversation_summary and "低速のとき、雨の日" in session.conversation_summary


def test_candidates_trigger_by_confidence_or_turn(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag(confidence_to_answer=0.75), diag(message="x？", question_topic="y")])
    handle_diagnosing(session, ChatRequest(message="a"), ctx)
    assert not session.candidates_shown
    handle_diagnosing(session, ChatRequest(message="b"), ctx)
    assert session.candidates_shown
    assert "原因の候補を提示できる段階" in diag_requests(client)[1].messages[-1]["content"]
    client, ctx, session = setup(make_ctx, session_at, [diag(message="q？", question_topic="z")], diagnostic_turn=3)
    handle_diagnosing(session, ChatRequest(message="c"), ctx)
    assert session.candidates_shown and session.diagnostic_turn == 4


def test_irrelevant_topic_triggers_one_restricted_recall(make_ctx, session_at):
    bad = diag(message="カーナビの地図は最新ですか？", question_topic="カーナビの地図更新", choices=["はい", "いいえ"])
    client, ctx, session = setup(make_ctx, session_at, [bad, diag()])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert len(diag_requests(client)) == 2
    assert "restrict_topic" in diag_requests(client)[1].context["flags"]
    assert "カーナビの地図更新" in diag_requests(client)[1].messages[-1]["content"]
    assert r.prompt.message == "音はどんなときに聞こえますか？"


def test_waiting_message_triggers_forced_answer_recall(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag(message="内容をまとめますので少々お待ちください。", choices=None),
                                                        answer()])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert FORCE_ANSWER_LINE in diag_requests(client)[1].messages[-1]["content"]
    assert "ブレーキパッドの摩耗" in r.prompt.message and r.prompt.action == "resolved"


def test_waiting_message_twice_gives_fallback(make_ctx, session_at):
    waiting = diag(message="確認いたします。", choices=None)
    client, ctx, session = setup(make_ctx, session_at, [waiting, waiting])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert r.fallback and r.prompt.message == FAILURE_MESSAGE


def test_duplicate_question_replaced_by_generic_message(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag(), diag(question_topic="音の状況")])
    handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏んだとき"), ctx)
    assert r.prompt.message == FALLBACK_MESSAGE and r.prompt.type == "single_choice"
    assert [c.value for c in r.prompt.choices] == ["dont_know", "free_input"]  # seed 000 §4: always offered


def test_model_failure_gives_fallback_and_keeps_session_consistent(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [ProviderError("server_error", "down")] * 3)
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert r.fallback and r.prompt.message == FAILURE_MESSAGE  # says it failed and that the message is kept
    assert "回答を作成できませんでした" in FAILURE_MESSAGE and "会話に残っています" in FAILURE_MESSAGE
    assert r.current_step == "diagnosing" and session.diagnostic_turn == 1
    assert session.conversation_history[-2] == {"role": "user", "content": "ブレーキを踏むと音がする"}  # kept
    assert session.conversation_history[-1] == {"role": "assistant", "content": FAILURE_MESSAGE}
    assert ctx.log[-1]["outcome"] == "provider_error:server_error"


def test_invalid_model_output_gives_fallback(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, ['{"action": "dance"}'] * 9)
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert r.fallback and any(rec["outcome"] == "schema_error" for rec in ctx.log)


def test_manual_coverage_raise_and_notes(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [answer(manual_coverage="not_covered", urgency_flag="low")])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert session.urgency_level == "medium" and session.visit_urgency == "this_week"
    assert NOT_COVERED_NOTE in r.prompt.message and r.prompt.message.startswith("ブレーキパッドの摩耗")
    client, ctx, session = setup(make_ctx, session_at, [answer(manual_coverage="partially_covered")])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert PARTIAL_NOTE in r.prompt.message and "ℹ️" in r.prompt.message and session.urgency_level == "low"


def test_provide_answer_low_offers_resolution_choices(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [answer()])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert r.current_step == "diagnosing" and r.prompt.action == "resolved"
    assert [c.value for c in r.prompt.choices] == ["yes", "no", "book"]
    assert r.rag_sources[0].section == "ブレーキ鳴き"  # the cited section first


def test_provide_answer_high_can_drive_false_goes_to_road_service(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [answer(urgency_flag="high", can_drive=False, visit_urgency="today")])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert r.current_step == "reservation" and "🚨 自走は控えてください" in r.prompt.message
    assert [c.value for c in r.prompt.choices] == ["dispatch", "skip"]
    assert r.urgency.level == "high" and r.urgency.can_drive is False


def test_provide_answer_high_can_drive_true_recommends_inspection(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [answer(urgency_flag="high", can_drive=True, visit_urgency="today")])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert r.current_step == "reservation" and "⚠️ 早急な点検をおすすめします" in r.prompt.message
    assert "⚠️ 本日中の来場をおすすめします" in r.prompt.message
    assert [c.value for c in r.prompt.choices] == ["dispatch", "visit", "skip"]


def test_urgency_flag_critical_routes_immediately(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag(urgency_flag="critical", can_drive=None, message="危険です。停車してください。")])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert r.current_step == "reservation" and r.urgency.level == "critical" and r.urgency.can_drive is False
    assert r.prompt.message.startswith("危険です。") and session.visit_urgency == "immediate"


def test_urgency_flag_high_is_saved_while_asking(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag(urgency_flag="high", can_drive=True, visit_urgency="today")])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert r.current_step == "diagnosing" and (session.urgency_level, session.can_drive) == ("high", True)
    assert r.urgency.level == "high"


def test_escalate_goes_to_reservation(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag(action="escalate", choices=None, message="専門家の点検が必要です。")])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert r.current_step == "reservation" and session.urgency_level == "high"


def test_spec_answer_moves_to_spec_check_phase_two(make_ctx, session_at, monkeypatch):
    # the action table alone: the semantic layer would (rightly) block a "normal" answer for a brake
    # noise the fake manual does not confirm (tests/core/diagnosis/test_diag_urgency_flow.py)
    monkeypatch.setenv("KAIWA_URGENCY_SEMANTIC", "off")
    client, ctx, session = setup(make_ctx, session_at, [diag(action="spec_answer", choices=None, message="正常な動作です。")])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert r.current_step == "spec_check" and session.spec_check_shown
    assert [c.value for c in r.prompt.choices] == ["resolved", "not_resolved", "already_tried"]


def test_spec_answer_after_rejection_is_shown_as_answer(make_ctx, session_at, monkeypatch):
    monkeypatch.setenv("KAIWA_URGENCY_SEMANTIC", "off")  # the action table alone (see above)
    client, ctx, session = setup(make_ctx, session_at, [diag(action="spec_answer", choices=None, message="正常です。")],
                                 spec_rejected=True)
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert r.current_step == "diagnosing" and r.prompt.action == "resolved"
    assert "spec_rejected" in diag_requests(client)[0].context["flags"]


def test_clarify_term_with_warning_light_icons(make_ctx, session_at):
    clarify = diag(action="clarify_term", term_to_clarify="ランプ", message="どのランプですか？", question_topic="警告灯の種類",
                   choices=["エンジン警告灯（エンジンの形）", "ABS警告灯", "エンジン警告灯（エンジンの形） "])
    client, ctx, session = setup(make_ctx, session_at, [clarify])  # distinct for uniqueItems, same after normalising
    r = handle_diagnosing(session, ChatRequest(message="ランプがついた"), ctx)
    assert [c.label for c in r.prompt.choices] == ["エンジン警告灯（エンジンの形）", "ABS警告灯", "わからない", "✏️ 自由入力"]
    assert [c.icon for c in r.prompt.choices][:2] == ["data/icons/warning-lights/engine.svg", "data/icons/warning-lights/abs.svg"]


def test_exact_duplicate_choices_are_repaired_by_schema_validation(make_ctx, session_at):
    dup = diag(choices=["赤", "赤", "黄"])
    client, ctx, session = setup(make_ctx, session_at, [dup, diag(choices=["赤", "黄"])])
    r = handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    assert [rec["kind"] for rec in ctx.log] == ["call", "repair"] and ctx.log[0]["outcome"] == "schema_error"
    assert [c.label for c in r.prompt.choices] == ["赤", "黄", "わからない", "✏️ 自由入力"]


def test_max_turns_exceeded_goes_to_urgency_check(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [], diagnostic_turn=2, max_diagnostic_turns=2)
    r = handle_diagnosing(session, ChatRequest(message="まだ鳴る"), ctx)
    assert client.tasks() == ["urgency_assessment"] and r.current_step in ("reservation", "done")


def test_final_turn_instruction(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [answer()], diagnostic_turn=1, max_diagnostic_turns=2)
    handle_diagnosing(session, ChatRequest(message="まだ鳴る"), ctx)
    assert "final_turn" in diag_requests(client)[0].context["flags"]


def test_pii_is_masked_before_the_model(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag()])
    handle_diagnosing(session, ChatRequest(message="音がする。連絡は090-1234-5678まで"), ctx)
    prompt = diag_requests(client)[0].messages[-1]["content"]
    assert "090-1234-5678" not in prompt and "[電話番号]" in prompt
    assert "090-1234-5678" not in str(diag_requests(client)[0].context)


# --- B. resolved -------------------------------------------------------------------------------------

def test_resolved_yes_done_and_book_reservation(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [])
    r = handle_diagnosing(session, ChatRequest(action="resolved", action_value="yes"), ctx)
    assert r.current_step == "done" and client.requests == []
    client, ctx, session = setup(make_ctx, session_at, [])
    r = handle_diagnosing(session, ChatRequest(action="resolved", action_value="book"), ctx)
    assert r.current_step == "reservation" and [c.value for c in r.prompt.choices] == ["dispatch", "visit", "skip"]


def test_resolved_no_asks_again_then_urgency_check_after_three(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag(message=f"別の質問{i}？", question_topic=f"音の状況{i}") for i in range(3)])
    for expected in (1, 2, 3):
        r = handle_diagnosing(session, ChatRequest(action="resolved", action_value="no"), ctx)
        assert session.solutions_tried == expected and r.current_step == "diagnosing"
    assert "solution_failed" in diag_requests(client)[-1].context["flags"]
    r = handle_diagnosing(session, ChatRequest(action="resolved", action_value="no"), ctx)
    assert session.solutions_tried == 4 and client.tasks()[-1] == "urgency_assessment"
    assert r.current_step in ("reservation", "done")


def test_typed_text_on_resolution_choices_is_judged(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [answer()])
    handle_diagnosing(session, ChatRequest(message="ブレーキを踏むと音がする"), ctx)
    r = handle_diagnosing(session, ChatRequest(message="おかげで直りました"), ctx)
    assert r.current_step == "done" and r.judgment.value == "yes" and r.judgment.method == "structured_output"


def test_run_turn_direct_entry(make_ctx, session_at):
    client, ctx, session = setup(make_ctx, session_at, [diag()])
    r = run_turn(session, "音がする", ctx)
    assert r.diagnostic_turn == 1 and session.current_step == ChatStep.DIAGNOSING
