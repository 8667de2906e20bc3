"""The knowledge index's first sync in a process (issue #25): what every new API worker, restarted console
or replica pays on its first ナレッジに質問, on libraries of 1k and 10k confirmed entries, and the growth
10k / 1k (linear = 10; it was n²: 1.15 s at 1k, 85 s at 10k), on SQLite (and PostgreSQL with ``--pg URL``
or ``KAIWA_TEST_PG_URL``).

Run: ``python -m bench.knowledge_sync [--quick] [--sizes 1000 10000] [--rounds 3] [--pg URL]`` (``--quick``: 100
and 1,000 entries, SQLite only). Seeding 10k entries takes several minutes per engine.

**The libraries** are made through the store's API (``record_knowledge`` ten drafts per conversation, then
``set_entry_status(…, "confirm")`` for each), in scratch stores dropped afterwards. **The figure** is the
median over the rounds of a new :class:`~core.knowledge.retrieval.KnowledgeIndex`'s ``sync()`` with every
vector already computed (a constant embedder stands for the vector cache: what is measured is reading the
entries and building the BM25 and vector matrices, not e5 or the tokenizer: a first untimed sync per size fills the token cache), sizes interleaved; plus the
cost of a search right after another replica confirms one entry (the sync reads that entry alone).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from core.identity import OPERATOR, REVIEWER, Identity
from core.knowledge.retrieval import KnowledgeIndex
from core.store.db import create_scratch_database, drop_database
from core.store.store import Store

SIZES = (1_000, 10_000)
QUICK_SIZES = (100, 1_000)  # ``--quick``: SQLite only
PER_CONVERSATION = 10
CONTRACTS = ("業務委託契約", "売買契約", "秘密保持契約", "賃貸借契約", "ライセンス契約")
CLAUSES = ("損害賠償", "契約解除", "知的財産", "秘密保持", "支払条件", "検収", "再委託", "競業避止")
OWNER = Identity(name="bench", email="bench@example.jp", source="proxy", roles=frozenset({OPERATOR, REVIEWER}))


class _CachedVectors:
    """Every passage's vector already known (what the embedding cache gives a new process)."""

    def passages(self, texts: list[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), 8), dtype=np.float32)
        vectors[:, 0] = 1.0
        return vectors

    def query_vector(self, text: str) -> list[float]:
        return [1.0] + [0.0] * 7


def _entry(i: int) -> dict[str, Any]:
    contract, clause = CONTRACTS[i % len(CONTRACTS)], CLAUSES[(i // len(CONTRACTS)) % len(CLAUSES)]
    return {"contract_type": contract, "knowledge_title": f"{contract}の{clause}（{i}）",
            "target_clause": f"第{i % 30 + 1}条（{clause}）",
            "review_points": f"{clause}の範囲と上限を確認する。案件{i}では上限額が定められていなかった。",
            "action_plan": f"{clause}条項に上限と例外を明記するよう修正を求める。",
            "clause_sample": f"甲及び乙は、本契約に関する{clause}について、委託料総額を上限とする。"}


def seed(store: Store, n: int) -> None:
    for first in range(0, n, PER_CONVERSATION):
        conversation = store.create_conversation("knowledge", OWNER)
        ids = store.record_knowledge(conversation, [_entry(i) for i in range(first, min(n, first + PER_CONVERSATION))],
                                     OWNER)
        for entry_id in ids:
            store.set_entry_status(entry_id, "confirm", OWNER)


def _first_sync_s(url: str, n: int) -> float:
    store = Store(url)
    try:
        index = KnowledgeIndex(store, embedder=_CachedVectors())
        started = time.perf_counter()
        index.sync()
        elapsed = time.perf_counter() - started
        assert len(index) == n, (len(index), n)
        return elapsed
    finally:
        store.engine.dispose()


def _after_replica_confirm_ms(url: str) -> float:
    """A search right after another replica confirmed one more entry (the sync reads that entry alone)."""
    store = Store(url)
    replica = Store(url)
    try:
        index = KnowledgeIndex(store, embedder=_CachedVectors())
        index.sync()
        conversation = replica.create_conversation("knowledge", OWNER)
        entry_id = replica.record_knowledge(conversation, [_entry(10**6)], OWNER)[0]
        replica.set_entry_status(entry_id, "confirm", OWNER)
        started = time.perf_counter()
        index.sync()
        return (time.perf_counter() - started) * 1000
    finally:
        store.engine.dispose()
        replica.engine.dispose()


def _stores(engine: str, sizes: tuple[int, ...], pg_url: str | None, work: Path) -> dict[int, str]:
    urls = {}
    for n in sizes:
        if engine == "sqlite":
            urls[n] = f"sqlite:///{work / f'library-{n}.db'}"
        else:
            urls[n] = create_scratch_database(pg_url, f"kaiwa_bench_ksync_{n}")
        store = Store(urls[n])
        print(f"  seeding {n:,} confirmed entries ({engine}) …", file=sys.stderr, flush=True)
        seed(store, n)
        store.engine.dispose()
    return urls


def measure(urls: dict[int, str], rounds: int) -> dict[str, Any]:
    times: dict[int, list[float]] = {n: [] for n in urls}
    for n, url in urls.items():  # once, untimed: tokens are cached on disk like the vectors
        _first_sync_s(url, n)
    for _ in range(rounds):
        for n, url in urls.items():  # sizes interleaved
            times[n].append(_first_sync_s(url, n))
    first = {n: round(statistics.median(v), 3) for n, v in times.items()}
    small, large = min(first), max(first)
    return {"first_sync_s": first, "growth": round(first[large] / first[small], 2),
            "size_ratio": large / small, "after_replica_confirm_ms": round(_after_replica_confirm_ms(urls[large]), 1)}


def run(quick: bool = False, pg_url: str | None = None, sizes: tuple[int, ...] | None = None,
        rounds: int | None = None) -> dict[str, Any]:
    sizes = tuple(sizes or (QUICK_SIZES if quick else SIZES))
    rounds = rounds or (1 if quick else 3)
    pg_url = None if quick else pg_url or os.environ.get("KAIWA_TEST_PG_URL")
    out: dict[str, Any] = {}
    for engine in ("sqlite", "postgresql") if pg_url else ("sqlite",):
        with tempfile.TemporaryDirectory() as tmp:
            urls = _stores(engine, sizes, pg_url, Path(tmp))
            try:
                figures = measure(urls, rounds)
            finally:
                if engine == "postgresql":
                    for url in urls.values():
                        drop_database(pg_url, url)
        out[f"knowledge_first_sync_s_{engine}"] = figures["first_sync_s"]
        out[f"knowledge_first_sync_growth_{engine}"] = figures["growth"]
        out[f"knowledge_sync_after_replica_confirm_ms_{engine}"] = figures["after_replica_confirm_ms"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--pg", help="PostgreSQL cluster URL (default: KAIWA_TEST_PG_URL)")
    args = parser.parse_args(argv)
    result = run(args.quick, args.pg, tuple(args.sizes) if args.sizes else None, args.rounds)
    for key, value in result.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
