"""The guards of seed 000 §11 that post-process model output and route symptoms.

| seed name | here |
|---|---|
| ``_append_default_choices`` | :func:`append_default_choices` (dedupe + わからない / ✏️ 自由入力) |
| ``_attach_icons`` | :func:`attach_icons` (warning-light icons when the topic is about a lamp) |
| ``_is_irrelevant_topic`` | :func:`is_irrelevant_topic` |
| ``_is_duplicate_question`` | :func:`is_duplicate_question` |
| ``_is_waiting_message`` | :func:`is_waiting_message` |
| ``_should_route_to_spec_check`` | :func:`should_route_to_spec_check` (3 safety gates + 3 path conditions) |
| ``_should_hint_spec`` | :func:`should_hint_spec` (soft threshold) |

Keyword urgency lives in :mod:`core.diagnosis.urgency_rules`, visit refusal in the reservation
step, the manual_coverage urgency raise in :func:`raise_for_coverage`.
"""
from __future__ import annotations

import difflib
import re
import unicodedata
from typing import Iterable, Sequence

from core.diagnosis.actions import DONT_KNOW, DONT_KNOW_LABEL, FREE_INPUT, FREE_INPUT_LABEL
from core.diagnosis.context import Thresholds
from core.diagnosis.models import Choice
from core.diagnosis.rag import DANGER_TYPES, SPEC_TYPES, RagHit

ICON_DIR = "data/icons/warning-lights"
LAMP_TOPIC_WORDS = ("警告灯", "ランプ", "表示灯", "インジケーター")
# Checked in order: the first keyword found in the label picks the icon.
ICON_KEYWORDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("ABS",), "abs.svg"),
    (("ハイブリッド",), "hybrid.svg"),
    (("4WD", "四駆", "4駆"), "4wd.svg"),
    (("横滑り", "VSC", "VDC", "スリップ"), "skid.svg"),
    (("タイヤ空気圧", "空気圧"), "tire-pressure.svg"),
    (("パワステ", "パワーステアリング", "EPS"), "power-steering.svg"),
    (("エアバッグ", "SRS"), "airbag.svg"),
    (("油圧", "オイル"), "oil-pressure.svg"),
    (("水温",), "coolant-temp.svg"),
    (("充電", "バッテリー"), "battery.svg"),
    (("燃料", "ガソリン", "給油"), "fuel.svg"),
    (("ブレーキ",), "brake.svg"),
    (("エンジン",), "engine.svg"),
)


def normalise(text: str | None) -> str:
    """NFKC, lower case, without spaces and punctuation: the key for exact-ish comparisons."""
    text = unicodedata.normalize("NFKC", text or "").lower()
    return "".join(ch for ch in text if not (ch.isspace() or unicodedata.category(ch)[0] in "PSZ"))


def append_default_choices(choices: Sequence[str] | None) -> list[Choice]:
    """Model choices deduplicated (value = label = the model's string), then わからない and
    ✏️ 自由入力 — also when the model returned no choices (seed 000 §4: a question always offers
    both, so "I don't know" is one press away even on an open question)."""
    out: list[Choice] = []
    seen: set[str] = set()
    reserved = {normalise(DONT_KNOW_LABEL), normalise(FREE_INPUT_LABEL), normalise("自由入力"),
                normalise("その他（自由入力）")}
    for raw in choices or []:
        label = (raw or "").strip()
        key = normalise(label)
        if not key or key in seen or key in reserved:
            continue
        seen.add(key)
        out.append(Choice(value=label, label=label))
    out.append(Choice(value=DONT_KNOW, label=DONT_KNOW_LABEL))
    out.append(Choice(value=FREE_INPUT, label=FREE_INPUT_LABEL))
    return out


def icon_for(label: str) -> str | None:
    text = unicodedata.normalize("NFKC", label or "").upper()
    for keywords, filename in ICON_KEYWORDS:
        if any(k.upper() in text for k in keywords):
            return f"{ICON_DIR}/{filename}"
    return None


def attach_icons(choices: list[Choice], question_topic: str | None) -> list[Choice]:
    """When the topic is about a lamp, give each choice whose label names a warning light its icon."""
    topic = unicodedata.normalize("NFKC", question_topic or "")
    if not any(word in topic for word in LAMP_TOPIC_WORDS):
        return choices
    for choice in choices:
        if choice.value in (DONT_KNOW, FREE_INPUT):
            continue
        icon = icon_for(choice.label)
        if icon:
            choice.icon = icon
    return choices


