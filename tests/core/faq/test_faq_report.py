"""Page helpers: outcome badges and trace tables for the chart."""
from core.faq.report import OUTCOME_BADGES, latency_frame, outcome_badge, trace_frame
from core.faq.flow import OUTCOMES

TRACE = [{"turn_id": 1, "node": f"N{i}", "action": "a", "outcome": "o", "latency_ms": float(i), "tool_ref": ["kb:1"]}
         for i in range(1, 12)]


def test_every_outcome_has_a_badge():
    assert set(OUTCOME_BADGES) == set(OUTCOMES)
    assert outcome_badge("handoff") == ("担当者へ引き継ぎ", "violet")
    assert outcome_badge(None)[1] == "gray"


def test_latency_frame_keeps_the_run_order_when_sorted():
    frame = latency_frame(TRACE)
    assert list(frame.index) == sorted(frame.index)
    assert frame.index[0] == "01 N1" and frame.index[10] == "11 N11"
    assert frame["latency_ms"].tolist() == [float(i) for i in range(1, 12)]


def test_trace_frame_columns():
    frame = trace_frame(TRACE[:1])
    assert frame.loc[0, "node"] == "N1" and frame.loc[0, "tool_ref"] == "kb:1"
    assert "error_type" in frame.columns
