"""What the wire tests of the SDK providers (Bedrock, Gemini, watsonx) share: the knowledge turn they run
through the real engine, a valid answer, and the error kinds every provider must type."""
from __future__ import annotations

import json

from core.engine import RetryPolicy
from core.knowledge.turn import call_llm, entry_schema, system_prompt, turn_schema
from core.llm.stream import RecordingSink, stream_to

GOOD = {"control": {"schema_version": "1.0", "mode": "interview"},
        "state": {"phase": "collect_case", "missing_info": []},
        "assistant_message": "どの契約書ですか？", "knowledge_json": None}
GOOD_TEXT = json.dumps(GOOD, ensure_ascii=False)
BAD_TEXT = json.dumps({"assistant_message": "スキーマに合わない"}, ensure_ascii=False)
NO_RETRY = RetryPolicy(max_retries=0, sleep=lambda s: None)


def run(client, log=None, retry=NO_RETRY):
    return call_llm("NDA の件", [], system_prompt(), [], client, turn_schema(), entry_schema(), log=log, retry=retry)


def run_streamed(client):
    sink, log = RecordingSink(), []
    with stream_to(sink):
        result = run(client, log)
    return result, sink, log


def chunks(text: str, size: int = 7) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]