# Words that say nothing about *what* is asked (a topic made only of these is always relevant).
_GENERIC_TERMS = {
    "タイミング", "状況", "条件", "発生", "時期", "場所", "位置", "種類", "程度", "頻度", "状態", "様子",
    "詳細", "症状", "確認", "内容", "有無", "具体", "具体的", "回数", "範囲", "継続", "期間", "天候",
    "気温", "速度", "走行", "停車", "始動", "警告灯", "ランプ", "表示灯", "インジケーター", "表示", "メーター",
    "色", "音", "異音", "におい", "振動", "車両", "お客様", "原因", "対処", "対処法", "点検", "いつ", "どこ",
    "直前", "最近", "使用", "状態確認", "発生状況", "発生条件", "聞き取り",
}
_TERM = re.compile(r"[ァ-ヴー]{2,}|[一-龥々]{2,}|[A-Za-z0-9]{2,}")


def _topic_terms(topic: str) -> list[str]:
    text = unicodedata.normalize("NFKC", topic)
    return [t for t in _TERM.findall(text) if t not in _GENERIC_TERMS]


def is_irrelevant_topic(question_topic: str | None, symptom_text: str, history: Iterable[dict[str, str]] = (),
                        extra_context: str = "") -> bool:
    """True when the topic names things that appear nowhere in the symptom, the conversation or the
    manual excerpts retrieved for it (e.g. a brake complaint answered with a question about the
    navigation map). A topic made only of generic words is never irrelevant."""
    terms = _topic_terms(question_topic or "")
    if not terms:
        return False
    context = unicodedata.normalize("NFKC", " ".join(
        [symptom_text or "", extra_context or ""] + [m.get("content", "") for m in history]))
    for term in terms:
        if term in context:
            return False
        if re.fullmatch(r"[一-龥々]{3,}", term) and any(term[i:i + 2] in context for i in range(len(term) - 1)):
            return False
        if re.fullmatch(r"[ァ-ヴー]{4,}", term) and any(term[i:i + 3] in context for i in range(len(term) - 2)):
            return False
    return True


_WAITING = re.compile(
    r"(まとめます|まとめさせて|まとめてお伝え|お待ちください|お待ち下さい|少々お待ち|しばらくお待ち|確認します|確認いたします|"
    r"確認してまいります|お調べします|調べます|調べてみます|検索します|整理します|整理いたします|分析します|検討します|"
    r"準備します|お時間をください|少し時間)")


def is_waiting_message(message: str | None) -> bool:
    """A non-substantive 'please wait / I will summarise' message (no question, no content)."""
    text = (message or "").strip()
    if not text:
        return True
    if "？" in text or "?" in text:
        return False
    return bool(_WAITING.search(text)) and len(text) < 120


def is_duplicate_question(message: str | None, history: Iterable[dict[str, str]], threshold: float = 0.85) -> bool:
    """The same question (after normalisation, or ≥ ``threshold`` similar) was already asked."""
    key = normalise(message)
    if not key:
        return False
    for item in history:
        if item.get("role") != "assistant":
            continue
        previous = normalise(item.get("content"))
        if not previous:
            continue
        if previous == key or difflib.SequenceMatcher(None, previous, key).ratio() >= threshold:
            return True
    return False


def should_route_to_spec_check(hits: Sequence[RagHit], keyword_level: str, th: Thresholds | None = None) -> bool:
    """Seed 000 §3. Safety gates (any one blocks): keyword urgency critical/high; a hit with
    ``has_warning``; more danger-type than spec-type hits. Path conditions (all needed): a hit with
    score ≥ 0.50; at least ``spec_min_count`` spec-type hits; spec-type share ≥ 50 %."""
    th = th or Thresholds()
    if keyword_level in ("critical", "high"):
        return False
    if not hits or any(h.has_warning for h in hits):
        return False
    spec = sum(1 for h in hits if h.content_type in SPEC_TYPES)
    danger = sum(1 for h in hits if h.content_type in DANGER_TYPES)
    if danger > spec:
        return False
    return (any(h.score >= th.strong_score for h in hits) and spec >= th.spec_min_count
            and spec / len(hits) >= th.spec_min_ratio)


def should_hint_spec(hits: Sequence[RagHit], keyword_level: str, th: Thresholds | None = None) -> bool:
    """Soft version (a hint in the diagnostic prompt, no routing): no high/critical keyword, the
    best hit is spec-type with score ≥ ``spec_hint_score`` and spec-type hits are at least half."""
    th = th or Thresholds()
    if keyword_level in ("critical", "high") or not hits:
        return False
    top = hits[0]
    spec = sum(1 for h in hits if h.content_type in SPEC_TYPES)
    return top.content_type in SPEC_TYPES and top.score >= th.spec_hint_score and spec / len(hits) >= th.spec_min_ratio


def raise_for_coverage(urgency_flag: str, manual_coverage: str | None) -> str:
    """§4 D12: not_covered with urgency none/low → medium (the manual cannot vouch for it), whatever
    the action (an answer, a question, a spec answer or an escalation)."""
    if manual_coverage == "not_covered" and urgency_flag in ("none", "low"):
        return "medium"
    return urgency_flag
