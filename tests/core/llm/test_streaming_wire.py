"""The real openai SDK against the fake OpenAI-compatible server: streamed answers and what they feed
the page, the first-token and between-token timers, servers without streaming, bounded requests and
the parameter name of the limit, overflow refits, the tool-less fall-through, validation before
truncation, and the model check. Time bounds are deliberately wide."""
from __future__ import annotations

import time

from core.engine import structured_call
from core.knowledge.turn import call_llm, entry_schema, system_prompt, turn_schema
from core.llm.registry import ProviderRegistry, model_notice
from core.llm.settings import load_settings
from core.llm.strategies import PROMPT_EXTRACT, STRUCTURED_OUTPUT, TOOL_CALL
from core.llm.stream import RecordingSink, stream_to
from core.schemas import load_schema
from core.text.untrusted import data_block
from tests.fakes.openai_server import DEFAULT_TURN, Fault

MESSAGE = DEFAULT_TURN["assistant_message"]


def turn(client, log=None, files=(), history=None):
    return call_llm("NDA の件", list(files), system_prompt(), history or [], client, turn_schema(), entry_schema(),
                    log=log)


def test_a_streamed_answer_reaches_the_sink_as_it_is_written_and_is_validated_at_the_end(fake_openai):
    fake_openai.stream_chunk = 3
    sink, log = RecordingSink(), []
    with stream_to(sink):
        result = turn(fake_openai.client(), log)
    assert result.ok and result.assistant_message == MESSAGE
    body = fake_openai.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert next(iter(body["response_format"]["json_schema"]["schema"]["properties"])) == "assistant_message"
    shown = sink.updates("knowledge_llm_turn")
    assert len(shown) >= 5 and shown[-1] == MESSAGE and all(b.startswith(a) for a, b in zip(shown, shown[1:]))
    assert sink.events[-1][0] == "finish" and sink.events[-1][2]["ok"] is True
    call = log[0]["call"]
    assert call["streamed"] and call["timings"]["first_token_ms"] >= 0 and log[0]["usage"]["total_tokens"] == 15
    assert log[0]["raw_output"] == result.raw  # the whole raw output is kept


def test_tool_call_argument_deltas_stream_too(fake_openai):
    sink = RecordingSink()
    with stream_to(sink):
        result = turn(fake_openai.client(strategies=(TOOL_CALL,)))
    assert result.ok and result.method == TOOL_CALL and sink.updates()[-1] == MESSAGE


def test_a_repair_replaces_the_partial_text_visibly(fake_openai):
    fake_openai.reply = lambda body: DEFAULT_TURN if len(fake_openai.requests) > 1 else {
        **DEFAULT_TURN, "control": {"schema_version": "1.0", "mode": "chat"}}
    sink = RecordingSink()
    with stream_to(sink):
        result = turn(fake_openai.client())
    kinds = [e[0] for e in sink.events]
    assert result.ok and result.repairs == 1 and "restart" in kinds
    assert kinds.index("restart") < len(kinds) - 1 and sink.texts["knowledge_llm_turn"] == MESSAGE
    assert ("restart", "knowledge_llm_turn", "repair") in sink.events


def test_a_server_without_streaming_answers_in_one_body(fake_openai):
    fake_openai.streaming = False  # ignores "stream": one JSON body
    sink = RecordingSink()
    with stream_to(sink):
        result = turn(fake_openai.client())
    assert result.ok and sink.updates() == [MESSAGE]  # the whole text at once


def test_a_server_that_rejects_streaming_gets_one_response_requests_from_then_on(fake_openai):
    fake_openai.set("reject_stream")
    client = fake_openai.client()
    assert turn(client).ok and turn(client).ok
    assert [bool(r.get("stream")) for r in fake_openai.requests] == [True, False, False]
    assert client.stream is False


def test_the_between_token_timer_cuts_a_stream_that_stops(fake_openai):
    fake_openai.set("stream_stall", chunks=3, seconds=30)
    client = fake_openai.client(timeout=30, token_gap_timeout=1, turn_deadline=60)
    log = []
    started = time.monotonic()
    result = turn(client, log)
    assert time.monotonic() - started < 20
    assert result.provider_error == "timeout" and result.timer == "token_gap" and fake_openai.count == 3
    assert log[0]["call"]["timeout"] == "token_gap" and client.last_timeout["timer"] == "token_gap"
    assert "トークン間" in result.errors[0] and "トークン間の待ち" in result.status_label


def test_the_first_token_timer_includes_a_server_that_sends_nothing(fake_openai):
    fake_openai.set("stall", seconds=30)  # a queued request: no headers, no bytes
    client = fake_openai.client(timeout=30, first_token_timeout=1, turn_deadline=60)
    log = []
    started = time.monotonic()
    result = turn(client, log)
    assert time.monotonic() - started < 20
    assert result.provider_error == "timeout" and result.timer == "first_token"
    assert [r["call"]["timeout"] for r in log] == ["first_token"] * 3
    fake_openai.set("stall", seconds=30)
    result = turn(fake_openai.client(timeout=30, first_token_timeout=20, turn_deadline=1))
    assert result.provider_error == "deadline" and result.timer == "deadline"  # the turn's deadline over everything


