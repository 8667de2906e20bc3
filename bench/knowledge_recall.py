"""Knowledge retrieval benchmark: does 「ナレッジに質問」 find the right confirmed entry?

Run: ``python -m bench.knowledge_recall [--json] [--pg URL]``. The 28 entries of
``bench/data/knowledge_library.yaml`` are confirmed in a scratch store (SQLite, or a scratch database in
the PostgreSQL cluster ``--pg`` names) and searched through :class:`core.knowledge.retrieval.KnowledgeIndex`
(Sudachi BM25 + the bundled e5 vectors, hybrid) with the questions of ``bench/data/knowledge_queries.yaml``,
written in a reviewer's own words before any run. Figures:

* ``knowledge_recall_at_1`` / ``knowledge_recall_at_3`` / ``knowledge_mrr`` over the answerable questions
  (no score threshold: where the right entry ranks);
* ``knowledge_answerable_kept`` — share of answerable questions whose right entry is in the top 3 *and*
  scores at least ``MIN_SCORE`` (what 「ナレッジに質問」 actually cites);
* ``knowledge_unanswerable_rejected`` — share of unanswerable questions with no hit at ``MIN_SCORE``
  (「該当するナレッジはありません」);
* the top-1 score medians of both kinds, which place the threshold.

:func:`run` returns the figures for a combined ``python -m bench``; :func:`measure` is what the test
with a floor (``tests/core/knowledge/test_knowledge_recall.py``) calls.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from typing import Any, Mapping

import yaml

from bench import BENCH_DATA
from core.identity import ADMIN, OPERATOR, Identity
from core.knowledge.retrieval import MIN_SCORE, KnowledgeIndex
from core.store.db import create_scratch_database, drop_database
from core.store.store import Store
from core.validation import ENTRY_FIELDS

LIBRARY_PATH = BENCH_DATA / "knowledge_library.yaml"
QUERIES_PATH = BENCH_DATA / "knowledge_queries.yaml"
REVIEWER = Identity(name="bench", source="proxy", roles=frozenset({OPERATOR, ADMIN}))


def load_library(store: Store, path=LIBRARY_PATH) -> dict[str, int]:
    """Confirm every entry of the library file in ``store``; ``{key: entry id}``."""
    entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    ids: dict[str, int] = {}
    for entry in entries:
        conversation = store.create_conversation("knowledge", REVIEWER)
        [entry_id] = store.record_knowledge(conversation, [{f: entry[f] for f in ENTRY_FIELDS}], REVIEWER)
        store.set_entry_status(entry_id, "confirm", REVIEWER)
        ids[entry["key"]] = entry_id
    return ids


def load_queries(path=QUERIES_PATH) -> tuple[list[dict[str, str]], list[str]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return list(data["answerable"]), list(data["unanswerable"])


def measure(index: KnowledgeIndex, ids: Mapping[str, int], answerable: list[dict[str, str]],
            unanswerable: list[str], min_score: float = MIN_SCORE) -> dict[str, Any]:
    ranks: list[int | None] = []
    kept = 0
    right_top, wrong_top = [], []
    misses: list[dict[str, Any]] = []
    for item in answerable:
        hits = index.search(item["q"], n=10, min_score=0.0)
        order = [h.entry_id for h in hits]
        want = ids[item["expect"]]
        rank = order.index(want) + 1 if want in order else None
        ranks.append(rank)
        if rank is not None and rank <= 3 and hits[rank - 1].score >= min_score:
            kept += 1
        if hits:
            right_top.append(hits[0].score)
        if rank != 1:
            misses.append({"q": item["q"], "expect": item["expect"], "rank": rank,
                           "top": hits[0].title if hits else None})
    for question in unanswerable:
        hits = index.search(question, n=1, min_score=0.0)
        wrong_top.append(hits[0].score if hits else 0.0)
    n = len(answerable)
    return {
        "knowledge_questions": n,
        "knowledge_recall_at_1": round(sum(r == 1 for r in ranks) / n, 3),
        "knowledge_recall_at_3": round(sum(r is not None and r <= 3 for r in ranks) / n, 3),
        "knowledge_mrr": round(sum(1 / r for r in ranks if r) / n, 3),
        "knowledge_answerable_kept": round(kept / n, 3),
        "knowledge_unanswerable_rejected": round(sum(s < min_score for s in wrong_top) / len(wrong_top), 3),
        "knowledge_top1_median_answerable": round(statistics.median(right_top), 3) if right_top else None,
        "knowledge_top1_median_unanswerable": round(statistics.median(wrong_top), 3) if wrong_top else None,
        "knowledge_top1_max_unanswerable": round(max(wrong_top), 3) if wrong_top else None,
        "knowledge_min_score": min_score,
        "knowledge_misses": misses,
    }


PROPOSAL_THRESHOLDS = (0.3, 0.4, 0.5, 0.6)


def proposals(index: KnowledgeIndex, ids: Mapping[str, int], answerable: list[dict[str, str]]) -> dict[str, Any]:
    """What 「参考」/似ている確定済みナレッジ would propose for each answerable question, per score threshold:
    the share of proposed entries (top 3) about the same contract type or clause topic as the right
    entry (``precision``), and the share of questions whose right entry is proposed (``kept``) — without
    and with the relatedness filter (:func:`core.knowledge.similar.related`, the case's contract type
    and topic read from the right entry, as the interview knows them)."""
    from core.knowledge.similar import entry_topic, related

    out: dict[str, Any] = {}
    for threshold in PROPOSAL_THRESHOLDS:
        for filtered in (False, True):
            shown = good = kept = 0
            for item in answerable:
                want = ids[item["expect"]]
                hits = index.search(item["q"], n=10, min_score=threshold)
                right = next((h.entry for h in index.search(item["q"], n=50, min_score=0.0) if h.entry_id == want), None)
                if right is None:
                    continue
                ctype, topic = str(right.get("contract_type") or ""), entry_topic(right)
                if filtered:
                    hits = [h for h in hits if related(ctype, topic, h.entry)]
                hits = hits[:3]
                shown += len(hits)
                good += sum(related(ctype, topic, h.entry) or h.entry_id == want for h in hits)
                kept += any(h.entry_id == want for h in hits)
            name = f"proposals@{threshold:.1f}{'_filtered' if filtered else ''}"
            out[name] = {"precision": round(good / shown, 3) if shown else None,
                         "kept": round(kept / len(answerable), 3), "shown": shown}
    return out


def run(quick: bool = False, pg_url: str | None = None) -> dict[str, Any]:
    answerable, unanswerable = load_queries()
    with tempfile.TemporaryDirectory(prefix="kaiwa-bench-knowledge-") as tmp:
        url = create_scratch_database(pg_url, "kaiwa_bench") if pg_url else f"sqlite:///{tmp}/bench.db"
        store = Store(url)
        try:
            ids = load_library(store)
            index = KnowledgeIndex(store)
            figures = measure(index, ids, answerable, unanswerable)
            if not quick:
                figures["knowledge_proposals"] = proposals(index, ids, answerable)
            return figures
        finally:
            store.engine.dispose()
            if pg_url:
                drop_database(pg_url, url)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.knowledge_recall", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--pg", help="a PostgreSQL cluster URL: run on a scratch database there")
    args = parser.parse_args(argv)
    figures = run(pg_url=args.pg)
    if args.json:
        print(json.dumps(figures, ensure_ascii=False, indent=2))
        return 0
    for key, value in figures.items():
        if key == "knowledge_proposals":
            for name, row in value.items():
                print(f"  {name:28s} precision {row['precision']}  right entry kept {row['kept']}  shown {row['shown']}")
        elif key != "knowledge_misses":
            print(f"{key:40s} {value}")
    for miss in figures["knowledge_misses"]:
        print(f"  rank {miss['rank']}: {miss['q']} → want {miss['expect']}, top: {miss['top']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
