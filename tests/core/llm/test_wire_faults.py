"""The real openai SDK path (``OpenAICompatibleClient``) against a fake server with faults:
whole-request timeouts and turn deadlines, Retry-After, typed 401/403/404, refusals, truncation,
bad 200 bodies, huge outputs, secrets in output, logging. Time bounds are deliberately wide."""
import json
import logging
import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.knowledge.turn import call_llm, entry_schema, system_prompt, turn_schema
from core.llm.base import ProviderError
from core.llm.openai_compat import parse_completion
from core.llm.registry import ProviderRegistry
from core.llm.settings import load_settings
from core.llm.strategies import PROMPT_EXTRACT, STRUCTURED_OUTPUT, TOOL_CALL
from core.text.pii import KNOWN_SECRETS
from tests.fakes.openai_server import DEFAULT_TURN, Fault

CHAIN = (STRUCTURED_OUTPUT, TOOL_CALL, PROMPT_EXTRACT)
KEY = "sk-fake-server-key-0123456789"
PY_ERRORS = ("IndexError", "AttributeError", "KeyError", "TypeError", "Traceback", "NoneType")


def run(client, log=None):
    return call_llm("NDA の件", [], system_prompt(), [], client, turn_schema(), entry_schema(), log=log)


@pytest.fixture
def known_key():
    KNOWN_SECRETS.add(KEY)
    yield KEY
    KNOWN_SECRETS.discard(KEY)


def test_ok_turn_over_the_real_sdk(fake_openai):
    log = []
    result = run(fake_openai.client(strategies=CHAIN), log)
    assert result.ok and result.data["assistant_message"] == DEFAULT_TURN["assistant_message"]
    assert fake_openai.count == 1 and fake_openai.requests[0]["response_format"]["type"] == "json_schema"
    assert fake_openai.headers[0]["authorization"] == f"Bearer {KEY}"
    assert log[0]["outcome"] == "ok" and log[0]["usage"]["total_tokens"] == 15


# ---- deadlines ---------------------------------------------------------------------------------

def test_a_trickled_body_is_cut_by_the_whole_request_timeout(fake_openai):
    # ~400 bytes at one byte per 0.1 s: 40 s per request before the fix (timeout only between reads).
    fake_openai.set("trickle", interval=0.1)
    client = fake_openai.client(timeout=1, turn_deadline=60)
    started = time.monotonic()
    result = run(client)
    assert time.monotonic() - started < 10
    assert result.provider_error == "timeout" and fake_openai.count == 3  # 1 call + 2 retries, each cut at 1 s


def test_a_one_second_turn_deadline_against_a_30_second_trickle(fake_openai):
    fake_openai.set("trickle", interval=0.1)
    client = fake_openai.client(timeout=30, turn_deadline=1)
    started = time.monotonic()
    result = run(client)
    assert time.monotonic() - started < 10
    assert not result.ok and result.provider_error == "deadline" and fake_openai.count == 1
    assert "タイムアウト" in result.errors[0] and result.status_label == "モデルの呼び出しに失敗しました（タイムアウト（制限時間超過））"


def test_a_stalled_server_is_cut_by_the_deadline(fake_openai):
    fake_openai.set("stall", seconds=30)
    started = time.monotonic()
    result = run(fake_openai.client(timeout=30, turn_deadline=1))
    assert time.monotonic() - started < 10 and result.provider_error == "deadline"


def test_settings_reach_the_client_through_the_registry(fake_openai):
    settings = load_settings({"OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_MODEL": "fake-model",
                              "KAIWA_TIMEOUT": "5", "KAIWA_TURN_DEADLINE": "1", "KAIWA_MAX_OUTPUT_BYTES": "4096"})
    client = ProviderRegistry(settings).get_active()
    assert (client.timeout, client.turn_deadline, client.max_output_bytes) == (5.0, 1.0, 4096)
    assert load_settings({"KAIWA_TIMEOUT": "4"}).deadline_seconds == 12.0  # default: 3 × timeout
    assert load_settings({"KAIWA_TURN_DEADLINE": "nan", "KAIWA_MAX_OUTPUT_BYTES": "-1"}).max_output_bytes == 256 * 1024
    fake_openai.set("trickle", interval=0.1)
    started = time.monotonic()
    assert run(client).provider_error == "deadline" and time.monotonic() - started < 10


# ---- Retry-After -------------------------------------------------------------------------------

