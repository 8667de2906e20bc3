"""Critical answers: the manual's emergency or warning section and its steps, never one sentence.

:func:`emergency_answer` builds what a critical symptom shows before the booking choices — the
reason in a whole sentence, the manual section for the emergency (a ``danger`` section first, then a
``warning`` one, preferring the section whose title or lamp the customer named), its steps (the
numbered lines and the ⚠ lines, :func:`steps_digest`) and its citation; with no such section the road-
service section's first steps, and with no manual at all the general safety steps. The sources put the
quoted section first.

:func:`is_emergency` is the check the state machine runs on text typed at any step (vehicle choice,
photo confirmation, spec check, booking form …): the keyword rules, then the learned layer fused with
them, on the text with its denied symptoms set aside.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from core.diagnosis.context import DiagnosisContext
from core.diagnosis.denials import strip_denials
from core.diagnosis.models import RagSource
from core.diagnosis.offline_policy import cite, lamps_named
from core.diagnosis.rag import RagHit, cited_first, rag_search, to_sources
from core.diagnosis.urgency_rules import SYMPTOM_WORD, KeywordUrgency, variants
from core.diagnosis.urgency_semantic import classify, fuse, has_japanese

ROAD_SERVICE_WORDS = ("ロードサービス", "緊急時の連絡")
GENERAL_STEPS = ("1. ハザードランプを点灯させ、周囲の車に注意しながら安全な場所に停車します。\n"
                 "2. エンジン（ハイブリッドシステム）を停止し、高速道路では同乗者とともにガードレールの外側など安全な場所に避難します。\n"
                 "3. 自走はせず、販売店またはロードサービスに連絡してください。")
STOP_LINE = "安全な場所に停車し、運転を続けないでください。"
_STEP = re.compile(r"^\s*(?:[0-9０-９]{1,2}[\.．、)）]|[①-⑳]|⚠)")
MAX_STEP_CHARS = 700


@dataclass
class EmergencyAnswer:
    """The lead text of a critical answer and the sources to show with it (quoted section first)."""

    message: str
    sources: list[RagSource] = field(default_factory=list)
    section: str | None = None
    steps: str = ""  # the manual part alone (section steps and citation), to add to a model's message


def reason_sentence(reasons: Sequence[str]) -> str:
    """「お伺いした内容から、次の危険が考えられます: ブレーキの効きに異常がある可能性。」 — a whole sentence
    whatever the reasons' wording (「…が点灯している」 does not take 「があります」)."""
    items = [r.strip().rstrip("。") for r in reasons if r and r.strip()]
    if not items:
        return "お伺いした内容は、すぐに対処が必要な危険な症状の可能性があります。"
    return "お伺いした内容から、次の危険が考えられます: " + "／".join(dict.fromkeys(items)) + "。"


