"""The eval runner's pass rates for the knowledge flow: ``python -m bench.knowledge_eval [--provider openai]``.

* ``knowledge_scenarios_pass_rate`` — every scenario of ``tests/scenarios/knowledge_*.yaml`` through
  ``core.eval`` (offline by default; ``--provider openai`` runs the same files against a real model);
* ``knowledge_library_regression_pass_rate`` — the regression set ``core.eval.library`` makes from a
  library: each attachment-free scenario's messages are played into one store through the console's
  path (``KnowledgeConversations``, so later conversations see the earlier confirmed entries as house
  style), its draft is confirmed, and the confirmed entries are replayed as scenarios in fresh stores.

:func:`run` returns the figures for a combined ``python -m bench``.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from core.eval.library import regression_scenarios
from core.eval.runner import load_file, make_client, run_files, run_scenario
from core.identity import ADMIN, OPERATOR, Identity
from core.knowledge.conversation import KnowledgeConversations
from core.paths import ROOT
from core.store.store import Store

SCENARIO_FILES = sorted((ROOT / "tests" / "scenarios").glob("knowledge_*.yaml"))
REVIEWER = Identity(name="bench", source="proxy", roles=frozenset({OPERATOR, ADMIN}))


def build_library(store: Store, provider: str = "offline") -> int:
    """Play every attachment-free knowledge scenario's messages into ``store`` and confirm its drafts."""
    confirmed = 0
    for path in SCENARIO_FILES:
        for scenario in load_file(path):
            turns = [t for t in scenario.get("turns") or [] if isinstance(t, dict)]
            if any("attachments" in t for t in turns) or not any("message" in t for t in turns):
                continue
            conversations = KnowledgeConversations(store, REVIEWER)
            cid = conversations.new()
            chat: list[dict[str, Any]] = []
            outputs: list[dict[str, Any]] = []
            for turn in turns:
                if "message" in turn:
                    conversations.submit(cid, chat, outputs, str(turn["message"]), [], make_client(provider))
            for entry in store.conversation_outputs(cid):
                if entry["status"] == "draft":
                    conversations.confirm(cid, entry["id"], REVIEWER)
                    confirmed += 1
    return confirmed


def run(quick: bool = False, provider: str = "offline") -> dict[str, Any]:
    scenario_results = run_files(SCENARIO_FILES, provider=provider)
    if quick:  # the library round trip replays every scenario twice: left to the full run
        return {"knowledge_scenarios": len(scenario_results),
                "knowledge_scenarios_pass_rate": round(sum(r.passed for r in scenario_results)
                                                       / max(1, len(scenario_results)), 3)}
    with tempfile.TemporaryDirectory(prefix="kaiwa-bench-eval-") as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'library.db'}")
        try:
            build_library(store, provider)
            scenarios, skipped = regression_scenarios(store)
        finally:
            store.engine.dispose()
    library_results = [run_scenario(s, lambda: make_client(provider)) for s in scenarios]
    failed = [{"name": r.name, "failures": r.failures} for r in scenario_results + library_results if not r.passed]
    return {
        "knowledge_scenarios": len(scenario_results),
        "knowledge_scenarios_pass_rate": round(sum(r.passed for r in scenario_results) / max(1, len(scenario_results)), 3),
        "knowledge_library_regression": len(library_results),
        "knowledge_library_regression_pass_rate": round(sum(r.passed for r in library_results)
                                                        / max(1, len(library_results)), 3),
        "knowledge_library_left_out": skipped,
        "knowledge_eval_failures": failed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.knowledge_eval", description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=("offline", "openai"), default="offline")
    args = parser.parse_args(argv)
    print(json.dumps(run(provider=args.provider), ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
