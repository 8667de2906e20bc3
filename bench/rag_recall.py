"""Retrieval benchmark: recall@5 / MRR per mode, score distributions and latency, in one run.

Run from the repository root::

    python -m bench.rag_recall            # fresh index in a temp dir (measures indexing too)
    python -m bench.rag_recall --chroma /tmp/kaiwa_bench   # reuse a persistent bench index
    python -m bench.rag_recall --tokenizers                # also compare Sudachi split modes

Manual queries: ``bench/data/rag_queries.yaml`` (``queries`` with expected section ids, ``unrelated``
without); FAQ queries: ``bench/data/faq_queries.yaml`` over ``data/faq/articles.yaml`` through
:class:`core.rag.TextRetriever`. A query is a hit when any expected id is in the top 5; MRR uses
the first expected id in the top 10.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

if __package__ in (None, ""):  # python bench/rag_recall.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import BENCH_DATA  # noqa: E402
from core.paths import DATA_DIR  # noqa: E402

QUERIES_FILE = BENCH_DATA / "rag_queries.yaml"
FAQ_ARTICLES = DATA_DIR / "faq" / "articles.yaml"
FAQ_QUERIES = BENCH_DATA / "faq_queries.yaml"
MODES = ("bm25", "dense", "hybrid")


def load_manual_queries(path: Path = QUERIES_FILE) -> tuple[list[dict], list[dict]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return list(data.get("queries") or []), list(data.get("unrelated") or [])


def faq_documents(articles: list[dict]) -> list[tuple[str, str, dict]]:
    """Same document text as the FAQ flow (core/faq/kb.py): title, body, keywords."""
    return [(str(a["id"]),
             "\n".join([str(a.get("title", "")).strip(), str(a.get("body", "")).strip(),
                        "キーワード: " + "、".join(str(k) for k in a.get("keywords") or [])]),
             {"id": str(a["id"]), "title": str(a.get("title", "")), "category": str(a.get("category", ""))})
            for a in articles]


def rank_of(ids: list[str], expected: list[str]) -> int | None:
    for i, doc_id in enumerate(ids, 1):
        if doc_id in expected:
            return i
    return None


def evaluate(search, queries: list[dict], k: int = 5) -> dict:
    """``search(query_dict) -> [(id, score)]`` best first; returns metrics and raw rows."""
    hits = 0
    rr = 0.0
    latencies = []
    rows = []
    for q in queries:
        started = time.perf_counter()
        results = search(q)
        latencies.append((time.perf_counter() - started) * 1000)
        ids = [r[0] for r in results]
        rank = rank_of(ids, q["expected"])
        if rank is not None and rank <= k:
            hits += 1
        if rank is not None:
            rr += 1.0 / rank
        rows.append({"q": q["q"], "rank": rank, "results": results[:k]})
    n = max(len(queries), 1)
    return {"recall@5": hits / n, "mrr": rr / n, "n": len(queries), "latency_ms": latencies, "rows": rows}


def describe(values: list[float]) -> str:
    if not values:
        return "n=0"
    import numpy as np

    p10, median, p90 = np.percentile(values, [10, 50, 90])
    ge50 = sum(v >= 0.5 for v in values) / len(values)
    gt30 = sum(v > 0.3 for v in values) / len(values)
    return (f"n={len(values):3d} min={min(values):.2f} p10={p10:.2f} median={median:.2f} "
            f"p90={p90:.2f} max={max(values):.2f}  >=0.5: {ge50:.0%}  >0.3: {gt30:.0%}")


def latency(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"mean {statistics.mean(values):.1f} ms, p95 {p95:.1f} ms"


def score_report(label: str, result: dict, unrelated_top: list[float]) -> list[str]:
    top1_relevant = [r["results"][0][1] for r in result["rows"] if r["rank"] == 1]
    relevant_any = [s for r in result["rows"] for (i, s) in r["results"][:5] if r["rank"] and i in r.get("expected", [])]
    top1_wrong = [r["results"][0][1] for r in result["rows"] if r["results"] and r["rank"] != 1]
    lines = [f"  {label} scores (hybrid):",
             f"    top-1 when it is relevant     {describe(top1_relevant)}",
             f"    top-1 when it is not relevant {describe(top1_wrong)}"]
    if relevant_any:
        lines.append(f"    every relevant hit in top 5   {describe(relevant_any)}")
    lines.append(f"    top-1 of unrelated queries    {describe(unrelated_top)}")
    return lines




def evaluate_modes(search, queries: list[dict], out: list[str]) -> tuple[dict, dict]:
    """recall@5 / MRR / latency of every mode, printed to ``out``; (summary per mode, hybrid result).
    ``search(q, mode, n)`` returns ``[(id, score, label)]`` best first."""
    summary, hybrid = {}, None
    for mode in MODES:
        res = evaluate(lambda q, m=mode: [(i, score) for i, score, _ in search(q, m, 10)], queries)
        for row, q in zip(res["rows"], queries):
            row["expected"] = q["expected"]
        summary[mode] = {"recall@5": round(res["recall@5"], 3), "mrr": round(res["mrr"], 3)}
        out.append(f"  {mode:6s} recall@5 {res['recall@5']:.3f}  MRR {res['mrr']:.3f}  "
                   f"query latency {latency(res['latency_ms'])}")
        if mode == "hybrid":
            hybrid = res
    return summary, hybrid


def unrelated_scores(search, unrelated: list[dict]) -> tuple[list[float], list[str]]:
    """Hybrid top-1 score of each unanswerable query, and a line for each scoring > 0.3."""
    tops, loud = [], []
    for q in unrelated:
        hits = search(q, "hybrid", 5)
        tops.append(hits[0][1] if hits else 0.0)
        if hits and hits[0][1] > 0.3:
            loud.append(f"    {hits[0][1]:.2f} {q['q']} -> {hits[0][0]} {hits[0][2]}")
    return tops, loud

def verbose_lines(hybrid: dict, loud: list[str], unrelated_label: str) -> list[str]:
    """The --verbose detail: hybrid misses at 5, then unanswerable queries that scored > 0.3."""
    lines = []
    misses = [r for r in hybrid["rows"] if not r["rank"] or r["rank"] > 5]
    if misses:
        lines.append("  hybrid misses:")
        lines += [f"    {r['q']}  expected {r['expected']}  got {[i for i, _ in r['results'][:3]]}" for r in misses]
    if loud:
        lines.append(f"  {unrelated_label} scoring > 0.3:")
        lines += loud
    return lines

def run_manuals(args, out: list[str], summary: dict) -> None:
    import chromadb

    from core.rag.embeddings import get_default_embedder
    from core.rag.manual_retriever import ManualRetriever
    from core.rag.store import chroma_settings
    from core.text.ja_tokens import JapaneseTokenizer, get_tokenizer

    queries, unrelated = load_manual_queries()
    tmp = None
    path = args.chroma
    if not path:
        tmp = tempfile.TemporaryDirectory(prefix="kaiwa_bench_chroma_")
        path = tmp.name
    embedder = get_default_embedder()
    client = chromadb.PersistentClient(path=str(path), settings=chroma_settings())
    started = time.perf_counter()
    retriever = ManualRetriever(store=client, embedder=embedder, collection="bench_manuals")
    indexed = retriever.sync_manuals()
    build_s = time.perf_counter() - started
    started = time.perf_counter()
    retriever = ManualRetriever(store=client, embedder=embedder, collection="bench_manuals")
    retriever.sync_manuals()
    reopen_s = time.perf_counter() - started
    chunks = len(retriever)
    out.append(f"== Manuals: {chunks} chunks, vehicles {retriever.vehicles()}, embedder {embedder.key}, "
               f"tokenizer {retriever.tokenizer.name}")
    if indexed:
        out.append(f"  indexing: {build_s:.1f} s for {sum(indexed.values())} chunks "
                   f"({build_s / max(sum(indexed.values()), 1) * 1000:.0f} ms/chunk, embedding included)")
    else:
        out.append(f"  indexing: reused the persistent index at {path} (open {build_s:.2f} s)")
    out.append(f"  reopen of the persisted index (load + BM25 build): {reopen_s * 1000:.0f} ms")
    out.append(f"  queries: {len(queries)} with answers, {len(unrelated)} unrelated")

    def searcher(r, mode):
        return lambda q: [(c.section_id, c.score) for c in r.search(q["q"], q["vehicle_id"], 10, mode)]

    def manual_search(q, mode, n):
        return [(c.section_id, c.score, c.section) for c in retriever.search(q["q"], q["vehicle_id"], n, mode)]

    summary["manuals"], hybrid = evaluate_modes(manual_search, queries, out)
    unrelated_top, loud = unrelated_scores(manual_search, unrelated)
    out.extend(score_report("manual", hybrid, unrelated_top))
    # what the scores would be with plain normalised RRF (fused / (2/(k+1))), for comparison
    from core.rag.hybrid import RRF_K

    def plain_rrf(hit) -> float:
        return sum(1.0 / (RRF_K + r) for r in (hit.bm25_rank, hit.dense_rank) if r) / (2.0 / (RRF_K + 1))

    rel_plain = [plain_rrf(retriever.search(q["q"], q["vehicle_id"], 1)[0]) for q in queries]
    unrel_plain = [plain_rrf(h[0]) for q in unrelated if (h := retriever.search(q["q"], q["vehicle_id"], 1))]
    out.append("    for comparison, plain RRF / (2/(k+1)) of the top-1:")
    out.append(f"      answerable queries          {describe(rel_plain)}")
    out.append(f"      unrelated queries           {describe(unrel_plain)}")
    summary["manual_scores"] = {
        "top1_relevant": [r["results"][0][1] for r in hybrid["rows"] if r["rank"] == 1],
        "unrelated_top1": unrelated_top}
    if args.verbose:
        out.extend(verbose_lines(hybrid, loud, "unrelated queries"))

    if args.tokenizers:
        out.append("  tokenizer comparison (recall@5 / MRR):")
        for mode_name in ("A", "B", "C", "C+A", "C+B"):
            for form in ("normalized", "surface"):
                tok = JapaneseTokenizer(mode_name, form)
                alt = ManualRetriever(store=retriever.store, tokenizer=tok)
                b = evaluate(searcher(alt, "bm25"), queries)
                h = evaluate(searcher(alt, "hybrid"), queries)
                mark = "  <- default" if tok.name == get_tokenizer().name else ""
                out.append(f"    {tok.name:24s} bm25 {b['recall@5']:.3f}/{b['mrr']:.3f}  "
                           f"hybrid {h['recall@5']:.3f}/{h['mrr']:.3f}{mark}")
    if tmp is not None:
        del retriever, client
        tmp.cleanup()


def run_faq(args, out: list[str], summary: dict) -> None:
    from core.rag.embeddings import get_default_embedder
    from core.rag.text_retriever import TextRetriever

    if not FAQ_ARTICLES.exists() or not FAQ_QUERIES.exists():
        out.append(f"== FAQ: skipped ({FAQ_ARTICLES.name} or {FAQ_QUERIES.name} missing)")
        return
    articles = yaml.safe_load(FAQ_ARTICLES.read_text(encoding="utf-8"))["articles"]
    raw = yaml.safe_load(FAQ_QUERIES.read_text(encoding="utf-8"))["queries"]
    queries = [q for q in raw if q.get("expected")]
    unrelated = [q for q in raw if not q.get("expected")]
    started = time.perf_counter()
    retriever = TextRetriever(faq_documents(articles), embedder=get_default_embedder())
    build_s = time.perf_counter() - started
    out.append(f"== FAQ: {len(articles)} articles, {len(queries)} queries with answers, "
               f"{len(unrelated)} without; build {build_s:.1f} s")
    def faq_search(q, mode, n):
        return [(i, score, meta.get("title", "")) for i, score, meta in retriever.search(q["q"], n, mode)]

    summary["faq"], hybrid = evaluate_modes(faq_search, queries, out)
    unrelated_top, loud = unrelated_scores(faq_search, unrelated)
    if not unrelated:  # the manual set's unrelated questions are mostly FAQ topics: use none
        out.append("  (bench/data/faq_queries.yaml has no queries without an answer)")
    out.extend(score_report("FAQ", hybrid, unrelated_top))
    if args.verbose:
        out.extend(verbose_lines(hybrid, loud, "queries without an answer"))
    if args.tokenizers:
        import copy

        from core.rag.bm25 import BM25Index
        from core.text.ja_tokens import JapaneseTokenizer, get_tokenizer

        out.append("  tokenizer comparison (recall@5 / MRR):")
        for mode_name in ("A", "B", "C", "C+A", "C+B"):
            for form in ("normalized", "surface"):
                tok = JapaneseTokenizer(mode_name, form)
                alt = copy.copy(retriever)
                alt.tokenizer = tok
                alt.bm25 = BM25Index(tok)
                alt.bm25.build(alt.texts)
                row = []
                for mode in ("bm25", "hybrid"):
                    r = evaluate(lambda q, m=mode: [(i, s) for i, s, _ in alt.search(q["q"], 10, m)], queries)
                    row.append(f"{mode} {r['recall@5']:.3f}/{r['mrr']:.3f}")
                mark = "  <- default" if tok.name == get_tokenizer().name else ""
                out.append(f"    {tok.name:24s} {'  '.join(row)}{mark}")


def run(quick: bool = False) -> dict:
    """Hybrid recall@5 on the real manuals (fresh temp index, default embedder; the shipped
    vectors make indexing cheap) and on the FAQ, for ``python -m bench``."""
    import chromadb

    from core.faq.kb import hybrid_retriever, load_articles
    from core.rag.manual_retriever import ManualRetriever
    from core.rag.store import chroma_settings

    queries, _ = load_manual_queries()
    with tempfile.TemporaryDirectory(prefix="kaiwa_bench_recall_") as tmp:
        client = chromadb.PersistentClient(path=tmp, settings=chroma_settings())
        retriever = ManualRetriever(store=client, collection="bench_recall")
        retriever.sync_manuals()
        manual = evaluate(lambda q: [(c.section_id, c.score) for c in retriever.search(q["q"], q["vehicle_id"], 10)],
                          queries)
        retriever.flush()
        del retriever, client
    out = {"retrieval_recall_at_5": round(manual["recall@5"], 3), "retrieval_mrr": round(manual["mrr"], 3)}
    if FAQ_QUERIES.exists():
        faq_queries = [q for q in yaml.safe_load(FAQ_QUERIES.read_text(encoding="utf-8"))["queries"] if q.get("expected")]
        faq = hybrid_retriever(load_articles(FAQ_ARTICLES))
        res = evaluate(lambda q: [(i, s) for i, s, _ in faq.search(q["q"], 10)], faq_queries)
        out["faq_recall_at_5"] = round(res["recall@5"], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chroma", help="persistent Chroma directory to (re)use instead of a temp dir")
    parser.add_argument("--tokenizers", action="store_true", help="compare Sudachi split modes / forms")
    parser.add_argument("--skip-faq", action="store_true")
    parser.add_argument("--json", help="also write the summary numbers to this file")
    parser.add_argument("-v", "--verbose", action="store_true", help="list the hybrid misses")
    args = parser.parse_args(argv)
    out: list[str] = []
    summary: dict = {}
    started = time.perf_counter()
    run_manuals(args, out, summary)
    if not args.skip_faq:
        run_faq(args, out, summary)
    out.append(f"total {time.perf_counter() - started:.1f} s")
    print("\n".join(out))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
