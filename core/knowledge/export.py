"""Exports of the knowledge library: CSV (UTF-8 with BOM, so Excel opens it), JSON, and JSONL of the
source conversations' turns (user and assistant, with session id, turn number and timestamp).

The CSV is for people: statuses in Japanese, times in Japan time with the offset, people by their names
(never an internal id), every cell safe for a spreadsheet (:mod:`core.text.spreadsheet`). The JSON and
JSONL are data for programs: status codes and UTC timestamps as stored.

Personal data is masked by default; a reviewer may keep the contract text (``clause_sample`` and the
other fields) unmasked, but secrets (API keys, bearer tokens) are always removed.
"""
from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

from core.text.jst import jst_stamp
from core.text.pii import clean_text
from core.text.spreadsheet import csv_bytes
from core.validation import ENTRY_FIELDS

META_FIELDS = ("id", "status", "version", "conversation_id", "created_by_label", "created_at", "updated_by_label",
               "updated_at", "confirmed_by_label", "confirmed_at")
STATUS_LABELS = {"draft": "下書き", "confirmed": "確定済み", "archived": "アーカイブ"}
CSV_HEADERS = {"id": "No.", "status": "状態", "version": "版", "knowledge_title": "タイトル", "contract_type": "契約類型",
               "target_clause": "対象条項", "review_points": "審査ポイント", "action_plan": "対応方針",
               "clause_sample": "条文例", "created_by_label": "作成者", "created_at": "作成日時（日本時間）",
               "updated_by_label": "更新者", "updated_at": "更新日時（日本時間）", "confirmed_by_label": "確定者",
               "confirmed_at": "確定日時（日本時間）"}
_TIMES = ("created_at", "updated_at", "confirmed_at")


def clean_entry(entry: Mapping[str, Any], *, keep_contract_text: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {k: entry.get(k) for k in META_FIELDS if k in entry}
    for field in ENTRY_FIELDS:
        out[field] = clean_text(entry.get(field), keep_personal_data=keep_contract_text)
    return out


def _for_people(entry: Mapping[str, Any]) -> dict[str, Any]:
    row = dict(entry)
    if "status" in row:
        row["status"] = STATUS_LABELS.get(str(row["status"]), row["status"])
    for key in _TIMES:
        if key in row:
            row[key] = jst_stamp(row[key])
    return row


def entries_csv(entries: Iterable[Mapping[str, Any]], *, keep_contract_text: bool = False) -> bytes:
    """CSV bytes with a UTF-8 BOM and Japanese headers, for people (see the module docstring)."""
    import pandas as pd  # lazy: pandas is heavy and only the export needs it

    rows = [_for_people(clean_entry(e, keep_contract_text=keep_contract_text)) for e in entries]
    columns = [c for c in CSV_HEADERS if any(c in r for r in rows)] or list(ENTRY_FIELDS)
    frame = pd.DataFrame(rows, columns=columns).rename(columns=CSV_HEADERS)
    return csv_bytes(frame)


def entries_json(entries: Iterable[Mapping[str, Any]], *, keep_contract_text: bool = False) -> str:
    return json.dumps([clean_entry(e, keep_contract_text=keep_contract_text) for e in entries], ensure_ascii=False,
                      indent=2, default=str)


def turns_jsonl(turns_by_conversation: Mapping[str, Sequence[Mapping[str, Any]]], *,
                keep_contract_text: bool = False) -> str:
    """One line per user / assistant turn: session id, turn number, time, role, text and (assistant) the
    validated turn JSON."""
    lines = []
    for session_id, turns in turns_by_conversation.items():
        for turn in turns:
            entry = turn.get("entry") or {}
            text = entry.get("user_text") or entry.get("content") or entry.get("text") or entry.get("user") or ""
            record = {"session_id": session_id, "turn": turn.get("seq"), "timestamp": turn.get("created_at"),
                      "role": turn.get("role"), "text": clean_text(text, keep_personal_data=keep_contract_text)}
            if turn.get("attachments"):
                record["attachments"] = turn["attachments"]
            if turn.get("turn_json") is not None:
                record["turn_json"] = _clean_value(turn["turn_json"], keep_contract_text)
            lines.append(json.dumps(record, ensure_ascii=False, default=str))
    return "".join(line + "\n" for line in lines)


def _clean_value(value: Any, keep: bool) -> Any:
    if isinstance(value, str):
        return clean_text(value, keep_personal_data=keep)
    if isinstance(value, Mapping):
        return {k: _clean_value(v, keep) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean_value(v, keep) for v in value]
    return value
