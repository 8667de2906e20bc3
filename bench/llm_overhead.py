"""Engine overhead vs ``instructor``: one structured call over the real ``openai`` SDK, no network.

Both sides talk to the same ``httpx.MockTransport`` (a fixed chat completion, built once):

* ours — :func:`core.engine.structured_call` over :class:`core.llm.openai_compat.OpenAICompatibleClient`
  (JSON-schema response format, parse, validate, no log sink);
* instructor — ``instructor.from_openai(OpenAI(...), mode=JSON_SCHEMA)`` with the equivalent
  pydantic model.

``engine_overhead_vs_instructor`` is ours / instructor per call when the first answer is valid;
``engine_repair_overhead_vs_instructor`` the same when the first answer is invalid and one repair
(instructor: one re-ask) fixes it. Rounds alternate the two sides; medians.
``engine_debug_sink_cost_ratio`` is ours with a debug log sink / without one (the debug record is
built and scrubbed only when there is a sink). ``instructor`` is a
bench-only dependency (``bench/requirements.txt``); without it :func:`run` returns no figures.
"""
from __future__ import annotations

import json
import statistics
import time
from typing import Any

import httpx

SCHEMA = {"type": "object", "additionalProperties": False,
          "required": ["answer", "urgency", "steps"],
          "properties": {"answer": {"type": "string"}, "urgency": {"type": "string", "enum": ["low", "high"]},
                         "steps": {"type": "array", "items": {"type": "string"}}}}
VALID = {"answer": "ブレーキ液の漏れが考えられます。安全な場所に停車してください。" * 3, "urgency": "high",
         "steps": ["安全な場所に停車する", "販売店に連絡する", "レッカーを手配する"]}
INVALID = {"answer": "ブレーキ液の漏れが考えられます。", "urgency": "urgent"}
MESSAGES = [{"role": "system", "content": "あなたは整備士です。JSON で答えてください。"},
            {"role": "user", "content": "ブレーキを踏むと床まで沈みます。"}]


def _completion(payload: dict) -> bytes:
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "bench",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": json.dumps(payload, ensure_ascii=False)}}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}},
                      ensure_ascii=False).encode("utf-8")


class _Transport:
    """Answers VALID, or (``repair``) INVALID then VALID alternately."""

    def __init__(self) -> None:
        self.repair = False
        self.calls = 0
        self._valid, self._invalid = _completion(VALID), _completion(INVALID)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        body = self._invalid if self.repair and self.calls % 2 == 1 else self._valid
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})


def _ours(transport: _Transport, sink: bool = False):
    from core.engine import structured_call
    from core.llm.openai_compat import OpenAICompatibleClient

    client = OpenAICompatibleClient(model="bench", api_key="k", base_url="http://llm.invalid/v1",
                                    http_client=httpx.Client(transport=httpx.MockTransport(transport)))

    def call() -> Any:
        result = structured_call(client, MESSAGES, schema=SCHEMA, name="answer", strategies=("structured_output",),
                                 log=[] if sink else None)
        assert result.ok, result.errors
        return result
    return call


def _instructor(transport: _Transport):
    import instructor
    from openai import OpenAI
    from pydantic import BaseModel

    class Answer(BaseModel):
        answer: str
        urgency: str
        steps: list[str]

        model_config = {"extra": "forbid"}

    from typing import Literal

    Answer.model_fields["urgency"].annotation = Literal["low", "high"]
    Answer.model_rebuild(force=True)
    sdk = OpenAI(api_key="k", base_url="http://llm.invalid/v1", max_retries=0,
                 http_client=httpx.Client(transport=httpx.MockTransport(transport)))
    client = instructor.from_openai(sdk, mode=instructor.Mode.JSON_SCHEMA)

    def call() -> Any:
        return client.chat.completions.create(model="bench", messages=MESSAGES, response_model=Answer,
                                              max_retries=2, temperature=0.2)
    return call


def _per_call(fn, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - started) / n


def run(quick: bool = False) -> dict:
    try:
        import instructor  # noqa: F401
    except ImportError:
        return {}
    out: dict[str, Any] = {}
    rounds, n = (5, 20) if quick else (9, 60)
    for label, repair in (("engine_overhead_vs_instructor", False), ("engine_repair_overhead_vs_instructor", True)):
        t_ours, t_instr = _Transport(), _Transport()
        t_ours.repair = t_instr.repair = repair
        ours, theirs = _ours(t_ours), _instructor(t_instr)
        first = ours()
        assert first.repairs == (1 if repair else 0), first
        theirs()
        a, b = [], []
        for _ in range(rounds):
            a.append(_per_call(ours, n))
            b.append(_per_call(theirs, n))
        out[label] = round(statistics.median(a) / statistics.median(b), 2)
        out[label.replace("_vs_instructor", "_ms")] = round(statistics.median(a) * 1000, 2)
        out[label.replace("engine", "instructor").replace("_vs_instructor", "_ms")] = round(statistics.median(b) * 1000, 2)
    # the debug record (built and scrubbed only when a log sink is given): with a sink / without
    plain, logged = _ours(_Transport()), _ours(_Transport(), sink=True)
    a, b = [], []
    for _ in range(rounds):
        a.append(_per_call(logged, n))
        b.append(_per_call(plain, n))
    out["engine_debug_sink_cost_ratio"] = round(statistics.median(a) / statistics.median(b), 2)
    return out


if __name__ == "__main__":
    print(json.dumps(run(quick=True), indent=1))
