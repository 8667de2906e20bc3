"""call_llm / structured_call: repairs, provider errors, strategy fallback, debug records."""
import json

import httpx
import openai
import pytest

from core.engine import RetryPolicy, structured_call
from core.knowledge.turn import call_llm, entry_schema, system_prompt, turn_schema
from core.llm.base import LLMResponse
from core.llm.scripted import ScriptedClient
from core.llm.strategies import PROMPT_EXTRACT, STRUCTURED_OUTPUT, TOOL_CALL

GOOD = json.dumps({"control": {"schema_version": "1.0", "mode": "interview"},
                   "state": {"phase": "collect_case", "missing_info": []},
                   "assistant_message": "次の質問です", "knowledge_json": None}, ensure_ascii=False)
BAD_SCHEMA = GOOD.replace('"interview"', '"chat"')
REQ = httpx.Request("POST", "http://test/v1/chat/completions")


def api_error(cls, status):
    return cls("error", response=httpx.Response(status, request=REQ), body=None)


def run(client, history=None, **kwargs):
    return call_llm("事例です", ["【a.txt】\n第1条（目的）"], system_prompt(), history or [], client,
                    turn_schema(), entry_schema(), **kwargs)


def test_ok_first_try_builds_the_seed_message_stack():
    client = ScriptedClient([GOOD])
    history = [{"role": "user", "content": "前の質問"}, {"role": "assistant", "content": GOOD},
               {"role": "system", "content": "ignored"}]
    result = run(client, history)
    assert result.ok and result.attempts == 1 and result.repairs == 0 and result.method == STRUCTURED_OUTPUT
    messages = client.requests[0].messages
    # the few-shot turn follows a short user turn: every chat template accepts user / assistant alternation
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    few_shot = json.loads(messages[2]["content"])
    from core.validation import parse_and_validate_turn
    assert parse_and_validate_turn(messages[2]["content"], turn_schema(), entry_schema()).ok, few_shot
    assert messages[-1]["content"] == ("ユーザー指示:\n事例です\n\n添付テキスト:\n<<<DOCUMENT>>>\n【a.txt】\n第1条（目的）\n"
                                       "<<<END DOCUMENT>>>")
    fmt = client.requests[0].response_format
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True


@pytest.mark.parametrize("script,repairs", [(["nope", GOOD], 1), (["nope", BAD_SCHEMA, GOOD], 2)])
def test_ok_after_repairs(script, repairs):
    client = ScriptedClient(script)
    result = run(client)
    assert result.ok and result.repairs == repairs and result.attempts == repairs + 1
    base = len(client.requests[0].messages)
    for i in range(1, repairs + 1):
        repair_msgs = client.requests[i].messages
        assert len(repair_msgs) == base + 2  # same stack + assistant=raw + user=repair, not accumulated
        assert repair_msgs[-2] == {"role": "assistant", "content": script[i - 1]}
        # the bad output goes once (the assistant turn above), never again inside the repair instruction
        assert "エラー種別:" in repair_msgs[-1]["content"] and script[i - 1] not in repair_msgs[-1]["content"]
    assert "parse_error" in client.requests[1].messages[-1]["content"]
    if repairs == 2:
        assert "schema_error" in client.requests[2].messages[-1]["content"]
        assert "$.control.mode" in client.requests[2].messages[-1]["content"]


def test_exhausted_repairs_return_the_last_raw_output():
    client = ScriptedClient(["first", "second", BAD_SCHEMA])
    result = run(client)
    assert not result.ok and result.raw == BAD_SCHEMA and result.error_type == "schema_error"
    assert result.attempts == 3 and client.remaining == 0


def test_max_repairs_is_respected():
    client = ScriptedClient(["bad", "bad", "bad"])
    result = run(client, max_repairs=0)
    assert not result.ok and result.attempts == 1 and client.remaining == 2


def test_transient_errors_are_retried_with_backoff(_offline_and_fast):
    client = ScriptedClient([openai.APITimeoutError(request=REQ), api_error(openai.RateLimitError, 429), GOOD])
    result = run(client)
    assert result.ok and result.attempts == 3
    assert _offline_and_fast == [0.5, 1.0]


