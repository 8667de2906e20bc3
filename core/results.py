"""Result objects of a structured model call: what was asked, what came back, and why it failed."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PARSE_ERROR = "parse_error"
SCHEMA_ERROR = "schema_error"
ENTRY_SCHEMA_ERROR = "entry_schema_error"
PROVIDER_ERROR = "provider_error"
INPUT_TOO_LONG = "input_too_long"  # stopped before any model call (core.text.input_gate)
NOT_ANSWERED = "not_answered"  # a valid turn that is no answer (core.answer_guard), after one regeneration

PROVIDER_ERROR_JA = {
    "timeout": "モデルの応答がタイムアウトしました。時間をおいて再送信してください。",
    "timeout:first_token": ("モデルの応答が始まりませんでした（最初のトークン待ちのタイムアウト。サーバーの順番待ちを含みます）。"
                            "サーバーが混み合っている可能性があります。時間をおいて再送信してください。"),
    "timeout:token_gap": "モデルの出力が途中で止まりました（トークン間のタイムアウト）。時間をおいて再送信してください。",
    "timeout:request": "モデルの応答が時間内に完了しませんでした（1 回の応答のタイムアウト）。時間をおいて再送信してください。",
    "deadline": "このターンの制限時間内にモデルの応答が完了しませんでした（タイムアウト）。時間をおいて再送信してください。",
    "connection": "モデルのサーバーに接続できませんでした。接続先 (OPENAI_BASE_URL、またはプロバイダーのリージョン・エンドポイント) を確認してください。",
    "connection:dropped": ("モデルのサーバーとの接続が応答の途中で切れました（サーバーが停止または再起動した可能性があります）。"
                           "サーバーの状態を確認してから再送信してください。"),
    "rate_limit": "利用上限 (429) に達しました。少し待ってから再送信してください。",
    "server_error": "モデルのサーバーでエラーが発生しました (5xx)。時間をおいて再送信してください。",
    "auth": "認証に失敗しました。API キーの設定を確認してください。",
    "forbidden": "このモデルを使う権限がありません (403)。API キーの権限やデプロイの設定を確認してください。",
    "not_found": "モデル {model} が見つかりません。モデル名 / デプロイ名 (OPENAI_MODEL) と接続先を確認してください。",
    "bad_request": "モデルのサーバーがリクエストを受け付けませんでした。サーバーの応答はデバッグログで確認できます。",
    "context_overflow": ("入力（指示・会話の履歴・添付や参照の文書）がモデルのコンテキスト長に収まりませんでした。"
                         "履歴と参照テキストを縮めても収まらなかったため送信を止めました。添付を減らすか、"
                         "新しい会話で始めてください。"),
    "template": ("モデルのチャットテンプレートがメッセージの並びを受け付けませんでした。"
                 "サーバーのチャットテンプレートの設定を確認してください。"),
    "unsupported_param": "モデルのサーバーがリクエストのパラメーターを受け付けませんでした。",
    "unsupported": "このプロバイダーは指定した構造化出力の方式に対応していません。",
    "refusal": "モデルが応答を拒否しました。入力内容を見直してください。",
    "truncated": "モデルの出力が長すぎて途中で切れました。質問を短くするか、分けて再送信してください。",
    "bad_response": "モデルのサーバーから chat completion として読めない応答が返りました（プロキシのエラーページなど）。",
    "content_filter": "サービスの安全フィルター（コンテンツフィルター）により入力または出力がブロックされました。入力内容を見直してください。",
    "missing_sdk": "選んだプロバイダーの SDK がインストールされていません。詳細のメッセージにあるコマンドでインストールしてください。",
    "config": "プロバイダーの設定（リージョン、プロジェクト、キーなど）が不足しています。docs/providers.md を参照してください。",
    "unknown": "モデルの呼び出し中に予期しないエラーが発生しました。",
}

# Short names for headings: 「モデルの呼び出しに失敗しました（タイムアウト）」.
PROVIDER_KIND_JA = {
    "timeout": "タイムアウト", "deadline": "タイムアウト（制限時間超過）", "connection": "接続エラー",
    "rate_limit": "利用上限", "server_error": "サーバーエラー", "auth": "認証エラー", "forbidden": "権限エラー",
    "not_found": "モデルが見つかりません", "bad_request": "方式が受け付けられません", "unsupported": "方式に非対応",
    "refusal": "応答の拒否", "truncated": "出力の打ち切り", "bad_response": "不正な応答", "unknown": "不明なエラー",
    "context_overflow": "コンテキスト長の超過", "template": "チャットテンプレートのエラー",
    "unsupported_param": "パラメーターが受け付けられません",
    "content_filter": "安全フィルターによるブロック", "missing_sdk": "SDK 未インストール", "config": "設定不足",
}

# Which timeout fired, for headings: 「モデルの呼び出しに失敗しました（タイムアウト（最初のトークン待ち））」.
TIMER_SHORT_JA = {"first_token": "最初のトークン待ち", "token_gap": "トークン間の待ち", "request": "応答全体"}


def provider_error_ja(kind: str, model: str = "", timer: str | None = None) -> str:
    """The user-facing Japanese sentence for a provider error kind (a timeout names the timer that fired)."""
    text = PROVIDER_ERROR_JA.get(f"{kind}:{timer}") if timer else None
    text = text or PROVIDER_ERROR_JA.get(kind, PROVIDER_ERROR_JA["unknown"])
    return text.replace("{model}", model or "（未指定）")


ERROR_LABELS_JA = {
    PARSE_ERROR: "JSON として読み取れない出力でした",
    SCHEMA_ERROR: "出力がスキーマに合いませんでした",
    ENTRY_SCHEMA_ERROR: "ナレッジ JSON がナレッジスキーマに合いませんでした",
    PROVIDER_ERROR: "モデルの呼び出しに失敗しました",
    INPUT_TOO_LONG: "入力が長すぎるため送信しませんでした",
    NOT_ANSWERED: "回答として使えない出力でした（入力の繰り返し、資料にない数値、日本語でない文など）",
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
    # not_found / bad_request / unsupported / refusal / truncated / context_overflow / template / content_filter /
    # missing_sdk / config / unknown
    # (core.llm.base)
    provider_error: str | None = None
    timer: str | None = None  # a timeout: first_token / token_gap / request / deadline

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
            if self.provider_error == "timeout" and self.timer in TIMER_SHORT_JA:
                kind = f"{kind}（{TIMER_SHORT_JA[self.timer]}）"
            return f"モデルの呼び出しに失敗しました（{kind}）"
        if self.error_type == INPUT_TOO_LONG:
            return ERROR_LABELS_JA[INPUT_TOO_LONG]
        return "応答の検証に失敗しました"


@dataclass
class TurnResult(StructuredResult):
    """A knowledge-interview turn: the generic result plus the message and normalised entries."""

    assistant_message: str = ""
    knowledge: list[dict[str, str]] = field(default_factory=list)