@pytest.mark.parametrize("fault", ["rate_limit", "unavailable"])
def test_retry_after_is_honoured(fake_openai, _offline_and_fast, fault):
    fake_openai.queue(Fault(fault, {"retry_after": 3}))
    result = run(fake_openai.client())
    assert result.ok and fake_openai.count == 2 and result.attempts == 2
    assert _offline_and_fast == [3.0]  # the server's wait, not the 0.5 s backoff


def test_retry_after_is_capped(fake_openai, _offline_and_fast):
    fake_openai.queue(Fault("rate_limit", {"retry_after": 100}))
    result = run(fake_openai.client(turn_deadline=600))
    assert result.ok and _offline_and_fast == [20.0]


def test_retry_after_beyond_the_deadline_fails_at_once(fake_openai, _offline_and_fast):
    fake_openai.queue(Fault("rate_limit", {"retry_after": 30}))
    result = run(fake_openai.client(turn_deadline=5))
    assert not result.ok and result.provider_error == "rate_limit"
    assert fake_openai.count == 1 and _offline_and_fast == []


# ---- typed errors that must not walk the strategy chain ----------------------------------------

def test_404_model_not_found_fails_at_once_with_the_servers_message(fake_openai):
    fake_openai.set("not_found")
    log = []
    result = run(fake_openai.client(strategies=CHAIN), log)
    assert not result.ok and result.provider_error == "not_found" and fake_openai.count == 1
    assert "モデル fake-model が見つかりません" in result.errors[0]
    assert "does not exist" in result.errors[1]
    assert "方式" not in result.error_text
    assert log[0]["http_status"] == 404 and "model_not_found" in log[0]["error_body"]


@pytest.mark.parametrize("fault,kind", [("unauthorized", "auth"), ("forbidden", "forbidden")])
def test_401_and_403_fail_at_once(fake_openai, known_key, fault, kind):
    fake_openai.set(fault)
    log = []
    result = run(fake_openai.client(strategies=CHAIN), log)
    assert not result.ok and result.provider_error == kind and fake_openai.count == 1
    assert KEY not in json.dumps(log) and KEY not in result.error_text  # 401 echoes the key


def test_rejected_response_format_moves_down_the_chain(fake_openai):
    fake_openai.set("reject_format")
    result = run(fake_openai.client(strategies=CHAIN))
    assert result.ok and result.method == TOOL_CALL and fake_openai.count == 2
    assert "tools" in fake_openai.requests[1] and "response_format" not in fake_openai.requests[1]


# ---- refusals, truncation ----------------------------------------------------------------------

@pytest.mark.parametrize("fault", ["refusal_null", "refusal_empty"])
def test_refusal_with_null_or_empty_content(fake_openai, fault):
    fake_openai.set(fault, refusal="I can't help with that.")
    result = run(fake_openai.client(strategies=CHAIN))
    assert not result.ok and result.provider_error == "refusal" and fake_openai.count == 1
    assert result.raw == "I can't help with that."


def test_finish_reason_length_is_truncated_and_repaired_with_a_shorter_ask(fake_openai):
    fake_openai.queue("length")
    log = []
    result = run(fake_openai.client(), log)
    assert result.ok and result.repairs == 1 and fake_openai.count == 2
    assert log[0]["outcome"] == "provider_error:truncated"
    repair = fake_openai.requests[1]["messages"][-1]["content"]
    assert "エラー種別: truncated" in repair and "より短い" in repair


def test_persistent_truncation_is_a_typed_error_not_a_parse_error(fake_openai):
    fake_openai.set("length")
    result = run(fake_openai.client())
    assert not result.ok and result.error_type == "provider_error" and result.provider_error == "truncated"
    assert result.attempts == 3


# ---- 200s that are not chat completions --------------------------------------------------------

@pytest.mark.parametrize("fault", ["empty_choices", "html", "not_chat"])
def test_bad_200_bodies_are_retried_bad_responses(fake_openai, fault):
    fake_openai.queue(fault)
    assert run(fake_openai.client()).ok and fake_openai.count == 2
    fake_openai.reset()
    fake_openai.set(fault)
    log = []
    result = run(fake_openai.client(strategies=CHAIN), log)
    assert not result.ok and result.provider_error == "bad_response" and fake_openai.count == 3
    shown = result.error_text + result.raw + result.status_label
    assert not any(name in shown for name in PY_ERRORS)
    assert [r["outcome"] for r in log] == ["provider_error:bad_response"] * 3
    if fault == "html":
        assert "502 Bad Gateway" in log[0]["error_body"] and "HTML" in result.errors[1]


