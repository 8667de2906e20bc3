"""Race counts (not speed): concurrent turns on one diagnosis conversation, and concurrent confirmations of one
booking form, sent by real processes at the same moment, on SQLite and PostgreSQL.

Run: ``python -m bench.races [--rounds N] [--pg URL]`` (PostgreSQL also from ``KAIWA_TEST_PG_URL``; a
throwaway database is made in that cluster and dropped afterwards). Prints one JSON object.

Two worker processes (``python -m bench.races --worker URL``) import everything and open the store first,
then wait for commands on stdin; a round writes one command to each of them back to back, so both start
their request within microseconds of each other. Each round is one of:

* ``turns``: both send a different symptom to one conversation at the free-text step, through
  ``DiagnosisConversations.handle`` (the path the HTTP API and the console share). A *loss* is a request
  answered as done (the HTTP API's 200) whose user turn is not among the conversation's live turns
  afterwards; ``busy`` counts requests refused with :class:`~core.store.conversations.TurnBusy` (409).
* ``booking``: both press 「この内容で予約する」 on one conversation's booking confirmation; a *duplicate*
  is every booking of that conversation beyond the first.
* ``form``: both call ``Store.create_booking`` with the same conversation and form at once (what the
  database itself must refuse to double, whatever the flow above it does).
* ``library``: two library writes on one entry at once (:data:`LIBRARY_CASES`: edits of different fields,
  archive against confirm, archive against edit, confirm against confirm). Counted: *lost edits* (an edit
  answered as done whose text the entry no longer holds although nothing else changed that field), *undone
  archives* (an archive answered as done and the entry not archived), *edits after archive* (an edit stored
  with a version above the archive's), *double confirms* (two confirmations stored), and *duplicate
  versions* (an entry with two history rows of one version) and *audit mismatches* (an entry whose
  history and audit rows do not pair up, or whose version is not its newest history row's).

The conformance suite (``tests/core/store/test_store_races.py``) runs the same rounds and asserts no loss
and no duplicate; ``run`` here only counts.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VEHICLE = "kaiwa-mirai-hv-2022"
FORM = {"name": "山田 太郎", "phone": "090-1234-5678", "address": "東京都テスト区1-2-3"}
TO_FREE_TEXT = (dict(action="select_vehicle", action_value=VEHICLE), dict(action="confirm_photo", action_value="yes"))
TO_CONFIRM = TO_FREE_TEXT + (dict(message="ブレーキペダルが床まで沈む"), dict(action="reserve", action_value="dispatch"),
                             dict(action="submit_booking", action_value=FORM))
SYMPTOMS = ("エアコンの風が弱い", "ワイパーが動かない", "ラジオが聞こえない", "窓が閉まらない")
ENV = {"KAIWA_URGENCY_SEMANTIC": "off", "KAIWA_DEBUG": "0"}


class NoManual:
    """A retriever that finds nothing (the race is in the store, not the search)."""

    def search(self, query: str, vehicle_id: str | None = None, n_results: int = 5, mode: str = "hybrid") -> list:
        return []


def conversations(store: Any, owner: Any = "race") -> Any:
    from core.diagnosis.conversation import DiagnosisConversations  # lazy: workers import after the fork
    from core.llm.offline import OfflineClient  # lazy: as above

    return DiagnosisConversations(store, client=OfflineClient(), retriever=NoManual(), owner=owner)


def prepare(store: Any, requests: tuple[dict, ...]) -> str:
    """A new conversation taken through ``requests``; returns its id."""
    from core.diagnosis.models import ChatRequest  # lazy: as above

    convs = conversations(store)
    sid = convs.handle(ChatRequest()).session_id
    for request in requests:
        response = convs.handle(ChatRequest(session_id=sid, **request))
        assert response.session_id == sid, response
    return sid


# ---- the worker ---------------------------------------------------------------------------------
def _serve(url: str) -> None:
    from core.diagnosis.models import ChatRequest  # lazy: the worker's own process
    from core.store.store import Store  # lazy: as above

    store = Store(url, run_migrations=False)
    convs = conversations(store)
    convs.handle(ChatRequest())  # warm up: imports, catalog, connection pool
    print("ready", flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        try:
            if command["op"] == "turn":
                response = conversations(store).handle(ChatRequest(**command["request"]))
                reply = {"ok": True, "session_id": response.session_id, "step": response.current_step,
                         "fallback": response.fallback}
            elif command["op"] == "library":
                reply = {"ok": True, "version": _library_write(store, command)}
            else:
                number = store.create_booking(command["cid"], booking_type="dispatch", contact=FORM, actor=None)
                reply = {"ok": True, "number": number}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which counts it
            reply = {"ok": False, "error": type(exc).__name__, "message": str(exc)[:300]}
        print(json.dumps(reply, ensure_ascii=False), flush=True)


LIBRARY_CASES = {
    "edit_edit": ({"call": "edit", "field": "review_points"}, {"call": "edit", "field": "action_plan"}),
    "archive_confirm": ({"call": "status", "action": "archive"}, {"call": "status", "action": "confirm"}),
    "archive_edit": ({"call": "status", "action": "archive"}, {"call": "edit", "field": "action_plan"}),
    "confirm_confirm": ({"call": "status", "action": "confirm"}, {"call": "status", "action": "confirm"}),
}
ENTRY = {"knowledge_title": "損害賠償の上限", "contract_type": "業務委託契約", "target_clause": "損害賠償",
         "review_points": "上限の有無を確認する", "action_plan": "委託料総額を上限とする", "clause_sample": "第10条"}


def _library_write(store: Any, command: dict) -> int:
    from core.identity import ADMIN, OPERATOR, Identity  # lazy: as above

    admin = Identity(name=f"管理者{os.getpid()}", email=f"admin{os.getpid()}@example.jp", source="proxy",
                     roles=frozenset({OPERATOR, ADMIN}))
    if command["call"] == "edit":
        row = store.edit_entry(command["entry_id"], {command["field"]: command["text"]}, admin)
    else:
        row = store.set_entry_status(command["entry_id"], command["action"], admin)
    return int(row["version"])


def library_round(store: Any, workers: "Workers", case: str, n: int = 0) -> dict[str, Any]:
    """One entry, the two writes of ``case`` at once; what went wrong (see the module docstring)."""
    entry_id = store.record_knowledge(None, [ENTRY], "race")[0]
    commands = []
    for i, call in enumerate(LIBRARY_CASES[case]):
        commands.append({"op": "library", "entry_id": entry_id, **call, "text": f"{case}の変更 {n}-{i}"})
    replies = workers.at_once(commands)
    entry = store.get_entry(entry_id)
    history = store.entry_history(entry_id)
    audit = [a for a in store.list_audit("knowledge_entry", entry_id, limit=50)]
    done = [(c, r) for c, r in zip(commands, replies) if r["ok"]]
    fields_edited = [c["field"] for c, _ in done if c["call"] == "edit"]
    lost = sum(1 for c, _ in done if c["call"] == "edit" and entry[c["field"]] != c["text"]
               and fields_edited.count(c["field"]) == 1)
    archived_ok = any(c["call"] == "status" and c["action"] == "archive" for c, _ in done)
    archive_versions = [h["version"] for h in history if h["action"] == "archive"]
    versions = [h["version"] for h in history]
    changes = [h for h in history if h["action"] not in ("drafted", "model_update")]
    return {
        "entry_id": entry_id, "replies": replies,
        "lost_edits": lost,
        "undone_archive": int(archived_ok and entry["status"] != "archived"),
        "edit_after_archive": int(bool(archive_versions) and any(
            h["action"] == "edit" and h["version"] >= min(archive_versions) for h in history)),
        "double_confirm": int(sum(1 for h in history if h["action"] == "confirm") > 1),
        "duplicate_versions": len(versions) - len(set(versions)),
        "audit_mismatch": int(len(audit) != len(changes) or entry["version"] != max(versions)),
        "errors": [r for r in replies if not r["ok"] and r.get("error") not in ("ValueError", "StaleEntry")],
    }


def measure_library(url: str, rounds: int) -> dict[str, Any]:
    """``rounds`` rounds of every :data:`LIBRARY_CASES` case on ``url``, summed per case."""
    from core.store.store import Store  # lazy: as above

    store = Store(url)
    workers = Workers(url)
    out: dict[str, Any] = {"rounds": rounds}
    try:
        for case in LIBRARY_CASES:
            results = [library_round(store, workers, case, n) for n in range(rounds)]
            out[case] = {key: sum(r[key] for r in results) for key in (
                "lost_edits", "undone_archive", "edit_after_archive", "double_confirm", "duplicate_versions",
                "audit_mismatch")}
            out[case]["errors"] = sum(len(r["errors"]) for r in results)
    finally:
        workers.close()
        store.engine.dispose()
    return out


class Workers:
    """``n`` worker processes on ``url``, each ready to take one command at a time."""

    def __init__(self, url: str, n: int = 2):
        env = {**os.environ, **ENV}
        self.procs = [subprocess.Popen([sys.executable, "-m", "bench.races", "--worker", url], cwd=ROOT, env=env,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(n)]
        for proc in self.procs:
            line = proc.stdout.readline()
            if line.strip() != "ready":
                self.close()
                raise RuntimeError(f"race worker did not start: {line!r}")

    def at_once(self, commands: list[dict]) -> list[dict]:
        """Each command to its worker back to back, then every reply."""
        for proc, command in zip(self.procs, commands):
            proc.stdin.write(json.dumps(command, ensure_ascii=False) + "\n")
            proc.stdin.flush()
        return [json.loads(proc.stdout.readline()) for proc in self.procs]

    def close(self) -> None:
        for proc in self.procs:
            if proc.stdin:
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


# ---- rounds ------------------------------------------------------------------------------------
def turn_round(store: Any, workers: Workers, n: int = 0) -> dict[str, Any]:
    sid = prepare(store, TO_FREE_TEXT)
    texts = [SYMPTOMS[(n + i) % len(SYMPTOMS)] + f"（{i}）" for i in range(len(workers.procs))]
    replies = workers.at_once([{"op": "turn", "request": {"session_id": sid, "message": t}} for t in texts])
    live = {e.get("text") for e in store.chat_entries(sid) if e.get("role") == "user"}
    done = [t for t, r in zip(texts, replies) if r["ok"]]
    return {"session_id": sid, "replies": replies, "lost": [t for t in done if t not in live],
            "busy": sum(1 for r in replies if r.get("error") == "TurnBusy"),
            "errors": [r for r in replies if not r["ok"] and r.get("error") != "TurnBusy"]}


def booking_round(store: Any, workers: Workers) -> dict[str, Any]:
    sid = prepare(store, TO_CONFIRM)
    replies = workers.at_once([{"op": "turn", "request": {"session_id": sid, "action": "booking",
                                                          "action_value": "confirm"}}] * len(workers.procs))
    bookings = store.list_bookings(conversation_id=sid)
    return {"session_id": sid, "replies": replies, "bookings": len(bookings),
            "duplicates": max(0, len(bookings) - 1), "errors": [r for r in replies if not r["ok"]]}


def form_round(store: Any, workers: Workers) -> dict[str, Any]:
    cid = store.create_conversation("diagnosis", "race")
    replies = workers.at_once([{"op": "book", "cid": cid}] * len(workers.procs))
    bookings = store.list_bookings(conversation_id=cid)
    numbers = {r.get("number") for r in replies if r["ok"]}
    return {"replies": replies, "bookings": len(bookings), "duplicates": max(0, len(bookings) - 1),
            "same_number": len(numbers) == 1, "errors": [r for r in replies if not r["ok"]]}


def measure(url: str, rounds: int) -> dict[str, Any]:
    from core.store.store import Store  # lazy: keeps ``--worker`` start-up free of the parent's imports

    store = Store(url)
    workers = Workers(url)
    try:
        turns = [turn_round(store, workers, n) for n in range(rounds)]
        booking = [booking_round(store, workers) for _ in range(rounds)]
        form = [form_round(store, workers) for _ in range(rounds)]
    finally:
        workers.close()
        store.engine.dispose()
    return {
        "rounds": rounds,
        "turns": {"rounds_with_loss": sum(1 for r in turns if r["lost"]), "lost_turns": sum(len(r["lost"]) for r in turns),
                  "busy_409": sum(r["busy"] for r in turns), "errors": sum(len(r["errors"]) for r in turns)},
        "booking_confirm": {"rounds_with_duplicate": sum(1 for r in booking if r["duplicates"]),
                            "duplicates": sum(r["duplicates"] for r in booking),
                            "errors": sum(len(r["errors"]) for r in booking)},
        "booking_form": {"rounds_with_duplicate": sum(1 for r in form if r["duplicates"]),
                         "duplicates": sum(r["duplicates"] for r in form),
                         "errors": sum(len(r["errors"]) for r in form)},
    }


def run_library(pg_url: str | None = None, rounds: int = 30) -> dict[str, Any]:
    """Library race counts per engine (PostgreSQL only with a URL)."""
    from core.store.db import create_scratch_database, drop_database  # lazy: as above

    pg_url = pg_url if pg_url is not None else (os.environ.get("KAIWA_TEST_PG_URL") or "").strip() or None
    os.environ.update(ENV)
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kaiwa-races-") as tmp:
        result["sqlite"] = measure_library(f"sqlite:///{Path(tmp) / 'races.db'}", rounds)
    if pg_url:
        database = create_scratch_database(pg_url, "kaiwa_races")
        try:
            result["postgresql"] = measure_library(database, rounds)
        finally:
            drop_database(pg_url, database)
    return result


def run(quick: bool = False, pg_url: str | None = None, rounds: int | None = None) -> dict[str, Any]:
    """Race counts per engine (PostgreSQL only with a URL): 5 rounds of each kind with ``quick``, else 20."""
    from core.store.db import create_scratch_database, drop_database  # lazy: as above

    pg_url = pg_url if pg_url is not None else (os.environ.get("KAIWA_TEST_PG_URL") or "").strip() or None
    rounds = rounds or (5 if quick else 20)
    os.environ.update(ENV)
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kaiwa-races-") as tmp:
        result["sqlite"] = measure(f"sqlite:///{Path(tmp) / 'races.db'}", rounds)
    if pg_url:
        database = create_scratch_database(pg_url, "kaiwa_races")
        try:
            result["postgresql"] = measure(database, rounds)
        finally:
            drop_database(pg_url, database)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.races", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pg", default=None, help="PostgreSQL cluster URL (default: KAIWA_TEST_PG_URL)")
    parser.add_argument("--library", action="store_true", help="only the knowledge library's rounds (30 a case)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _serve(args.worker)
        return 0
    if args.library:
        print(json.dumps(run_library(pg_url=args.pg, rounds=args.rounds if args.rounds != 20 else 30),
                         ensure_ascii=False, indent=1))
        return 0
    print(json.dumps(run(pg_url=args.pg, rounds=args.rounds), ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