def steps_digest(text: str, limit: int = MAX_STEP_CHARS) -> str:
    """The section's first sentence, then its numbered steps and its ⚠ lines with their 「・」 items
    (a bare 「⚠警告」 brings the line it announces), within ``limit`` characters; the opening lines
    when it has none of these."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    opening = next((line for line in lines if not line.startswith(("⚠", "【"))), lines[0])
    first = re.findall(r"[^。]+。?", opening)[0].strip()
    picked: list[str] = [first]
    size = len(first)
    in_warning = False  # the 「・」 items of a ⚠ block are its steps too
    for i, line in enumerate(lines):
        if line.startswith("⚠"):
            in_warning = True
        elif not line.startswith("・"):
            in_warning = False
        if line == opening or not (_STEP.match(line) or (in_warning and line.startswith("・"))):
            continue
        if re.fullmatch(r"⚠.{0,4}", line) and i + 1 < len(lines) and not _STEP.match(lines[i + 1]):
            if lines[i + 1] == opening:  # 「⚠警告」 over the opening itself: mark the opening
                picked[0] = f"{line} {first}"
                continue
            line = f"{line} {lines[i + 1]}"  # 「⚠警告」 alone: bring the sentence it announces
        if size + len(line) > limit:
            break
        if line not in picked:
            picked.append(line)
            size += len(line)
    if len(picked) == 1:  # no steps: the opening lines
        for line in lines[1:]:
            if size + len(line) > limit:
                break
            picked.append(line)
            size += len(line)
    return "\n".join(picked)


# A customer's word and the manual's word for the same part, for matching section titles.
TITLE_WORDS = {"ハンドル": ("ステアリング", "パワステ"), "オイル": ("油圧",), "油": ("油圧", "オイル"),
               "水温": ("オーバーヒート",), "オーバーヒート": ("水温",), "煙": ("煙", "焦げ"), "焦げ": ("焦げ", "煙")}


# A section about one situation is quoted only when the customer's words are about it: a stall that will
# not restart is not 「冠水路の走行」 nor 「…緊急停止方法」 (for a car that cannot be stopped); with no
# section left, the road-service section's steps are shown (issue #24).
SECTION_CONDITIONS = ((re.compile(r"冠水"), re.compile(r"冠水|浸水|水没|水たまり|水溜|大雨|豪雨|水の中|水に(入|浸|つか)|アンダーパス")),
                      (re.compile(r"緊急停止"), re.compile(r"止まらな|止められな|止まれな|とまらな|戻らな|もどらな|暴走|"
                                                        r"加速し(続|つづ)|勝手に加速|アクセル.{0,8}(戻|もど|引っかか|張り付)")))


def applies(hit: RagHit, text: str) -> bool:
    """False for a situation-specific section (:data:`SECTION_CONDITIONS`) the text does not speak of."""
    return all(when.search(text or "") for title, when in SECTION_CONDITIONS if title.search(hit.section))


def emergency_section(hits: Sequence[RagHit], text: str) -> RagHit | None:
    """The danger or warning section that fits ``text`` best: retrieval score, plus the title naming
    the customer's words (or the manual's word for them: ハンドル → ステアリング) or the lamp they named,
    a danger section slightly first; None when there is neither kind (or none that applies)."""
    candidates = [h for h in hits if h.content_type in ("danger", "warning") and applies(h, text)]
    if not candidates:
        return None
    named = set(lamps_named(text))
    words = [alt for word, alts in TITLE_WORDS.items() if word in text for alt in alts]

    def rank(hit: RagHit) -> float:
        title = re.sub(r"（[^）]*）", "", hit.section)
        bonus = 0.05 if hit.content_type == "danger" else 0.0
        if any(len(part) >= 3 and part in text for part in re.split(r"[・／/、]", title)) or any(w in title for w in words):
            bonus += 0.3
        if named & set(lamps_named(hit.section)):
            bonus += 0.5
        return hit.score + bonus

    return max(candidates, key=rank)


def emergency_answer(ctx: DiagnosisContext, vehicle_id: str | None, text: str, reasons: Sequence[str],
                     hits: Sequence[RagHit] | None = None) -> EmergencyAnswer:
    """The critical answer for ``text`` (see module docstring). ``hits``: the manual hits already found
    (searched here when None)."""
    if not vehicle_id:  # no vehicle chosen yet: no manual to quote (another car's would mislead)
        hits = []
    hits = list(hits) if hits is not None else rag_search(ctx, text, vehicle_id)
    section = emergency_section(hits, text)
    lead = f"🚨 {reason_sentence(reasons)}{STOP_LINE}"
    if section is not None:
        steps = f"取扱説明書「{section.section}」の手順:\n{steps_digest(section.text)}\n\n{cite(section.as_dict())}"
        return EmergencyAnswer(f"{lead}\n\n{steps}", cited_first(to_sources(hits), hits, f"「{section.section}」"),
                               section.section, steps)
    road = next((h for h in hits if any(w in h.section for w in ROAD_SERVICE_WORDS)), None)
    if road is None and vehicle_id:
        road = next((h for h in rag_search(ctx, "ロードサービス 緊急時の連絡", vehicle_id)
                     if any(w in h.section for w in ROAD_SERVICE_WORDS)), None)
    if road is not None:
        steps = f"取扱説明書「{road.section}」の手順:\n{steps_digest(road.text)}\n\n{cite(road.as_dict())}"
        return EmergencyAnswer(f"{lead}\n\n{steps}", cited_first(to_sources([road] + hits), [road] + hits,
                                                                   f"「{road.section}」"), road.section, steps)
    return EmergencyAnswer(f"{lead}\n\n{GENERAL_STEPS}", to_sources(hits) if vehicle_id else [], None, GENERAL_STEPS)


# Text typed at a button step is usually an answer (「できました、解決しました」「出張でお願いします」),
# not a symptom: the learned layer alone makes it an emergency only with this probability of critical
# and a symptom word in it (its 0.3 threshold is for symptom descriptions).
TYPED_CRITICAL_PROBABILITY = 0.5


def is_emergency(ctx: DiagnosisContext, text: str | None, context: str | None = None) -> KeywordUrgency | None:
    """The urgency of ``text`` typed at a button step when it is critical: the rules say so, or the
    learned layer is sure of it (:data:`TYPED_CRITICAL_PROBABILITY`) and the text names a symptom —
    also when read after ``context`` (the symptom under discussion): a reply such as 「高速道路を走った
    あとに特に悪い」 about poor fuel economy is not an emergency because, alone, it resembles one."""
    if not text or not has_japanese(text):
        return None
    keyword = ctx.rules.check(text)
    if keyword.is_critical:
        return keyword
    semantic = classify(text)
    learned = semantic.learned if semantic is not None else None
    if learned is None or learned.probabilities.get("critical", 0.0) < TYPED_CRITICAL_PROBABILITY:
        return None
    if not any(SYMPTOM_WORD.search(form) for form in variants(strip_denials(text).kept)):
        return None
    if context and context.strip() and context.strip() not in text:
        joined = classify(f"{context.strip()} {text}")
        joined_learned = joined.learned if joined is not None else None
        if joined_learned is not None and joined_learned.probabilities.get("critical", 0.0) < TYPED_CRITICAL_PROBABILITY:
            return None
    fused = fuse(keyword, semantic)
    return fused if fused.is_critical else None
