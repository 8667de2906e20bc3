"""The shared body of the SDK providers (core.llm.sdk_client), through the real google-genai SDK over an
httpx MockTransport: the first-token and between-token timers, the turn deadline, the output cap and the
context budget work as they do for the OpenAI client."""
from __future__ import annotations

import json
import time

import httpx

from core.engine import RetryPolicy
from core.knowledge.turn import call_llm, entry_schema, system_prompt, turn_schema
from core.llm.gemini import GeminiClient
from core.llm.strategies import STRUCTURED_OUTPUT
from tests.core.llm.provider_cases import GOOD_TEXT, chunks, run
from tests.core.llm.test_gemini_wire import answer


def _sse(events, pause_before=0.0, pause_between=0.0):
    def body():
        time.sleep(pause_before)
        for i, event in enumerate(events):
            if i:
                time.sleep(pause_between)
            yield f"data: {json.dumps(event, ensure_ascii=False)}\r\n\r\n".encode()
    return body()


def _client(handler, **kwargs):
    client = GeminiClient(model="gemini-2.5-flash", api_key="AIza-limits-test-0123456789",
                          http_client=httpx.Client(transport=httpx.MockTransport(handler)), **kwargs)
    client.strategies = (STRUCTURED_OUTPUT,)
    return client


def _pieces(text):
    return [answer(part) for part in chunks(text)]


def test_a_silent_server_fires_the_first_token_timer():
    def handler(request):
        return httpx.Response(200, content=_sse(_pieces(GOOD_TEXT), pause_before=3.0),
                              headers={"content-type": "text/event-stream"})

    client = _client(handler, stream=True, timeout=10, first_token_timeout=0.5)
    started = time.perf_counter()
    result = run(client)
    assert not result.ok and result.provider_error == "timeout" and result.timer == "first_token"
    assert time.perf_counter() - started < 2.5
    assert client.last_timeout["timer"] == "first_token" and client.last_timeout["seconds"] == 0.5


def test_a_stalled_stream_fires_the_token_gap_timer():
    def handler(request):
        return httpx.Response(200, content=_sse(_pieces(GOOD_TEXT), pause_between=3.0),
                              headers={"content-type": "text/event-stream"})

    client = _client(handler, stream=True, timeout=10, token_gap_timeout=0.5)
    result = run(client)
    assert not result.ok and result.provider_error == "timeout" and result.timer == "token_gap"


def test_the_turn_deadline_bounds_a_whole_response():
    def handler(request):
        time.sleep(3.0)
        return httpx.Response(200, json=answer(GOOD_TEXT))

    client = _client(handler, stream=False, timeout=10)
    client.turn_deadline = 0.5
    started = time.perf_counter()
    result = run(client)
    assert not result.ok and result.provider_error == "deadline" and time.perf_counter() - started < 2.5


def test_output_over_the_cap_is_truncated_then_repaired():
    replies = [answer("x" * 100_000), answer(GOOD_TEXT)]

    def handler(request):
        return httpx.Response(200, json=replies.pop(0))

    client = _client(handler, stream=False, timeout=10, max_output_bytes=1000)
    client.max_output_bytes = 1000
    log = []
    result = call_llm("NDA の件", [], system_prompt(), [], client, turn_schema(), entry_schema(), log=log,
                      retry=RetryPolicy(max_retries=0, sleep=lambda s: None))
    assert result.ok and result.repairs == 1
    assert log[0]["outcome"] == "provider_error:truncated"
    assert len(log[0]["raw_output"] or "") <= 2000  # never the whole 100 KB in the debug record


def test_the_prompt_is_fitted_to_the_configured_context():
    sent = []

    def handler(request):
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=answer(GOOD_TEXT))

    client = _client(handler, stream=False, timeout=10, context_tokens=3000)
    attachment = "第1条 秘密情報の定義。" * 3000  # far more than 3000 tokens
    result = call_llm("この契約書を確認してください", [attachment], system_prompt(), [], client, turn_schema(),
                      entry_schema(), retry=RetryPolicy(max_retries=0, sleep=lambda s: None))
    assert result.ok
    text = "".join(p["text"] for c in sent[0]["contents"] for p in c["parts"])
    assert len(text) < len(attachment) // 2 and sent[0]["generationConfig"]["maxOutputTokens"] <= 1500 + client.thinking_tokens
