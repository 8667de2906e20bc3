"""Result objects of a structured model call: what was asked, what came back, and why it failed."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.llm.base import PROVIDER_KIND_JA

PARSE_ERROR = "parse_error"
SCHEMA_ERROR = "schema_error"
ENTRY_SCHEMA_ERROR = "entry_schema_error"
PROVIDER_ERROR = "provider_error"
INPUT_TOO_LONG = "input_too_long"  # stopped before any model call (core.input_gate)

ERROR_LABELS_JA = {
    PARSE_ERROR: "JSON として読み取れない出力でした",
    SCHEMA_ERROR: "出力がスキーマに合いませんでした",
    ENTRY_SCHEMA_ERROR: "ナレッジ JSON がナレッジスキーマに合いませんでした",
    PROVIDER_ERROR: "モデルの呼び出しに失敗しました",
    INPUT_TOO_LONG: "入力が長すぎるため送信しませんでした",
}


@dataclass
class StructuredResult:
    """Outcome of validating (and possibly repairing) one structured model turn.

    ``errors`` are readable ``$.json.path: message`` lines. ``method`` is the strategy that
    produced the accepted output (structured_output / tool_call / prompt_extract / offline),
    ``repairs`` how many repair calls it took, ``attempts`` the number of model calls.
    """

    ok: bool
    data: dict[str, Any] | None = None
    raw: str = ""
    error_type: str | None = None
    errors: list[str] = field(default_factory=list)
    attempts: int = 0
    method: str | None = None
    repairs: int = 0
    parse_stage: str | None = None
    # timeout / deadline / rate_limit / server_error / connection / bad_response / auth / forbidden /
    # not_found / bad_request / unsupported / refusal / truncated / unknown (core.llm.base)
    provider_error: str | None = None

    @property
    def error_text(self) -> str:
        return "\n".join(self.errors)

    @property
    def error_label(self) -> str:
        return ERROR_LABELS_JA.get(self.error_type or "", "不明なエラー")

    @property
    def status_label(self) -> str:
        """A one-line heading for the turn: success, a failed model call (by kind), or failed validation."""
        if self.ok:
            return "応答しました"
        if self.error_type == PROVIDER_ERROR:
            kind = PROVIDER_KIND_JA.get(self.provider_error or "", PROVIDER_KIND_JA["unknown"])
            return f"モデルの呼び出しに失敗しました（{kind}）"
        if self.error_type == INPUT_TOO_LONG:
            return ERROR_LABELS_JA[INPUT_TOO_LONG]
        return "応答の検証に失敗しました"


@dataclass
class TurnResult(StructuredResult):
    """A knowledge-interview turn: the generic result plus the message and normalised entries."""

    assistant_message: str = ""
    knowledge: list[dict[str, str]] = field(default_factory=list)
