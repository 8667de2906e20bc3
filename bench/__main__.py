"""Every benchmark figure side by side, measured in one process: ``python -m bench [--quick] [--json]``.

Prints a table (figure, value, goal) or, with ``--json``, one JSON object with every figure.
Sections (each module's ``run(quick)``; a missing or failing one shows "—" and its error):

* engine — :mod:`bench.llm_overhead` (ours vs ``instructor`` over the same mock transport);
* extract — :mod:`bench.extract` (``extract_document`` vs plain pypdf);
* retrieval — :mod:`bench.scale` (10k chunks vs Chroma + bm25s; recall@5 from :mod:`bench.rag_recall`);
* console — :mod:`bench.rerun` (AppTest rerun of every page with a 20-turn history);
* mask, store, prompts, urgency — :mod:`bench.mask`, :mod:`bench.store`, :mod:`bench.prompts`, :mod:`bench.urgency`;
* knowledge — :mod:`bench.knowledge_recall` (recall@3 of the right confirmed entry) and
  :mod:`bench.knowledge_eval` (the eval runner's pass rates for the knowledge flow);
* streaming — :mod:`bench.streaming` (the knowledge page against llama.cpp's real server: first character
  on the page after the server's first token, as a ratio to the server's time to first token);
* startup — :mod:`bench.startup` (``streamlit run app.py`` until the first page is rendered in Chromium);
* install — :mod:`bench.install` (the README's installs into an empty virtualenv, wheels only, no pip cache;
  downloads, so it needs the network: one to four minutes);
* review_queue — :mod:`bench.review_queue` (one page of the レビュー queue at 1k and 100k items);
* knowledge_sync — :mod:`bench.knowledge_sync` (a new process's first sync of the knowledge index, 1k and 10k
  confirmed entries; ``--quick``: 100 and 1,000, SQLite);
* pages — :mod:`bench.pages` (every page's rerun on stores of 1k and 30k conversations, SQLite and, with
  ``KAIWA_TEST_PG_URL``, PostgreSQL; ``--quick`` measures stores of 100 and 500, seeded on first use);
* memory — :mod:`bench.memory` (the server's RSS before, after 30 Chromium sessions opened and closed, and once
  they are gone; 10 with ``--quick``);
* analytics_write — :mod:`bench.analytics_write` (分析's first run after another user's chat turn against
  its rerun, at two store sizes; ``--quick``: 200 and 1,000);
* api_turns — :mod:`bench.api_turns` (a ``POST /api/chat`` turn's CPU in-process, and a real uvicorn worker's
  turns/s against a one-insert-one-select endpoint, lost turns counted).

Store sizes of the pages and analytics_write sections: ``KAIWA_BENCH_SIZES=1000,30000``. Progress goes to
stderr; with ``--json`` stdout is one JSON object.

``--quick`` uses fewer rounds everywhere (under 3 minutes on the 2-core dev machine, plus about a minute for
the streaming section's two llama.cpp turns, once the 10k
index under ``var/bench/scale`` exists; its first build adds about a minute). Bench-only
dependencies: ``pip install -r bench/requirements.txt`` (the startup section also needs Playwright, a test tool).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import sys
import time
import warnings
from typing import Any

SECTIONS = ("llm_overhead", "extract", "scale", "rerun", "pages", "analytics_write", "api_turns", "mask", "store", "prompts",
            "urgency", "knowledge_recall", "knowledge_eval", "streaming", "startup", "install",
            "review_queue", "memory", "knowledge_sync")
# (figure, goal shown in the table, how to read it)
FIGURES = (
    ("engine_overhead_vs_instructor", "≤ 1.0", "our structured_call / instructor per call, valid answer"),
    ("engine_repair_overhead_vs_instructor", "≤ 1.0", "same with one invalid answer and one repair"),
    ("extract_overhead_vs_pypdf", "—", "extract_document / plain pypdf text, same PDFs"),
    ("retrieval_recall_at_5", "≥ 0.98", "hybrid recall@5, real manuals and embedder"),
    ("faq_recall_at_5", "—", "hybrid recall@5 of the FAQ queries"),
    ("retrieval_query_p50_vs_chroma_10k", "≤ 1.0", "hybrid search p50 / plain Chroma dense-only p50, 10k chunks"),
    ("index_add_vs_chroma_bm25s_10k", "≤ 1.5", "add one manual / Chroma upsert + bm25s re-index, 10k chunks"),
    ("reopen_s_10k", "≤ 2 s", "new process: open the 10k index until searchable"),
    ("rerun_ms_p50", "≤ 100 ms", "Streamlit rerun p50 per page, 20-turn history"),
    ("rerun_growth_20_vs_2", "≈ 1", "rerun p50 at 20 turns / at 2 turns"),
    ("rerun_growth_20_vs_shown", "≈ 1", "rerun p50 at 20 turns / at the 5 a chat page draws (the turns out of view)"),
    ("pages_rerun_ms_sqlite", "≤ 100 ms", "page rerun median (ms) per store size while others write, SQLite (bench.pages)"),
    ("pages_rerun_cpu_ms_sqlite", "—", "the same in CPU ms of the measuring process (steady under load)"),
    ("pages_after_write_ms_sqlite", "—", "the rerun right after another operator's chat turn, SQLite"),
    ("pages_growth_sqlite", "≤ 1.5", "page rerun at 30k conversations / at 1k, SQLite"),
    ("pages_rerun_ms_postgresql", "≤ 100 ms", "the same on PostgreSQL (KAIWA_TEST_PG_URL)"),
    ("pages_rerun_cpu_ms_postgresql", "—", "the same in CPU ms, PostgreSQL"),
    ("pages_growth_postgresql", "≤ 1.5", "page rerun at 30k / at 1k, PostgreSQL"),
    ("analytics_after_write_vs_rerun_sqlite", "≤ 2", "分析: first run after a write / its rerun, per size, SQLite"),
    ("analytics_growth_after_write_sqlite", "≤ 1.5", "分析 first run after a write, largest size / smallest, SQLite"),
    ("analytics_after_write_vs_rerun_postgresql", "≤ 2", "the same on PostgreSQL"),
    ("analytics_growth_after_write_postgresql", "≤ 1.5", "the same on PostgreSQL"),
    ("api_turn_cpu_ms_sqlite", "—", "POST /api/chat work per turn, CPU ms in-process, SQLite (bench.api_turns)"),
    ("api_diagnosis_turn_cpu_ms_sqlite", "—", "the same for the symptom and answer turns only"),
    ("api_turn_rps_vs_baseline_sqlite", "—", "real uvicorn worker, 8 clients: turns/s / one-insert-one-select endpoint's"),
    ("api_turns_lost_sqlite", "0", "turns answered 200 and missing from the stored transcript"),
    ("api_turn_cpu_ms_postgresql", "—", "the same on PostgreSQL (KAIWA_TEST_PG_URL)"),
    ("api_diagnosis_turn_cpu_ms_postgresql", "—", "the same on PostgreSQL"),
    ("api_turn_rps_vs_baseline_postgresql", "—", "the same on PostgreSQL"),
    ("api_turns_lost_postgresql", "0", "the same on PostgreSQL"),
    ("mask_time_ratio_1mb_vs_100kb", "≈ 10", "masking time 1 MB / 100 KB (linear = 10)"),
    ("store_turn_ratio_sqlite", "—", "stored / unstored diagnosis turn, SQLite (bench.store)"),
    ("prompt_render_ratio_store_vs_files_sqlite", "≈ 1", "prompt render with store versions / files only (bench.prompts)"),
    ("urgency_heldout_accuracy", "—", "urgency classifier accuracy on held-out utterances"),
    ("urgency_critical_recall", "—", "recall of the critical class"),
    ("knowledge_recall_at_3", "—", "right confirmed entry in the top 3, paraphrased questions"),
    ("knowledge_unanswerable_rejected", "—", "unanswerable questions with no entry at the threshold"),
    ("knowledge_scenarios_pass_rate", "1.0", "core.eval over tests/scenarios/knowledge_*.yaml"),
    ("knowledge_library_regression_pass_rate", "1.0", "confirmed entries replayed as a regression set"),
    ("stream_first_char_vs_server_ttft", "—", "server's first token → first character on the page / server TTFT"),
    ("stream_own_vs_server_ttft", "≪ 1", "chunk with the first character → the page / server TTFT (our part)"),
    ("first_page_s", "≤ 5 s", "streamlit run → first page rendered in Chromium (median of cold starts)"),
    ("first_page_server_cpu_s", "—", "the server's CPU seconds until then (what load does not stretch)"),
    ("first_page_vs_health", "—", "first page rendered / server health 200: the page's own first run"),
    ("install_console_s", "≤ 120 s", "pip install -r requirements.txt, empty venv, wheels only, no cache"),
    ("venv_console_mb", "—", "that virtualenv on disk (MB)"),
    ("install_test_s", "—", "then pip install -r requirements-test.txt (not with --quick)"),
    ("venv_test_mb", "—", "the virtualenv with the tests' tools (MB)"),
    ("review_queue_page_ms_sqlite", "—", "レビュー queue: one page + count (ms), 1k and 100k items (bench.review_queue)"),
    ("review_queue_growth_sqlite", "—", "that page at 100k items / at 1k, SQLite"),
    ("memory_rss_mb_before", "—", "streamlit run app.py: server RSS (MB) after a first warm session (bench.memory)"),
    ("memory_rss_mb_after_sessions", "—", "RSS after 30 browser sessions opened and closed (10 with --quick)"),
    ("memory_rss_mb_settled", "—", "RSS once the closed sessions are gone (disconnectedSessionTTL + settle)"),
    ("memory_growth_per_session_kb", "—", "(settled − before) / sessions, KB"),
    ("knowledge_first_sync_s_sqlite", "—", "knowledge index: a new process's first sync (s), 1k and 10k entries"),
    ("knowledge_first_sync_growth_sqlite", "≈ 10", "that sync at 10k / at 1k (linear = 10; n² = 100), SQLite"),
)


def _section(name: str, quick: bool) -> tuple[dict, str | None, float]:
    started = time.perf_counter()
    try:
        module = importlib.import_module(f"bench.{name}")
    except ImportError as exc:
        return {}, f"not available ({exc.name or exc})", 0.0
    try:
        with _progress_to_stderr():
            result = module.run(quick)
    except Exception as exc:  # noqa: BLE001 - one broken section must not hide the others
        return {}, f"{type(exc).__name__}: {str(exc)[:200]}", time.perf_counter() - started
    return (result if isinstance(result, dict) else {}), None, time.perf_counter() - started


@contextlib.contextmanager
def _progress_to_stderr():
    """While a section runs, whatever it (a library, a server it starts) writes to stdout goes to stderr:
    stdout carries only the result (one JSON object with ``--json``)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_fmt(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (< 3 minutes)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--only", nargs="*", choices=SECTIONS, help="run only these sections")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    logging.disable(logging.WARNING)  # expected failures (repairs) would flood the table
    warnings.simplefilter("ignore")
    started = time.perf_counter()
    figures: dict[str, Any] = {}
    errors: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for name in args.only or SECTIONS:
        if not args.json:
            print(f"running {name} …", file=sys.stderr, flush=True)
        result, error, took = _section(name, args.quick)
        figures.update(result)
        seconds[name] = round(took, 1)
        if error:
            errors[name] = error
    figures["bench_seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps({**figures, "section_seconds": seconds, "errors": errors, "quick": args.quick},
                         ensure_ascii=False))
        return 0
    width = max(len(f) for f, _, _ in FIGURES)
    print(f"{'figure':{width}s}  {'value':>12s}  {'goal':8s}  meaning")
    for figure, goal, meaning in FIGURES:
        print(f"{figure:{width}s}  {_fmt(figures.get(figure)):>12s}  {goal:8s}  {meaning}")
    shown = {f for f, _, _ in FIGURES} | {"bench_seconds"}
    extra = {k: v for k, v in figures.items() if k not in shown and not isinstance(v, list)}  # lists: --json
    if extra:
        print("\ndetails: " + "; ".join(f"{k} {_fmt(v)}" for k, v in extra.items()))
    for name, error in errors.items():
        print(f"{name}: — ({error})")
    print(f"\nsections (s): {_fmt(seconds)}; total {figures['bench_seconds']} s{' (quick)' if args.quick else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
