"""Load scenario files, play each scenario through its flow adapter, check expectations, report.

A file (YAML; JSON is valid YAML) holds a list of scenarios
``{name, flow, vehicle?, faults?, turns: [{message} | {action, value}], expect: {...}}``.
Each scenario gets a fresh client and debug log; an adapter that takes a ``source`` keyword gets
the scenario file's path (the knowledge flow resolves attachment paths against it), one that takes a
``store`` keyword the store the run reads (ナレッジに質問 asks that store's library; ``--stored`` passes the
store the cases came from, a scenario file none: the adapter then opens the default store). An adapter
that is missing or raises, or a malformed scenario, is a failed scenario (never a crash). Exit
status of :func:`main`: 0 when every scenario passed, 1 when any failed, 2 when a file cannot be
read or parsed (or none given). ``--from-library`` adds the knowledge library's confirmed entries as a
regression set (:mod:`core.eval.library`); ``--stored`` adds the regression cases reviewers made from reviewed
answers (table ``review_scenarios``, :func:`run_stored`).
"""
from __future__ import annotations

import argparse
import inspect
import json
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from core.eval.adapters import AdapterUnavailable, load_adapter
from core.eval.expectations import check_expectations
from core.eval.library import regression_scenarios
from core.llm.offline import OfflineClient
from core.llm.registry import ProviderRegistry
from core.llm.settings import load_settings
from core.store.db import default_url
from core.store.store import Store

FINAL_KEYS = ("step", "urgency", "can_drive", "citations", "message", "outcome", "phase", "mode", "knowledge",
              "confirmed")
SCENARIO_SUFFIXES = (".yaml", ".yml", ".json")


class ScenarioFileError(ValueError):
    """A scenario file that cannot be read or is not a list of scenarios."""


@dataclass
class ScenarioResult:
    name: str
    flow: str
    passed: bool
    failures: list[str] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "flow": self.flow, "passed": self.passed, "failures": self.failures,
                "final": {k: self.final.get(k) for k in FINAL_KEYS}}


