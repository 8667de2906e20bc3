"""The FAQ knowledge base: articles from ``data/faq/articles.yaml`` searched with the hybrid retriever.

``KnowledgeBase.search(query, n)`` returns :class:`Hit` objects (id, title, category, body,
score 0..1), re-ranked so that an article whose title matches the question's words comes first
(``title_match``; the hit keeps its retrieval score for the relevance threshold). The retriever is ``core.rag.TextRetriever`` (BM25 + dense) built lazily on the first
search; any object with ``search(query, n_results, mode) -> [(id, score, metadata)]`` can be
injected instead. Passage vectors come from the vectors shipped with the repository, then from the
shared cache (:mod:`core.rag.cache`), so neither a fresh checkout nor a restart re-embeds an
unchanged KB (:class:`CachedEmbedder`, a per-text-list cache in ``var/faq_vectors``, remains for
injected embedders). :class:`FaultyKB` simulates KB failures
(timeout / error) for fault injection in the console and the scenario runner.
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

from core.paths import DATA_DIR, ROOT
from core.text.quoting import tokens

ARTICLES_PATH = DATA_DIR / "faq" / "articles.yaml"
# Re-ranking: the retriever's CANDIDATES best are ordered by score + TITLE_WEIGHT × title match.
# An article titled 「ロードサービスは24時間利用できますか？」 scored 0.87 under a battery article
# (0.90) that merely mentions 24-hour road service; its title shares two of the question's three
# words. Measured with ``python -m bench.faq_rank`` (110 answerable queries of bench/data/faq_queries.yaml),
# weight 0 → 0.3: top-1 0.900 → 0.909, recall@3 0.982 → 0.973, recall@5 1.000 → 1.000, MRR 0.942 →
# 0.946; 0.4 and above lose top-1 (short titles start to win on one shared word).
CANDIDATES = 8
TITLE_WEIGHT = 0.3
# A sibling article: its title names a compound of the question's subject (「オイルフィルター」 for a
# question about 「オイル」) whose other half the question never says. 「オイルの交換時期はいつ？」 ranked
# the oil-filter article (kb:008) over the oil-change article (kb:007). Measured with
# ``python -m bench.faq_rank`` at TITLE_WEIGHT 0.3 (110 queries): SIBLING_WEIGHT 0 → 0.15 leaves top-1,
# recall@3/5 and MRR unchanged on that set, and puts the subject's own article first on the sibling
# questions of bench/data/faq_paraphrases.yaml (see docs/answer-quality-kb.md).
SIBLING_WEIGHT = 0.15
MAX_QUERY_CHARS = 1000
VECTOR_CACHE_DIR = ROOT / "var" / "faq_vectors"


class KBTimeout(TimeoutError):
    """The KB search did not answer in time."""


class KBError(RuntimeError):
    """The KB search failed for another reason."""


@dataclass(frozen=True)
class Article:
    id: str
    title: str
    category: str
    keywords: tuple[str, ...]
    body: str


@dataclass(frozen=True)
class Hit:
    id: str
    title: str
    category: str
    score: float
    body: str

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "category": self.category, "score": self.score, "text": self.body}


def load_articles(path: Path = ARTICLES_PATH) -> list[Article]:
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return [Article(id=str(a["id"]), title=str(a.get("title", "")).strip(), category=str(a.get("category", "")),
                    keywords=tuple(str(k) for k in a.get("keywords") or ()), body=str(a.get("body", "")).strip())
            for a in raw.get("articles") or []]


def documents(articles: list[Article]) -> list[tuple[str, str, dict]]:
    """Retriever documents: title, body and keywords as text; id/title/category as metadata."""
    return [(a.id, "\n".join([a.title, a.body, "キーワード: " + "、".join(a.keywords)]),
             {"id": a.id, "title": a.title, "category": a.category}) for a in articles]


class CachedEmbedder:
    """Wraps an embedder: passage vectors are stored per (embedder, texts) hash and reused."""

    def __init__(self, inner: Any, cache_dir: Path = VECTOR_CACHE_DIR):
        self.inner = inner
        self.cache_dir = Path(cache_dir)
        self.cosine_range = inner.cosine_range

    def passages(self, texts: list[str]) -> np.ndarray:
        digest = hashlib.sha256("\x1e".join(texts).encode("utf-8")).hexdigest()[:16]
        key = getattr(self.inner, "key", type(self.inner).__name__)
        path = self.cache_dir / f"{key}-{digest}.npy"
        if path.exists():
            try:
                cached = np.load(path)
                if cached.shape[0] == len(texts):
                    return cached
            except (OSError, ValueError):
                pass
        vectors = np.asarray(self.inner.passages(texts), dtype=np.float32)
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            np.save(path, vectors)
        except OSError:
            pass  # a read-only checkout still works, just without the cache
        return vectors

    def query_vector(self, text: str) -> np.ndarray:
        return self.inner.query_vector(text)


def hybrid_retriever(articles: list[Article]) -> Any:
    """The shared hybrid retriever over the articles (the one switch point to core.rag)."""
    from core.rag import TextRetriever  # lazy: core.rag loads chromadb (~1.4 s), only on first retrieval
    from core.rag.cache import CachingEmbedder  # lazy: as above
    from core.rag.embeddings import get_default_embedder  # lazy: as above

    # shipped vectors (data/vectors) first, then var/cache: a fresh checkout embeds nothing
    return TextRetriever(documents(articles), embedder=CachingEmbedder(get_default_embedder()))


def _tokens(text: str) -> set[str]:
    return tokens(text[:MAX_QUERY_CHARS])


def title_match(question_tokens: set[str], title: str) -> float:
    """Share (0..1) of the question's words that the article title contains."""
    words = _tokens(title)
    if not words or not question_tokens:
        return 0.0
    return len(words & question_tokens) / len(question_tokens)


