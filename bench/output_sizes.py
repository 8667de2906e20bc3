"""The output each schema's text can need, measured on the scenario set (issue #26): ``python -m bench.output_sizes``.

Plays every scenario of ``tests/scenarios/`` with the built-in offline provider (the eval runner's adapters,
each with its own debug log) and reads, per task (= schema name), the longest schema-valid output it produced,
in the engine's token estimate (``core.llm.messages.text_tokens``). The limit a request gets is that longest
output times ``MARGIN`` (room for a model that writes more than the rules do, and for its whitespace), never
below ``MIN_LIMIT``. ``--write`` stores them in ``data/output_limits.json``, which ``core.llm.limits`` reads;
a schema the set never exercised keeps the schema-derived estimate. The turn's deadline, not this cap, bounds
a model that runs away (a cut answer is repaired once with twice the limit, within the deadline).
"""
from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from typing import Any

from core.eval.adapters import load_adapter
from core.eval.runner import _takes_source, load_file, scenario_files
from core.llm.limits import OUTPUT_LIMITS_PATH
from core.llm.messages import text_tokens
from core.llm.offline import OfflineClient
from core.paths import ROOT

SCENARIOS = ROOT / "tests" / "scenarios"
MARGIN = 1.5
MIN_LIMIT = 64


def measure() -> dict[str, dict[str, Any]]:
    """``{task: {"longest_tokens", "outputs", "limit"}}`` over every scenario file."""
    longest: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for path in scenario_files([SCENARIOS]):
        for scenario in load_file(path):
            log: list[dict[str, Any]] = []
            try:
                adapter = load_adapter(str(scenario.get("flow")))
                extra = {"source": str(path)} if _takes_source(adapter) else {}
                adapter(scenario, OfflineClient(), log, **extra)
            except Exception:  # noqa: BLE001 - a scenario that fails still measured what it produced
                pass
            for record in log:
                if record.get("outcome") != "ok" or not record.get("raw_output") or record.get("strategy") == "plain_text":
                    continue
                task = str(record.get("task") or "")
                longest[task] = max(longest[task], text_tokens(record["raw_output"]))
                counts[task] += 1
    return {task: {"longest_tokens": round(longest[task]), "outputs": counts[task],
                   "limit": max(MIN_LIMIT, int(math.ceil(longest[task] * MARGIN)))} for task in sorted(longest)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"store the limits in {OUTPUT_LIMITS_PATH.name}")
    args = parser.parse_args(argv)
    measured = measure()
    for task, row in measured.items():
        print(f"{task:24} longest {row['longest_tokens']:5} tokens over {row['outputs']:4} outputs → limit {row['limit']}")
    if args.write:
        payload = {"_about": "Output limits per schema, measured by `python -m bench.output_sizes --write` (issue #26): "
                             f"the longest schema-valid offline output on tests/scenarios × {MARGIN}, at least {MIN_LIMIT}.",
                   **{task: row for task, row in measured.items()}}
        OUTPUT_LIMITS_PATH.write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"written: {OUTPUT_LIMITS_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
