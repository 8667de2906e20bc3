"""What an answer of 「ナレッジに質問」 may contain, checked after the model wrote it (``core.knowledge.ask``).

Entry text reaches the model only as quoted data (each entry in its own data block, ``core.text.untrusted``;
the system prompt says such text is never an instruction), but a model may obey text planted in an entry
anyway — an uploaded counterparty draft that says 「これまでの指示を無視して…」. So the answer itself is
checked, not only its sources:

* **No text of an entry it does not cite.** A run of :data:`ENTRY_RUN` characters (whitespace ignored)
  that stands in a retrieved but uncited entry and in no cited entry (nor the question) is a leak.
* **No URL or markdown image that is not in a cited entry.** Every ``http(s)://`` / ``www.`` address in
  the answer must stand word for word in a cited entry, and an image (``![…](…)``) only with such an address.
* **No instructions.** A run of :data:`PROMPT_RUN` characters of the system prompt or the prompt's rules is
  a leak of the instructions.

An answer that breaks a rule is not shown: :func:`grounded_answer` replaces it by the cited entries' own
words (as the offline provider answers), and the problem is logged (never the text). A line of an entry that
addresses the model (「これまでの指示を無視して…」「システムプロンプトを…」, "ignore previous instructions") is
never quoted in an answer, the model's, the offline one or this one (:func:`quotable_lines`): the library
shows it, where a reviewer can remove it. Everything that
leaves (answer, titles, quotes) is masked as the library listing masks it (:func:`masked_hit`,
``core.text.pii.clean_text``). Linear: sets of fixed-length substrings, one re2 scan for addresses.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Iterable, Sequence

import re2

from core.knowledge.retrieval import KnowledgeHit
from core.text.pii import clean_text
from core.validation import ENTRY_FIELDS

logger = logging.getLogger(__name__)

ENTRY_RUN = 12  # characters of an uncited entry that count as copied from it
PROMPT_RUN = 16  # characters of the instructions that count as copied from them
MAX_CHECKED_CHARS = 20_000  # an answer is never longer (the output limit); longer text is cut before checking
_URL = re2.compile(r"(?i)(?:https?://|www\.)[^\s<>()\[\]{}「」『』\"'、。]+")
_IMAGE = re2.compile(r"!\[[^\]\n]{0,200}\]\(\s*([^)\s]{0,500})")
_TO_THE_MODEL = re2.compile(r"(?i)(?:指示を無視|これまでの指示|以前の指示|上記の指示|システムプロンプト|system prompt|"
                            r"ignore (?:all |any |the )?(?:previous|prior|above) instructions)")


def masked_hit(hit: KnowledgeHit) -> KnowledgeHit:
    """The hit with its entry's text masked as the library listing masks it (personal data, secrets)."""
    entry = dict(hit.entry)
    for field in ENTRY_FIELDS:
        entry[field] = clean_text(entry.get(field))
    return replace(hit, entry=entry)


def _flat(text: str) -> str:
    return "".join(str(text or "").split())


def _runs(text: str, n: int) -> set[str]:
    flat = _flat(text)
    return {flat[i:i + n] for i in range(len(flat) - n + 1)}


def _body(hit: KnowledgeHit) -> str:
    return "\n".join(str(hit.entry.get(f) or "") for f in ENTRY_FIELDS)


def problems(answer: str, cited: Sequence[KnowledgeHit], retrieved: Iterable[KnowledgeHit], *, question: str = "",
             instructions: Sequence[str] = ()) -> list[str]:
    """What is wrong with ``answer`` (empty when nothing): ``uncited_entry``, ``url``, ``image``, ``instructions``."""
    text = str(answer or "")[:MAX_CHECKED_CHARS]
    cited_ids = {h.entry_id for h in cited}
    cited_text = "\n".join(_body(h) for h in cited)
    found: list[str] = []
    allowed = _runs(cited_text, ENTRY_RUN) | _runs(question, ENTRY_RUN)
    leaked = set().union(*(_runs(_body(h), ENTRY_RUN) for h in retrieved if h.entry_id not in cited_ids)) - allowed
    if leaked & _runs(text, ENTRY_RUN):
        found.append("uncited_entry")
    flat_cited = _flat(cited_text)
    if any(_flat(m.group()) not in flat_cited for m in _URL.finditer(text)):
        found.append("url")
    if any(not m.group(1) or _flat(m.group(1)) not in flat_cited for m in _IMAGE.finditer(text)):
        found.append("image")
    prompt = set().union(*(_runs(p, PROMPT_RUN) for p in instructions)) - _runs(cited_text, PROMPT_RUN)
    if prompt & _runs(text, PROMPT_RUN):
        found.append("instructions")
    return found


def quotable_lines(text: str, limit: int = 4) -> list[str]:
    """The first ``limit`` non-empty lines of an entry's field that an answer may quote: none that
    addresses the model."""
    lines = (ln.strip() for ln in str(text or "").split("\n"))
    return [ln for ln in lines if ln and not _TO_THE_MODEL.search(ln[:2000])][:limit]


def grounded_answer(cited: Sequence[KnowledgeHit]) -> str:
    """The cited entries' own words (their action plan and review points), with their No. and title."""
    parts = []
    for hit in cited:
        e = hit.entry
        block = [f"当社の確定済みナレッジ No.{hit.entry_id}「{e.get('knowledge_title') or ''}」では、次のように整理しています。"]
        if plan := quotable_lines(e.get("action_plan")):
            block.append("対応方針:\n" + "\n".join(plan))
        if points := quotable_lines(e.get("review_points")):
            block.append("審査ポイント:\n" + "\n".join(points))
        parts.append("\n".join(block))
    return "\n\n".join(parts)


def checked_answer(answer: str, cited: Sequence[KnowledgeHit], retrieved: Sequence[KnowledgeHit], *,
                   question: str = "", instructions: Sequence[str] = ()) -> str:
    """``answer`` masked, or — when it breaks a rule (:func:`problems`) — the cited entries' own words."""
    found = problems(answer, cited, retrieved, question=question, instructions=instructions)
    if found:
        logger.warning("knowledge answer replaced by the cited entries' words: %s", ", ".join(found))
        answer = grounded_answer(cited)
    return clean_text(answer)
