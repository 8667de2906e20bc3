"""Offline policies for the choice judgment (tasks ``choice_judgment``, ``choice_tag``,
``choice_evaluation``): a deterministic matcher of typed text to the on-screen choices.

A choice scores by the longest synonym of its value found in the text (negative forms such as
「解決していない」 are longer than the positive ones they contain, so they win), or by the share of
the text's character bigrams that occur in its label (「ミライバ」 → the Miraiba vehicle). The best
choice wins when it scores ≥ 0.5 and beats the runner-up; otherwise 0 (none).
"""
from __future__ import annotations

import unicodedata
from typing import Any

from core.llm.base import LLMRequest

SYNONYMS: dict[str, tuple[str, ...]] = {
    "yes": ("はい", "うん", "そうです", "合って", "あって", "正しい", "この車", "間違いない", "まちがいない", "ok", "オーケー",
            "解決した", "解決しました", "直った", "直りました", "なおった", "なおりました", "治った", "治りました", "良くなった",
            "よくなった", "助かった"),
    "no": ("いいえ", "いや", "違", "ちが", "別の", "解決してい", "解決しない", "解決せず", "直らない", "直りません", "なおらない", "治らない",
           "変わらない", "だめ", "ダメ", "まだ"),
    "resolved": ("解決した", "解決しました", "直った", "直りました", "なおった", "治った", "治りました", "良くなった", "よくなった", "わかりました", "納得",
                 "助かった", "はい"),
    "not_resolved": ("解決してい", "解決しない", "解決せず", "直らない", "直りません", "なおらない", "治らない", "変わらない", "だめ", "ダメ",
                     "いいえ", "まだ"),
    "already_tried": ("試した", "試しました", "やった", "やりました", "やってみた", "すでに", "既に", "もうやって", "確認済"),
    "book": ("予約", "点検したい", "見てほしい", "見てもらい", "診てもらい", "持ち込"),
    "dispatch": ("出張", "ロードサービス", "来てほしい", "来てもらい", "来て", "レッカー", "呼んで", "呼びたい", "手配", "jaf"),
    "visit": ("来店", "持って行", "持っていく", "もっていく", "行きます", "店に行", "お店", "自分で運転", "自走"),
    "skip": ("予約しない", "予約はしない", "しない", "いらない", "不要", "結構", "あとで", "後で", "やめ", "今はいい"),
    "confirm": ("確定", "お願いします", "お願い", "はい", "ok", "これで", "予約する", "大丈夫"),
    "edit": ("修正", "直したい", "変更", "訂正", "間違", "ちがう", "違う"),
    "dont_know": ("わからない", "分からない", "わかりません", "分かりません", "不明"),
}


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text or "").lower()
    return "".join(ch for ch in text if not (ch.isspace() or unicodedata.category(ch)[0] in "PSZ"))


def _bigrams(text: str) -> set[str]:
    return {text[i:i + 2] for i in range(len(text) - 1)} if len(text) > 1 else ({text} if text else set())


def score_choice(text: str, value: str, label: str) -> float:
    t = _norm(text)
    if not t:
        return 0.0
    best = 0.0
    for synonym in SYNONYMS.get(value, ()):
        s = _norm(synonym)
        if s and s in t:
            best = max(best, 1.0 + len(s) / 100)
    grams = _bigrams(t)
    label_grams = _bigrams(_norm(label)) | _bigrams(_norm(value))
    if grams and label_grams:
        best = max(best, len(grams & label_grams) / len(grams))
    return best


def match_choice(text: str, choices: list[dict[str, Any]]) -> tuple[int, str]:
    """``(1-based index or 0, reason)``."""
    scored = sorted(((score_choice(text, c.get("value", ""), c.get("label", "")), c["index"], c.get("label", ""))
                     for c in choices), key=lambda x: (-x[0], x[1]))
    if not scored or scored[0][0] < 0.5 or (len(scored) > 1 and scored[1][0] >= scored[0][0]):
        return 0, "どの選択肢とも判断できません"
    return scored[0][1], f"入力が「{scored[0][2]}」に当たると判断しました"


def judge_structured(request: LLMRequest) -> dict[str, Any]:
    index, reason = match_choice(request.context.get("text", ""), request.context.get("choices") or [])
    return {"step": index, "reason": reason}


def judge_tag(request: LLMRequest) -> str:
    index, _ = match_choice(request.context.get("text", ""), request.context.get("choices") or [])
    return f"[CHOICE:{index}]"


def evaluate(request: LLMRequest) -> dict[str, Any]:
    index, reason = match_choice(request.context.get("text", ""), request.context.get("choices") or [])
    return {"matched_index": index, "reason": reason}
