"""What the interview has learned: vague first descriptions, the description the answers narrow it to,
and the booking's 症状 summary.

A *vague* description (「なんか変な音がする」「車が揺れる気がする」「ランプがついた」) names a kind of
symptom — a sound, a vibration, a lamp — and nothing that says where, when or what kind: no part, no
driving situation, no sound word, no lamp colour or shape. The keyword rules rate every sound, vibration
and lamp high (seed 000 §6), so such a line would be rated 高 / 本日中 before the customer has said what
it is. :func:`is_vague` finds it; the diagnosing step asks about it first and rates nothing until the
answers say more (:func:`still_vague`).

:func:`narrowed` is the description the rules, the semantic layer and the manual search read once the
customer has answered: the answers themselves (「ブレーキを踏んだとき」「キーキーという高い音」) with the
kind of symptom (「音がする」), instead of the vague line whose generic word (「変な音」) would keep the
generic rule and the generic section on top.

:func:`booking_symptom` is the 症状 of a booking: the first line with the customer's own answers in
brackets, each cut to its first sentence (a pasted page never fills the field), without the fixed inputs
of the buttons (「わからない」「解決しませんでした」).
"""
from __future__ import annotations

import re
import unicodedata
from typing import Sequence

from core.diagnosis.actions import DONT_KNOW_LABEL

NOT_RESOLVED_INPUT = "提案された対処を試しましたが、解決しませんでした。"
SPEC_FEEDBACK_INPUTS = {"not_resolved": "仕様の説明を確認しましたが、解決していません。",
                        "already_tried": "説明された内容はすでに試しましたが、解決していません。"}
FIXED_INPUTS = frozenset({DONT_KNOW_LABEL, NOT_RESOLVED_INPUT, *SPEC_FEEDBACK_INPUTS.values()})

MAX_VAGUE_CHARS = 40  # a longer first line says more than a kind of symptom
PART_CHARS = 60  # one answer in the booking summary
SYMPTOM_CHARS = 300  # the whole booking summary

# kind of symptom → (its words, the phrase that keeps the kind in a narrowed description)
KINDS: dict[str, tuple[re.Pattern[str], str]] = {
    "noise": (re.compile(r"音|おと|オト|鳴"), "音がする"),
    "vibration": (re.compile(r"振動|揺れ|ゆれ|震え|ふるえ|ブレる|ぶれる"), "振動がある"),
    "lamp": (re.compile(r"警告灯|ランプ|らんぷ|マーク|表示灯|インジケーター"), "警告灯が点いた"),
}
# anything that says where, when or what kind: a part, a driving situation, a sound word, a colour or shape
SPECIFIC = re.compile(
    r"ブレーキ|ぶれーき|エンジン|えんじん|タイヤ|たいや|ハンドル|はんどる|ステアリング|足回り|足まわり|下回り|マフラー|エアコン|"
    r"ルーム|室内|車内|荷室|足元|読書|マップ|ドア|窓|ワイパー|ボンネット|トランク|荷室|シート|ベルト|ミラー|ライト|ペダル|アクセル|シフト|モーター|バッテリー|"
    r"前輪|後輪|前の|後ろ|うしろ|右|左|床|屋根|天井|車体の下|下から|メーター|"
    r"走行|走って|走る|はしって|はしる|したから|まえのほう|うしろ|発進|加速|減速|停車|止まる|止まっ|曲が|カーブ|段差|高速|低速|キロ|km|雨|朝|寒|暑|"
    r"かけ(た|る)|始動|踏(む|ん|み)|とき|時に|中に|直後|バック|信号|"
    r"赤|黄|オレンジ|緑|青|点滅|形|びっくり|ビックリ|[!！]|"
    r"(?P<kata>[ァ-ヴー]{1,3})(?P=kata)|(?P<hira>[ぁ-ゖー]{1,3})(?P=hira)|キー|ゴー|ウィーン|ヒュー|金属|こすれ|擦れ")


def vague_kind(text: str | None) -> str | None:
    """The kind of symptom a vague ``text`` names (noise / vibration / lamp), None when it is not vague."""
    text = unicodedata.normalize("NFKC", text or "").strip()
    if not text or len(text) > MAX_VAGUE_CHARS or SPECIFIC.search(text):
        return None
    return next((kind for kind, (words, _) in KINDS.items() if words.search(text)), None)


# the rules that rate a kind of symptom whatever it is (seed 000 §6: 警告灯点灯・異音・振動 → HIGH)
GENERIC_RULES = frozenset({"abnormal_noise", "vibration", "warning_light_generic"})


def is_vague(text: str | None, rule_ids: Sequence[str] | None = None) -> bool:
    """``text`` is vague (see the module docstring); with ``rule_ids`` (the rules that matched it), only
    when they are the generic ones (「ルームランプが点かない」 is the interior-light rule's, not vague)."""
    if rule_ids is not None and not set(rule_ids) <= GENERIC_RULES:
        return False
    return vague_kind(text) is not None


def answers(texts: Sequence[str]) -> list[str]:
    """The customer's own inputs after the first, without the buttons' fixed inputs."""
    return [t for t in texts[1:] if t and t.strip() and t.strip() not in FIXED_INPUTS]


def still_vague(texts: Sequence[str], rule_ids: Sequence[str] | None = None) -> bool:
    """The first description is vague (``rule_ids``: the rules that matched it) and no answer has said
    anything specific yet."""
    if not texts or not is_vague(texts[0], rule_ids):
        return False
    return not any(SPECIFIC.search(unicodedata.normalize("NFKC", a)) for a in answers(texts))


def narrowed(texts: Sequence[str]) -> list[str]:
    """The texts the rules and the search read: after a vague first line that the answers made
    specific, one description made of the answers and the kind of symptom; else ``texts`` unchanged."""
    texts = list(texts)
    kind = vague_kind(texts[0]) if texts else None
    if kind is None or still_vague(texts):
        return texts
    said = answers(texts)
    phrase = KINDS[kind][1]
    joined = "、".join(a.strip().rstrip("。") for a in said)
    if KINDS[kind][0].search(joined):
        return [joined]
    return [f"{joined}{phrase}" if re.search(r"(とき|時|中|後|前|から|ほう|方|で)$", joined) else f"{joined}、{phrase}"]


def _first_sentence(text: str, limit: int = PART_CHARS) -> str:
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    # a sentence ends at 。！？, or at ! ? before a space or the end (「![…](…)」 or 「!?」 inside text is no end)
    sentence = re.split(r"(?<=[。！？])|(?<=[!?])(?=\s|$)", line[:2000], maxsplit=1)[0].strip()
    return sentence if len(sentence) <= limit else sentence[:limit - 1] + "…"


def booking_symptom(session) -> str:
    """The booking's 症状: 「first line（answer／answer）」 (see the module docstring)."""
    first = _first_sentence(session.symptom_text or (session.collected_symptoms[0] if session.collected_symptoms else ""))
    texts = list(session.collected_symptoms)
    if texts and session.symptom_text and texts[0] != session.symptom_text and session.symptom_text in texts:
        texts = texts[texts.index(session.symptom_text):]  # a later symptom (a new topic) starts the summary
    said = [_first_sentence(a) for a in answers(texts)]
    said = [a for a in dict.fromkeys(said) if a and a != first]
    summary = f"{first}（{'／'.join(said)}）" if said else first
    return summary if len(summary) <= SYMPTOM_CHARS else summary[:SYMPTOM_CHARS - 1] + "…"
