"""Pages at scale (issues #17, #25): each page's Streamlit rerun on stores of 1k and 30k conversations while
another operator writes, and the growth 30k / 1k, on SQLite and (given a URL) PostgreSQL.

Run: ``python -m bench.pages [--quick] [--pg URL] [--sizes 1000 30000] [--engine sqlite|postgresql|both]
[--pages …]`` (PostgreSQL also from ``KAIWA_TEST_PG_URL``). ``run(quick)`` returns the figures for
``python -m bench``.

**The stores** are seeded through the store's own API (``create_conversation``, ``append_turn`` with each
flow's chat columns, ``add_debug_record``, ``record_knowledge`` / ``edit_entry`` / ``set_entry_status``,
``create_booking``), deterministically, with the volumes of the issue: the three flows in turn, ten turns
each, half as many knowledge entries as conversations (drafted, some edited and confirmed: with history),
a booking for a third of the diagnoses, two debug records per model turn, all spread over the 365 days
before seeding (a console used every day for a year). Seeding 30k conversations takes about half an hour
per engine, so each store is kept: SQLite under ``var/bench/pages/``, PostgreSQL as a database
``kaiwa_bench_pages_<n>_v<k>`` in the cluster; a later run reuses it (a run adds three conversations and a
turn per round to it, see :func:`write_turn`).

**The figures** (``streamlit.testing.v1.AppTest``, the whole ``app.py``, offline provider; sizes interleaved;
every round first writes another operator's chat turn to each store, :func:`measure_sizes`):

* ``rerun`` — the median of plain reruns of a page already open (what every click costs; goal ≤ 100 ms on
  a quiet 2-core machine at 30k, and ≤ 1.5× from 1k to 30k), and ``rerun_cpu``, the same in CPU time of
  this process (steady on a loaded machine; PostgreSQL's own work is not in it);
* ``after_write`` / ``after_write_cpu`` — the rerun right after another operator's turn;
* ``first`` — the first run after the page's shared caches were emptied (``st.cache_data.clear()``);
* ``library_search`` is ナレッジライブラリ with 「賠償」 in the search box;
* ``session_kb`` — what one browser session keeps (its session state, pickled) on each page at the largest
  size: the shared caches are not in it, so the server's memory does not grow with its sessions.

``--quick`` (and ``python -m bench --quick``) measures stores of 100 and 500 conversations with 5 rounds,
seeded on first use; a larger missing store is not seeded by a measuring run (it says which command seeds
it). Sizes also from ``KAIWA_BENCH_SIZES`` (e.g. ``1000,30000``).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import pickle
import random
import sqlite3
import statistics
import sys
import time
from contextlib import closing, contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator
from unittest import mock

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

import core.store.base as store_base
from core.identity import ADMIN, OPERATOR, Identity
from core.paths import ROOT
from core.rag.manual_retriever import reset_manual_retriever
from core.store.chat_sync import COLUMNS
from core.store.db import drop_database
from core.store.store import Store

SIZES = (1_000, 30_000)
QUICK_SIZES = (100, 500)  # ``--quick``: seeded on first use (about a minute per engine)
SEED_LIMIT = 2_000  # a missing store up to this size is seeded when measuring; a larger one says how to seed it
SEED_VERSION = 2
WORKERS = 3  # seeding processes
CACHE_DIR = ROOT / "var" / "bench" / "pages"
APP = str(ROOT / "app.py")
PAGES = ("analytics", "library", "library_search", "debug_log", "bookings", "knowledge", "diagnosis", "faq",
         "manual_admin")
OPERATORS = [Identity(name=n, email=f"{e}@example.jp", source="proxy", roles=frozenset({OPERATOR}))
             for n, e in (("山田", "yamada"), ("佐藤", "sato"), ("鈴木", "suzuki"))]
REVIEWER = Identity(name="管理者", email="admin@example.jp", source="proxy", roles=frozenset({OPERATOR, ADMIN}))

CONTRACTS = ("業務委託契約", "秘密保持契約", "売買契約", "ライセンス契約", "賃貸借契約", "共同研究開発契約")
CLAUSES = ("損害賠償", "契約解除", "秘密保持", "知的財産権の帰属", "再委託", "支払条件", "競業避止", "準拠法・管轄")
RISKS = ("賠償の上限がない", "解除の催告期間が短い", "秘密情報の定義が広すぎる", "成果物の権利が相手方に帰属する",
         "再委託に事前の承諾が要らない", "支払期日が検収から90日後")
QUESTIONS = ("オイル交換の目安は？", "保証期間は何年ですか", "タイヤの空気圧はどのくらい？", "車検の費用はいくら？",
             "バッテリーの寿命は？", "ワイパーの交換時期は？", "営業時間を教えて", "ナビの地図更新はできますか")
SYMPTOMS = ("ブレーキを踏むとキーキー鳴る", "エアコンの風が弱い", "エンジン警告灯が点いた", "ハンドルが重い",
            "走行中に異音がする", "バッテリー警告灯が点灯した")
PHASES = ("collect_case", "organize_risks", "draft_knowledge", "review_knowledge")
SYSTEM_PROMPT = ("あなたは法務部の契約審査ナレッジを作成するためのインタビュアーです。" * 12)[:600]


# ---- seeding -------------------------------------------------------------------------------------------------
class _Clock:
    """The store's timestamps during seeding (``core.store.base.now_iso``)."""

    def __init__(self) -> None:
        self.at = datetime.now(timezone.utc)

    def iso(self) -> str:
        return self.at.isoformat(timespec="milliseconds")

    def tick(self, seconds: float = 7.0) -> str:
        self.at += timedelta(seconds=seconds)
        return self.iso()