def sibling(question_tokens: set[str], question: str, title: str) -> bool:
    """The title is about a sibling of the question's subject: one of its words is a compound that
    extends a word of the question (「オイルフィルター」 ⊃ 「オイル」) and the question says neither the
    compound nor its other half (「フィルター」)."""
    text = question[:MAX_QUERY_CHARS]
    shared = _tokens(title) & question_tokens
    for word in _tokens(title) - question_tokens:
        for asked in question_tokens:
            if len(asked) >= 2 and len(word) > len(asked) + 1 and word.startswith(asked) \
                    and word[len(asked):] not in text \
                    and not any(len(w) >= 2 and asked + w in text for w in shared):  # 「オイルエレメント」 asked
                return True
    return False


def rank_key(score: float, title: float, is_sibling: bool = False) -> float:
    """Retrieval score plus ``TITLE_WEIGHT`` × title match, less ``SIBLING_WEIGHT`` for a sibling
    article (the score itself is kept on the hit)."""
    return score + TITLE_WEIGHT * title - (SIBLING_WEIGHT if is_sibling else 0.0)


class KnowledgeBase:
    def __init__(self, articles: list[Article], retriever: Any = None,
                 retriever_factory: Callable[[list[Article]], Any] = hybrid_retriever, mode: str = "hybrid"):
        self.articles = {a.id: a for a in articles}
        self._retriever = retriever
        self._factory = retriever_factory
        self._lock = threading.Lock()
        self.mode = mode

    @property
    def ready(self) -> bool:
        return self._retriever is not None

    @property
    def retriever(self) -> Any:
        with self._lock:
            if self._retriever is None:
                self._retriever = self._factory(list(self.articles.values()))
            return self._retriever

    def article(self, article_id: str) -> Article | None:
        return self.articles.get(article_id)

    def categories(self) -> list[str]:
        return list(dict.fromkeys(a.category for a in self.articles.values()))

    def search(self, query: str, n_results: int = 3) -> list[Hit]:
        """The ``n_results`` best articles: the retriever's ``CANDIDATES`` best, re-ranked by
        :func:`rank_key` (an article whose title says what the question asks comes first)."""
        hits = []
        wanted = max(n_results, CANDIDATES)
        for doc_id, score, _meta in self.retriever.search(query, n_results=wanted, mode=self.mode):
            article = self.articles.get(str(doc_id))
            if article is not None:  # only ids that really exist in the KB
                hits.append(Hit(article.id, article.title, article.category, float(score), article.body))
        if len(hits) > 1:
            asked = _tokens(query)
            order = {h.id: i for i, h in enumerate(hits)}
            hits.sort(key=lambda h: (-rank_key(h.score, title_match(asked, h.title), sibling(asked, query, h.title)),
                                     order[h.id]))
        return hits[:n_results]


class FaultyKB:
    """A KB whose searches fail: ``mode`` timeout / error, for the first ``times`` calls (None = always)."""

    def __init__(self, inner: Any, mode: str = "timeout", times: int | None = None):
        if mode not in ("timeout", "error"):
            raise ValueError(f"unknown KB fault {mode!r} (expected timeout or error)")
        self.inner = inner
        self.mode = mode
        self.times = times
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def search(self, query: str, n_results: int = 3) -> list[Hit]:
        self.calls += 1
        if self.times is None or self.calls <= self.times:
            if self.mode == "timeout":
                raise KBTimeout("KB search timed out")
            raise KBError("KB search failed")
        return self.inner.search(query, n_results)


_default: KnowledgeBase | None = None
_default_lock = threading.Lock()


def default_kb() -> KnowledgeBase:
    """The process-wide KB over ``data/faq/articles.yaml`` (its retriever is built on first search)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = KnowledgeBase(load_articles())
        return _default
