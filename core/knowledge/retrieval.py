"""Retrieval over the knowledge library: the confirmed entries, searched like the manuals.

:class:`KnowledgeIndex` is the same hybrid retriever as the manuals and the FAQ (``core.rag``): Sudachi
tokens with BM25 and the bundled multilingual-e5 vectors, fused into one 0..1 score
(:func:`core.rag.hybrid.fuse`). An entry is indexed by its title, contract type, clause, review points
and action plan (``entry_text``); passage vectors and tokens go through the shared caches
(``core.rag.cache``), so an entry is embedded once per host.

**The store is the truth.** Before every search the index asks the store for the ``(id, version)`` of
every confirmed entry (one indexed query) and brings itself in line: a new or edited entry (every edit,
confirm, archive or restore bumps ``version``) is read and indexed again, an entry that is no longer
confirmed drops out. So a confirm, an edit or an archive made by another console replica or API worker,
on SQLite or PostgreSQL, is searchable (or gone) on the very next search here, with no message between
processes. :func:`knowledge_index` keeps one index per store object in this process.
"""
from __future__ import annotations

import logging
import threading
import unicodedata
import weakref
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping, Sequence

import numpy as np
import yaml
from sqlalchemy import select

from core.paths import DATA_DIR
from core.rag.bm25 import BM25Index, Vocabulary
from core.rag.cache import CachingEmbedder, TokenCache
from core.rag.embeddings import get_default_embedder
from core.rag.hybrid import CANDIDATE_K, KEEP_THRESHOLD, RRF_K, fuse
from core.store import tables as t
from core.store.store import Store
from core.text.ja_tokens import get_tokenizer

logger = logging.getLogger(__name__)

INDEXED_FIELDS = ("knowledge_title", "contract_type", "target_clause", "review_points", "action_plan")
ENTRY_CHARS = 1500  # an entry's indexed text at most (e5 reads about 512 tokens anyway)
MAX_QUERY_CHARS = 1000
# Below this score nothing "fits" (「該当するナレッジはありません」). Measured with
# ``python -m bench.knowledge_recall`` (bench/data/knowledge_queries.yaml): see docs/benchmarks.md.
MIN_SCORE = KEEP_THRESHOLD


VOCABULARY_PATH = DATA_DIR / "knowledge" / "vocabulary.yaml"


