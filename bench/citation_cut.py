"""Citation cut benchmark: what the relative cut of ``core.diagnosis.rag`` does to the citations.

Run from the repository root::

    python -m bench.citation_cut                 # ratios 0 (no cut) … 0.95 on bench/data/rag_queries.yaml
    python -m bench.citation_cut --ratios 0.7 0.8

For each manual query the diagnosis keeps the hybrid hits scoring above ``keep_score`` (one per
section, top ``n_results``); a ratio ``r`` then drops the hits scoring below ``r`` × the top score.
Per ratio: citation precision (share of cited sections that are expected), recall (share of
queries that still cite an expected section, when the uncut list did), and the average number of
citations. The production index (``core.rag.get_manual_retriever``, built on first use) is used.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # python bench/citation_cut.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.rag_recall import load_manual_queries  # noqa: E402

DEFAULT_RATIOS = (0.0, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


def measure(rows: list[tuple[list[tuple[str, float]], list[str]]], ratio: float) -> dict[str, float]:
    """``rows``: (kept hits best first, expected ids) per query."""
    cited = relevant = recalled = answerable = 0
    for hits, expected in rows:
        if not hits:
            continue
        top = hits[0][1]
        kept = [sid for sid, score in hits if score >= ratio * top]
        cited += len(kept)
        relevant += sum(1 for sid in kept if sid in expected)
        if any(sid in expected for sid, _ in hits):
            answerable += 1
            recalled += any(sid in expected for sid in kept)
    n = max(1, sum(1 for hits, _ in rows if hits))
    return {"precision": relevant / max(cited, 1), "recall": recalled / max(answerable, 1),
            "citations": cited / n}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ratios", type=float, nargs="*", default=list(DEFAULT_RATIOS))
    args = parser.parse_args(argv)

    from core.diagnosis.context import Thresholds
    from core.diagnosis.rag import CITATION_RATIO
    from core.rag import get_manual_retriever

    th = Thresholds()
    retriever = get_manual_retriever()
    queries, _ = load_manual_queries()
    rows = []
    for q in queries:
        seen: dict[str, float] = {}
        for c in retriever.search(q["q"], q["vehicle_id"], th.n_results):
            if c.score > th.keep_score and c.section_id not in seen:
                seen[c.section_id] = c.score
        rows.append((sorted(seen.items(), key=lambda kv: -kv[1]), list(q["expected"])))
    print(f"{len(rows)} manual queries, keep_score > {th.keep_score}, n_results {th.n_results}")
    print("ratio  precision  recall  citations/query")
    for ratio in args.ratios:
        m = measure(rows, ratio)
        mark = "  <- CITATION_RATIO" if abs(ratio - CITATION_RATIO) < 1e-9 else ""
        print(f"{ratio:5.2f}  {m['precision']:9.3f}  {m['recall']:6.3f}  {m['citations']:15.2f}{mark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
