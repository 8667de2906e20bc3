"""Japanese labels of the workbench's columns, outcomes and methods, and one line naming a record."""
from __future__ import annotations

from typing import Any, Mapping

from core import workbench as wb
from core.text.jst import jst
from ui.sidebar import STRATEGY_LABELS

OUTCOME_LABELS = {"ok": "成功", "parse_error": "JSON 解析エラー", "schema_error": "スキーマ違反",
                  "entry_schema_error": "ナレッジ項目のスキーマ違反"}
METHOD_LABELS = {**STRATEGY_LABELS, "tag_fallback": "タグ判定（seed 004 段階 2）", "ai_judge": "AI 判定（seed 004 段階 3）",
                 "plain_text": "テキスト"}
COLUMN_LABELS = {"id": "ID", "time": "時刻（日本時間）", "session_id": "会話", "flow": "フロー", "step": "ステップ",
                 "task": "タスク", "prompt_version": "プロンプト版", "provider": "プロバイダー", "model": "モデル",
                 "method": "方式", "judgment_method": "選択肢の判定", "kind": "種別", "attempt": "試行",
                 "outcome": "結果", "error_type": "エラー種別", "latency_ms": "レイテンシ (ms)",
                 "total_tokens": "トークン", "owner": "操作者"}


def method_label(method: str | None) -> str:
    return METHOD_LABELS.get(method or "", method or "—")


def record_label(record: Mapping[str, Any]) -> str:
    """One line for a record in a list or a select box."""
    mark = "✅" if record.get("outcome") == "ok" else "❌"
    return (f"{mark} #{record['id']} {jst(record.get('time'))} · {record.get('flow') or '—'}/{record.get('step') or '—'} · "
            f"{wb.record_task(record)} · {method_label(wb.record_method(record))} · {record.get('outcome')}")


def owner_label(owner: Any) -> str:
    """A record's operator as people read it: 「anonymous:匿名」 → 「匿名」, 「proxy:yamada」 → 「yamada」
    (the source prefix is internal)."""
    text = str(owner or "").strip()
    if not text:
        return "—"
    source, sep, name = text.partition(":")
    return (name or "匿名") if sep and source.isascii() and source.isalpha() else text
