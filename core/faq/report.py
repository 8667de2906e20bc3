"""Presentation helpers for the FAQ console page (no Streamlit here): outcome labels, trace tables."""
from __future__ import annotations

import re
from typing import Any

# outcome → (Japanese label, badge colour)
OUTCOME_BADGES = {
    "answered": ("回答（根拠あり）", "green"),
    "not_found": ("該当記事なし", "orange"),
    "fallback": ("縮退応答", "red"),
    "refused": ("お断り", "red"),
    "handoff": ("担当者へ引き継ぎ", "violet"),
    "smalltalk": ("案内・雑談", "gray"),
}
TRACE_COLUMNS = ["turn_id", "node", "action", "outcome", "latency_ms", "intent_type", "confidence", "tool_name",
                 "tool_status", "tool_ref", "citations", "error_type"]


# "kb:012" where an answer names its article; the article's title in 「」 follows it.
_ARTICLE_ID = re.compile(r"[ \t]*kb:[0-9]{1,9}[ \t]*")  # no nesting, no overlap: linear


def without_article_ids(message: str) -> str:
    """An answer as people read it: 「詳しくは kb:012「…」をご覧ください」 → 「詳しくは「…」をご覧ください」.
    The id is internal (the citations and the debug views keep it); the title stays."""
    return _ARTICLE_ID.sub("", message or "")


def outcome_badge(outcome: str | None) -> tuple[str, str]:
    return OUTCOME_BADGES.get(outcome or "", (outcome or "不明", "gray"))


def trace_frame(trace: list[dict[str, Any]]):
    """The trace entries as a DataFrame (one row per node, in run order; tool_ref joined)."""
    import pandas as pd

    rows = [{**{c: e.get(c) for c in TRACE_COLUMNS}, "tool_ref": ", ".join(e.get("tool_ref") or [])} for e in trace]
    return pd.DataFrame(rows, columns=TRACE_COLUMNS)


def latency_frame(trace: list[dict[str, Any]]):
    """Latency per node for a bar chart: index ``"01 API"``, ``"02 IR"`` … (run order kept by the prefix)."""
    import pandas as pd

    rows = [{"step": f"{i:02d} {e.get('node')}", "latency_ms": float(e.get("latency_ms") or 0.0)}
            for i, e in enumerate(trace, start=1)]
    return pd.DataFrame(rows, columns=["step", "latency_ms"]).set_index("step")
