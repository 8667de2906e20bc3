"""Scenario runner: adapters (missing, crashing), malformed scenarios, reports, and the CLI
(``python -m core.eval``) exit codes and --json format."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.eval import adapters, runner
from core.eval.runner import ScenarioFileError, load_file, run_files, run_scenario

ROOT = Path(__file__).resolve().parents[3]

PASSING = {"name": "handoff", "flow": "faq", "turns": [{"message": "値引きはいくらまでできますか"}],
           "expect": {"outcome": "handoff", "citations_max": 0, "trace_nodes_include": ["NP"]}}
FAILING = {"name": "wrong expectation", "flow": "faq", "turns": [{"message": "こんにちは"}],
           "expect": {"outcome": "answered"}}


def write(tmp_path, name, scenarios):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(scenarios, allow_unicode=True), encoding="utf-8")
    return path


def client_factory():
    from core.llm.offline import OfflineClient

    return OfflineClient()


def test_a_missing_adapter_module_is_a_clear_failure_not_a_crash(monkeypatch):
    monkeypatch.setitem(adapters.FLOW_ADAPTERS, "diagnosis", "core.no_such_flow.scenario:run_scenario")
    result = run_scenario({"name": "d", "flow": "diagnosis", "turns": [], "expect": {"step": "x"}}, client_factory)
    assert not result.passed
    assert "adapter core.no_such_flow.scenario:run_scenario is not available" in result.failures[0]


def test_the_registry_names_every_flow():
    assert adapters.FLOW_ADAPTERS == {"faq": "core.faq.scenario:run_scenario",
                                      "diagnosis": "core.diagnosis.scenario:run_scenario",
                                      "knowledge": "core.knowledge.scenario:run_scenario",
                                      "ask": "core.knowledge.ask_scenario:run_scenario"}


def test_an_adapter_that_takes_source_gets_the_scenario_file(monkeypatch):
    seen = []

    def adapter(scenario, client, log, *, source=""):
        seen.append(source)
        return {"outcome": "answered"}

    monkeypatch.setattr(runner, "load_adapter", lambda flow: adapter)
    assert run_scenario({**PASSING, "expect": {"outcome": "answered"}}, client_factory, source="x/y.yaml").passed
    assert seen == ["x/y.yaml"]


def test_an_adapter_that_takes_store_gets_the_runs_store_and_others_do_not(monkeypatch):
    seen = []

    def adapter(scenario, client, log, store=None):
        seen.append(store)
        return {"outcome": "answered"}

    monkeypatch.setattr(runner, "load_adapter", lambda flow: adapter)
    marker = object()
    assert run_scenario({**PASSING, "expect": {"outcome": "answered"}}, client_factory, store=marker).passed
    assert run_scenario({**PASSING, "expect": {"outcome": "answered"}}, client_factory).passed
    assert seen == [marker, None]


def test_unknown_flow_crashing_adapter_and_malformed_scenarios_fail(monkeypatch):
    assert "unknown flow 'chat'" in run_scenario({**PASSING, "flow": "chat"}, client_factory).failures[0]

    def crash(scenario, client, log):
        raise KeyError("boom")

    monkeypatch.setattr(runner, "load_adapter", lambda flow: crash)
    crashed = run_scenario(PASSING, client_factory)
    assert not crashed.passed and crashed.failures[0].startswith("adapter raised KeyError")
    bad = run_scenario({"name": "x", "flow": "faq", "turns": "hello"}, client_factory)
    assert set(bad.failures) == {"invalid scenario: 'turns' must be a list",
                                 "invalid scenario: 'expect' must be a non-empty mapping"}
    assert not run_scenario(["not", "a", "mapping"], client_factory).passed


def test_adapter_receives_a_fresh_client_and_log(monkeypatch):
    seen = []

    def adapter(scenario, client, log):
        seen.append((client, log))
        log.append({"messages": "ok"})
        return {"outcome": "answered", "citations": ["kb:001"], "message": "m"}

    monkeypatch.setattr(runner, "load_adapter", lambda flow: adapter)
    scenario = {**PASSING, "expect": {"outcome": "answered", "citations_min": 1}}
    assert run_scenario(scenario, client_factory).passed and run_scenario(scenario, client_factory).passed
    assert seen[0][0] is not seen[1][0] and seen[0][1] is not seen[1][1]


def test_files_directories_and_load_errors(tmp_path):
    write(tmp_path, "a.yaml", [PASSING])
    (tmp_path / "b.json").write_text(json.dumps({"scenarios": [FAILING]}, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "notes.txt").write_text("ignored", encoding="utf-8")
    results = run_files([tmp_path])
    assert [(r.name, r.passed) for r in results] == [("handoff", True), ("wrong expectation", False)]
    (tmp_path / "c.yaml").write_text("a: [unclosed", encoding="utf-8")
    with pytest.raises(ScenarioFileError):
        run_files([tmp_path])
    with pytest.raises(ScenarioFileError, match="expected a list"):
        load_file(write(tmp_path, "d.yaml", {"name": "x"}))
    with pytest.raises(ScenarioFileError, match="no such file"):
        run_files([tmp_path / "missing.yaml"])


def cli(*args):
    return subprocess.run([sys.executable, "-m", "core.eval", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_cli_json_output_and_exit_codes(tmp_path):
    good = write(tmp_path, "good.yaml", [PASSING])
    mixed = write(tmp_path, "mixed.yaml", [PASSING, FAILING])
    ok = cli(good, "--json")
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["passed"] == 1 and report["failed"] == 0
    assert report["results"][0] == {"name": "handoff", "flow": "faq", "passed": True, "failures": [],
                                    "final": {**report["results"][0]["final"]}}
    assert set(report["results"][0]["final"]) >= {"step", "urgency", "can_drive", "citations", "message"}
    assert report["results"][0]["final"]["citations"] == []
    bad = cli(mixed)
    assert bad.returncode == 1
    assert "PASS  [faq] handoff" in bad.stdout and "FAIL  [faq] wrong expectation" in bad.stdout
    assert "outcome: expected 'answered', got 'smalltalk'" in bad.stdout and "1 passed, 1 failed" in bad.stdout
    missing = cli(tmp_path / "nope.yaml")
    assert missing.returncode == 2 and "no such file" in missing.stderr
