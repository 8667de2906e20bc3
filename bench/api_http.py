"""What the HTTP worker costs around a ``POST /api/chat`` turn, without the turn.

Run: ``python -m bench.api_http [--against NAME=DIR …] [--clients 1 8] [--seconds 4] [--repeat 3]``.

A real ``uvicorn api.main:app`` worker per code tree whose flow answers at once: the conversations' ``handle``
returns a canned answer (``bench/data/api_chat_answer.json``, a symptom turn's answer of 1.8 KB) and the review
intake does nothing, so what is measured is routing, the body's validation, the dependencies, the hand-over to
a thread and back and the answer's serialization. Beside them, the least FastAPI does for the same request (a
``dict`` body, one hand-over, the same answer). N clients post an answer to a question for S seconds, the
servers alternating; reported per server and client count: the server process's CPU per request (from
``/proc``) and requests/s, medians of the drives. ``--against old=DIR`` adds an older checkout (as in
:mod:`bench.api_turns`).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.api_turns import ROOT, Server, alternating_drives

ANSWER = ROOT / "bench" / "data" / "api_chat_answer.json"
CANNED_APP = f'''
import json
from core.diagnosis import conversation
from core.diagnosis.models import ChatResponse
import api.main as api_main
ANSWER = ChatResponse.model_validate(json.loads(open({str(ANSWER)!r}, encoding="utf-8").read()))
conversation.DiagnosisConversations.handle = lambda self, request, **kwargs: ANSWER.model_copy()
if hasattr(api_main, "queue_latest_answer"):
    api_main.queue_latest_answer = lambda *args, **kwargs: None
app = api_main.app
'''
LEAST_APP = f'''
import json
from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
ANSWER = json.loads(open({str(ANSWER)!r}, encoding="utf-8").read())
app = FastAPI()

@app.post("/api/chat")
async def chat(body: dict) -> dict:
    return await run_in_threadpool(lambda: ANSWER)

@app.get("/healthz")
def healthz() -> dict:
    return {{}}
'''


async def _drive(base: str, clients: int, seconds: float) -> dict[str, Any]:
    import httpx

    done = errors = 0
    stop = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        async def customer(k: int) -> None:
            nonlocal done, errors
            while time.monotonic() < stop:
                r = await http.post("/api/chat", json={"session_id": f"bench-{k}", "message": "はい、そうです"})
                done, errors = (done + 1, errors) if r.status_code == 200 else (done, errors + 1)

        start = time.monotonic()
        await asyncio.gather(*(customer(k) for k in range(clients)))
        elapsed = time.monotonic() - start
    return {"requests": done, "errors": errors, "rps": done / elapsed}


def measure(trees: dict[str, Path], clients: list[int], seconds: float, repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kaiwa-http-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "bench_http_canned.py").write_text(CANNED_APP, encoding="utf-8")
        (tmp / "bench_http_least.py").write_text(LEAST_APP, encoding="utf-8")
        servers: dict[str, Server] = {}
        try:
            servers["least"] = Server(tmp, "bench_http_least:app", f"sqlite:///{tmp / 'least.db'}", tmp)
            for name, tree in trees.items():
                servers[name] = Server(tree, "bench_http_canned:app", f"sqlite:///{tmp / f'{name}.db'}", tmp)
            for i, n in enumerate(clients):
                runs = alternating_drives(servers, n, i, repeat,
                                          lambda _name, base, _r, n=n: asyncio.run(_drive(base, n, seconds)),
                                          per="requests")
                for name, results in runs.items():
                    out[f"{name}_{n}"] = {
                        "server_cpu_ms": round(statistics.median(x["server_cpu_ms"] for x in results), 3),
                        "rps": round(statistics.median(x["rps"] for x in results), 1),
                        "errors": sum(x["errors"] for x in results), "runs": len(results)}
        finally:
            for server in servers.values():
                server.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.api_http", description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", metavar="NAME=DIR", action="append", default=[],
                        help="also measure an older checkout (its own api/ and core/)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--seconds", type=float, default=4.0, help="per drive")
    parser.add_argument("--repeat", type=int, default=3, help="drives per server and client count (medians)")
    args = parser.parse_args(argv)
    trees = {"new": ROOT}
    for spec in args.against:
        name, _, directory = spec.partition("=")
        trees[name] = Path(directory).resolve()
    print(json.dumps(measure(trees, args.clients, args.seconds, args.repeat), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
