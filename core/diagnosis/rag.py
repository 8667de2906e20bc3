"""Manual retrieval for the diagnosis flow (seed 000 §10): search, filter, cite, format.

Hits with ``score > keep_score`` (0.3) are kept, one per section (long sections come back as
several chunks). ``rag_context`` is the text embedded in the prompts (each excerpt in its own
``core.untrusted`` data block: manual text is data, never instructions), ``to_sources`` the citations
put on the response. A failing retriever means no hits, never an exception.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

from core.diagnosis.context import DiagnosisContext
from core.diagnosis.models import RagSource
from core.untrusted import data_block

logger = logging.getLogger(__name__)

SPEC_TYPES = frozenset({"procedure", "specification", "general"})
DANGER_TYPES = frozenset({"danger", "warning"})


@dataclass
class RagHit:
    section_id: str
    section: str
    chapter: str
    page: int
    content_type: str
    has_warning: bool
    text: str
    score: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _hit_from(chunk: Any) -> RagHit:
    get = (lambda k, d=None: chunk.get(k, d)) if isinstance(chunk, dict) else (lambda k, d=None: getattr(chunk, k, d))
    return RagHit(section_id=str(get("section_id") or get("chunk_id") or ""), section=str(get("section", "")),
                  chapter=str(get("chapter", "")), page=int(get("page", 0) or 0),
                  content_type=str(get("content_type", "general")), has_warning=bool(get("has_warning", False)),
                  text=str(get("text", "")), score=float(get("score", 0.0) or 0.0))


def rag_search(ctx: DiagnosisContext, query: str, vehicle_id: str | None) -> list[RagHit]:
    """Kept hits for ``query`` (best first, one per section); cached for the current request."""
    query = (query or "").strip()
    if not query:
        return []
    key = (query, vehicle_id)
    if key in ctx.rag_cache:
        return list(ctx.rag_cache[key])
    retriever = ctx.get_retriever()
    hits: list[RagHit] = []
    if retriever is not None:
        try:
            chunks = retriever.search(query, vehicle_id=vehicle_id, n_results=ctx.thresholds.n_results)
        except Exception as exc:  # noqa: BLE001 - retrieval failure = no excerpts
            logger.warning("manual search failed: %s", exc)
            chunks = []
        seen: set[str] = set()
        for chunk in chunks:
            hit = _hit_from(chunk)
            if hit.score <= ctx.thresholds.keep_score or hit.section_id in seen:
                continue
            seen.add(hit.section_id)
            hits.append(hit)
        hits.sort(key=lambda h: -h.score)
    ctx.rag_cache[key] = hits
    return list(hits)


def rag_search_many(ctx: DiagnosisContext, queries: list[str], vehicle_id: str | None, limit: int = 8) -> list[RagHit]:
    """Hits of several queries merged (best score per section), best first, at most ``limit``.
    The diagnosing loop searches with the refined query *and* the original symptom, so that
    narrowing answers ("点灯したまま消えない") do not push the section about the symptom out."""
    best: dict[str, RagHit] = {}
    for query in dict.fromkeys(q for q in queries if q and q.strip()):
        for hit in rag_search(ctx, query, vehicle_id):
            if hit.section_id not in best or hit.score > best[hit.section_id].score:
                best[hit.section_id] = hit
    return sorted(best.values(), key=lambda h: -h.score)[:limit]


def to_sources(hits: list[RagHit]) -> list[RagSource]:
    return [RagSource(section_id=h.section_id, section=h.section, page=h.page, score=round(h.score, 3),
                      chapter=h.chapter, content_type=h.content_type, has_warning=h.has_warning,
                      content=h.text[:200]) for h in hits]


def rag_context(hits: list[RagHit], max_chars: int = 900) -> str:
    if not hits:
        return "（該当する記載は見つかりませんでした）"
    blocks = []
    for h in hits:
        warn = " ⚠警告あり" if h.has_warning else ""
        blocks.append(data_block(f"[{h.section} p.{h.page} {h.content_type}{warn}] {h.section_id}\n{h.text[:max_chars]}"))
    return "\n\n".join(blocks)


def citation(section: str, page: int | None) -> str:
    """「（取扱説明書「節」p.N）」"""
    return f"（取扱説明書「{section}」p.{page}）" if page else f"（取扱説明書「{section}」）"
