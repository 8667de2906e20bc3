"""Building the diagnostic prompt (seed 000 §4 D7): recent turns, conditional instructions, the
rendered ``prompts/diagnosis_diagnostic.md`` and the facts handed to the offline policy.

Personal data in user text is masked (``core.text.pii.mask_pii``) before it reaches a model.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from core.diagnosis.context import Thresholds
from core.diagnosis.denials import strip_denials
from core.diagnosis.models import SessionState
from core.diagnosis.rag import RagHit, rag_context
from core.diagnosis.urgency_rules import KeywordUrgency
from core.prompts import load_prompt, render
from core.text.pii import mask_pii

# Flags that switch on a conditional instruction (also passed to the offline policy).
FLAG_SPEC_HINT = "spec_hint"
FLAG_SPEC_REJECTED = "spec_rejected"
FLAG_CANDIDATES = "candidates"
FLAG_SOLUTION_FAILED = "solution_failed"
FLAG_FINAL_TURN = "final_turn"
FLAG_KEYWORD_HIGH = "keyword_high"
FLAG_RESTRICT_TOPIC = "restrict_topic"
FLAG_FORCE_ANSWER = "force_answer"
FLAG_DENIED = "denied_symptoms"
FLAG_GUARD = "answer_guard"  # the previous answer was no answer (core.answer_guard): the reason, once


def denied_symptoms(session: SessionState) -> list[str]:
    """The symptom words the customer denied in any of their messages (「警告灯は点いていない」)."""
    out: list[str] = []
    for text in session.collected_symptoms or [session.symptom_text]:
        out += [w for w in strip_denials(text).denied if w not in out]
    return out


@dataclass
class Instructions:
    flags: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def add(self, flag: str, line: str) -> None:
        if flag not in self.flags:
            self.flags.append(flag)
            self.lines.append(line)

    def text(self) -> str:
        return "\n".join(f"- {line}" for line in self.lines) or "- 特になし"


def build_recent_turns(session: SessionState, n: int = 4) -> str:
    """The last ``n`` messages of the conversation (user text masked)."""
    recent = session.conversation_history[-n:]
    if not recent:
        return "（まだ会話はありません）"
    names = {"user": "お客様", "assistant": "問診担当"}
    return "\n".join(f"{names.get(m.get('role'), m.get('role'))}: {mask_pii(m.get('content', ''))}" for m in recent)


def build_additional_instructions(session: SessionState, keyword: KeywordUrgency, extra: Sequence[tuple[str, str]] = (),
                                  th: Thresholds | None = None) -> Instructions:
    """Conditional instructions: spec hint, rejected spec answer, candidate stage, failed solutions,
    last turn, keyword urgency, plus ``extra`` (flag, line) pairs from the guards."""
    out = Instructions()
    if session.spec_hint and not session.spec_rejected:
        out.add(FLAG_SPEC_HINT, "取扱説明書に仕様・正常動作として説明されている可能性があります。該当すれば spec_answer を検討してください。")
    if session.spec_rejected:
        out.add(FLAG_SPEC_REJECTED, "仕様の説明ではお客様の問題は解決しませんでした。spec_answer は使わず、故障の可能性を絞り込んでください。")
    if session.candidates_shown:
        out.add(FLAG_CANDIDATES, "原因の候補を提示できる段階です。確信度が十分なら provide_answer で原因の候補と対処を伝えてください。")
    if session.solutions_tried:
        out.add(FLAG_SOLUTION_FAILED, f"これまでに提案した対処では解決していません（{session.solutions_tried} 回）。別の原因を検討してください。")
    if session.diagnostic_turn >= session.max_diagnostic_turns:
        out.add(FLAG_FINAL_TURN, "問診ターンの上限です。質問はせず、provide_answer か escalate で回答してください。")
    denied = denied_symptoms(session)
    if denied:
        out.add(FLAG_DENIED, f"お客様は「{'、'.join(denied)}」はないと述べています。その症状について質問せず、緊急度の根拠にもしないでください。")
    if keyword.level == "high":
        out.add(FLAG_KEYWORD_HIGH, f"キーワード判定で緊急度 high（{'、'.join(keyword.reasons)}）です。urgency_flag は high 以上にしてください。")
    for flag, line in extra:
        out.add(flag, line)
    return out


def _vehicle(session: SessionState) -> str:
    return f"{session.make or ''} {session.model or ''}（{session.year or '-'}年式）".strip()


def build_diagnostic_messages(session: SessionState, hits: Sequence[RagHit], keyword: KeywordUrgency,
                              instructions: Instructions, latest_input: str, th: Thresholds) -> list[dict[str, str]]:
    keyword_text = f"{keyword.level}（{'、'.join(keyword.reasons) or '該当ルールなし'}）"
    collected = "\n".join(f"  - {mask_pii(t)}" for t in session.collected_symptoms) or "  - （なし）"
    user = render("diagnosis_diagnostic", vehicle=_vehicle(session), symptom=mask_pii(session.symptom_text),
                  collected_symptoms=collected, summary=mask_pii(session.conversation_summary) or "（まだありません）",
                  recent_turns=build_recent_turns(session, th.recent_turns), turn=session.diagnostic_turn,
                  max_turns=session.max_diagnostic_turns,
                  asked_topics="、".join(session.asked_topics) or "（なし）", keyword_urgency=keyword_text,
                  rag_context=rag_context(list(hits)), additional_instructions=instructions.text(),
                  latest_input=mask_pii(latest_input))
    return [{"role": "system", "content": load_prompt("diagnosis_system")}, {"role": "user", "content": user}]


def policy_context(session: SessionState, hits: Sequence[RagHit], keyword: KeywordUrgency, instructions: Instructions,
                   latest_input: str, powertrain: str = "") -> dict[str, Any]:
    """The facts the offline diagnosis policy decides from (never sent to a real model)."""
    return {
        "vehicle": {"vehicle_id": session.vehicle_id, "make": session.make, "model": session.model,
                    "year": session.year, "powertrain": powertrain},
        "symptom": mask_pii(session.symptom_text),
        "collected": [mask_pii(t) for t in session.collected_symptoms],
        "latest_input": mask_pii(latest_input),
        "history": [{"role": m.get("role", ""), "content": mask_pii(m.get("content", ""))}
                    for m in session.conversation_history],
        "asked_topics": list(session.asked_topics),
        "hits": [h.as_dict() for h in hits],
        "keyword": {"level": keyword.level, "reasons": list(keyword.reasons), "rule_ids": list(keyword.rule_ids)},
        "turn": session.diagnostic_turn,
        "max_turns": session.max_diagnostic_turns,
        "candidates_shown": session.candidates_shown,
        "solutions_tried": session.solutions_tried,
        "flags": list(instructions.flags),
    }


def build_summary_messages(session: SessionState) -> list[dict[str, str]]:
    history = "\n".join(f"{'お客様' if m.get('role') == 'user' else '問診担当'}: {mask_pii(m.get('content', ''))}"
                        for m in session.conversation_history[-12:])
    return [{"role": "user", "content": render("diagnosis_summary", vehicle=_vehicle(session),
                                               symptom=mask_pii(session.symptom_text), history=history or "（なし）")}]
