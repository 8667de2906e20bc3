"""Pages at scale (issue #17): each page's Streamlit rerun on stores of 1k and 20k conversations, and the
growth 20k / 1k, on SQLite and (given a URL) PostgreSQL.

Run: ``python -m bench.pages [--quick] [--pg URL] [--sizes 1000 20000]`` (PostgreSQL also from
``KAIWA_TEST_PG_URL``). ``run(quick)`` returns the figures for ``python -m bench``.

**The stores** are seeded through the store's own API (``create_conversation``, ``append_turn`` with each
flow's chat columns, ``add_debug_record``, ``record_knowledge`` / ``edit_entry`` / ``set_entry_status``,
``create_booking``), deterministically, with the volumes of the issue: the three flows in turn, ten turns
each, half as many knowledge entries as conversations (drafted, some edited and confirmed: with history),
a booking for a third of the diagnoses, two debug records per model turn, all spread over the 365 days
before seeding (a console used every day for a year). Seeding 20k conversations takes several minutes, so
each store is kept: SQLite under ``var/bench/pages/``, PostgreSQL as a database ``kaiwa_bench_pages_<n>_v<k>``
in the cluster; a later run reuses it (the pages opened add a few empty conversations, which no figure
counts).

**The figures** (``streamlit.testing.v1.AppTest``, the whole ``app.py``, offline provider):

* ``rerun`` — the median of plain reruns of a page already open (what every click costs): the figure the
  issue's targets are about (≤ 1.5× from 1k to 20k; 分析 and ナレッジライブラリ < 1 s, デバッグログ < 0.3 s).
* ``first`` — the first run after the page's shared caches were emptied (``st.cache_data.clear()``): what
  the first visitor after a write waits for. It reads the store and grows with what the page reads (分析:
  the 30-day period's conversations).
* ``library_search`` is ナレッジライブラリ with 「賠償」 in the search box.
* ``session_kb`` — what one browser session keeps (its session state, pickled) on each page at the largest
  size: the shared caches are not in it, so the server's memory does not grow with its sessions.

``--quick`` (and ``python -m bench --quick``) measures stores of 100 and 500 conversations, seeded on first
use; a larger missing store is not seeded by a measuring run (it says which command seeds it). Sizes also
from ``KAIWA_BENCH_SIZES`` (e.g. ``1000,30000``).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import pickle
import random
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import Any
from unittest import mock

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

import core.store.base as store_base
from bench.rerun import median_rerun_ms
from core.identity import ADMIN, OPERATOR, Identity
from core.paths import ROOT
from core.rag.manual_retriever import reset_manual_retriever
from core.store.chat_sync import COLUMNS
from core.store.store import Store

SIZES = (1_000, 20_000)
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
        return url
    if engine == "sqlite":
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        path = CACHE_DIR / f"sqlite-{n}-v{SEED_VERSION}.db"
        url = f"sqlite:///{path}"
        if not path.exists() or not _complete(url, n):
            for stale in CACHE_DIR.glob(f"sqlite-{n}-v{SEED_VERSION}.db*"):
                stale.unlink()
            _seed_into(url, n)
        return url
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
    return url


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
        with store._write() as conn:
            store._audit(conn, None, "bench.seeded", "bench", f"seeded-{n}-v{SEED_VERSION}")
    finally:
        store.engine.dispose()
    print(f"  done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)


# ---- measuring -----------------------------------------------------------------------------------------------
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


def measure(url: str, reruns: int) -> dict[str, dict[str, float]]:
    """``{page: {"first": ms, "rerun": ms, "session_kb": kb}}`` for the store at ``url``."""
    import streamlit as st  # lazy: Streamlit only when measuring

    out: dict[str, dict[str, float]] = {}
    with mock.patch.dict(os.environ, {"KAIWA_DB_URL": url}):  # the whole environment is restored after
        os.environ.pop("OPENAI_API_KEY", None)
        os.environ.pop("KAIWA_PROVIDER", None)
        reset_manual_retriever()
        try:
            for page in PAGES:
                at = _open(page)
                st.cache_data.clear()
                started = time.perf_counter()
                at.run()
                first = (time.perf_counter() - started) * 1000
                if page == "library_search":
                    at.text_input(key="lib_query").set_value("賠償")
                    started = time.perf_counter()
                    at.run()
                    first = (time.perf_counter() - started) * 1000
                if at.exception:
                    raise RuntimeError(f"{page}: {at.exception}")
                out[page] = {"first": round(first, 1), "rerun": round(median_rerun_ms(at, reruns), 1),
                             "session_kb": _session_kb(at)}
        finally:
            reset_manual_retriever()
    return out


def sizes_from_env(default: tuple[int, ...]) -> tuple[int, ...]:
    """``KAIWA_BENCH_SIZES`` (comma or space separated store sizes), else ``default``."""
    raw = (os.environ.get("KAIWA_BENCH_SIZES") or "").replace(",", " ").split()
    return tuple(int(v) for v in raw) or default


def run(quick: bool = False, pg_url: str | None = None, sizes: tuple[int, ...] | None = None) -> dict[str, Any]:
    """Per engine: ``pages_rerun_ms_<engine>`` ({size: {page: ms}}), ``pages_first_ms_<engine>`` and
    ``pages_growth_<engine>`` (rerun at the largest size ÷ at the smallest, per page)."""
    sizes = sizes or sizes_from_env(QUICK_SIZES if quick else SIZES)
    pg_url = pg_url if pg_url is not None else (os.environ.get("KAIWA_TEST_PG_URL") or "").strip() or None
    reruns = 5 if quick else 15
    engines = ["sqlite"] + (["postgresql"] if pg_url else [])
    result: dict[str, Any] = {"pages_reruns": reruns, "pages_sizes": list(sizes)}
    for engine in engines:
        figures = {n: measure(_seeded(n, engine, pg_url, make=n <= SEED_LIMIT), reruns) for n in sizes}
        small, large = min(sizes), max(sizes)
        result[f"pages_rerun_ms_{engine}"] = {n: {p: f["rerun"] for p, f in figures[n].items()} for n in sizes}
        result[f"pages_first_ms_{engine}"] = {n: {p: f["first"] for p, f in figures[n].items()} for n in sizes}
        result[f"pages_growth_{engine}"] = {p: round(figures[large][p]["rerun"] / figures[small][p]["rerun"], 2)
                                            for p in PAGES}
        result[f"pages_session_kb_{engine}"] = {p: figures[large][p]["session_kb"] for p in PAGES}
    return result


def _table(result: dict[str, Any]) -> str:
    sizes = result["pages_sizes"]
    small, large = min(sizes), max(sizes)
    lines = []
    for engine in ("sqlite", "postgresql"):
        if f"pages_rerun_ms_{engine}" not in result:
            lines.append(f"\n{engine}: (no URL: --pg or KAIWA_TEST_PG_URL)")
            continue
        rerun, first = result[f"pages_rerun_ms_{engine}"], result[f"pages_first_ms_{engine}"]
        lines.append(f"\n{engine} — rerun median of {result['pages_reruns']} (first run after the caches emptied), ms")
        lines.append(f"{'page':16s} " + " ".join(f"{f'{n:,}':>20s}" for n in sizes) + f"  {'growth':>7s}")
        for page in PAGES:
            cells = " ".join(f"{rerun[n][page]:>9.0f} ({first[n][page]:>7.0f})" for n in sizes)
            lines.append(f"{page:16s} {cells}  {rerun[large][page] / rerun[small][page]:>7.2f}"
                         f"  session {result[f'pages_session_kb_{engine}'][page]:>6.1f} KB")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 reruns per page instead of 15")
    parser.add_argument("--pg", metavar="URL", default=None,
                        help="PostgreSQL cluster URL (default: KAIWA_TEST_PG_URL); the seeded databases are kept there")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="store sizes (conversations)")
    parser.add_argument("--seed-only", choices=("sqlite", "postgresql", "both"),
                        help="make (or check) the stores of one engine, measure nothing")
    args = parser.parse_args(argv)
    if args.seed_only:
        pg_url = args.pg or (os.environ.get("KAIWA_TEST_PG_URL") or "").strip() or None
        for engine in [e for e in ("sqlite", "postgresql") if args.seed_only in (e, "both")]:
            for n in args.sizes or sizes_from_env(SIZES):
                print(_seeded(n, engine, pg_url))
        return 0
    print(_table(run(args.quick, args.pg, tuple(args.sizes) if args.sizes else None)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