@lru_cache(maxsize=1)
def vocabulary() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(a reviewer's word, the review terms it stands for): ``data/knowledge/vocabulary.yaml``."""
    data = yaml.safe_load(VOCABULARY_PATH.read_text(encoding="utf-8")) or {}
    return tuple((unicodedata.normalize("NFKC", str(word)), tuple(str(t) for t in terms or ()))
                 for word, terms in (data.get("terms") or {}).items())


def expand_query(query: str) -> str:
    """``query`` NFKC-folded (「ＮＤＡ」 is 「NDA」), plus the review terms of the words it uses
    (「外注」 → 再委託, 「壁紙」 → 原状回復) that it does not already say."""
    text = unicodedata.normalize("NFKC", query)
    extra = [t for word, terms in vocabulary() if word in text for t in terms if t not in text]
    return text + ("\n" + " ".join(dict.fromkeys(extra)) if extra else "")


def entry_text(entry: Mapping[str, Any]) -> str:
    return "\n".join(str(entry.get(f) or "").strip() for f in INDEXED_FIELDS)[:ENTRY_CHARS]


@dataclass
class KnowledgeHit:
    entry_id: int
    score: float
    entry: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return str(self.entry.get("knowledge_title") or "")

    @property
    def contract_type(self) -> str:
        return str(self.entry.get("contract_type") or "")

    def source(self) -> dict[str, Any]:
        """``{entry_id, title, contract_type, score}`` (the HTTP API's source shape)."""
        return {"entry_id": self.entry_id, "title": self.title, "contract_type": self.contract_type,
                "score": round(self.score, 4)}


class KnowledgeIndex:
    """Hybrid search over one store's confirmed entries, kept in line with the store (module docstring)."""

    def __init__(self, store: Store, *, embedder: Any = None, tokenizer: Any = None):
        self.store = store
        self._embedder = embedder
        self.tokenizer = tokenizer or get_tokenizer()
        self._token_cache: TokenCache | None = None
        self.vocab = Vocabulary()
        self._lock = threading.RLock()
        self._versions: dict[int, int] = {}
        self._entries: dict[int, dict[str, Any]] = {}
        self._token_ids: dict[int, np.ndarray] = {}
        self._vectors: dict[int, np.ndarray] = {}
        self._order: list[int] = []
        self._bm25 = BM25Index(self.tokenizer, vocab=self.vocab)
        self._matrix: np.ndarray | None = None
        self.indexed = 0  # entries (re)indexed so far, for tests and logs

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            self._embedder = CachingEmbedder(get_default_embedder())
        return self._embedder

    def _tokens(self, texts: list[str]) -> list[list[str]]:
        if self._token_cache is None:
            self._token_cache = TokenCache(self.tokenizer)
        return self._token_cache.tokens(texts)

    def __len__(self) -> int:
        return len(self._order)

    # ---- keeping in line with the store ------------------------------------------------------------
    def _confirmed_versions(self) -> dict[int, int]:
        c = t.knowledge_entries.c
        with self.store.read_connection() as conn:
            return {int(r.id): int(r.version) for r in conn.execute(select(c.id, c.version).where(c.status == "confirmed"))}

    def _read(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        c = t.knowledge_entries.c
        rows: list[dict[str, Any]] = []
        with self.store.read_connection() as conn:
            for start in range(0, len(ids), 500):
                part = list(ids[start:start + 500])
                rows += [r._asdict() for r in conn.execute(select(t.knowledge_entries).where(c.id.in_(part)))]
        return rows

    def sync(self) -> bool:
        """Bring the index in line with the store; True when something changed."""
        current = self._confirmed_versions()
        with self._lock:
            if current == self._versions:
                return False
            gone = [i for i in self._versions if i not in current]
            changed = [i for i, v in current.items() if self._versions.get(i) != v]
            fresh = [r for r in self._read(changed) if r.get("status") == "confirmed"]
            fresh_ids = {int(r["id"]) for r in fresh}  # once: a first sync reads every entry (linear, not n²)
            for entry_id in gone + [i for i in changed if i not in fresh_ids]:
                for table in (self._versions, self._entries, self._token_ids, self._vectors):
                    table.pop(entry_id, None)
            if fresh:
                texts = [entry_text(r) for r in fresh]
                vectors = np.asarray(self.embedder.passages(texts), dtype=np.float32)
                tokens = self._tokens(texts)
                for row, vector, words in zip(fresh, vectors, tokens):
                    entry_id = int(row["id"])
                    self._entries[entry_id] = row
                    self._versions[entry_id] = int(row["version"])
                    self._vectors[entry_id] = vector
                    self._token_ids[entry_id] = self.vocab.encode(words)
                self.indexed += len(fresh)
            self._order = sorted(self._entries)
            self._bm25.build_ids([self._token_ids[i] for i in self._order])
            self._matrix = np.stack([self._vectors[i] for i in self._order]) if self._order else None
            logger.info("knowledge index: %d confirmed entries (%d read again, %d dropped)", len(self._order),
                        len(fresh), len(gone))
            return True

    # ---- search --------------------------------------------------------------------------------------
    def search(self, query: str, *, n: int = 3, min_score: float = MIN_SCORE, contract_type: str | None = None,
               exclude_conversation: str | None = None, exclude_ids: Sequence[int] = ()) -> list[KnowledgeHit]:
        """The confirmed entries most similar to ``query``, best first, each scoring at least
        ``min_score`` (0..1, see :mod:`core.rag.hybrid`); optionally only one contract type, and never
        the entries of ``exclude_conversation`` or ``exclude_ids``."""
        query = (query or "").strip()[:MAX_QUERY_CHARS]
        if not query or n <= 0:
            return []
        query = expand_query(query)
        self.sync()
        with self._lock:
            if not self._order or self._matrix is None:
                return []
            order = list(self._order)
            entries = dict(self._entries)
            tokens = self._bm25.query_tokens(query)
            bm25_scores = self._bm25.scores(tokens)
            coverage = self._bm25.coverage(tokens)
            matrix = self._matrix
        cosines = matrix @ np.asarray(self.embedder.query_vector(query), dtype=np.float32)
        fused = fuse(bm25_scores=bm25_scores, coverage=coverage, cosines=cosines,
                     cosine_range=self.embedder.cosine_range, mode="hybrid", n_results=len(order),
                     rrf_k=RRF_K, candidate_k=CANDIDATE_K)
        hits: list[KnowledgeHit] = []
        skip = {int(i) for i in exclude_ids}
        for f in fused:
            entry = entries[order[f.index]]
            if f.score < min_score or int(entry["id"]) in skip:
                continue
            if exclude_conversation and entry.get("conversation_id") == exclude_conversation:
                continue
            if contract_type and entry.get("contract_type") != contract_type:
                continue
            hits.append(KnowledgeHit(int(entry["id"]), float(f.score), dict(entry)))
            if len(hits) >= n:
                break
        return hits


_indexes: "weakref.WeakKeyDictionary[Store, KnowledgeIndex]" = weakref.WeakKeyDictionary()
_indexes_lock = threading.Lock()


def knowledge_index(store: Store) -> KnowledgeIndex:
    """The process-wide index of ``store``'s confirmed entries (built on first use)."""
    with _indexes_lock:
        index = _indexes.get(store)
        if index is None:
            index = _indexes[store] = KnowledgeIndex(store)
        return index
