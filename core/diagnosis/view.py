"""Page helpers for the 車両問診 console page (no Streamlit here): the on-screen transcript, rewind
bookkeeping, and the labels of the urgency banner, the citations and the sidebar state.

The transcript is a list of plain dicts kept in the page's session state::

    {"role": "user", "text": "...", "turn": N | None}      # turn: the rewind point this input created
    {"role": "assistant", "step", "message", "sources", "rag_answer", "fallback", "notice", "judgment", "summary"}

:func:`send` runs one request through the ``ChatService`` and updates the transcript: a rewind cuts
it back to the input that created that rewind point (the restored prompt is then the last
assistant entry again), a restart or an expired session starts it afresh.

Labels that carry manual or model text (citations, the excerpt of a source, urgency reasons) are
markdown made safe by ``core.text.markup``: no image, link or autolink from that text ever renders.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, MutableSequence

from core.diagnosis.actions import BOOKING, RESTART, SUBMIT_BOOKING
from core.diagnosis.models import ChatRequest, ChatResponse, PromptInfo, SessionState, UrgencyInfo
from core.diagnosis.service import ChatService
from core.paths import ROOT
from core.text.markup import safe_markdown, safe_text
from core.vehicles import default_catalog, find_vehicle

STEP_LABELS = {"vehicle_id": "車両の選択", "photo_confirm": "車両の写真確認", "free_text": "症状の入力",
               "spec_check": "仕様の確認", "diagnosing": "問診中", "urgency_check": "緊急度の評価",
               "reservation": "予約のご案内", "booking_info": "予約情報の入力", "booking_confirm": "予約内容の確認",
               "done": "完了"}
LEVEL_LABELS = {"none": "なし", "low": "低", "medium": "中", "high": "高", "critical": "緊急"}
VISIT_LABELS = {"immediate": "今すぐ", "today": "本日中", "this_week": "今週中", "when_convenient": "都合のよいときに"}
COVERAGE_LABELS = {"covered": "記載あり", "partially_covered": "一部のみ記載", "not_covered": "記載なし"}
BOOKING_LABELS = {"dispatch": "ロードサービス・出張点検", "visit": "来店予約"}
CONFIRM_LABELS = {"confirm": "✅ 確定する", "edit": "✏️ 修正する"}
FALLBACK_NOTE = "⚠️ モデルの呼び出しに失敗したため、定型の案内を表示しています（これまでの会話は保持しています）。"
JUDGMENT_METHODS = {"exact": "完全一致", "structured_output": "構造化出力", "tag_fallback": "タグ抽出",
                    "ai_judge": "AI 判定"}


@dataclass(frozen=True)
class Banner:
    kind: str  # "error" (critical or no driving) / "warning" (high)
    icon: str
    text: str


def drive_label(can_drive: bool | None) -> str:
    return {True: "走行可", False: "自走不可"}.get(can_drive, "未判定")  # type: ignore[arg-type]


def asset_path(relative: str | None) -> str | None:
    """A repo-relative picture/icon path as an absolute path (None when missing)."""
    if not relative:
        return None
    path = ROOT / relative
    return str(path) if path.is_file() else None


def urgency_banner(urgency: UrgencyInfo | None) -> Banner | None:
    """🚨 for critical or no driving, ⚠️ for high, nothing below."""
    if urgency is None:
        return None
    if urgency.level == "critical" or urgency.can_drive is False:
        icon, kind = "🚨", "error"
    elif urgency.level == "high":
        icon, kind = "⚠️", "warning"
    else:
        return None
    parts = [f"緊急度: {LEVEL_LABELS.get(urgency.level, urgency.level)}",
             "自走不可（ロードサービス・出張点検をご利用ください）" if urgency.can_drive is False else drive_label(urgency.can_drive)]
    if urgency.visit_urgency:
        parts.append(f"来場の目安: {VISIT_LABELS.get(urgency.visit_urgency, urgency.visit_urgency)}")
    text = " · ".join(parts)
    if urgency.reasons:
        text += "\n\n判断の理由: " + "／".join(safe_text(r, single_line=True) for r in urgency.reasons[:4])
    return Banner(kind, icon, text)


def citation_caption(sources: list[dict[str, Any]], limit: int = 3) -> str:
    """「📖 参照: 「節」p.N ／ …」 for the first ``limit`` sources ('' when none)."""
    if not sources:
        return ""
    shown = "／".join(f"「{safe_text(s['section'], single_line=True)}」p.{s['page']}" for s in sources[:limit])
    more = f" ほか {len(sources) - limit} 件" if len(sources) > limit else ""
    return f"📖 参照した取扱説明書: {shown}{more}"


def vehicle_card(vehicle_id: str) -> dict[str, Any]:
    """Title, subtitle and picture of a catalog vehicle for the picker."""
    v = find_vehicle(default_catalog(), vehicle_id)
    if v is None:
        return {"title": vehicle_id, "subtitle": "", "image": None}
    grade = f" {v.grade} グレード" if v.grade else ""
    return {"title": f"{v.make} {v.model}", "subtitle": f"{v.year}年式{grade}", "image": asset_path(v.image)}


def request_label(request: ChatRequest, prompt: PromptInfo | None) -> str | None:
    """What the user's input looks like in the transcript (None for a rewind)."""
    if request.rewind_to_turn is not None:
        return None
    if request.message is not None:
        return request.message
    if request.action == SUBMIT_BOOKING and isinstance(request.action_value, dict):
        fields = {f.name: f.label for f in (prompt.booking_fields if prompt else [])}
        return "📝 " + " / ".join(f"{fields.get(k, k)}: {v}" for k, v in request.action_value.items() if v)
    if request.action == BOOKING and isinstance(request.action_value, str):
        return CONFIRM_LABELS.get(request.action_value, request.action_value)
    for choice in (prompt.choices if prompt else []):
        if choice.value == request.action_value:
            return choice.label
    return str(request.action_value or request.action or "")


