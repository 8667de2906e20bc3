"""Console speed: how long one Streamlit rerun of each page takes, offline, with a long history.

Each page runs in ``streamlit.testing.v1.AppTest`` (the whole ``app.py``: navigation, sidebar,
page) against a throwaway SQLite store and manual index, with the offline provider. The chat pages
first get two real turns through their input, then the history is repeated to 20 turns; the
figure is the median wall time of a plain rerun (no input), in ms, which is what every widget
click costs. ``rerun_ms_p50`` holds the 20-turn figure per page and ``rerun_growth_20_vs_2`` the
ratio to the same page with 2 turns (≈1 when a rerun does not grow with the history);
``rerun_growth_20_vs_shown`` the ratio to the page with as many turns as it draws
(``ui.history.SHOWN_EXCHANGES``): the same exchanges on screen, four times the history behind them, so it
is what the turns out of view cost (≈1 when a rerun does not redo past turns).
"""
from __future__ import annotations

import copy
import os
import statistics
import tempfile
import time
from pathlib import Path
from unittest import mock

from bench.pages import scripts_compiled_once
from core.paths import ROOT
from ui.history import SHOWN_EXCHANGES

APP = str(ROOT / "app.py")
CHAT_PAGES = {  # page: (input key, history key in session state, two messages)
    "faq": ("faq_input", "faq_chat", ("オイル交換の目安は？", "車検の費用はどのくらい？")),
    "knowledge": ("knowledge_input", "chat", ("業務委託契約の第8条（損害賠償）で、賠償の上限がない点が問題でした。",
                                               "委託料総額を上限とするよう修正を求めるべきです。")),
    "diagnosis": ("diag_input", "diag_transcript", ("エアコンの風が弱い気がする", "ブレーキを踏むとキーキー鳴ります")),
}
OTHER_PAGES = ("library", "ask_knowledge", "bookings", "debug_log", "manual_admin")
TURNS = 20


def median_rerun_ms(at, reruns: int) -> float:
    """One warm-up run, then the median of ``reruns`` timed reruns of ``at`` in ms; raises if the page did."""
    at.run()
    times = []
    for _ in range(reruns):
        started = time.perf_counter()
        at.run()
        times.append((time.perf_counter() - started) * 1000)
    if at.exception:
        raise RuntimeError(f"page raised: {at.exception}")
    return statistics.median(times)


def _open(page: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=180)
    at.run()
    at.switch_page(f"pages/{page}.py").run()
    if at.exception:
        raise RuntimeError(f"{page}: {at.exception}")
    return at


def _grow(history: list, turns: int) -> list:
    """``history`` (entries of two turns) repeated up to ``turns`` turns."""
    per_turn = max(1, len(history) // 2)
    out = []
    while len(out) < turns * per_turn:
        out.extend(copy.deepcopy(history))
    return out[:turns * per_turn]


def run(quick: bool = False) -> dict:
    reruns = 5 if quick else 15
    from core.rag.manual_retriever import reset_manual_retriever

    p50: dict[str, float] = {}
    growth: dict[str, float] = {}
    beyond: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kaiwa_bench_rerun_") as tmp, \
            mock.patch.dict(os.environ, {"KAIWA_DB_URL": f"sqlite:///{Path(tmp) / 'bench.db'}",
                                         "KAIWA_CHROMA_PATH": str(Path(tmp) / "chroma")}), \
            scripts_compiled_once():  # the environment restored after; each page compiled once, as a server does
        os.environ.pop("OPENAI_API_KEY", None)
        os.environ.pop("KAIWA_PROVIDER", None)
        reset_manual_retriever()
        try:
            for page, (key, history_key, messages) in CHAT_PAGES.items():
                at = _open(page)
                for text in messages:
                    at.chat_input(key=key).set_value(text).run()
                    if at.exception:
                        raise RuntimeError(f"{page}: {at.exception}")
                two = median_rerun_ms(at, reruns)
                played = list(at.session_state[history_key])
                at.session_state[history_key] = _grow(played, SHOWN_EXCHANGES)
                shown = median_rerun_ms(at, reruns)
                at.session_state[history_key] = _grow(played, TURNS)
                p50[page] = round(median_rerun_ms(at, reruns), 1)
                growth[page] = round(p50[page] / two, 2)
                beyond[page] = round(p50[page] / shown, 2)
            for page in OTHER_PAGES:
                p50[page] = round(median_rerun_ms(_open(page), reruns), 1)
        finally:
            reset_manual_retriever()
    return {"rerun_ms_p50": p50, "rerun_growth_20_vs_2": growth, "rerun_growth_20_vs_shown": beyond}


if __name__ == "__main__":
    import json

    print(json.dumps(run(quick=True), ensure_ascii=False, indent=1))
