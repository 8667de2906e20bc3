"""``UrgencyAssessor`` (seed 000 §6): keyword rules and a model judgment, the higher level wins.

1. ``keyword_urgency_check`` over every user input (immediate, rule-based), fused with the semantic
   layer (``core.diagnosis.urgency_semantic.assess``: it may raise, never lower);
2. a model call with ``URGENCY_SCHEMA`` (``schemas/urgency_assessment.schema.json``) that sees the
   symptoms and the manual's warning / danger excerpts;
3. merge: the higher level wins (keyword ``none`` counts as ``low``); on a tie the stricter
   ``can_drive`` / ``visit_urgency`` are kept; the reasons of both are merged (keyword first,
   duplicates dropped). A failed model call leaves the keyword result alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from core.diagnosis import llm_calls
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import SessionState, urgency_rank
from core.diagnosis.rag import DANGER_TYPES, RagHit
from core.diagnosis.urgency_rules import KeywordUrgency
from core.diagnosis.urgency_semantic import as_context, assess
from core.prompts import load_prompt, render
from core.text.pii import mask_pii
from core.text.untrusted import data_block

LEVEL_DEFAULTS: dict[str, tuple[str, bool]] = {
    "critical": ("immediate", False), "high": ("today", True), "medium": ("this_week", True),
    "low": ("when_convenient", True),
}
VISIT_ORDER = {"when_convenient": 0, "this_week": 1, "today": 2, "immediate": 3}
RECOMMENDATIONS = {
    "critical": "安全な場所に停車し、自走せずにロードサービスまたは販売店へ連絡してください。",
    "high": "本日中に販売店で点検を受けてください。",
    "medium": "今週中を目安に販売店で点検を受けてください。",
    "low": "ご都合のよいときに販売店で点検を受けてください。",
}
LEVEL_LABELS = {"critical": "緊急", "high": "高", "medium": "中", "low": "低", "none": "なし"}


@dataclass
class UrgencyAssessment:
    level: str
    can_drive: bool
    visit_urgency: str
    reasons: list[str] = field(default_factory=list)
    recommendation: str = ""
    keyword_level: str = "none"
    model_level: str | None = None
    model_ok: bool = False


def _keyword_level(keyword: KeywordUrgency) -> str:
    return keyword.level if keyword.level != "none" else "low"


def merge(keyword: KeywordUrgency, model: dict[str, Any] | None) -> UrgencyAssessment:
    """Combine the two judgments: higher level wins, reasons merged."""
    k_level = _keyword_level(keyword)
    k_visit, k_drive = LEVEL_DEFAULTS[k_level]
    if keyword.visit_urgency:
        k_visit = keyword.visit_urgency
    if keyword.can_drive is not None:
        k_drive = keyword.can_drive
    reasons: list[str] = []
    for reason in list(keyword.reasons) + list((model or {}).get("reasons") or []):
        if reason and reason not in reasons:
            reasons.append(reason)
    if not model:
        return UrgencyAssessment(level=k_level, can_drive=k_drive, visit_urgency=k_visit, reasons=reasons,
                                 recommendation=RECOMMENDATIONS[k_level], keyword_level=keyword.level)
    m_level = model["level"]
    if urgency_rank(m_level) > urgency_rank(k_level):
        level, can_drive, visit, rec = m_level, model["can_drive"], model["visit_urgency"], model["recommendation"]
    elif urgency_rank(m_level) < urgency_rank(k_level):
        level, can_drive, visit, rec = k_level, k_drive, k_visit, RECOMMENDATIONS[k_level]
    else:
        level = k_level
        can_drive = bool(k_drive and model["can_drive"])
        visit = max((k_visit, model["visit_urgency"]), key=lambda v: VISIT_ORDER.get(v, 0))
        rec = model["recommendation"] or RECOMMENDATIONS[level]
    return UrgencyAssessment(level=level, can_drive=can_drive, visit_urgency=visit, reasons=reasons,
                             recommendation=rec, keyword_level=keyword.level, model_level=m_level, model_ok=True)


class UrgencyAssessor:
    def __init__(self, ctx: DiagnosisContext):
        self.ctx = ctx

    def assess(self, session: SessionState, hits: Sequence[RagHit] = (), *, step: str = "urgency_check") -> UrgencyAssessment:
        texts = session.collected_symptoms or [session.symptom_text]
        keyword = assess(self.ctx.rules, texts, texts[0] if texts else None, hits)
        warnings = [h for h in hits if h.has_warning or h.content_type in DANGER_TYPES]
        vehicle = f"{session.make or ''} {session.model or ''} {session.year or ''}".strip()
        warning_text = "\n\n".join(data_block(f"[{h.section} p.{h.page} {h.content_type}]\n{h.text[:600]}")
                                   for h in warnings) \
            or "（警告・危険に関する記載は見つかりませんでした）"
        keyword_text = f"{keyword.level}（{'、'.join(keyword.reasons) or '該当ルールなし'}）"
        messages = [
            {"role": "system", "content": load_prompt("diagnosis_system")},
            {"role": "user", "content": render("urgency_assessment", vehicle=vehicle or "不明",
                                               symptoms="\n".join(f"- {mask_pii(t)}" for t in texts),
                                               keyword_urgency=keyword_text, warnings=warning_text)},
        ]
        context = {"symptoms": [mask_pii(t) for t in texts],
                   "keyword": {"level": keyword.level, "reasons": keyword.reasons, "rule_ids": keyword.rule_ids},
                   "hits": [h.as_dict() for h in hits], "urgency": as_context(keyword)}
        result = llm_calls.call_structured(self.ctx, session, task=llm_calls.URGENCY_TASK, messages=messages,
                                           context=context, step=step, prompt="urgency_assessment")
        return merge(keyword, result.data if result.ok else None)