def scenario_files(paths: Sequence[str | Path]) -> list[Path]:
    """The files named, with directories expanded to their scenario files (sorted)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix in SCENARIO_SUFFIXES)
        elif path.is_file():
            files.append(path)
        else:
            raise ScenarioFileError(f"{path}: no such file or directory")
    return files


def load_file(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioFileError(f"{path}: cannot read scenarios ({exc})") from exc
    if isinstance(data, dict) and isinstance(data.get("scenarios"), list):
        data = data["scenarios"]
    if not isinstance(data, list):
        raise ScenarioFileError(f"{path}: expected a list of scenarios, got {type(data).__name__}")
    return data


def scenario_problems(scenario: Any) -> list[str]:
    if not isinstance(scenario, dict):
        return [f"invalid scenario: expected a mapping, got {type(scenario).__name__}"]
    problems = []
    if not scenario.get("name"):
        problems.append("invalid scenario: 'name' is missing")
    if not scenario.get("flow"):
        problems.append("invalid scenario: 'flow' is missing")
    if not isinstance(scenario.get("turns"), list):
        problems.append("invalid scenario: 'turns' must be a list")
    if not isinstance(scenario.get("expect"), dict) or not scenario.get("expect"):
        problems.append("invalid scenario: 'expect' must be a non-empty mapping")
    return problems


def make_client(provider: str) -> Any:
    if provider == "offline":
        return OfflineClient()
    return ProviderRegistry(load_settings()).set_active(provider)


def _takes(adapter: Callable[..., Any], keyword: str) -> bool:
    try:
        return keyword in inspect.signature(adapter).parameters
    except (TypeError, ValueError):
        return False


def _takes_source(adapter: Callable[..., Any]) -> bool:
    return _takes(adapter, "source")


def run_scenario(scenario: Any, client_factory: Callable[[], Any], source: str = "", *,
                 store: Store | None = None) -> ScenarioResult:
    name = str(scenario.get("name", "?")) if isinstance(scenario, dict) else "?"
    flow = str(scenario.get("flow", "?")) if isinstance(scenario, dict) else "?"
    problems = scenario_problems(scenario)
    if problems:
        return ScenarioResult(name, flow, False, problems, source=source)
    try:
        adapter = load_adapter(flow)
    except AdapterUnavailable as exc:
        return ScenarioResult(name, flow, False, [str(exc)], source=source)
    log: list[dict[str, Any]] = []
    extra: dict[str, Any] = {"source": source} if _takes(adapter, "source") else {}
    if store is not None and _takes(adapter, "store"):
        extra["store"] = store
    try:
        final = dict(adapter(scenario, client_factory(), log, **extra) or {})
    except Exception as exc:  # noqa: BLE001 - a crashing flow is a failed scenario
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return ScenarioResult(name, flow, False, [f"adapter raised {type(exc).__name__}: {exc} "
                                                  f"({Path(where.filename).name}:{where.lineno})"], source=source)
    final.setdefault("citations", [])
    final.setdefault("trace", [])
    failures = check_expectations(scenario["expect"], final, log)
    return ScenarioResult(name, flow, not failures, failures, final, source)


def run_files(paths: Sequence[str | Path], provider: str = "offline") -> list[ScenarioResult]:
    """Every scenario of every file (raises :class:`ScenarioFileError` before running anything)."""
    loaded = [(path, load_file(path)) for path in scenario_files(paths)]
    results = []
    for path, scenarios in loaded:
        for scenario in scenarios:
            results.append(run_scenario(scenario, lambda: make_client(provider), source=str(path)))
    return results


def report_text(results: list[ScenarioResult]) -> str:
    lines = []
    for r in results:
        lines.append(f"{'PASS' if r.passed else 'FAIL'}  [{r.flow}] {r.name}")
        lines += [f"      - {f}" for f in r.failures]
    passed = sum(r.passed for r in results)
    lines.append(f"\n{passed} passed, {len(results) - passed} failed")
    return "\n".join(lines)


def report_json(results: list[ScenarioResult]) -> str:
    passed = sum(r.passed for r in results)
    return json.dumps({"results": [r.as_json() for r in results], "passed": passed,
                       "failed": len(results) - passed}, ensure_ascii=False, indent=2)


def run_library(db_url: str | None = None, provider: str = "offline", *,
                write: str | None = None) -> tuple[list[ScenarioResult], dict[str, int], int]:
    """The confirmed entries of the store at ``db_url`` as a regression set (:mod:`core.eval.library`):
    ``(results, left out by reason, scenarios)``; with ``write``, the set is saved as a scenario file
    instead of run (no results)."""
    store = Store(db_url or default_url())
    try:
        scenarios, skipped = regression_scenarios(store)
    finally:
        store.engine.dispose()
    if write:
        Path(write).write_text(yaml.safe_dump(scenarios, allow_unicode=True, sort_keys=False), encoding="utf-8")
        return [], skipped, len(scenarios)
    results = [run_scenario(s, lambda: make_client(provider), source=str(Path.cwd() / "library.yaml")) for s in scenarios]
    return results, skipped, len(scenarios)


def stored_scenarios(store: Store) -> list[dict[str, Any]]:
    """The active regression cases made from reviews (``core.review.regression``), oldest first."""
    return [row["scenario"] for row in store.list_review_scenarios() if isinstance(row.get("scenario"), dict)]


def run_stored(db_url: str | None = None, provider: str = "offline") -> list[ScenarioResult]:
    """Every stored regression case of the store at ``db_url``, run on ``provider``."""
    store = Store(db_url or default_url())
    try:
        return [run_scenario(s, lambda: make_client(provider), source="store:review_scenarios", store=store)
                for s in stored_scenarios(store)]
    finally:
        store.engine.dispose()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.eval", description="Run conversation-flow scenarios.")
    parser.add_argument("files", nargs="*", help="scenario files (YAML / JSON) or directories of them")
    parser.add_argument("--provider", choices=("offline", "openai"), default="offline")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--from-library", action="store_true",
                        help="the knowledge library's confirmed entries as a regression set for the knowledge flow")
    parser.add_argument("--stored", action="store_true",
                        help="the regression cases made from reviewed answers, stored in the store")
    parser.add_argument("--db", help="the store to read the library or the stored cases from "
                                     "(default KAIWA_DB_URL or var/kaiwa.db)")
    parser.add_argument("--write", metavar="FILE", help="with --from-library: save the set as a scenario file")
    args = parser.parse_args(argv)
    if not args.files and not args.from_library and not args.stored:
        parser.error("give scenario files, --from-library or --stored")
    results: list[ScenarioResult] = []
    if args.from_library:
        library_results, skipped, count = run_library(args.db, args.provider, write=args.write)
        left_out = ", ".join(f"{why} {n}" for why, n in sorted(skipped.items())) or "none"
        print(f"library: {count} confirmed entries as scenarios (left out: {left_out})", file=sys.stderr)
        if args.write:
            print(f"wrote {count} scenarios to {args.write}", file=sys.stderr)
            return 0 if count else 2
        results += library_results
    if args.stored:
        stored = run_stored(args.db, args.provider)
        print(f"stored: {len(stored)} regression cases from reviews", file=sys.stderr)
        results += stored
    try:
        results += run_files(args.files, provider=args.provider) if args.files else []
    except ScenarioFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not results:
        print("error: no scenarios found", file=sys.stderr)
        return 2
    print(report_json(results) if args.json else report_text(results))
    return 0 if all(r.passed for r in results) else 1
