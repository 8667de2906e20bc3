"""Chunking: manual sections and extracted PDF text into :class:`~core.rag.records.Chunk` objects.

* Manual (``data/manuals/<vehicle_id>.json``): one chunk per section; a section longer than
  ``MAX_CHARS`` is split at sentence ends into parts of at most ``MAX_CHARS`` that overlap by
  about ``OVERLAP_CHARS``, each keeping the section's metadata (chunk ids ``<section_id>#<n>``).
* PDF (text from :func:`core.documents.extract_document`, in memory): when the document has headed
  sections (at least ``MIN_HEADINGS`` headings such as 「1. ブレーキ警告灯」「■ タイヤの交換」「【給油】」
  「第2章 …」), one chunk per section, named by its heading, on the page where it starts (a section
  longer than ``MAX_CHARS`` is split as a manual section is); otherwise each page's paragraphs are
  grouped into chunks of at most ``MAX_CHARS``; ``content_type`` is inferred
  (危険 → danger, 警告 → warning, 手順 or numbered steps → procedure, 仕様/諸元 → specification,
  else general) and ``has_warning`` is set when ⚠, 警告, 注意 or 危険 appears.
"""
from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Iterable

from core.rag.records import Chunk

MAX_CHARS = 800
OVERLAP_CHARS = 150
CHUNKER_VERSION = "3"  # bump when chunking changes so persisted indexes are rebuilt
MIN_HEADINGS = 2
HEADING_MAX_CHARS = 40
# A heading paragraph: short, no sentence end, opened by a section marker (numbered, bracketed, a
# square or a chapter number). Runs on one short paragraph at a time.
_HEADING_MARK = re.compile(r"^(?:第[0-9一二三四五六七八九十]+[章節]|[0-9]+(?:\.[0-9]+)*[\.)]?\s|[0-9]+(?:\.[0-9]+)+\s?|"
                           r"【[^】]{1,30}】$|[■□◆◇●▼▶]\s?)")

_SENTENCE = re.compile(r"[^。！？!?\n]*(?:[。！？!?]+|\n|$)")
_STEP = re.compile(r"(^|\n)\s*(?:[0-9０-９]+[\.．、)）]|[（(][0-9０-９]+[）)]|[①-⑳]|STEP\s*\d|ステップ\s*\d)")
_WARNING_MARK = re.compile(r"⚠|警告|注意|危険")


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.findall(text) if s]


def split_text(text: str, max_chars: int = MAX_CHARS, overlap: int = OVERLAP_CHARS) -> list[str]:
    """Split ``text`` into parts of at most ``max_chars`` at sentence ends, consecutive parts
    sharing about ``overlap`` characters (whole sentences). Short text is returned as is."""
    text = text.strip()
    if len(text) <= max_chars:
        return [text] if text else []
    sentences: list[str] = []
    for sentence in _sentences(text):
        step = max(1, max_chars - overlap)
        while len(sentence) > step:  # a monster sentence: hard cut (overlap comes from the carry)
            sentences.append(sentence[:step])
            sentence = sentence[step:]
        sentences.append(sentence)
    parts: list[str] = []
    current: list[str] = []
    fresh = 0  # sentences in `current` that are not overlap carried from the previous part
    for sentence in sentences:
        if fresh and sum(map(len, current)) + len(sentence) > max_chars:
            parts.append("".join(current).strip())
            carry: list[str] = []
            for prev in reversed(current):  # overlap: trailing sentences up to `overlap` chars
                if sum(map(len, carry)) + len(prev) > overlap:
                    break
                carry.insert(0, prev)
            current = carry
            fresh = 0
        current.append(sentence)
        fresh += 1
    if fresh:
        parts.append("".join(current).strip())
    return [p for p in parts if p]


def manual_chunks(manual: dict) -> list[Chunk]:
    """Chunks of one manual dict (``{"vehicle_id", "title", "sections": [...]}``)."""
    vehicle_id = str(manual["vehicle_id"])
    chunks: list[Chunk] = []
    for section in manual.get("sections", []):
        section_id = str(section["section_id"])
        keywords = "、".join(str(k) for k in section.get("keywords") or [])
        parts = split_text(str(section.get("text", "")))
        for n, part in enumerate(parts):
            chunks.append(Chunk(
                chunk_id=f"{section_id}#{n}", section_id=section_id, vehicle_id=vehicle_id,
                section=str(section.get("section", "")), chapter=str(section.get("chapter", "")),
                page=int(section.get("page") or 0),
                content_type=str(section.get("content_type") or "general"),
                has_warning=bool(section.get("has_warning", False)), text=part, keywords=keywords,
                source="manual", part=n))
    return chunks


