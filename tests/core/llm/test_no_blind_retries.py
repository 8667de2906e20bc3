"""No blind retries (issue #26): a timed-out request is sent again only when the turn's deadline leaves time
for it to succeed, and a server that goes away mid-answer is a typed connection error with its Japanese
message (never "unknown") — on a scripted client with a fake clock, and on the real openai SDK over
httpx.MockTransport (a stream cut off by the peer, a stream that stops without its end mark)."""
import json

import httpx

from core.engine import RetryPolicy, structured_call
from core.llm.base import DROPPED, LLMRequest, ProviderError, classify_exception
from core.llm.openai_compat import OpenAICompatibleClient
from core.results import provider_error_ja

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
          "additionalProperties": False}


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


class HungServer:
    """Every request runs until its timer fires (``timeout`` seconds on the fake clock), then times out."""

    name, model = "hung", "hung-model"

    def __init__(self, clock, timeout):
        self.clock, self.timeout, self.calls = clock, timeout, 0

    def complete(self, request: LLMRequest):
        self.calls += 1
        self.clock.now += min(self.timeout, request.timeout)
        raise ProviderError("timeout", "no answer", timer="first_token")


def call(client, clock, deadline):
    retry = RetryPolicy(max_retries=2, base_delay=0.5, sleep=clock.sleep, clock=clock)
    return structured_call(client, [{"role": "user", "content": "q"}], schema=SCHEMA, name="t", max_repairs=0,
                           timeout=60, deadline=deadline, retry=retry)


def test_a_timeout_is_retried_only_while_the_deadline_leaves_time_for_it():
    clock = FakeClock()
    server = HungServer(clock, 60)
    result = call(server, clock, deadline=150)
    # 60 s in vain, 0.5 s backoff, 89.5 s left >= 60: one retry; then 29 s left < 60: no third blind resend
    assert server.calls == 2 and result.provider_error == "timeout" and clock.now < 150
    clock, server = FakeClock(), None
    server = HungServer(clock, 60)
    call(server, clock, deadline=100)  # 40 s left after the first: no retry at all
    assert server.calls == 1


def test_a_quick_timeout_is_still_retried():
    clock = FakeClock()
    server = HungServer(clock, 2)  # a 408 or a short timer: there is time to try again
    call(server, clock, deadline=150)
    assert server.calls == 3


# ---- a connection lost mid-answer, over the SDK ------------------------------------------------

class CutStream(httpx.SyncByteStream):
    def __init__(self, lines, error=None):
        self.lines, self.error = lines, error

    def __iter__(self):
        for line in self.lines:
            yield line.encode()
        if self.error is not None:
            raise self.error


def chunk(text, finish=None):
    return "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                                  "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}) + "\n\n"


def sdk_client(handler):
    http = httpx.Client(transport=httpx.MockTransport(handler), base_url="http://llm.local/v1")
    client = OpenAICompatibleClient(model="m", base_url="http://llm.local/v1", http_client=http, timeout=10)
    client.strategies = ("structured_output",)
    return client


def run(client, log):
    retry = RetryPolicy(max_retries=1, base_delay=0.0, sleep=lambda s: None)
    return structured_call(client, [{"role": "user", "content": "q"}], schema=SCHEMA, name="t", max_repairs=0,
                           retry=retry, log=log)


def test_a_stream_cut_off_by_the_peer_is_a_connection_error_not_unknown():
    sent = []

    def handler(request):
        sent.append(request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=CutStream([chunk('{"ans')], httpx.RemoteProtocolError("peer closed connection")))

    log = []
    result = run(sdk_client(handler), log)
    assert result.provider_error == "connection" and len(sent) == 2  # transient: retried once, then typed
    assert log[-1]["outcome"] == "provider_error:connection" and log[-1]["call"]["connection"] == DROPPED
    assert "応答の途中で切れました" in result.errors[0] and "予期しない" not in " ".join(result.errors)


def test_a_stream_that_stops_without_its_end_mark_is_a_connection_error():
    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=CutStream([chunk('{"answer": "途中')]))

    result = run(sdk_client(handler), [])
    assert result.provider_error == "connection" and result.timer == DROPPED


def test_a_complete_stream_still_answers():
    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=CutStream([chunk('{"answer": "はい"}', "stop"), "data: [DONE]\n\n"]))

    result = run(sdk_client(handler), [])
    assert result.ok and result.data == {"answer": "はい"}


def test_transport_errors_are_typed_with_a_japanese_message():
    dropped = classify_exception(httpx.ReadError("connection reset"))
    assert dropped.kind == "connection" and dropped.timer == DROPPED
    assert "途中で切れました" in provider_error_ja(dropped.kind, timer=dropped.timer)
    assert classify_exception(httpx.ConnectError("refused")).kind == "connection"
    assert classify_exception(httpx.ReadTimeout("slow")).kind == "timeout"
    assert classify_exception(ConnectionResetError()).kind == "connection"