@pytest.mark.parametrize("exc,kind", [
    (api_error(openai.InternalServerError, 500), "server_error"),
    (openai.APITimeoutError(request=REQ), "timeout"),
    (openai.APIConnectionError(request=REQ), "connection"),
    (TimeoutError("slow"), "timeout"),
])
def test_persistent_transient_errors_end_as_provider_error(exc, kind):
    client = ScriptedClient([exc, exc, exc, GOOD])
    result = run(client)
    assert not result.ok and result.error_type == "provider_error" and result.provider_error == kind
    assert result.attempts == 3 and client.remaining == 1


@pytest.mark.parametrize("exc,kind", [
    (api_error(openai.AuthenticationError, 401), "auth"),
    (RuntimeError("anything"), "unknown"),
    (ValueError("boom"), "unknown"),
])
def test_non_transient_errors_are_not_retried_and_never_escape(exc, kind):
    client = ScriptedClient([exc, GOOD])
    result = run(client)
    assert not result.ok and result.provider_error == kind and result.attempts == 1
    assert result.errors and result.error_label


def test_exhausted_script_is_a_provider_error_not_a_crash():
    result = run(ScriptedClient([]))
    assert not result.ok and result.error_type == "provider_error"


def test_rejected_strategy_falls_back_to_the_next():
    client = ScriptedClient([api_error(openai.BadRequestError, 400), GOOD])
    result = run(client)
    assert result.ok and result.method == TOOL_CALL and result.attempts == 2
    assert client.requests[1].tools[0]["function"]["name"] == "knowledge_llm_turn"
    assert client.requests[1].tool_choice == {"type": "function", "function": {"name": "knowledge_llm_turn"}}


def test_all_strategies_rejected():
    err = api_error(openai.BadRequestError, 400)
    result = run(ScriptedClient([err, err, err]))
    assert not result.ok and result.provider_error == "bad_request" and result.attempts == 3


def test_prompt_extract_appends_schema_and_accepts_fenced_output():
    client = ScriptedClient([f"了解しました。\n```json\n{GOOD}\n```"], strategies=(PROMPT_EXTRACT,))
    result = run(client)
    assert result.ok and result.method == PROMPT_EXTRACT and result.parse_stage == "code_block"
    last = client.requests[0].messages[-1]["content"]
    assert last.startswith("ユーザー指示:\n事例です") and "IMPORTANT" in last and '"knowledge_json"' in last
    assert client.requests[0].response_format is None and client.requests[0].tools is None


def test_lenient_recovery_of_wrapped_output_without_a_repair_call():
    client = ScriptedClient([f"Sure! {GOOD} Hope this helps."])
    result = run(client)
    assert result.ok and result.attempts == 1 and result.parse_stage == "brace_extraction"


class RefusingClient:
    name, model = "refuser", "r"

    def complete(self, request):
        return LLMResponse(content=None, refusal="I can't help with that.")


def test_refusal_is_a_typed_failure():
    result = run(RefusingClient())
    assert not result.ok and result.provider_error == "refusal" and result.raw == "I can't help with that."


def test_debug_records_one_per_call_without_secrets_or_pii():
    from core.text.pii import KNOWN_SECRETS
    KNOWN_SECRETS.add("my-secret-key-123456")
    log = []
    client = ScriptedClient(["not json", GOOD])
    call_llm("電話は 090-1234-5678、メールは taro@example.com、キーは sk-abcdefghijklmnop と my-secret-key-123456",
             [], system_prompt(), [], client, turn_schema(), entry_schema(), log=log)
    assert [r["outcome"] for r in log] == ["parse_error", "ok"]
    assert [r["kind"] for r in log] == ["call", "repair"]
    assert log[0]["response_format"]["json_schema"]["name"] == "knowledge_llm_turn"
    assert log[1]["raw_output"] == GOOD and log[0]["errors"]
    dumped = json.dumps(log, ensure_ascii=False)
    for secret in ("090-1234-5678", "taro@example.com", "sk-abcdefghijklmnop", "my-secret-key-123456"):
        assert secret not in dumped
    assert "[電話番号]" in dumped and "[メール]" in dumped
    # the client itself received the user's real text: masking is for logs here
    assert "090-1234-5678" in client.requests[0].messages[-1]["content"]


