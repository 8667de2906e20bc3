"""Input gates shared by the three flows: over-long input, and input with no Japanese in it.

Every flow's entry point asks :func:`check` before anything else, so a gated input costs no model
call, no retrieval and no tokenisation:

* longer than ``core.text.pii.MAX_MESSAGE_CHARS`` (8,000) characters → :data:`TOO_LONG` (all flows);
* with ``japanese=True`` (the diagnosis symptom): no hiragana, katakana or kanji *and* either
  English-like words (:func:`is_non_japanese`, which the FAQ's language rule uses too, so both
  flows agree on what "not Japanese" means) or no letters at all (digits, emoji, symbols only) →
  :data:`NOT_JAPANESE`. 「P0301」 or 「ABS」 alone are fault codes and lamp names, not English,
  and pass. The FAQ keeps its own handling (a policy handoff in both languages) and only uses the
  length gate here.

Only the first ``SCAN_CHARS`` characters are scanned, with re2 (linear time).
"""
from __future__ import annotations

from dataclasses import dataclass

import re2

from core.text.normalize import normalize
from core.text.pii import MAX_MESSAGE_CHARS

TOO_LONG = "入力が長すぎます（{length:,} 文字。最大 {limit:,} 文字）。要点を短くまとめてお送りください。"
NOT_JAPANESE = "日本語で入力してください。"
NOT_JAPANESE_SYMPTOM = NOT_JAPANESE + "気になる症状を、たとえば「ブレーキを踏むとキーキー音がする」のように書いてください。"
SCAN_CHARS = 2000

_JAPANESE = re2.compile(r"[\p{Hiragana}\p{Katakana}\p{Han}ー々〆]")
_LETTER = re2.compile(r"\pL")
_WORD = re2.compile(r"\pL{2,}")


@dataclass(frozen=True)
class Gate:
    """Why an input was stopped: ``kind`` is ``too_long`` or ``not_japanese``; ``message`` is
    what the user is shown instead of an answer."""

    kind: str
    message: str


def has_japanese(text: str) -> bool:
    return bool(_JAPANESE.search((text or "")[:SCAN_CHARS]))


def is_non_japanese(text: str) -> bool:
    """True for text written without any Japanese: two or more words, or one of 4+ letters
    (「hello」, 「Can I get a refund?」, 「환불해 주세요」); 「ABS」 or 「P0301」 alone are not."""
    if has_japanese(text):
        return False
    words = [m.group() for m in _WORD.finditer(text[:SCAN_CHARS])][:3]
    return len(words) >= 2 or any(len(w) >= 4 for w in words)


def is_not_japanese(text: str) -> bool:
    """True for text that is not Japanese (see the module docstring); blank text is not judged."""
    head = normalize((text or "")[:SCAN_CHARS])
    if not head.strip() or has_japanese(head):
        return False
    return is_non_japanese(head) or not _LETTER.search(head)


def check_length(text: str | None, limit: int = MAX_MESSAGE_CHARS) -> Gate | None:
    length = len(text or "")
    if length <= limit:
        return None
    return Gate("too_long", TOO_LONG.format(length=length, limit=limit))


def check(text: str | None, *, japanese: bool = False, limit: int = MAX_MESSAGE_CHARS,
          not_japanese_message: str = NOT_JAPANESE) -> Gate | None:
    """The gate ``text`` does not pass, or None. ``japanese`` also requires Japanese text."""
    gate = check_length(text, limit)
    if gate is not None:
        return gate
    if japanese and is_not_japanese(text or ""):
        return Gate("not_japanese", not_japanese_message)
    return None
