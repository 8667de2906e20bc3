"""Store benchmark: what the shared store adds to a diagnosis turn, as ratios measured in one run.

Run: ``python -m bench.store [--quick] [--pg URL]`` (PostgreSQL also from ``KAIWA_TEST_PG_URL``; a
throwaway database is created in that cluster and dropped afterwards). One "conversation" is the
same four requests (start, pick the vehicle, confirm the photo, describe a symptom) with the offline
client and an empty retriever, run

* unstored: ``ChatService`` over the in-memory session store, transcript in a list (no database);
* stored: ``DiagnosisConversations`` as the console page and the HTTP API run it: the session in the
  store, and after each request the transcript written through (``sync_chat``) plus the last
  response (``update_conversation``).

Rounds alternate the variants so load on the machine hits both alike; the figures are medians per
request (turn). ``run(quick)`` returns them for ``python -m bench``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from core.diagnosis import view
from core.diagnosis.conversation import DiagnosisConversations
from core.diagnosis.models import ChatRequest
from core.diagnosis.service import ChatService
from core.diagnosis.session_store import InMemorySessionStore
from core.llm.offline import OfflineClient
from core.store.db import create_scratch_database, drop_database
from core.store.store import Store

VEHICLE = "kaiwa-mirai-hv-2022"
REQUESTS = (dict(action="select_vehicle", action_value=VEHICLE), dict(action="confirm_photo", action_value="yes"),
            dict(message="エアコンの風が弱い気がする"))
TURNS = 1 + len(REQUESTS)


class NoManual:
    """A retriever that finds nothing (the bench measures the store, not the search)."""

    def search(self, query: str, vehicle_id: str | None = None, n_results: int = 5, mode: str = "hybrid") -> list:
        return []


def unstored_conversation(client: Any) -> None:
    service = ChatService(client, store=InMemorySessionStore(), retriever=NoManual())
    transcript: list[dict[str, Any]] = []
    response = view.start(service, transcript)
    for request in REQUESTS:
        response = view.send(service, transcript, ChatRequest(session_id=response.session_id, **request),
                             prompt=response.prompt)
    assert response.current_step == "diagnosing", response.current_step


def stored_conversation(store: Store, client: Any) -> None:
    conversations = DiagnosisConversations(store, client=client, retriever=NoManual(), owner="bench")
    transcript: list[dict[str, Any]] = []
    response = conversations.start(transcript)
    for request in REQUESTS:
        response = conversations.send(transcript, ChatRequest(session_id=response.session_id, **request),
                                      prompt=response.prompt)
    assert response.current_step == "diagnosing", response.current_step


def _ms_per_turn(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000 / TURNS


def measure(stores: dict[str, Store], rounds: int) -> dict[str, list[float]]:
    """Per-turn ms of every round: ``unstored`` and one list per store, interleaved."""
    client = OfflineClient()
    variants: dict[str, Callable[[], None]] = {"unstored": lambda: unstored_conversation(client)}
    for name, store in stores.items():
        variants[name] = lambda store=store: stored_conversation(store, client)
    for fn in variants.values():  # warm up: imports, caches, connection pools
        fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for i in range(rounds):
        for name in (names if i % 2 == 0 else reversed(names)):
            times[name].append(_ms_per_turn(variants[name]))
    return times


def transactions_per_turn(store: Store) -> float:
    """How many transactions one stored turn opens (reads and writes)."""
    from sqlalchemy import event

    count = 0

    def on_begin(conn: Any) -> None:
        nonlocal count
        count += 1

    event.listen(store.engine, "begin", on_begin)
    try:
        stored_conversation(store, OfflineClient())
    finally:
        event.remove(store.engine, "begin", on_begin)
    return count / TURNS


def run(quick: bool = False, pg_url: str | None = None) -> dict[str, Any]:
    """``store_turn_ratio_sqlite`` / ``store_turn_ratio_postgresql`` (stored ÷ unstored median turn
    time; PostgreSQL None without a URL) and the per-turn milliseconds behind them."""
    pg_url = pg_url if pg_url is not None else (os.environ.get("KAIWA_TEST_PG_URL") or "").strip() or None
    rounds = 5 if quick else 30
    stores: dict[str, Store] = {}
    pg_database = None
    with tempfile.TemporaryDirectory(prefix="kaiwa-bench-") as tmp:
        try:
            stores["sqlite"] = Store(f"sqlite:///{Path(tmp) / 'bench.db'}")
            if pg_url:
                pg_database = create_scratch_database(pg_url, "kaiwa_bench")
                stores["postgresql"] = Store(pg_database)
            times = measure(stores, rounds)
            transactions = {name: transactions_per_turn(store) for name, store in stores.items()}
        finally:
            for store in stores.values():
                store.engine.dispose()
            if pg_url and pg_database:
                drop_database(pg_url, pg_database)
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians["unstored"]
    result: dict[str, Any] = {"store_rounds": rounds, "store_turn_ms_unstored": round(base, 3),
                              "store_turn_transactions": round(transactions["sqlite"], 1)}
    for name in ("sqlite", "postgresql"):
        stored = medians.get(name)
        result[f"store_turn_ms_{name}"] = None if stored is None else round(stored, 3)
        result[f"store_turn_added_ms_{name}"] = None if stored is None else round(stored - base, 3)
        result[f"store_turn_ratio_{name}"] = None if stored is None else round(stored / base, 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds instead of 30")
    parser.add_argument("--pg", metavar="URL", default=None,
                        help="PostgreSQL cluster URL (default: KAIWA_TEST_PG_URL); a scratch database is created there")
    args = parser.parse_args(argv)
    result = run(args.quick, args.pg)
    base = result["store_turn_ms_unstored"]
    print(f"diagnosis turn, offline client, median of {result['store_rounds']} rounds × {TURNS} turns")
    print(f"  without the store                 {base:8.2f} ms/turn")
    print(f"  (a stored turn opens {result['store_turn_transactions']} transactions)")
    for name in ("sqlite", "postgresql"):
        if result[f"store_turn_ms_{name}"] is None:
            print(f"  {name:<10} (no URL: --pg or KAIWA_TEST_PG_URL)")
            continue
        print(f"  stored, {name:<10}                {result[f'store_turn_ms_{name}']:8.2f} ms/turn   "
              f"+{result[f'store_turn_added_ms_{name}']:.2f} ms   ratio stored/unstored = "
              f"{result[f'store_turn_ratio_{name}']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