def assistant_entry(response: ChatResponse) -> dict[str, Any]:
    judgment = response.judgment
    judged = None
    if judgment is not None:
        method = JUDGMENT_METHODS.get(judgment.method, judgment.method)
        judged = (f"入力を選択肢「{safe_text(judgment.value, single_line=True)}」として受け付けました（判定: {method}）"
                  if judgment.value
                  else f"入力をどの選択肢とも判断できませんでした（判定: {method}）")
    return {"role": "assistant", "step": response.current_step, "message": response.prompt.message,
            "sources": [s.model_dump(include={"section_id", "section", "page", "score", "content"})
                        for s in response.rag_sources],
            "rag_answer": response.rag_answer,
            "fallback": response.fallback, "notice": response.notice, "judgment": judged,
            "summary": dict(response.prompt.booking_summary) if response.current_step == "done" else {}}


def start(service: ChatService, transcript: MutableSequence[dict[str, Any]], *, client: Any = None,
          log: Any = None) -> ChatResponse:
    """A new session: the transcript holds only its welcome message."""
    response = service.start(client=client, log=log)
    transcript.clear()
    transcript.append(assistant_entry(response))
    return response


def send(service: ChatService, transcript: MutableSequence[dict[str, Any]], request: ChatRequest, *,
         prompt: PromptInfo | None = None, client: Any = None, log: Any = None) -> ChatResponse:
    """Process ``request`` and update ``transcript`` (see the module docstring). ``prompt`` is the
    prompt the input answers (for the button labels)."""
    response = service.process(request, client=client, log=log)
    if response.rewound_to_turn is not None:
        cut = next((i for i, e in enumerate(transcript) if e["role"] == "user" and e.get("turn") == response.rewound_to_turn),
                   None)
        if cut is not None:
            del transcript[cut:]
        return response
    if response.session_id != request.session_id or request.action == RESTART:
        transcript.clear()
    elif (label := request_label(request, prompt)) is not None:
        entry = {"role": "user", "text": label, "turn": response.snapshot_turn}
        if request.message is None and request.action:  # a button or the form: what the workbench replays
            entry["action"] = request.action  # the form's values (name, phone, address) are never kept here
            if not isinstance(request.action_value, dict):
                entry["action_value"] = request.action_value
        transcript.append(entry)
    transcript.append(assistant_entry(response))
    return response


def state_rows(session: SessionState | None, response: ChatResponse | None) -> list[tuple[str, str]]:
    """(label, value) rows of the session's state for the sidebar."""
    if session is None:
        return []
    vehicle = find_vehicle(default_catalog(), session.vehicle_id)
    urgency = response.urgency if response else None
    rows = [("ステップ", STEP_LABELS.get(session.current_step.value, session.current_step.value)),
            ("車両", vehicle.label if vehicle else "未選択"),
            ("問診ターン", f"{session.diagnostic_turn} / {session.max_diagnostic_turns}"),
            ("緊急度", LEVEL_LABELS.get(session.urgency_level or "none", session.urgency_level or "")),
            ("走行", drive_label(session.can_drive)),
            ("来場の目安", VISIT_LABELS.get(session.visit_urgency or "", "—")),
            ("マニュアル該当", COVERAGE_LABELS.get(session.manual_coverage or "", "—")),
            ("解決策の試行", f"{session.solutions_tried} 回")]
    if session.booking_type:
        rows.append(("予約種別", BOOKING_LABELS.get(session.booking_type, session.booking_type)))
    if urgency is not None and urgency.reasons:
        rows.append(("判断の理由", "／".join(safe_text(r, single_line=True) for r in urgency.reasons[:3])))
    rows.append(("セッション", session.session_id))
    return rows


def source_details(source: dict[str, Any]) -> str:
    """The expander body of one citation: the manual text excerpt (safe markdown) and the score."""
    heading = f"**「{safe_text(source['section'], single_line=True)}」 p.{source['page']}**（スコア {source['score']:.2f}）"
    return f"{heading}\n\n{safe_markdown(source.get('content') or '')}".rstrip()


__all__ = ["Banner", "asset_path", "assistant_entry", "citation_caption", "drive_label",
           "request_label", "send", "source_details", "start", "state_rows", "urgency_banner", "vehicle_card"]