def _debug(store: Store, clock: _Clock, cid: str, flow: str, step: str, provider: str, rng: random.Random,
           owner: Identity) -> None:
    """Two records of one model turn: a first call, then a repair (when it failed) or the next call."""
    failed = rng.random() < 0.2
    for attempt, (kind, outcome) in enumerate((("call", "schema_error" if failed else "ok"),
                                               ("repair" if failed else "call", "ok")), start=1):
        store.add_debug_record({
            "time": clock.tick(1.5), "session_id": cid, "flow": flow, "step": step, "prompt": f"{flow}_system",
            "task": f"{flow}_turn", "provider": provider, "model": "gpt-4o-mini" if provider == "openai" else "rules-v1",
            "strategy": "structured_output", "attempt": attempt if failed else 1, "kind": kind, "outcome": outcome,
            "errors": ["$: 'state' is a required property"] if outcome != "ok" else [],
            "raw_output": '{"assistant_message": "' + rng.choice(RISKS) + 'について確認します。"}',
            "latency_ms": round(rng.uniform(200, 2500), 1), "prompt_version": "v2" if rng.random() < 0.5 else "v1",
            "usage": {"prompt_tokens": 900, "completion_tokens": 120, "total_tokens": 1020},
            "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                         {"role": "user", "content": rng.choice(SYMPTOMS + QUESTIONS)}]}, owner)


def _knowledge(store: Store, clock: _Clock, rng: random.Random, owner: Identity, provider: str) -> None:
    contract, clause, risk = rng.choice(CONTRACTS), rng.choice(CLAUSES), rng.choice(RISKS)
    cid = store.create_conversation("knowledge", owner, title=f"{contract}の{clause}")
    reached = rng.randint(0, 3)
    for n in range(5):
        phase = PHASES[min(n, reached)]
        text = f"{contract}の第{rng.randint(1, 30)}条（{clause}）で、{risk}点が問題でした。"
        user = {"role": "user", "content": text, "user_text": text}
        store.append_turn(cid, user, role="user", author=owner, **_columns("knowledge", user))
        clock.tick()
        mode = "finalize" if n == 4 and reached == 3 else "interview"
        turn = {"control": {"schema_version": "1.0", "mode": mode}, "state": {"phase": phase, "missing_info": []},
                "assistant_message": f"{clause}について、どのような修正を求めましたか。", "knowledge_json": None}
        answer = {"role": "assistant", "content": turn["assistant_message"], "turn": turn, "method": "structured_output",
                  "attempts": 1, "provider": provider, "model": "m"}
        store.append_turn(cid, answer, role="assistant", author=owner, **_columns("knowledge", answer))
        _debug(store, clock, cid, "knowledge", phase, provider, rng, owner)
    if reached >= 2 or rng.random() < 0.7:  # about 1.5 entries per knowledge conversation: n / 2 in all
        drafts = [{"knowledge_title": f"{clause}の{risk[:6]}", "contract_type": contract,
                   "target_clause": f"第{rng.randint(1, 30)}条（{clause}）",
                   "review_points": f"{risk}場合、{clause}の範囲と上限を確認する。" * 3,
                   "action_plan": f"{clause}条項に上限と例外を明記するよう修正を求める。" * 2,
                   "clause_sample": f"甲及び乙は、本契約に関する{clause}について、委託料総額を上限とする。" * 2}
                  for _ in range(rng.choice((1, 2, 2, 2)))]
        ids = store.record_knowledge(cid, drafts, owner)
        for entry_id in ids:
            clock.tick(60)
            if rng.random() < 0.3:
                store.edit_entry(entry_id, {"action_plan": f"{clause}の例外を削除するよう求める。"}, owner)
            if rng.random() < 0.5:
                store.set_entry_status(entry_id, "confirm", REVIEWER)


def _diagnosis(store: Store, clock: _Clock, rng: random.Random, owner: Identity, provider: str) -> None:
    urgency = rng.choice(("critical", "high", "medium", "low", "none"))
    steps = ("vehicle_id", "free_text", "diagnosing", "diagnosing", rng.choice(("reservation", "done", "diagnosing")))
    cid = store.create_conversation("diagnosis", owner, state={"session": {"urgency_level": urgency}})
    for n, step in enumerate(steps):
        if n:
            user = {"role": "user", "text": rng.choice(SYMPTOMS), "turn": n}
            store.append_turn(cid, user, role="user", author=owner, **_columns("diagnosis", user))
            clock.tick()
        answer = {"role": "assistant", "step": step, "message": "…", "fallback": False, "provider": provider,
                  "sources": [{"section_id": f"s{k}", "section": "ブレーキ", "page": k + 1, "score": 0.5}
                              for k in range(rng.randint(0, 3) if step == "diagnosing" else 0)]}
        store.append_turn(cid, answer, role="assistant", author=owner, **_columns("diagnosis", answer))
        _debug(store, clock, cid, "diagnosis", step, provider, rng, owner)
    if rng.random() < 1 / 3:
        store.create_booking(cid, booking_type=rng.choice(("visit", "dispatch")), urgency=urgency, actor=owner,
                             contact={"name": f"顧客{rng.randint(1, 9999)}", "phone": "090-0000-0000"},
                             vehicle_label="カイワ ミライ", symptom=rng.choice(SYMPTOMS))


def _faq(store: Store, clock: _Clock, rng: random.Random, owner: Identity, provider: str) -> None:
    cid = store.create_conversation("faq", owner)
    for _ in range(10):
        outcome = rng.choices(("answered", "not_found", "fallback", "refused", "handoff", "smalltalk"),
                              (60, 20, 5, 5, 5, 5))[0]
        entry = {"user": rng.choice(QUESTIONS), "message": "回答", "outcome": outcome, "provider": provider,
                 "citations": ["kb-001"] if outcome == "answered" else []}
        store.append_turn(cid, entry, role="exchange", author=owner, **_columns("faq", entry))
        _debug(store, clock, cid, "faq", outcome, provider, rng, owner)


def _columns(flow: str, entry: dict[str, Any]) -> dict[str, Any]:
    columns = COLUMNS[flow](entry)
    columns.pop("role", None)
    return columns


def seed(store: Store, n: int, *, seed_value: int = 17, until: datetime | None = None, part: int = 0,
         parts: int = 1, progress: bool = False) -> None:
    """Conversations ``part``, ``part + parts``, … of ``n`` (the three flows in turn) through the store's API,
    spread over the 365 days before ``until``. Each conversation has its own random generator, so the
    content does not depend on how many processes share the seeding."""
    clock = _Clock()
    end = until or clock.at
    start = end - timedelta(days=365)
    spacing = timedelta(days=365) / max(1, n)
    saved = store_base.now_iso
    store_base.now_iso = clock.iso
    try:
        for i in range(part, n, parts):
            rng = random.Random(f"{seed_value}-{i}")
            clock.at = start + spacing * i
            owner, provider = OPERATORS[i % len(OPERATORS)], "openai" if rng.random() < 0.5 else "offline"
            (_knowledge, _diagnosis, _faq)[i % 3](store, clock, rng, owner, provider)
            if progress and i and i % 1000 < parts:
                print(f"  seeded {i:,} / {n:,}", file=sys.stderr, flush=True)
    finally:
        store_base.now_iso = saved


def _seed_part(url: str, n: int, until: datetime, part: int, parts: int) -> None:
    store = Store(url)
    try:
        seed(store, n, until=until, part=part, parts=parts, progress=part == 0)
    finally:
        store.engine.dispose()


def _seeded(n: int, engine: str, pg_url: str | None, *, make: bool = True) -> str:
    """The URL of a seeded store of ``n`` conversations (made now, or kept from an earlier run). With
    ``make=False`` a store that is not there yet raises instead of being seeded (``--quick`` stays quick)."""
    if not make:
        url = (f"sqlite:///{CACHE_DIR / f'sqlite-{n}-v{SEED_VERSION}.db'}" if engine == "sqlite" else
               make_url(pg_url).set(database=f"kaiwa_bench_pages_{n}_v{SEED_VERSION}").render_as_string(False))
        if (engine == "sqlite" and not (CACHE_DIR / f"sqlite-{n}-v{SEED_VERSION}.db").exists()) or not _complete(url, n):
            raise RuntimeError(f"no seeded {engine} store of {n:,} conversations: run "
                               f"`python -m bench.pages --seed-only both --sizes {n}` once (it takes a while)")
        return _settled(url)
    if engine == "sqlite":
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        path = CACHE_DIR / f"sqlite-{n}-v{SEED_VERSION}.db"
        url = f"sqlite:///{path}"
        if not path.exists() or not _complete(url, n):
            for stale in CACHE_DIR.glob(f"sqlite-{n}-v{SEED_VERSION}.db*"):
                stale.unlink()
            _seed_into(url, n)
        return _settled(url)
    name = f"kaiwa_bench_pages_{n}_v{SEED_VERSION}"
    url = make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            exists = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first()
            if exists and not _complete(url, n):
                conn.execute(text(f'DROP DATABASE "{name}"'))
                exists = None
            if not exists:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    if not _complete(url, n):
        _seed_into(url, n)
    return _settled(url)


@contextmanager
def scratch_copies(urls: dict[int, str]) -> Iterator[dict[int, str]]:
    """A copy of each seeded store (``{size: url}``) for one run that writes to it, removed after: every run
    starts from the store as seeded, not from the writes of the runs before it (they pile up on today, which
    the first run after a write reads again). SQLite: the file copied with SQLite's backup API; PostgreSQL:
    ``CREATE DATABASE … TEMPLATE`` (nothing else may be connected to the seeded one meanwhile)."""
    copies: dict[int, str] = {}
    try:
        for n, url in urls.items():
            parsed = make_url(url)
            if parsed.get_backend_name() == "sqlite":  # one name per size: a copy left by a killed run goes first
                target = Path(parsed.database).with_name(f"scratch-{n}.db")
                for stale in target.parent.glob(target.name + "*"):
                    stale.unlink()
                with closing(sqlite3.connect(parsed.database)) as source, closing(sqlite3.connect(target)) as copy:
                    source.backup(copy)
                copies[n] = f"sqlite:///{target}"
                continue
            copy_url = parsed.set(database=f"{parsed.database}_run").render_as_string(hide_password=False)
            drop_database(_admin_url(parsed), copy_url)  # a copy left by a killed run goes first
            admin = create_engine(_admin_url(parsed), isolation_level="AUTOCOMMIT")
            try:
                with admin.connect() as conn:
                    conn.execute(text(f'CREATE DATABASE "{make_url(copy_url).database}" TEMPLATE "{parsed.database}"'))
            finally:
                admin.dispose()
            copies[n] = copy_url
        yield copies
    finally:
        for url in copies.values():
            parsed = make_url(url)
            if parsed.get_backend_name() == "sqlite":
                for path in Path(parsed.database).parent.glob(Path(parsed.database).name + "*"):
                    path.unlink()
            else:
                drop_database(_admin_url(parsed), url)


def _admin_url(parsed: Any) -> str:
    """The URL of the cluster's ``postgres`` database, from which a database of it is made or dropped."""
    return parsed.set(database="postgres").render_as_string(hide_password=False)


def _complete(url: str, n: int) -> bool:
    """Whether the store at ``url`` was seeded to the end (a marker row written last)."""
    try:
        store = Store(url)
    except Exception:  # noqa: BLE001 - an unreadable leftover is re-seeded
        return False
    try:
        return bool(store.list_audit("bench", f"seeded-{n}-v{SEED_VERSION}"))
    finally:
        store.engine.dispose()


def _seed_into(url: str, n: int, workers: int = WORKERS) -> None:
    """Seed ``n`` conversations with ``workers`` processes (the store's API is per row; the Python around
    each write is most of the time, and SQLite queues the writers itself)."""
    Store(url).engine.dispose()  # migrate once, before the workers start
    started = time.perf_counter()
    print(f"seeding {n:,} conversations into {make_url(url).get_backend_name()} with {workers} processes "
          "(kept for later runs) …", file=sys.stderr, flush=True)
    until = datetime.now(timezone.utc)
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.starmap(_seed_part, [(url, n, until, part, workers) for part in range(workers)])
    store = Store(url)
    try:
        settle(store)
        with store._write() as conn:
            store._audit(conn, None, "bench.seeded", "bench", f"seeded-{n}-v{SEED_VERSION}")
    finally:
        store.engine.dispose()
    print(f"  done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)


def _settled(url: str) -> str:
    """``url``, its store settled first if it never was (:func:`settle`; seeded before seeding settled it)."""
    store = Store(url)
    try:
        if not any(store.rollup_versions().values()):
            settle(store)
    finally:
        store.engine.dispose()
    return url


def settle(store: Store) -> None:
    """Leave a seeded store as a console in use keeps it: everything written counted into the rollups (the
    first refresh takes a mark per conversation and per record: 1.1 million at 30k), and on PostgreSQL the
    marks' table vacuumed. Unvacuumed, the emptied table keeps its dead rows until autovacuum comes by, and
    every refresh's look for marks scans them (25 ms at 30k, where a settled store takes 0.2 ms): a run
    measured meanwhile measures that scan, in its rerun and its first run after a write alike."""
    store.refresh_rollups()
    if store.dialect == "postgresql":
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))


# ---- measuring -----------------------------------------------------------------------------------------------
@contextmanager
def scripts_compiled_once() -> Iterator[None]:
    """Inside the block ``AppTest`` runs a page as a server does: each script compiled once and kept. AppTest
    makes a new ``ScriptCache`` for every run, so every run parsed and compiled the page again (with Streamlit's
    "magic": ≈ 5 ms for 分析), which a server keeps compiled for as long as it runs; a rerun measured without
    this was that much slower than a server's, and a ratio to it that much smaller."""
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner

    shared = ScriptCache()
    with mock.patch.object(app_test, "ScriptCache", lambda: shared), \
            mock.patch.object(local_script_runner, "ScriptCache", lambda: shared):
        yield


def _open(page: str):
    from streamlit.testing.v1 import AppTest  # lazy: Streamlit's test harness only when measuring

    at = AppTest.from_file(APP, default_timeout=600)
    at.run()
    at.switch_page(f"pages/{page.replace('_search', '')}.py")
    return at


def _session_kb(at: Any) -> float:
    """What one browser session keeps (its session state, pickled), in KB: the server's memory per session."""
    size = 0
    for key, value in at.session_state.to_dict().items():
        if key in ("llm_client", "provider_registry", "debug_logs"):  # the same small objects on every page
            continue
        try:
            size += len(pickle.dumps(value))
        except Exception:  # noqa: BLE001 - an unpicklable widget value: not a cached table
            continue
    return round(size / 1024, 1)


def write_turn(store: Store, n: int, conversations: dict[str, str]) -> None:
    """Another operator's chat turn, written through the store's API while the pages are measured (a console
    in use): in turn an FAQ exchange, a diagnosis turn that books a visit, and a knowledge turn that drafts an
    entry, each with its debug record; so every page's store-backed data changes during the run. The turns
    go to one conversation per flow (``conversations``, made on first use), so a run adds 3 conversations to
    a kept store (and a turn, a debug record and a booking or entry per round)."""
    owner = OPERATORS[0]
    flow = ("faq", "diagnosis", "knowledge")[n % 3]
    if flow not in conversations:
        conversations[flow] = store.create_conversation(flow, owner, title="計測中の書き込み")
    cid = conversations[flow]
    if flow == "faq":
        entry = {"user": QUESTIONS[n % len(QUESTIONS)], "message": "回答", "outcome": "answered",
                 "provider": "offline", "citations": ["kb-001"]}
        store.append_turn(cid, entry, role="exchange", author=owner, **_columns("faq", entry))
    elif flow == "diagnosis":
        entry = {"role": "assistant", "step": "reservation", "message": "…", "fallback": False, "provider": "offline",
                 "sources": []}
        store.append_turn(cid, entry, role="assistant", author=owner, **_columns("diagnosis", entry))
        store.create_booking(cid, booking_type="visit", urgency="medium", actor=owner,
                             contact={"name": f"顧客{n}", "phone": "090-0000-0000"}, vehicle_label="カイワ ミライ",
                             symptom=SYMPTOMS[n % len(SYMPTOMS)])
    else:
        text_ = f"{CONTRACTS[n % len(CONTRACTS)]}の損害賠償で、{RISKS[n % len(RISKS)]}点が問題でした。"
        entry = {"role": "user", "content": text_, "user_text": text_}
        store.append_turn(cid, entry, role="user", author=owner, **_columns("knowledge", entry))
        store.record_knowledge(cid, [{"knowledge_title": f"計測中の下書き {n}", "contract_type": CONTRACTS[0],
                                      "target_clause": "第8条（損害賠償）", "review_points": "上限を確認する。",
                                      "action_plan": "上限を明記する。", "clause_sample": "委託料総額を上限とする。"}],
                               owner)
    store.add_debug_record({"session_id": cid, "flow": flow, "step": "turn", "provider": "offline",
                            "model": "rules-v1", "strategy": "structured_output", "attempt": 1, "kind": "call",
                            "outcome": "ok", "latency_ms": 321.0, "messages": []}, owner)


def _timed(at: Any) -> tuple[float, float]:
    """(wall ms, CPU ms of this process) of one run of ``at``. The CPU time is what the run itself cost,
    steady however busy the machine is (PostgreSQL's own work is in its server process, not in it)."""
    started, cpu = time.perf_counter(), time.process_time()
    at.run()
    return (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000


def _median(values: list[tuple[float, float]], i: int) -> float:
    return round(statistics.median(v[i] for v in values), 1)


def measure_sizes(urls: dict[int, str], reruns: int, log=lambda *_: None, pages: tuple[str, ...] = PAGES
                  ) -> dict[int, dict[str, dict[str, float]]]:
    """``{size: {page: figures}}``, sizes interleaved: per page, an ``AppTest`` per store; then ``reruns``
    rounds, each writing another operator's chat turn (:func:`write_turn`) to every store and timing, per
    size, the page's rerun right after that write and a plain rerun. Figures (ms, medians of the rounds):
    ``rerun`` / ``rerun_cpu`` (nothing new), ``after_write`` / ``after_write_cpu`` (the first rerun after
    the write), ``first`` (the first run after the shared caches were emptied) and ``session_kb``."""
    import streamlit as st  # lazy: Streamlit only when measuring

    out: dict[int, dict[str, dict[str, float]]] = {n: {} for n in urls}
    writes = 0
    with mock.patch.dict(os.environ, {}), scripts_compiled_once():  # the whole environment is restored after
        os.environ.pop("OPENAI_API_KEY", None)
        os.environ.pop("KAIWA_PROVIDER", None)
        reset_manual_retriever()
        stores = {n: Store(url) for n, url in urls.items()}
        writing: dict[int, dict[str, str]] = {n: {} for n in urls}
        try:
            for page in pages:
                tests, first = {}, {}
                for n, url in urls.items():
                    os.environ["KAIWA_DB_URL"] = url
                    at = _open(page)
                    st.cache_data.clear()
                    if page == "library_search":
                        at.run()
                        at.text_input(key="lib_query").set_value("賠償")
                    first[n] = _timed(at)[0]
                    if at.exception:
                        raise RuntimeError(f"{page}: {at.exception}")
                    at.run()  # warm
                    tests[n] = at
                after: dict[int, list] = {n: [] for n in urls}
                plain: dict[int, list] = {n: [] for n in urls}
                for _ in range(reruns):
                    for n, url in urls.items():
                        os.environ["KAIWA_DB_URL"] = url
                        write_turn(stores[n], writes, writing[n])
                        writes += 1
                        after[n].append(_timed(tests[n]))
                        plain[n].append(_timed(tests[n]))
                        if tests[n].exception:
                            raise RuntimeError(f"{page}: {tests[n].exception}")
                for n in urls:
                    out[n][page] = {"first": round(first[n], 1), "rerun": _median(plain[n], 0),
                                    "rerun_cpu": _median(plain[n], 1), "after_write": _median(after[n], 0),
                                    "after_write_cpu": _median(after[n], 1), "session_kb": _session_kb(tests[n])}
                log(f"  {page}: " + ", ".join(
                    f"{n:,}: rerun {out[n][page]['rerun']:.0f} (CPU {out[n][page]['rerun_cpu']:.0f}), after a write "
                    f"{out[n][page]['after_write']:.0f} (CPU {out[n][page]['after_write_cpu']:.0f}) ms" for n in urls))
                del tests
        finally:
            for s in stores.values():
                s.engine.dispose()
            reset_manual_retriever()
    return out


def measure(url: str, reruns: int) -> dict[str, dict[str, float]]:
    """``{page: figures}`` for the store at ``url`` alone (see :func:`measure_sizes`)."""
    return measure_sizes({0: url}, reruns)[0]


def sizes_from_env(default: tuple[int, ...]) -> tuple[int, ...]:
    """``KAIWA_BENCH_SIZES`` (comma or space separated store sizes), else ``default``."""
    raw = (os.environ.get("KAIWA_BENCH_SIZES") or "").replace(",", " ").split()
    return tuple(int(v) for v in raw) or default


def run(quick: bool = False, pg_url: str | None = None, sizes: tuple[int, ...] | None = None,
        log=lambda *_: None, pages: tuple[str, ...] = PAGES, engines: tuple[str, ...] = ("sqlite", "postgresql")
        ) -> dict[str, Any]:
    """Per engine: ``pages_rerun_ms_<engine>`` ({size: {page: ms}}, a plain rerun while others write),
    ``pages_after_write_ms_<engine>`` (the rerun right after another operator's turn), the same in CPU ms
    (``*_cpu_ms_*``), ``pages_first_ms_<engine>``, and ``pages_growth_<engine>`` (rerun at the largest size ÷
    at the smallest, per page; ``pages_growth_cpu_<engine>`` from the CPU figures)."""
    sizes = sizes or sizes_from_env(QUICK_SIZES if quick else SIZES)
    pg_url = pg_url if pg_url is not None else (os.environ.get("KAIWA_TEST_PG_URL") or "").strip() or None
    reruns = 5 if quick else 15
    engines = tuple(e for e in engines if e == "sqlite" or pg_url)
    result: dict[str, Any] = {"pages_reruns": reruns, "pages_sizes": list(sizes), "pages": list(pages)}
    for engine in engines:
        log(f"{engine}:")
        figures = measure_sizes({n: _seeded(n, engine, pg_url, make=n <= SEED_LIMIT) for n in sizes}, reruns, log, pages)
        small, large = min(sizes), max(sizes)
        for key, name in (("rerun", "rerun_ms"), ("rerun_cpu", "rerun_cpu_ms"), ("after_write", "after_write_ms"),
                          ("after_write_cpu", "after_write_cpu_ms"), ("first", "first_ms")):
            result[f"pages_{name}_{engine}"] = {n: {p: f[key] for p, f in figures[n].items()} for n in sizes}
        result[f"pages_growth_{engine}"] = {p: round(figures[large][p]["rerun"] / figures[small][p]["rerun"], 2)
                                            for p in pages}
        result[f"pages_growth_cpu_{engine}"] = {
            p: round(figures[large][p]["rerun_cpu"] / max(figures[small][p]["rerun_cpu"], 0.1), 2) for p in pages}
        result[f"pages_session_kb_{engine}"] = {p: figures[large][p]["session_kb"] for p in pages}
    return result


def _table(result: dict[str, Any]) -> str:
    sizes = result["pages_sizes"]
    small, large = min(sizes), max(sizes)
    lines = []
    for engine in ("sqlite", "postgresql"):
        if f"pages_rerun_ms_{engine}" not in result:
            lines.append(f"\n{engine}: (no URL: --pg or KAIWA_TEST_PG_URL)")
            continue
        r, rc = result[f"pages_rerun_ms_{engine}"], result[f"pages_rerun_cpu_ms_{engine}"]
        w, wc = result[f"pages_after_write_ms_{engine}"], result[f"pages_after_write_cpu_ms_{engine}"]
        first = result[f"pages_first_ms_{engine}"]
        lines.append(f"\n{engine} — medians of {result['pages_reruns']} rounds, each after another operator's turn; "
                     "ms: rerun (CPU) / rerun right after the write (CPU) / first run with the caches emptied")
        lines.append(f"{'page':16s} " + " ".join(f"{f'{n:,}':>34s}" for n in sizes) + f"  {'growth':>6s} {'(CPU)':>6s}")
        for page in result["pages"]:
            cells = " ".join(f"{r[n][page]:>6.0f} ({rc[n][page]:>4.0f}) / {w[n][page]:>5.0f} ({wc[n][page]:>4.0f}) / "
                             f"{first[n][page]:>5.0f}" for n in sizes)
            lines.append(f"{page:16s} {cells}  {result[f'pages_growth_{engine}'][page]:>6.2f} "
                         f"{result[f'pages_growth_cpu_{engine}'][page]:>6.2f}"
                         f"  session {result[f'pages_session_kb_{engine}'][page]:>6.1f} KB")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds per page instead of 15")
    parser.add_argument("--pg", metavar="URL", default=None,
                        help="PostgreSQL cluster URL (default: KAIWA_TEST_PG_URL); the seeded databases are kept there")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="store sizes (conversations)")
    parser.add_argument("--pages", nargs="+", choices=PAGES, default=None, help="only these pages")
    parser.add_argument("--engine", choices=("sqlite", "postgresql", "both"), default="both",
                        help="measure one engine only")
    parser.add_argument("--seed-only", choices=("sqlite", "postgresql", "both"),
                        help="make (or check) the stores of one engine, measure nothing")
    args = parser.parse_args(argv)
    if args.seed_only:
        pg_url = args.pg or (os.environ.get("KAIWA_TEST_PG_URL") or "").strip() or None
        for engine in [e for e in ("sqlite", "postgresql") if args.seed_only in (e, "both")]:
            for n in args.sizes or sizes_from_env(SIZES):
                print(_seeded(n, engine, pg_url))
        return 0
    print(_table(run(args.quick, args.pg, tuple(args.sizes) if args.sizes else None,
                     log=lambda *a: print(*a, file=sys.stderr, flush=True), pages=tuple(args.pages or PAGES),
                     engines=("sqlite", "postgresql") if args.engine == "both" else (args.engine,))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
