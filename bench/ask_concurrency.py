"""Ask the knowledge base side by side: the latency of a normal question while long ones are in flight.

``python -m bench.ask_concurrency [--long N] [--chars C]`` (defaults 6 and 2,000): a library of the 20
benchmark entries (SQLite in a temporary folder), ``POST /api/knowledge/ask`` through the app (TestClient,
the offline provider), ``N`` questions of ``C`` characters started together, then — once they are all under
way — one normal question (a new wording each time, so its vector is never cached); prints one JSON object: the normal question's latency alone and with the long
ones in flight (median of ``--rounds``), the long ones' own latency, and how many were refused (429).
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

NORMAL = "相手だけがいつでも契約を解除できる条項には、普段どう対応していますか？"
NORMALS = ("相手方だけがいつでも解除できる条項への対応は？", "一方的な任意解除権があるときの方針を教えて",
           "相手だけが自由に契約を終了できる条文はどう直していますか？", "任意解除は相手だけに認められている。対応は？",
           "いつでも解除できるのが相手方だけの条項の扱いは？")  # each asked once: never in the query cache
FILLER = "当社の業務委託契約で、相手方が一方的に契約を解除できる条項と損害賠償の上限について検討しています。"


def long_question(n: int, chars: int) -> str:
    text = f"（{n}）" + FILLER * (chars // len(FILLER) + 1)
    return text[:chars]


def measure(long: int = 6, chars: int = 2000, rounds: int = 3) -> dict[str, Any]:
    from fastapi.testclient import TestClient  # lazy: bench imports stay light

    from api import knowledge as api_knowledge
    from api.main import app
    from bench.knowledge_recall import load_library
    from core.llm.offline import OfflineClient
    from core.store.store import Store

    with tempfile.TemporaryDirectory(prefix="kaiwa-ask-") as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'library.db'}")
        load_library(store)
        app.dependency_overrides[api_knowledge.get_store] = lambda: store
        app.dependency_overrides[api_knowledge.get_client] = OfflineClient
        try:
            client = TestClient(app)

            def ask(question: str) -> tuple[float, int]:
                started = time.perf_counter()
                status = client.post("/api/knowledge/ask", json={"question": question}).status_code
                return time.perf_counter() - started, status

            ask(NORMAL)  # warm up: the index, the embedder
            alone = statistics.median(ask(NORMALS[-1 - i] + "（単独）")[0] for i in range(rounds))
            busy, long_times, refused = [], [], 0
            for r in range(rounds):
                results: list[tuple[float, int]] = []

                def asker(n: int, into: list[tuple[float, int]] = results) -> None:
                    into.append(ask(long_question(n, chars)))

                threads = [threading.Thread(target=asker, args=(r * long + i,)) for i in range(long)]
                for thread in threads:
                    thread.start()
                time.sleep(0.3)  # all long ones under way
                elapsed, status = ask(NORMALS[r % len(NORMALS)] + f"（{r}）")
                busy.append(elapsed)
                refused += int(status == 429)
                for thread in threads:
                    thread.join()
                long_times += [t for t, s in results if s == 200]
                refused += sum(1 for _, s in results if s == 429)
            return {"long_in_flight": long, "long_chars": chars, "rounds": rounds,
                    "normal_alone_s": round(alone, 3), "normal_with_long_in_flight_s": round(statistics.median(busy), 3),
                    "long_question_s": round(statistics.median(long_times), 3) if long_times else None,
                    "refused_429": refused}
        finally:
            app.dependency_overrides.clear()
            store.engine.dispose()


def run(quick: bool = False) -> dict[str, Any]:
    return measure(rounds=1 if quick else 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ask_concurrency", description=__doc__.splitlines()[0])
    parser.add_argument("--long", type=int, default=6)
    parser.add_argument("--chars", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.long, args.chars, args.rounds), ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
