"""The model's urgency checked against the manual (issue #26): a higher level needs evidence.

The rules floor only raises (an emergency is critical before any model call, and nothing here lowers a
level below the rules and the learned layer). What this module stops is the other way round: a model
that rates the manual's own normal behaviour (a hybrid's engine stopping at a light) medium or critical
and offers road service.

:func:`cap_model_urgency` applies when the retrieved section is a normal-behaviour case (the case the
semantic layer confirmed, or a top section that a normal case of ``data/urgency_normal_cases.yaml`` names and
that itself says 「故障ではありません」) or when the rules and the
learned layer see no risk (the fused level is ``none``). Then a model level above that (its
``urgency_flag``, or ``escalate``, which means high) needs **evidence from the conversation**: the
customer's answer to the normal case's question saying it is abnormal, or a danger word in what the
customer wrote (smoke, a leak, a lamp, no start, a smell: ``_DANGER_WORDS``). Without it the level
is capped to the fused level (``low`` at least when only the no-risk reading applies: no manual page
calls it normal), ``escalate`` becomes the answer it should be (the spec answer of a confirmed
case, else a plain answer), ``visit_urgency`` and a ``can_drive`` of false the rules did not say are
dropped, and the reason is returned as a :class:`core.answer_guard.Finding` for the debug log.
"""
from __future__ import annotations

from typing import Any, Sequence

import re2

from core.answer_guard import Finding
from core.diagnosis.models import urgency_rank
from core.diagnosis.rag import SPEC_TYPES
from core.diagnosis.urgency_rules import KeywordUrgency, variants
from core.diagnosis.urgency_semantic import LEVEL_VISIT, NORMAL_MARK, normal_answer_blocked, normal_cases

URGENCY_CAP = "urgency_cap"
# what a customer says that backs a higher level than the manual's normal case or the rules: smoke, fire, a
# leak, a lamp, no start, no brakes, a smell. Narrower than ``urgency_semantic.NOT_NORMAL``: the words a
# customer uses to describe the normal case itself (「再始動」, 「点灯」, 「オイル」) are not evidence.
_DANGER_WORDS = re2.compile(r"煙|ケムリ|けむり|火が|火花|発火|炎|焦げ|コゲ|漏れ|漏る|もれ|モレ|警告灯|警告|ランプ|点滅|"
                            r"かからな|カカラナ|かからん|進まな|ススマナ|走れな|ハシレナ|効かな|キカナ|止まらな|トマラナ|"
                            r"ガリガリ|金属音|焼け|異臭|臭|クサ|におい|ニオイ|匂|沈む|スカスカ|重くな|ぶつけ|事故")
# a message that sends the customer to road service or tells them to stop: wrong once the level is capped
URGENT_MESSAGE = re2.compile(r"ロードサービス|レッカー|JAF|直ちに|ただちに|すぐに(停車|停止|止め)|運転を(中止|やめ)|走行を(中止|やめ)|"
                             r"自走(は|を)?(しない|控え|不可|禁止|できません)|危険です|緊急")


def _normal_section(keyword: KeywordUrgency, hits: Sequence[Any]) -> str | None:
    """The normal-behaviour section this turn retrieved (its title), or None."""
    if keyword.normal_confirmed:
        case = normal_cases().get(keyword.normal_case or "")
        named = next((h for h in hits if case and any(s in getattr(h, "section", "") for s in case.sections)), None)
        return getattr(named, "section", None) or (case.sections[0] if case and case.sections else "正常な動作")
    top = hits[0] if hits else None  # the best section is one a normal case names, and it says "not a fault"
    title = str(getattr(top, "section", "") or "")
    if top is not None and getattr(top, "content_type", "") in SPEC_TYPES and NORMAL_MARK.search(getattr(top, "text", "")) \
            and any(name in title for case in normal_cases().values() for name in case.sections):
        return title
    return None


def evidence(keyword: KeywordUrgency, texts: Sequence[str]) -> str | None:
    """What in the customer's own words backs a higher urgency (None: nothing)."""
    joined = " ".join(t for t in texts if t)
    case = normal_cases().get(keyword.normal_case or "") if keyword.normal_confirmed else None
    if case is not None and case.says_abnormal(joined):
        return "通常の動作の条件に当てはまらないとのお答え"
    for text in texts:
        for form in variants(text) or [text or ""]:
            match = _DANGER_WORDS.search(form)
            if match:
                return f"お客様の言葉「{match.group(0)}」"
    return None


def cap_model_urgency(data: dict[str, Any], keyword: KeywordUrgency, hits: Sequence[Any],
                      texts: Sequence[str]) -> tuple[dict[str, Any], Finding | None]:
    """``data`` (a diagnostic answer) with its urgency capped when nothing backs it (module docstring),
    and the finding that says why (None: left as it was)."""
    section = _normal_section(keyword, hits)
    no_risk = keyword.level == "none"
    if section is None and not no_risk:
        return data, None
    model_level = data.get("urgency_flag") or "none"
    if data.get("action") == "escalate" and urgency_rank(model_level) < urgency_rank("high"):
        model_level = "high"
    allowed = keyword.level or "none"
    if section is None and urgency_rank(allowed) < urgency_rank("low"):
        allowed = "low"  # no risk seen, but no manual page says it is normal either: "when convenient" stands
    if urgency_rank(model_level) <= urgency_rank(allowed):
        return data, None
    backed = evidence(keyword, texts)
    if backed is not None:
        return data, None
    out = dict(data, urgency_flag=allowed, visit_urgency=LEVEL_VISIT.get(allowed))
    if keyword.can_drive is not False and data.get("can_drive") is False:
        out["can_drive"] = keyword.can_drive
    if data.get("action") == "escalate":
        confirmed = keyword.normal_confirmed and not normal_answer_blocked(keyword, texts)
        out["action"] = "spec_answer" if confirmed else "provide_answer"
    if section is not None and data.get("manual_coverage") == "not_covered":
        out["manual_coverage"] = "covered"  # the manual describes it: its normal-behaviour section was retrieved
    why = (f"取扱説明書「{section}」は正常な動作の説明です" if section is not None
           else "キーワード規則と学習層はいずれも危険を認めていません")
    reason = (f"モデルの緊急度 {model_level} を {allowed} に制限しました（{why}。会話にもそれを覆す記述"
              "（危険を示す言葉、通常の条件に当てはまらないとの回答）がありません）。")
    return out, Finding(URGENCY_CAP, reason, {"model_level": model_level, "capped_to": allowed,
                                              "normal_section": section, "model_action": data.get("action")})
