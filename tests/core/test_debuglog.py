"""Debug records: personal data in the call is masked, the console's own tags are kept as made."""
from __future__ import annotations

from core.debuglog import CallTags, make_record
from core.llm.base import LLMRequest


def _record(session_id: str) -> dict:
    request = LLMRequest(messages=[{"role": "user", "content": "電話は09012345678です"}], task="t")
    return make_record(tags=CallTags(session_id=session_id, flow="diagnosis", step="diagnosing", prompt="p"),
                       provider="offline", model="m", strategy="s", attempt=1, kind="call", request=request,
                       raw='{"phone": "09012345678"}', outcome="ok")


def test_a_generated_session_id_with_a_phone_like_digit_run_is_not_masked():
    # uuid4().hex[:12] can be "a09012345678": the CI run that found this had one session's records
    # carry "a[電話番号]" instead of its id, so the debug panel lost track of whose call it was.
    record = _record("a09012345678")
    assert record["session_id"] == "a09012345678"
    assert (record["flow"], record["step"], record["prompt"]) == ("diagnosis", "diagnosing", "p")
    assert "09012345678" not in record["messages"][0]["content"]
    assert "09012345678" not in record["raw_output"]
    assert list(record)[:2] == ["time", "session_id"]


def test_the_records_time_is_not_sent_through_masking(monkeypatch):
    """Issue #25: the time is the console's own (new on every call, so a masking pass per record that could
    never be remembered); every string of the call still is masked."""
    from datetime import datetime

    from core import debuglog

    scrubbed: list[str] = []
    real = debuglog.scrub

    def spy(value, extra=()):
        def walk(v):
            if isinstance(v, str):
                scrubbed.append(v)
            elif isinstance(v, dict):
                for x in v.values():
                    walk(x)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    walk(x)
        walk(value)
        return real(value, extra)

    monkeypatch.setattr(debuglog, "scrub", spy)
    record = _record("s1")
    assert datetime.fromisoformat(record["time"]) and record["time"] not in scrubbed
    assert "電話は09012345678です" in scrubbed and '{"phone": "09012345678"}' in scrubbed
    assert "09012345678" not in record["messages"][0]["content"]