def test_generic_structured_call_with_custom_retry_policy():
    schema = {"type": "object", "properties": {"step": {"type": "integer"}, "reason": {"type": "string"}},
              "required": ["step", "reason"], "additionalProperties": False}
    waits = []
    client = ScriptedClient([TimeoutError(), '{"step": 2, "reason": "ok"}'])
    result = structured_call(client, [{"role": "user", "content": "x"}], schema=schema, name="judgment",
                             retry=RetryPolicy(max_retries=1, base_delay=2.0, sleep=waits.append))
    assert result.ok and result.data == {"step": 2, "reason": "ok"} and waits == [2.0]


def test_text_call_retries_transient_errors_and_logs_each_attempt(_offline_and_fast):
    from core.engine import text_call
    log = []
    client = ScriptedClient([TimeoutError(), "[CHOICE:2]"])
    assert text_call(client, [{"role": "user", "content": "x"}], task="choice_tag", log=log) == "[CHOICE:2]"
    assert [r["outcome"] for r in log] == ["provider_error:timeout", "ok"] and _offline_and_fast == [0.5]
    assert text_call(ScriptedClient([RuntimeError("x")]), [], task="t") is None


# ---- deadlines, Retry-After, typed errors (injected clock: no real waiting) ----------------------

class FakeClock:
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


class SlowClient:
    """Each call takes ``seconds`` on the fake clock, cut (TimeoutError) at the request's timeout."""
    name, model = "slow", "slow-model"

    def __init__(self, clock, seconds, replies):
        self.clock, self.seconds, self.replies, self.timeouts = clock, seconds, list(replies), []

    def complete(self, request):
        self.timeouts.append(request.timeout)
        if request.timeout < self.seconds:
            self.clock.now += request.timeout
            raise TimeoutError("cut")
        self.clock.now += self.seconds
        item = self.replies.pop(0)
        if isinstance(item, BaseException):
            raise item
        return LLMResponse(content=item)


def test_the_deadline_clips_the_last_request_and_ends_with_the_typed_error():
    clock = FakeClock()
    client = SlowClient(clock, 4.0, ["bad", "bad", "bad"])
    result = structured_call(client, [{"role": "user", "content": "x"}], schema=turn_schema(), name="t",
                             timeout=5, deadline=10, retry=RetryPolicy(sleep=clock.sleep, clock=clock))
    assert not result.ok and result.provider_error == "deadline" and result.raw == "bad"
    assert client.timeouts == [5, 5, 2] and clock.now == 10  # never past the deadline
    assert "タイムアウト" in result.errors[0]


def test_retry_after_replaces_backoff_is_capped_and_counts_against_the_deadline():
    from core.llm.base import ProviderError
    clock = FakeClock()
    policy = RetryPolicy(sleep=clock.sleep, clock=clock, max_retry_after=20)
    busy = ProviderError("rate_limit", "429", 429, retry_after=7.0)
    result = run(ScriptedClient([busy, GOOD]), retry=policy)
    assert result.ok and clock.sleeps == [7.0]
    long_wait = ProviderError("rate_limit", "429", 429, retry_after=500.0)
    assert run(ScriptedClient([long_wait, GOOD]), retry=policy).ok and clock.sleeps[-1] == 20.0
    client = ScriptedClient([ProviderError("server_error", "503", 503, retry_after=15.0), GOOD])
    result = structured_call(client, [{"role": "user", "content": "x"}], schema=turn_schema(), name="t",
                             deadline=10, retry=policy)
    assert result.provider_error == "server_error" and client.remaining == 1 and clock.sleeps[-1] == 20.0


def test_turn_deadline_is_shared_by_every_call_inside():
    from core.engine import turn_deadline
    clock = FakeClock()
    policy = RetryPolicy(sleep=clock.sleep, clock=clock)
    client = SlowClient(clock, 4.0, [GOOD, GOOD])
    with turn_deadline(6, retry=policy):
        assert run(client, retry=policy).ok
        second = run(client, retry=policy)
    assert second.provider_error == "deadline" and client.timeouts == [6, 2]


