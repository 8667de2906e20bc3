"""The reviewed answers as an export (``GET /api/review/export``, the レビュー page's download): one line per
reviewed item — session, turn, flow, the user's message, the answer, verdict, labels, comment, corrected answer,
prompt version, model, reviewer and time (Japan time). Personal data is masked (the snapshot was masked when
queued; the comment and the correction are masked here), secrets removed; the CSV goes through the one
spreadsheet-safe rule (``core.text.spreadsheet``)."""
from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from core.text.jst import jst_stamp
from core.text.pii import clean_text
from core.text.spreadsheet import csv_bytes

COLUMNS = ("session_id", "turn", "flow", "user_message", "answer", "verdict", "labels", "comment", "corrected_answer",
           "prompt_version", "model", "reviewer", "reviewed_at")


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def export_rows(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for item in items:
        snapshot = item.get("snapshot") or {}
        rows.append({"session_id": item["conversation_id"], "turn": item["turn"], "flow": item["flow"],
                     "user_message": clean_text(snapshot.get("question") or ""),
                     "answer": clean_text(snapshot.get("answer") or ""), "verdict": item.get("verdict"),
                     "labels": list(item.get("labels") or []), "comment": clean_text(item.get("comment") or ""),
                     "corrected_answer": _clean(item.get("corrected_answer")),
                     "prompt_version": item.get("prompt_version") or "", "model": item.get("model") or "",
                     "reviewer": item.get("reviewed_by_label") or "", "reviewed_at": jst_stamp(item.get("reviewed_at"))})
    return rows


def export_jsonl(items: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in export_rows(items))


def export_csv(items: Iterable[Mapping[str, Any]]) -> bytes:
    import pandas as pd

    rows = []
    for row in export_rows(items):
        corrected = row["corrected_answer"]
        rows.append({**row, "labels": "、".join(row["labels"]),
                     "corrected_answer": "" if not corrected else json.dumps(corrected, ensure_ascii=False)})
    return csv_bytes(pd.DataFrame(rows, columns=list(COLUMNS)))
