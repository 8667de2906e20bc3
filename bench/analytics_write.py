"""分析 on a store that is being written (issue #25): the page's first run after another user's chat turn,
against its own plain rerun, at two store sizes, on SQLite and (given a URL) PostgreSQL.

Run: ``python -m bench.analytics_write [--sizes 1000 30000] [--rounds 5] [--pg URL]`` (PostgreSQL also from
``KAIWA_TEST_PG_URL``; sizes also from ``KAIWA_BENCH_SIZES``, e.g. ``1000,5000``). The stores are the ones
:mod:`bench.pages` seeds through the store's API (kept under ``var/bench/pages`` / as databases in the
cluster); a missing one up to 2,000 conversations is seeded first (a larger one: ``python -m bench.pages
--seed-only both --sizes N``).

Every run measures copies of the seeded stores (``bench.pages.scratch_copies``), removed after it: the writes
of one run do not pile up on today for the next (the first run after a write reads today again).

Each size has its own ``AppTest`` of the whole app on 分析 (offline provider). Sizes are interleaved: every
round writes one chat turn to each store (a new FAQ conversation of today: a conversation, a turn and a debug
record, as a console in use does every few seconds) and then times, per size, the page's first run after
that write and a plain rerun, the page compiled once as a server keeps it
(``bench.pages.scripts_compiled_once``). Figures (medians over the rounds, ms):

* ``after_write`` / ``rerun`` and their ratio ``after_write_vs_rerun`` (goal ≤ 2);
* ``growth_after_write`` — after_write at the largest size ÷ at the smallest (goal ≤ 1.5);
* the same from the CPU time of this process (``*_cpu``): what the run cost itself, steady on a busy
  machine (PostgreSQL's share of the work is in its server, not in it).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any
from unittest import mock

from bench.pages import APP, OPERATORS, SEED_LIMIT, _seeded, scratch_copies, scripts_compiled_once, sizes_from_env
from core.identity import Identity
from core.store.chat_sync import faq_columns

DEFAULT_SIZES = (1_000, 30_000)


def _write_turn(url: str, owner: Identity, n: int) -> None:
    """Another operator's FAQ exchange, written through the store's API (a conversation, a turn, a record)."""
    from core.store.store import get_store

    store = get_store(url)
    cid = store.create_conversation("faq", owner)
    entry = {"user": f"オイル交換の目安は？ ({n})", "message": "回答", "outcome": "answered", "provider": "offline",
             "citations": ["kb-001"]}
    columns = faq_columns(entry)
    columns.pop("role")
    store.append_turn(cid, entry, role="exchange", author=owner, **columns)
    store.add_debug_record({"session_id": cid, "flow": "faq", "step": "answered", "provider": "offline",
                            "model": "rules-v1", "strategy": "structured_output", "attempt": 1, "kind": "call",
                            "outcome": "ok", "latency_ms": 321.0, "messages": []}, owner)


def _timed(at: Any) -> tuple[float, float]:
    """(wall ms, CPU ms of this process) of one run: the CPU time is what the run itself cost, however busy
    the machine is (PostgreSQL's own work is in its server process, not in it)."""
    started, cpu = time.perf_counter(), time.process_time()
    at.run()
    took = ((time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000)
    if at.exception:
        raise RuntimeError(f"分析 raised: {at.exception}")
    return took


def measure(urls: dict[int, str], rounds: int, log=lambda *_: None) -> dict[int, dict[str, float]]:
    """``{size: {"after_write": ms, "rerun": ms}}``, sizes interleaved in every round."""
    from streamlit.testing.v1 import AppTest

    from core.rag.manual_retriever import reset_manual_retriever

    tests: dict[int, Any] = {}
    after: dict[int, list[tuple[float, float]]] = {n: [] for n in urls}
    rerun: dict[int, list[tuple[float, float]]] = {n: [] for n in urls}
    with mock.patch.dict(os.environ, {}), scripts_compiled_once():  # the whole environment is restored after
        os.environ.pop("OPENAI_API_KEY", None)
        os.environ.pop("KAIWA_PROVIDER", None)
        reset_manual_retriever()
        for n, url in urls.items():
            os.environ["KAIWA_DB_URL"] = url
            at = AppTest.from_file(APP, default_timeout=900)
            at.run()
            at.switch_page("pages/analytics.py")
            started = time.perf_counter()
            at.run()
            log(f"  {n:,}: first open {time.perf_counter() - started:.1f} s")
            at.run()
            tests[n] = at
        for r in range(rounds):
            for n, url in urls.items():
                os.environ["KAIWA_DB_URL"] = url
                _write_turn(url, OPERATORS[r % len(OPERATORS)], r)
                after[n].append(_timed(tests[n]))
                reruns = [_timed(tests[n]) for _ in range(3)]
                rerun[n].append((statistics.median(w for w, _ in reruns), statistics.median(c for _, c in reruns)))
            log(f"  round {r + 1}/{rounds}: " + ", ".join(
                f"{n:,}: {after[n][-1][0]:.0f} / {rerun[n][-1][0]:.0f} ms (CPU {after[n][-1][1]:.0f} / "
                f"{rerun[n][-1][1]:.0f})" for n in urls))
        reset_manual_retriever()
    return {n: {"after_write": round(statistics.median(w for w, _ in after[n]), 1),
                "rerun": round(statistics.median(w for w, _ in rerun[n]), 1),
                "after_write_cpu": round(statistics.median(c for _, c in after[n]), 1),
                "rerun_cpu": round(statistics.median(c for _, c in rerun[n]), 1)} for n in urls}


def run(quick: bool = False, pg_url: str | None = None, sizes: tuple[int, ...] | None = None,
        rounds: int | None = None, log=lambda *_: None) -> dict[str, Any]:
    pg_url = pg_url if pg_url is not None else (os.environ.get("KAIWA_TEST_PG_URL") or "").strip() or None
    sizes = sizes or sizes_from_env((200, 1_000) if quick else DEFAULT_SIZES)
    rounds = rounds or (3 if quick else 7)
    result: dict[str, Any] = {"analytics_write_sizes": list(sizes), "analytics_write_rounds": rounds}
    for engine in ["sqlite"] + (["postgresql"] if pg_url else []):
        log(f"{engine}:")
        seeded = {n: _seeded(n, engine, pg_url, make=n <= SEED_LIMIT) for n in sizes}
        with scratch_copies(seeded) as copies:  # the run's writes go to copies: the next run starts as seeded
            figures = measure(copies, rounds, log)
        small, large = min(sizes), max(sizes)
        for cpu in ("", "_cpu"):  # wall time, then the CPU time of this process
            after, rerun = f"after_write{cpu}", f"rerun{cpu}"
            result[f"analytics_after_write{cpu}_ms_{engine}"] = {n: f[after] for n, f in figures.items()}
            result[f"analytics_rerun{cpu}_ms_{engine}"] = {n: f[rerun] for n, f in figures.items()}
            result[f"analytics_after_write_vs_rerun{cpu}_{engine}"] = {
                n: round(f[after] / f[rerun], 2) for n, f in figures.items()}
            result[f"analytics_growth_after_write{cpu}_{engine}"] = round(
                figures[large][after] / figures[small][after], 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.analytics_write", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="store sizes (conversations)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--pg", metavar="URL", default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.quick, args.pg, tuple(args.sizes) if args.sizes else None, args.rounds,
                 log=lambda *a: print(*a, file=sys.stderr, flush=True))
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
