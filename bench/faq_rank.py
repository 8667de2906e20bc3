"""FAQ ranking benchmark: the KB's title re-ranking (``core.faq.kb``) against the plain retriever.

Run from the repository root::

    python -m bench.faq_rank                    # weights 0 (no re-ranking) … 0.5
    python -m bench.faq_rank --weights 0 0.3 -v # and list the queries whose top-1 is wrong

Every answerable question of ``bench/data/faq_queries.yaml`` goes through ``KnowledgeBase.search`` over
``data/faq/articles.yaml`` (the flow's own hybrid retriever, vectors cached in ``var/faq_vectors``)
with ``CANDIDATES`` candidates; per title weight: top-1 accuracy, recall@3 (the flow asks for 3),
recall@5 and MRR. A query is right when any expected id is there.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

if __package__ in (None, ""):  # python bench/faq_rank.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import BENCH_DATA  # noqa: E402

DEFAULT_WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=float, nargs="*", default=list(DEFAULT_WEIGHTS))
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)

    import core.faq.kb as kb

    queries = [q for q in yaml.safe_load((BENCH_DATA / "faq_queries.yaml").read_text(encoding="utf-8"))["queries"]
               if q.get("expected")]
    base = kb.KnowledgeBase(kb.load_articles())
    print(f"{len(queries)} answerable FAQ queries, {len(base.articles)} articles, {kb.CANDIDATES} candidates")
    print("weight  top-1  recall@3  recall@5  MRR")
    default = kb.TITLE_WEIGHT
    try:
        for weight in args.weights:
            kb.TITLE_WEIGHT = weight
            top1 = r3 = r5 = 0
            rr = 0.0
            wrong = []
            for q in queries:
                ids = [h.id for h in base.search(q["q"], 10)]
                rank = next((i for i, doc in enumerate(ids, 1) if doc in q["expected"]), None)
                top1 += rank == 1
                r3 += bool(rank and rank <= 3)
                r5 += bool(rank and rank <= 5)
                rr += 1 / rank if rank else 0.0
                if rank != 1:
                    wrong.append(f"    {q['q']}  expected {q['expected']} got {ids[:3]}")
            n = len(queries)
            mark = "  <- TITLE_WEIGHT" if abs(weight - default) < 1e-9 else ""
            print(f"{weight:6.2f}  {top1 / n:5.3f}  {r3 / n:8.3f}  {r5 / n:8.3f}  {rr / n:.3f}{mark}")
            if args.verbose:
                print("\n".join(wrong))
    finally:
        kb.TITLE_WEIGHT = default
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