def test_every_request_is_bounded_under_the_newer_name_and_falls_back_to_the_older(fake_openai):
    client = fake_openai.client(strategies=(STRUCTURED_OUTPUT, TOOL_CALL, PROMPT_EXTRACT))
    assert turn(client).ok
    first = fake_openai.requests[0]
    assert 64 <= first["max_completion_tokens"] <= 2048 and "max_tokens" not in first
    fake_openai.reset()
    fake_openai.set("reject_param", param="max_completion_tokens")
    assert turn(client).ok and client.limit_param == "max_tokens"
    assert "max_completion_tokens" in fake_openai.requests[0] and "max_tokens" in fake_openai.requests[1]
    assert turn(client).ok and "max_tokens" in fake_openai.requests[-1]  # remembered


def test_a_server_that_ignores_the_newer_name_is_caught_by_its_usage(fake_openai):
    fake_openai.set("ignore_limit")
    client = fake_openai.client()
    assert turn(client).ok and client.limit_param == "max_tokens"


def test_a_forced_tool_call_answered_in_text_moves_to_the_next_strategy_at_once(fake_openai):
    fake_openai.set("tool_text")
    log = []
    result = turn(fake_openai.client(strategies=(TOOL_CALL, STRUCTURED_OUTPUT)), log)
    assert result.ok and result.method == STRUCTURED_OUTPUT and fake_openai.count == 2  # no repair spent on the text
    assert log[0]["outcome"] == "provider_error:unsupported" and "plain text" in log[0]["raw_output"]


def test_a_complete_valid_answer_is_accepted_although_the_server_says_length(fake_openai):
    fake_openai.set("length_valid")
    log = []
    result = turn(fake_openai.client(), log)
    assert result.ok and fake_openai.count == 1 and log[0]["call"]["finish_reason"] == "length"
    fake_openai.reset()
    fake_openai.set("length")  # really cut: truncated, repaired with twice the limit (up to the cap)
    result = structured_call(fake_openai.client(), [{"role": "user", "content": "x"}], schema=load_schema("faq_plan"),
                             name="faq_plan")
    limits = [r["max_completion_tokens"] for r in fake_openai.requests]
    assert result.provider_error == "truncated" and limits[1] == 2 * limits[0] and limits[2] <= 2048


def test_an_overflow_is_learnt_from_and_the_prompt_resent_smaller_never_larger(fake_openai):
    attachment = "契約書の本文です。" * 600
    fake_openai.set("overflow", style="vllm", n_ctx=4096, n_prompt=6000, when_over=5000)
    client = fake_openai.client(strategies=(STRUCTURED_OUTPUT, TOOL_CALL, PROMPT_EXTRACT))
    log = []
    result = turn(client, log, files=[attachment])
    assert result.ok and client.context_tokens == 4096
    sizes = [len(str(r["messages"])) for r in fake_openai.requests]
    assert len(sizes) == 2 and sizes[1] < sizes[0]  # resent smaller, same strategy, no other strategy tried
    assert [r["outcome"] for r in log] == ["provider_error:context_overflow", "ok"]
    assert "参照テキスト" in " ".join(log[1]["call"]["fit"]) and data_block("")[:11] in log[1]["messages"][-1]["content"]


def test_an_overflow_that_cannot_be_cut_is_a_typed_failure_with_one_request(fake_openai):
    fake_openai.set("overflow", style="openai", n_ctx=100, n_prompt=1500)
    log = []
    result = turn(fake_openai.client(strategies=(STRUCTURED_OUTPUT, TOOL_CALL, PROMPT_EXTRACT)), log)
    assert result.provider_error == "context_overflow" and fake_openai.count == 1
    assert "コンテキスト長" in result.errors[0] and "方式" not in result.errors[0]


def test_a_template_that_wants_alternation_accepts_every_stack_after_failures_and_resends(fake_openai):
    from core.knowledge.session import resend, submit_turn
    fake_openai.strict_roles = True
    client = fake_openai.client()
    chat, outputs = [], []
    assert submit_turn(chat, outputs, "一回目", [], client).result.ok
    fake_openai.queue(Fault("server_error"), Fault("server_error"), Fault("server_error"))
    failed = submit_turn(chat, outputs, "二回目", [], client)
    assert not failed.result.ok
    assert resend(chat, outputs, failed.user_entry["id"], client).result.ok
    assert submit_turn(chat, outputs, "三回目", [], client).result.ok
    assert all(fake_openai.alternates(r["messages"]) for r in fake_openai.requests)
    assert not [r for r in fake_openai.requests if r["messages"][1]["role"] != "user"]


def test_the_model_check_at_start_and_on_a_switch(fake_openai):
    fake_openai.served, fake_openai.owned_by, fake_openai.n_ctx = ["local-model"], "llamacpp", 4096
    registry = ProviderRegistry(load_settings({"OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_MODEL": "gpt-x"}))
    client = registry.get_active()
    assert "gpt-x" in model_notice(client) and "local-model" in model_notice(client)
    assert client.context_tokens == 4096 and client.server_info.server == "llama.cpp"
    assert fake_openai.gets == ["/v1/models", "/props"]
    client = registry.set_active("openai", model="local-model")
    assert model_notice(client) == "" and len(fake_openai.gets) == 4
    log = []
    structured_call(client, [{"role": "user", "content": "x"}], schema=load_schema("faq_plan"), name="faq_plan",
                    log=log)
    assert log[0]["model"] == fake_openai.model  # what the server reported in its answer
    configured = load_settings({"OPENAI_BASE_URL": fake_openai.base_url, "KAIWA_CONTEXT_TOKENS": "2000"})
    assert ProviderRegistry(configured).get_active().context_tokens == 2000  # configured wins