def infer_content_type(text: str) -> str:
    if "危険" in text:
        return "danger"
    if "警告" in text:
        return "warning"
    if "手順" in text or len(_STEP.findall(text)) >= 2:
        return "procedure"
    if "仕様" in text or "諸元" in text:
        return "specification"
    return "general"


def infer_has_warning(text: str) -> bool:
    return bool(_WARNING_MARK.search(text))


def _heading(text: str, fallback: str) -> str:
    first = text.strip().split("\n", 1)[0].strip()
    first = re.split(r"[。]", first, maxsplit=1)[0]
    return first[:40] if first else fallback


def _group(paragraphs: Iterable[str], max_chars: int = MAX_CHARS) -> list[str]:
    groups: list[str] = []
    current = ""
    for para in paragraphs:
        para = para.strip()
        if not para:
            continue
        if len(para) > max_chars:
            if current:
                groups.append(current)
                current = ""
            groups.extend(split_text(para, max_chars))
            continue
        if current and len(current) + 1 + len(para) > max_chars:
            groups.append(current)
            current = para
        else:
            current = f"{current}\n{para}" if current else para
    if current:
        groups.append(current)
    return groups


def is_heading(paragraph: str) -> bool:
    """A section heading: short, no sentence end, opened by a section marker."""
    text = paragraph.strip()
    return 2 <= len(text) <= HEADING_MAX_CHARS and not re.search(r"[。！？!?]$", text) \
        and bool(_HEADING_MARK.match(text)) and len(_HEADING_MARK.sub("", text, count=1).strip()) >= 2


def _sections(pages: list[list[str]], numbered: bool) -> list[tuple[str, int, list[str]]]:
    """(heading, page, paragraphs) of each headed section; [] when the document has too few headings.
    Text before the first heading is a section of its own, named by its first line."""
    flat = [(unicodedata.normalize("NFKC", p).strip(), (i + 1) if numbered else 0)
            for i, paras in enumerate(pages) for p in paras if p and p.strip()]
    if sum(is_heading(p) for p, _ in flat) < MIN_HEADINGS:
        return []
    sections: list[tuple[str, int, list[str]]] = []
    for text, page in flat:
        if is_heading(text) or not sections:
            sections.append((text if is_heading(text) else "", page, [text]))
        else:
            sections[-1][2].append(text)
    return sections


def document_chunks(vehicle_id: str, name: str, pages: list[list[str]]) -> list[Chunk]:
    """Chunks of an uploaded document: ``pages`` is one paragraph list per page (a document
    without pages is passed as a single page and gets page 0). A document with headed sections
    gets one chunk per section (module docstring)."""
    doc_key = hashlib.sha1(name.encode("utf-8")).hexdigest()[:8]
    numbered = len(pages) > 1 or bool(pages and pages[0] and len(pages) == 1 and name.lower().endswith(".pdf"))
    chunks: list[Chunk] = []
    sections = _sections(pages, numbered)
    for index, (heading, page, paragraphs) in enumerate(sections, 1):
        body = "\n".join(paragraphs)
        section_id = f"{vehicle_id}:pdf-{doc_key}-s{index:03d}"
        parts = split_text(body) if len(body) > MAX_CHARS else [body]
        for n, text in enumerate(parts):
            chunks.append(Chunk(
                chunk_id=f"{section_id}#{n}", section_id=section_id, vehicle_id=vehicle_id,
                section=(heading or _heading(text, f"{name} p.{page}"))[:40], chapter=name, page=page,
                content_type=infer_content_type(body), has_warning=infer_has_warning(body),
                text=text, keywords="", source=f"pdf:{name}", part=n))
    if sections:
        return chunks
    for index, paragraphs in enumerate(pages):
        page = index + 1 if numbered else 0
        for n, text in enumerate(_group(unicodedata.normalize("NFKC", p) for p in paragraphs)):
            section_id = f"{vehicle_id}:pdf-{doc_key}-p{page:03d}"
            chunks.append(Chunk(
                chunk_id=f"{section_id}#{n}", section_id=section_id, vehicle_id=vehicle_id,
                section=_heading(text, f"{name} p.{page}"), chapter=name, page=page,
                content_type=infer_content_type(text), has_warning=infer_has_warning(text),
                text=text, keywords="", source=f"pdf:{name}", part=n))
    return chunks