def test_server_error_record_keeps_the_servers_body(fake_openai, caplog):
    fake_openai.set("server_error")
    log = []
    with caplog.at_level(logging.WARNING, logger="kaiwa.engine"):
        result = run(fake_openai.client(), log)
    assert result.provider_error == "server_error" and fake_openai.count == 3
    assert log[0]["http_status"] == 500 and "had an error" in log[0]["error_body"]


# ---- huge output, secrets, logging -------------------------------------------------------------

def test_huge_output_is_capped_before_parsing_and_logging(fake_openai):
    fake_openai.queue(Fault("huge", {"size": 256 * 1024}))
    log = []
    result = run(fake_openai.client(max_output_bytes=64 * 1024), log)
    assert result.ok and result.repairs == 1 and fake_openai.count == 2
    first = log[0]
    assert first["outcome"] == "provider_error:truncated" and first["raw_output_bytes"] > 256 * 1024
    assert len(first["raw_output"].encode()) <= 64 * 1024 and first["raw_output"].startswith('{"assistant_message"')
    repair_messages = fake_openai.requests[1]["messages"]
    assert len(json.dumps(repair_messages, ensure_ascii=False)) < 64 * 1024  # only the head is echoed back
    assert "エラー種別: truncated" in repair_messages[-1]["content"]


def test_a_body_far_over_the_cap_is_not_read_to_the_end(fake_openai):
    fake_openai.queue(Fault("huge", {"size": 4 * 1024 * 1024}))
    log = []
    result = run(fake_openai.client(max_output_bytes=16 * 1024), log)
    assert result.ok and result.repairs == 1 and fake_openai.count == 2
    assert log[0]["outcome"] == "provider_error:truncated" and "chatcmpl-fake" in log[0]["error_body"]


def test_model_output_is_scrubbed_of_the_configured_key(fake_openai, known_key):
    fake_openai.set("echo_key")
    log = []
    result = run(fake_openai.client(), log)
    assert result.ok and "[秘匿]" in result.data["assistant_message"]
    assert KEY not in json.dumps(result.data, ensure_ascii=False) and KEY not in result.raw
    assert KEY not in json.dumps(log, ensure_ascii=False)


def test_failures_reach_the_server_log_masked_without_a_debug_sink(fake_openai, known_key, caplog):
    fake_openai.set("unauthorized")
    with caplog.at_level(logging.WARNING, logger="kaiwa.engine"):
        result = run(fake_openai.client(), log=None)
    assert result.provider_error == "auth"
    messages = [r.getMessage() for r in caplog.records if r.name == "kaiwa.engine"]
    assert messages and any("provider_error:auth" in m for m in messages)
    assert KEY not in caplog.text


def test_fallbacks_are_logged(fake_openai, caplog):
    fake_openai.set("reject_format")
    with caplog.at_level(logging.WARNING, logger="kaiwa.engine"):
        assert run(fake_openai.client(strategies=CHAIN)).ok
    assert any("falling back" in r.getMessage() and "structured_output" in r.getMessage() for r in caplog.records)


def test_connection_refused_is_a_typed_connection_error(fake_openai):
    client = fake_openai.client(timeout=5)
    fake_openai.stop()
    started = time.monotonic()
    result = run(client)
    assert result.provider_error == "connection" and time.monotonic() - started < 10


# ---- any 200 body: an LLMResponse or a typed bad_response, never a Python exception -------------

_KEYS = st.sampled_from(["choices", "message", "content", "tool_calls", "function", "arguments", "refusal",
                         "usage", "finish_reason", "model", "text", "type"])
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
                     max_leaves=25)


@settings(max_examples=300, deadline=None)
@example(b'{"choices": [1]}')
@example(b'{"choices": [{"message": {"content": [1]}}]}')
@example(b'{"choices": [{"message": {"tool_calls": "abc"}}]}')
@example(b'{"choices": [{"message": {"tool_calls": [{"function": null}]}}]}')
@example(b'{"choices": [{"message": {"content": "x", "refusal": {"a": 1}}}], "usage": [1]}')
@given(st.one_of(_JSON.map(lambda v: json.dumps(v).encode()), st.binary(max_size=64)))
def test_parse_completion_never_raises_a_python_error(body):
    try:
        response = parse_completion(body, model="m")
    except ProviderError as err:
        assert err.kind == "bad_response" and err.transient
    else:
        assert response.content is None or isinstance(response.content, str)
        assert response.tool_arguments is None or isinstance(response.tool_arguments, str)
        assert response.refusal is None or isinstance(response.refusal, str)