@pytest.mark.parametrize("status,cls,kind", [
    (404, openai.NotFoundError, "not_found"),
    (401, openai.AuthenticationError, "auth"),
    (403, openai.PermissionDeniedError, "forbidden"),
])
def test_404_401_403_do_not_walk_the_strategy_chain(status, cls, kind):
    client = ScriptedClient([api_error(cls, status), GOOD, GOOD], model="gpt-x")
    result = run(client)
    assert not result.ok and result.provider_error == kind and result.attempts == 1 and client.remaining == 2
    assert "方式" not in result.errors[0]
    if kind == "not_found":
        assert "モデル scripted-model が見つかりません" not in result.errors[0]
        assert "モデル gpt-x が見つかりません" in result.errors[0]


def test_empty_string_refusal_is_a_refusal_and_length_is_truncated():
    class Client:
        name, model = "c", "m"

        def __init__(self, responses):
            self.responses = list(responses)

        def complete(self, request):
            return self.responses.pop(0)

    result = run(Client([LLMResponse(content="", refusal="No.")]))
    assert result.provider_error == "refusal" and result.raw == "No."
    cut = LLMResponse(content=GOOD[:20], finish_reason="length")
    result = run(Client([cut, LLMResponse(content=GOOD)]))
    assert result.ok and result.repairs == 1


def test_debug_records_are_built_only_with_a_sink(monkeypatch):
    import core.engine
    built = []
    real = core.engine.make_record
    monkeypatch.setattr(core.engine, "make_record", lambda **kw: built.append(kw) or real(**kw))
    run(ScriptedClient(["not json", GOOD]))
    text_call_ = core.engine.text_call(ScriptedClient(["x"]), [{"role": "user", "content": "x"}], task="t")
    assert built == [] and text_call_ == "x"
    log = []
    run(ScriptedClient(["not json", GOOD]), log=log)
    assert len(built) == 2 == len(log)


def test_unknown_exceptions_never_show_python_text(caplog):
    result = run(ScriptedClient([IndexError("list index out of range")]))
    assert result.provider_error == "unknown"
    assert "IndexError" not in result.error_text and "list index" not in result.error_text
    assert any("IndexError" in r.getMessage() for r in caplog.records)  # but the server log has it


def test_current_turn_is_one_token_per_outermost_turn_deadline():
    """What a turn checks once (the manual index's freshness) is keyed by this token (issue #25)."""
    from core.engine import current_turn, turn_deadline

    assert current_turn() is None
    with turn_deadline(30):
        first = current_turn()
        with turn_deadline(10):  # a nested block is the same turn
            assert current_turn() is first
    assert first is not None and current_turn() is None
    with turn_deadline(30):
        assert current_turn() is not None and current_turn() is not first


def test_keep_tail_pins_the_last_messages_through_fitting_and_a_repair():
    """``keep_tail=3`` (an answer guard's regeneration: the question with its sources, the rejected output,
    the reason): a small context trims the sources and drops older turns, never those three; a repair of
    the reply keeps them too, with its own two messages after them."""
    from core.text.untrusted import OPEN, data_block
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
              "additionalProperties": False}
    question = "質問: 支払期限は？\n" + data_block("第4条 代金は引渡し後30日以内に支払う。" * 80)
    stack = [{"role": "system", "content": "S"}, {"role": "user", "content": "前の質問" * 40},
             {"role": "assistant", "content": "前の回答" * 40}, {"role": "user", "content": question},
             {"role": "assistant", "content": '{"answer": "支払期限は？"}'}, {"role": "user", "content": "もう一度答えて"}]
    client = ScriptedClient(["not json", '{"answer": "引渡し後30日以内です。"}'], strategies=(STRUCTURED_OUTPUT,))
    client.context_tokens = 1000
    log = []
    result = structured_call(client, stack, schema=schema, name="t", keep_tail=3, log=log)
    assert result.ok and len(client.requests) == 2
    first, repair = client.requests[0].messages, client.requests[1].messages
    assert "前の質問" not in str(first) and first[-3]["content"].startswith("質問: 支払期限は？") and OPEN in first[-3]["content"]
    assert first[-2:] == stack[-2:]
    assert repair[-5]["content"].startswith("質問: 支払期限は？") and repair[-4:-2] == stack[-2:]
    assert repair[-2]["content"] == "not json"
    assert "参照テキスト" in " ".join(log[0]["call"]["fit"]) and "以前の会話 2 件を省略しました" in log[0]["call"]["fit"]
