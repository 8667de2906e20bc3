"""In-memory BM25 (Lucene variant, as ``bm25s`` computes it) over Japanese tokens, built with numpy.

The index is a term-major (CSC) matrix of per-document BM25 term scores, built in one vectorised
pass from token-id arrays, so rebuilding it for 10,000 chunks takes a fraction of a second
(``bm25s.BM25.index`` loops over documents in Python: ~2 s). Token strings map to ids through a
:class:`Vocabulary` that only grows, so the id arrays of unchanged chunks are reused across
rebuilds. Scores are those of ``bm25s.BM25(method="lucene")`` (checked in the tests).

Besides the BM25 score, :meth:`BM25Index.coverage` gives, per document, the share of the query's
IDF mass whose terms occur in the document (0..1). Query terms the corpus never uses get the
largest IDF, so a query about something the corpus does not cover has coverage near 0; this is
the lexical half of the absolute evidence used by :mod:`core.rag.hybrid`. It is computed from the
query terms' posting lists, for all documents or only for given candidates.
"""
from __future__ import annotations

import math
import threading
from typing import Callable, Sequence

import numpy as np

from core.text.memo import short_text_memo

Tokenizer = Callable[[str], list[str]]

QUERY_MEMO = 256  # queries whose tokens an index remembers
QUERY_MEMO_MAX_CHARS = 2000  # a longer query is tokenised every time


class Vocabulary:
    """Token string → int id, append-only (thread-safe)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.ids)

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        ids = self.ids
        missing = [t for t in tokens if t not in ids]
        if missing:
            with self._lock:
                for t in missing:
                    if t not in ids:
                        ids[t] = len(ids)
        return np.fromiter((ids[t] for t in tokens), dtype=np.int32, count=len(tokens))

    def lookup(self, tokens: Sequence[str]) -> list[int]:
        """Ids of the tokens the vocabulary knows (unknown ones are skipped, order kept)."""
        return [self.ids[t] for t in tokens if t in self.ids]


class BM25Index:
    def __init__(self, tokenizer: Tokenizer, k1: float = 1.2, b: float = 0.75, vocab: Vocabulary | None = None):
        self.tokenizer = tokenizer
        self.k1 = k1
        self.b = b
        self.vocab = vocab if vocab is not None else Vocabulary()
        self.size = 0
        self._data = np.zeros(0, dtype=np.float32)  # per (term, doc) BM25 score, term-major
        self._docs = np.zeros(0, dtype=np.int32)  # document of each entry
        self._indptr = np.zeros(1, dtype=np.int64)  # term t's entries: [indptr[t], indptr[t+1])
        # a query's tokens (:meth:`query_tokens`), per index as its tokenizer is
        self._query_memo = short_text_memo(QUERY_MEMO, QUERY_MEMO_MAX_CHARS)(lambda q: tuple(self.tokenizer(q)))

    # --- building ------------------------------------------------------------------------------
    def build(self, texts: Sequence[str]) -> None:
        """Tokenise ``texts`` and index them."""
        self.build_ids([self.vocab.encode(self.tokenizer(t)) for t in texts])

    def build_ids(self, doc_ids: Sequence[np.ndarray]) -> None:
        """Index documents given as token-id arrays (from :attr:`vocab`)."""
        n = len(doc_ids)
        self.size = n
        n_vocab = len(self.vocab)
        lengths = np.fromiter((len(d) for d in doc_ids), dtype=np.int64, count=n)
        if n == 0 or not lengths.sum():
            self._data = np.zeros(0, dtype=np.float32)
            self._docs = np.zeros(0, dtype=np.int32)
            self._indptr = np.zeros(n_vocab + 1, dtype=np.int64)
            return
        flat = np.concatenate([np.asarray(d, dtype=np.int64) for d in doc_ids])
        doc_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
        # one entry per distinct (term, doc), term-major, with its term frequency
        keys, tf = np.unique(flat * n + doc_of, return_counts=True)
        terms, docs = np.divmod(keys, n)
        df = np.bincount(terms, minlength=n_vocab)
        idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5)).astype(np.float32)
        avg_len = lengths.mean()
        tf = tf.astype(np.float32)
        tfc = tf / (self.k1 * ((1 - self.b) + self.b * lengths[docs] / avg_len) + tf)
        self._data = (idf[terms] * tfc).astype(np.float32)
        self._docs = docs.astype(np.int32)
        self._indptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)

    # --- statistics ----------------------------------------------------------------------------
    def _df(self, term_id: int) -> int:
        if term_id + 1 >= len(self._indptr):
            return 0
        return int(self._indptr[term_id + 1] - self._indptr[term_id])

    def idf(self, term: str) -> float:
        term_id = self.vocab.ids.get(term)
        df = self._df(term_id) if term_id is not None else 0
        return math.log(1.0 + (self.size - df + 0.5) / (df + 0.5))

    def query_tokens(self, query: str) -> list[str]:
        """``query``'s tokens, remembered per text (:data:`QUERY_MEMO` texts of at most
        :data:`QUERY_MEMO_MAX_CHARS` characters): a turn searches with the same symptom several times."""
        return list(self._query_memo(query))

    def _postings(self, term_id: int) -> slice:
        if term_id + 1 >= len(self._indptr):
            return slice(0, 0)
        return slice(int(self._indptr[term_id]), int(self._indptr[term_id + 1]))

    # --- scoring -------------------------------------------------------------------------------
    def scores(self, query_tokens: list[str]) -> np.ndarray:
        """Raw BM25 score of every document (0 where no query term occurs); a repeated query
        term counts again, as in ``bm25s``."""
        out = np.zeros(self.size, dtype=np.float32)
        for term_id in self.vocab.lookup(query_tokens):
            span = self._postings(term_id)
            out[self._docs[span]] += self._data[span]  # a term's documents are distinct
        return out

    def coverage(self, query_tokens: list[str], docs: np.ndarray | None = None) -> np.ndarray:
        """Per document (all, or the ``docs`` given): sum of IDF of the distinct query terms it
        contains / the sum over all of them."""
        terms = sorted(set(query_tokens))
        size = self.size if docs is None else len(docs)
        out = np.zeros(size, dtype=np.float64)
        if not terms or not size:
            return out.astype(np.float32)
        weights = {t: self.idf(t) for t in terms}
        total = sum(weights.values())
        if total <= 0:
            return out.astype(np.float32)
        if docs is not None:
            order = np.argsort(docs, kind="stable")
            sorted_docs = np.asarray(docs)[order]
        for term, weight in weights.items():
            term_id = self.vocab.ids.get(term)
            if term_id is None:
                continue
            posting = self._docs[self._postings(term_id)]
            if not posting.size:
                continue
            if docs is None:
                out[posting] += weight
            else:  # postings are sorted by document: mark the candidates they contain
                found = np.searchsorted(posting, sorted_docs)
                hit = (found < posting.size) & (posting[np.minimum(found, posting.size - 1)] == sorted_docs)
                out[order[hit]] += weight
        return (out / total).astype(np.float32)
