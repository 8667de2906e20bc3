"""Prompt-source benchmark: what serving saved prompt versions from the store adds to a render.

Run: ``python -m bench.prompts [--quick] [--pg URL]`` (PostgreSQL also from ``KAIWA_TEST_PG_URL``; a
throwaway database is created in that cluster and dropped afterwards). Measured in one run, rounds
alternating so load on the machine hits both alike:

* files: ``core.prompts.render`` of the diagnosis system prompt with no source (the prompt files only);
* store: the same render with ``core.store.prompt_versions.StoredPrompts`` as the source and a saved
  version of that prompt in the store, at the default refresh interval (a render reads memory; the
  change stamp is looked at most once per interval);
* stamp: one change-stamp query (what a process pays once per ``KAIWA_PROMPT_REFRESH`` seconds).

Figures: ``prompt_render_ratio_store_vs_files_<db>`` (median render time, store / files) and
``prompt_stamp_check_ms_<db>`` (median stamp query). ``run(quick)`` returns them for ``python -m bench``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from core import prompts
from core.identity import ADMIN, Identity
from core.store.db import create_scratch_database, drop_database
from core.store.prompt_versions import StoredPrompts
from core.store.store import Store
from core.workbench import save_prompt_version

NAME = "diagnosis_system"
ADMIN_ID = Identity(name="bench", email="bench@example.com", source="oidc", roles=frozenset({ADMIN}))


def _render_seconds(renders: int) -> float:
    started = time.perf_counter()
    for _ in range(renders):
        prompts.render(NAME)
    return (time.perf_counter() - started) / renders


def measure(url: str, rounds: int, renders: int) -> dict[str, float]:
    store = Store(url)
    try:
        save_prompt_version(NAME, prompts.load_prompt(NAME) + "\n（ベンチマーク用の版）", ADMIN_ID, store)
        source = StoredPrompts(store)
        files, stored, stamps = [], [], []
        for _ in range(rounds):
            prompts.set_prompt_source(None)
            files.append(_render_seconds(renders))
            prompts.set_prompt_source(source)
            assert prompts.render(NAME).endswith("（ベンチマーク用の版）")
            stored.append(_render_seconds(renders))
            started = time.perf_counter()
            source._stamp_now()
            stamps.append(time.perf_counter() - started)
        return {"render_us_files": statistics.median(files) * 1e6, "render_us_store": statistics.median(stored) * 1e6,
                "ratio": statistics.median(stored) / statistics.median(files),
                "stamp_ms": statistics.median(stamps) * 1e3}
    finally:
        prompts.set_prompt_source(None)
        store.engine.dispose()


def run(quick: bool = False, pg_url: str | None = None) -> dict[str, Any]:
    rounds, renders = (9, 300) if quick else (21, 2000)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = measure(f"sqlite:///{Path(tmp) / 'bench.db'}", rounds, renders)
    out["prompt_render_ratio_store_vs_files_sqlite"] = round(sqlite["ratio"], 3)
    out["prompt_render_us_files"] = round(sqlite["render_us_files"], 1)
    out["prompt_render_us_store_sqlite"] = round(sqlite["render_us_store"], 1)
    out["prompt_stamp_check_ms_sqlite"] = round(sqlite["stamp_ms"], 3)
    admin = pg_url or os.environ.get("KAIWA_TEST_PG_URL", "").strip()
    if admin:
        url = create_scratch_database(admin, "kaiwa_bench")
        try:
            pg = measure(url, rounds, renders)
        finally:
            drop_database(admin, url)
        out["prompt_render_ratio_store_vs_files_postgresql"] = round(pg["ratio"], 3)
        out["prompt_render_us_store_postgresql"] = round(pg["render_us_store"], 1)
        out["prompt_stamp_check_ms_postgresql"] = round(pg["stamp_ms"], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.prompts", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pg", help="PostgreSQL admin URL (default KAIWA_TEST_PG_URL)")
    args = parser.parse_args(argv)
    for key, value in run(args.quick, args.pg).items():
        print(f"{key:48s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
