"""The review queue at scale (issue #22): one page of the レビュー queue (the page's read: ``review_page`` +
``count_review_items``) on queues of 1k and 100k items, and the growth 100k / 1k, on SQLite (and PostgreSQL
with ``--pg URL`` or ``KAIWA_TEST_PG_URL``).

Run: ``python -m bench.review_queue [--quick] [--sizes 1000 100000] [--pg URL]``. ``run(quick)`` returns the
figures for ``python -m bench`` (``--quick``: 1k and 10k items).

**The queue** is seeded with bulk inserts (the store's tables, not its API: 100k one-by-one enqueues would
take minutes and measure nothing of the read): the four flows in turn, every reason, a third reviewed with a
label, a tenth claimed, spread over a year. **The figures** are medians of 15 reads (5 with ``--quick``) of:
the first page of the pending queue (what a reviewer opens), the last page of it (the deepest ``OFFSET``), a
page filtered by flow and label (an ``IN`` over the label index of ``review_item_labels``), and a claim of the next item
(``claim_next_review_item``: the conditional ``UPDATE``).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import insert

from core.identity import OPERATOR, REVIEWER, Identity
from core.store import tables as t
from core.store.db import create_scratch_database, drop_database
from core.store.review import REASONS, REVIEW_FLOWS, ReviewQuery
from core.store.store import Store

LABELS = ("緊急度の誤り", "根拠の誤り", "情報不足", "不適切な表現", "事実でない内容")
BATCH = 5000
REVIEWER_ID = Identity(name="bench", email="bench@example.jp", source="proxy", roles=frozenset({OPERATOR, REVIEWER}))


def seed(store: Store, n: int) -> None:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    future = (datetime.now(timezone.utc) + timedelta(days=1)).isoformat(timespec="milliseconds")
    item_id = 0
    with store._write() as conn:
        for first in range(0, n, BATCH):
            rows, labels = [], []
            for i in range(first, min(n, first + BATCH)):
                item_id = i + 1
                at = (start + timedelta(minutes=5 * i * 100_000 // max(n, 1))).isoformat(timespec="milliseconds")
                reviewed = i % 3 == 0
                claimed = not reviewed and i % 10 == 1
                label = LABELS[i % len(LABELS)]
                rows.append({"id": item_id, "conversation_id": f"bench-{i}", "turn": 1, "flow": REVIEW_FLOWS[i % 4],
                             "reason": REASONS[i % len(REASONS)],
                             "status": "done" if reviewed else "claimed" if claimed else "pending",
                             "prompt_version": f"diagnosis_system@v{i % 3}", "model": "offline",
                             "snapshot": "{}", "reviews_wanted": 1, "review_count": 1 if reviewed else 0,
                             "claimed_by": "other@example.jp" if claimed else None,
                             "claimed_by_label": "other" if claimed else None, "claim_until": future if claimed else None,
                             "verdict": "incorrect" if reviewed else None, "labels": f'["{label}"]' if reviewed else "[]",
                             "comment": "", "reviewed_by": "r@example.jp" if reviewed else None,
                             "reviewed_by_label": "r" if reviewed else None, "reviewed_at": at if reviewed else None,
                             "created_at": at, "updated_at": at})
                if reviewed:
                    labels.append({"item_id": item_id, "label": label})
            conn.execute(insert(t.review_items), rows)
            if labels:
                conn.execute(insert(t.review_item_labels), labels)
    if store.dialect == "postgresql":
        with store._write() as conn:
            conn.exec_driver_sql("SELECT setval(pg_get_serial_sequence('review_items', 'id'), "
                                 "(SELECT max(id) FROM review_items))")
            conn.exec_driver_sql("ANALYZE")


def _median_ms(action: Callable[[], Any], rounds: int) -> float:
    action()  # warm
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def measure(store: Store, rounds: int) -> dict[str, float]:
    pending = ReviewQuery(statuses=("pending",))
    total = store.count_review_items(pending)
    last = max(0, (total - 1) // 50 * 50)
    labelled = ReviewQuery(flows=("diagnosis",), labels=("根拠の誤り",))

    def page(query: ReviewQuery, offset: int) -> Callable[[], Any]:
        return lambda: (store.review_page(query, limit=50, offset=offset), store.count_review_items(query))

    def claim() -> None:
        item = store.claim_next_review_item(REVIEWER_ID, pending)
        if item is not None:
            store.release_review_item(item["id"], REVIEWER_ID)

    return {"first_page": _median_ms(page(pending, 0), rounds), "last_page": _median_ms(page(pending, last), rounds),
            "label_filter": _median_ms(page(labelled, 0), rounds), "claim_next": _median_ms(claim, rounds)}


def bench_engine(url_for: Callable[[int], tuple[str, Callable[[], None]]], sizes: list[int], rounds: int
                 ) -> dict[int, dict[str, float]]:
    out = {}
    for n in sizes:
        url, cleanup = url_for(n)
        store = Store(url)
        try:
            seed(store, n)
            out[n] = measure(store, rounds)
        finally:
            store.engine.dispose()
            cleanup()
    return out


def _sqlite(work: Path) -> Callable[[int], tuple[str, Callable[[], None]]]:
    def make(n: int) -> tuple[str, Callable[[], None]]:
        path = work / f"queue-{n}.db"
        for leftover in work.glob(f"queue-{n}.db*"):
            leftover.unlink()
        return f"sqlite:///{path}", lambda: None
    return make


def _postgres(admin_url: str) -> Callable[[int], tuple[str, Callable[[], None]]]:
    def make(n: int) -> tuple[str, Callable[[], None]]:
        url = create_scratch_database(admin_url, prefix="kaiwa_bench_queue")
        return url, lambda: drop_database(admin_url, url)
    return make


def figures(results: dict[int, dict[str, float]], engine: str) -> dict[str, Any]:
    small, large = min(results), max(results)
    growth = {k: round(results[large][k] / results[small][k], 2) if results[small][k] else None
              for k in results[small]}
    return {f"review_queue_page_ms_{engine}": {f"{n // 1000}k": r["first_page"] for n, r in sorted(results.items())},
            f"review_queue_growth_{engine}": growth["first_page"],
            f"review_queue_detail_{engine}": {f"{n // 1000}k": r for n, r in sorted(results.items())},
            f"review_queue_growth_detail_{engine}": growth}


def run(quick: bool = False, sizes: list[int] | None = None, pg: str | None = None) -> dict[str, Any]:
    sizes = sizes or ([1000, 10_000] if quick else [1000, 100_000])
    rounds = 5 if quick else 15
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kaiwa-bench-queue-") as work:
        out.update(figures(bench_engine(_sqlite(Path(work)), sizes, rounds), "sqlite"))
    pg = pg or os.environ.get("KAIWA_TEST_PG_URL")
    if pg:
        out.update(figures(bench_engine(_postgres(pg), sizes, rounds), "postgresql"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.review_queue", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", nargs="+", type=int)
    parser.add_argument("--pg", help="a PostgreSQL cluster URL (default KAIWA_TEST_PG_URL)")
    args = parser.parse_args(argv)
    result = run(args.quick, args.sizes, args.pg)
    for key, value in result.items():
        print(f"{key}: {value}", file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
