"""Whole-sentence quoting: the sentences of a text that answer a question, never a fragment.

Used by the offline answers of the diagnosis RAG call (``core.diagnosis.rag``) and of the FAQ
(``core.faq.offline_policy``). A text is read as *units*, line by line:

* a heading — a short line that ends no sentence (「季節による影響」「運転方法」), or 「【…】」 alone on
  its line — is one unit, never quoted;
* a list item — a line starting with 「・」「-」「※」「【」 or a step number (「1.」「(2)」「③」) — is one unit;
* any other line is cut into sentences ending at 「。」「！」「？」 (or the line end).

:func:`quote` scores sentences and items by the words they share with the question (Sudachi tokens,
character bigrams when Sudachi is unavailable) and returns, in document order: the best sentences
(up to ``limit``, each after the first scoring more than half of the best);
for a chosen sentence that introduces a list, that list (what the sentence announces, at most
``MAX_LIST_ITEMS`` items, with its 「【…】」 group titles); for a chosen item — the question matched
the item itself — the sentence introducing its list first, and only the matching items — so an
answer never starts in the middle of a list. Regexes are re2 (linear time) and the text read is capped.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import re2

from core.text.ja_tokens import get_tokenizer

MAX_TEXT_CHARS = 20_000  # text read at most (a manual section or an article is far shorter)
MAX_QUESTION_CHARS = 1000
MAX_LIST_ITEMS = 8
HEADING_CHARS = 24

_SENTENCE = re2.compile(r"[^。！？!?]+(?:[。！？!?]+|$)|[。！？!?]+")
_ITEM = re2.compile(r"^(?:[・\-※【•●◆■]|[0-9０-９]{1,2}[\.．、)）]|[（(][0-9０-９]{1,2}[）)]|[①-⑳])")
_SENTENCE_END = ("。", "！", "？", "!", "?")


@dataclass(frozen=True)
class Unit:
    text: str
    kind: str  # "sentence" | "item" | "heading"
    line: int


def is_heading(line: str) -> bool:
    """A short line that ends no sentence and is not a list item (「季節による影響」「運転方法」), or a
    bracketed title alone on its line (「【停止のしかた】」)."""
    line = line.strip()
    if line.startswith("【") and line.endswith("】"):
        return True
    return bool(line) and len(line) <= HEADING_CHARS and not line.endswith(_SENTENCE_END) and not _ITEM.search(line)


def units(text: str) -> list[Unit]:
    out: list[Unit] = []
    for n, raw in enumerate((text or "")[:MAX_TEXT_CHARS].splitlines()):
        line = raw.strip()
        if not line:
            continue
        if is_heading(line):
            out.append(Unit(line, "heading", n))
        elif _ITEM.search(line):
            out.append(Unit(line, "item", n))
        else:
            out.extend(Unit(s.strip(), "sentence", n) for s in _SENTENCE.findall(line) if s.strip())
    return out


TOKENS_MEMO_TEXTS = 2048  # tokens' memo: distinct texts remembered (least recently used dropped)
TOKENS_MEMO_MAX_CHARS = 2000  # a longer text is tokenised every time (the memo stays small)


@lru_cache(maxsize=TOKENS_MEMO_TEXTS)
def _memo_tokens(text: str) -> frozenset[str]:
    return frozenset(get_tokenizer()(text))


def tokens(text: str) -> set[str]:
    """The words of ``text`` (a new set each call). A short text is tokenised once and remembered
    (:data:`TOKENS_MEMO_TEXTS`): the diagnosis answers tokenise the same manual sections' sentences and
    titles on every turn of every conversation."""
    try:
        if len(text) <= TOKENS_MEMO_MAX_CHARS:
            return set(_memo_tokens(text))
        return set(get_tokenizer()(text))
    except Exception:  # noqa: BLE001 - tokenizer unavailable: character bigrams (never remembered)
        t = unicodedata.normalize("NFKC", text)
        return {t[i:i + 2] for i in range(len(t) - 1)}


def _in_list(parts: list[Unit], j: int) -> bool:
    """Unit ``j`` continues a list: an item, or a heading (「【旧所有者】」) followed by an item."""
    if parts[j].kind == "item":
        return True
    return parts[j].kind == "heading" and j + 1 < len(parts) and parts[j + 1].kind == "item"


def _lead_of(parts: list[Unit], i: int) -> int | None:
    """The sentence introducing the list that item ``i`` belongs to."""
    j = i - 1
    while j >= 0 and _in_list(parts, j):
        j -= 1
    if j >= 0 and parts[j].kind == "sentence":
        return j
    return None


def _list_after(parts: list[Unit], i: int) -> list[int]:
    """The items and sub-headings of the list introduced by sentence ``i``."""
    out = []
    j = i + 1
    while j < len(parts) and _in_list(parts, j):
        out.append(j)
        j += 1
    return out


def _heading_of(parts: list[Unit], i: int) -> int | None:
    """The sub-heading of item ``i`` inside its list (「【新所有者】」), if any."""
    j = i - 1
    while j >= 0 and parts[j].kind == "item":
        j -= 1
    return j if j >= 0 and parts[j].kind == "heading" and j + 1 <= i else None


def quote(text: str, question: str, *, limit: int = 2, extra: str = "") -> list[str]:
    """The units of ``text`` answering ``question`` (see the module docstring), in document order.
    Words of ``extra`` (e.g. the rewritten search query) count once, the question's twice."""
    parts = units(text)
    if not parts:
        return []
    asked = tokens(question[:MAX_QUESTION_CHARS])
    wanted = tokens(extra[:MAX_QUESTION_CHARS]) if extra else set()
    part_tokens = [tokens(p.text) for p in parts]
    scores = [2 * len(asked & t) + len(wanted & t) for t in part_tokens]
    candidates = [i for i, p in enumerate(parts) if p.kind != "heading"]
    if not candidates:
        return [p.text for p in parts[:1]]
    ranked = sorted(candidates, key=lambda i: (-scores[i], i))
    top = scores[ranked[0]]
    # further picks must be more than half as good as the best one (no weak tag-alongs)
    best = [i for n, i in enumerate(ranked) if scores[i] > 0 and (n == 0 or 2 * scores[i] > top)][:limit]
    if not best:
        first = next((i for i in candidates if parts[i].kind == "sentence"), candidates[0])
        best = [first]
    chosen: set[int] = set()
    for i in best:
        chosen.add(i)
        if parts[i].kind == "item":
            lead = _lead_of(parts, i)
            if lead is not None:
                chosen.add(lead)
            continue
        # a lead sentence that answers the question brings its whole list (what it announces)
        chosen.update([j for j in _list_after(parts, i) if parts[j].kind == "item"][:MAX_LIST_ITEMS])
    for i in list(chosen):  # an item inside a titled group brings the group's title
        if parts[i].kind == "item" and (heading := _heading_of(parts, i)) is not None:
            chosen.add(heading)
    return [parts[i].text for i in sorted(chosen)]


def join(lines: list[str]) -> str:
    """Quoted units as text: sentences run on, list items each on their own line."""
    text = ""
    previous_item = False
    for line in lines:
        item = bool(_ITEM.search(line))
        if text and (item or previous_item):
            text += "\n"
        text += line
        previous_item = item
    return text
