"""Every scenario file in tests/scenarios/ (faq_*.yaml, diagnosis_*.yaml, …) through the scenario runner.

One test per scenario, offline provider. A file that cannot be loaded is one failing test; a flow
whose adapter is missing fails its scenarios with the runner's message.
"""
from pathlib import Path

import pytest

from core.eval.runner import ScenarioFileError, load_file, make_client, run_scenario, scenario_files

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"


def _cases():
    cases = []
    for path in scenario_files([SCENARIO_DIR]):
        try:
            scenarios = load_file(path)
        except ScenarioFileError as exc:
            cases.append(pytest.param(path, None, str(exc), id=f"{path.name}::<load error>"))
            continue
        for i, scenario in enumerate(scenarios):
            name = scenario.get("name", f"#{i}") if isinstance(scenario, dict) else f"#{i}"
            cases.append(pytest.param(path, scenario, None, id=f"{path.stem}::{name}"))
    return cases


CASES = _cases()


def test_the_faq_acceptance_scenarios_are_there():
    names = [p.values[1]["name"] for p in CASES if p.values[0].name == "faq_acceptance.yaml"]
    for ts in ("TS-UC01-001", "TS-UC01-002", "TS-UC01-003", "TS-UC01-004"):
        assert any(n.startswith(ts) for n in names), ts
    assert sum(p.values[0].name.startswith("faq_") for p in CASES) >= 24


@pytest.mark.parametrize("path, scenario, load_error", CASES)
def test_scenario(path, scenario, load_error):
    assert load_error is None, load_error
    result = run_scenario(scenario, lambda: make_client("offline"), source=str(path))
    assert result.passed, f"{path.name} / {result.name}:\n  " + "\n  ".join(result.failures)
