"""The knowledge flow in the scenario runner: its expectation keys (pass and fail), turns_max over the
per-turn states, attachments relative to the scenario file, and {action: confirm} in the library."""
import pytest
import yaml

from core.eval.expectations import check_expectations
from core.eval.runner import run_files, run_scenario
from core.knowledge import scenario as knowledge_scenario
from core.llm.offline import OfflineClient
from tests.helpers.scenario_files import OUTSOURCING, make_docx

ENTRY = {"knowledge_title": "業務委託契約の損害賠償：賠償上限の設定", "contract_type": "業務委託契約",
         "target_clause": "第8条(損害賠償)", "review_points": "・損害賠償の上限額が定められているか確認する",
         "action_plan": "・上限を設ける", "clause_sample": ""}
FINAL = {"phase": "draft_knowledge", "mode": "finalize", "knowledge": ENTRY, "confirmed": True, "message": "草案です"}
CASE = ["業務委託契約の第8条（損害賠償）で、賠償額の上限がなく揉めました。", "委託料の総額を上限とするよう修正を求めるべきです。",
        "おまかせ"]


@pytest.mark.parametrize("expect", [
    {"phase": "draft_knowledge"}, {"phase": ["collect_case", "draft_knowledge"]}, {"mode": "finalize"},
    {"knowledge_fields": ["contract_type", "target_clause"]},
    {"knowledge_contains": {"knowledge_title": "賠償上限", "review_points": ["上限額", "確認する"]}},
    {"knowledge_contains": {"*": "第8条"}},
    {"knowledge_not_contains": {"review_points": "揉め", "*": ["無視", "承認済み"]}},
    {"confirmed": True},
])
def test_knowledge_expectation_holds(expect):
    assert check_expectations(expect, FINAL, []) == []


@pytest.mark.parametrize("expect, fragment", [
    ({"phase": "review_knowledge"}, "phase: expected 'review_knowledge', got 'draft_knowledge'"),
    ({"mode": ["interview", "clarify"]}, "mode"),
    ({"knowledge_fields": ["*"]}, "knowledge_fields: empty ['*']"),
    ({"knowledge_fields": ["clause_sample"]}, "empty ['clause_sample']"),
    ({"knowledge_fields": ["title"]}, "unknown field"),
    ({"knowledge_contains": {"action_plan": "削除"}}, "action_plan lacks '削除'"),
    ({"knowledge_contains": {"*": "秘密保持"}}, "* lacks '秘密保持'"),
    ({"knowledge_contains": {"titel": "x"}}, "unknown field 'titel'"),
    ({"knowledge_contains": "上限"}, "expected a mapping"),
    ({"knowledge_not_contains": {"review_points": "上限額"}}, "review_points contains '上限額'"),
    ({"knowledge_not_contains": {"*": "業務委託"}}, "* contains '業務委託'"),
    ({"confirmed": False}, "confirmed: expected False, got True"),
])
def test_knowledge_expectation_fails_with_a_readable_message(expect, fragment):
    failures = check_expectations(expect, FINAL, [])
    assert len(failures) == 1 and fragment in failures[0], failures


def test_knowledge_checks_without_an_entry():
    empty = {**FINAL, "knowledge": None}
    assert "no knowledge entry" in check_expectations({"knowledge_contains": {"*": "x"}}, empty, [])[0]
    assert "no knowledge entry" in check_expectations({"knowledge_fields": ["*"]}, empty, [])[0]
    assert check_expectations({"knowledge_not_contains": {"*": "x"}}, empty, []) == []


def snapshots(*states):
    return {**states[-1], "snapshots": [{**s, "user_turns": i + 1} for i, s in enumerate(states)]}


def test_turns_max_finds_the_first_state_where_every_other_expectation_holds():
    final = snapshots({"phase": "collect_case"}, {"phase": "organize_risks"}, {"phase": "draft_knowledge"})
    assert check_expectations({"phase": "draft_knowledge", "turns_max": 3}, final, []) == []
    late = check_expectations({"phase": "draft_knowledge", "turns_max": 2}, final, [])
    assert late == ["turns_max: expected within 2 user turns, took 3"]
    never = check_expectations({"phase": "review_knowledge", "turns_max": 5}, final, [])
    assert any("never held" in f for f in never) and any(f.startswith("phase:") for f in never)
    assert "no per-turn states" in check_expectations({"turns_max": 1}, {"phase": "x"}, [])[0]


def run(turns, expect, source=""):
    scenario = {"name": "t", "flow": "knowledge", "turns": turns, "expect": expect}
    return run_scenario(scenario, OfflineClient, source=source)


def test_an_interview_played_through_the_runner():
    result = run([{"message": m} for m in CASE] + [{"action": "confirm"}],
                 {"phase": "draft_knowledge", "confirmed": True, "knowledge_fields": ["*"], "turns_max": 3})
    assert result.passed, result.failures
    assert result.final["user_turns"] == 3 and len(result.final["snapshots"]) == 4
    assert [s["confirmed"] for s in result.final["snapshots"]] == [False, False, False, True]
    assert result.final["knowledge"]["contract_type"] == "業務委託契約"


def test_a_wrong_expectation_fails_the_knowledge_scenario():
    result = run([{"message": m} for m in CASE], {"confirmed": True, "knowledge_contains": {"contract_type": "売買契約"}})
    assert not result.passed and len(result.failures) == 2


def test_a_later_message_does_not_change_the_confirmed_entry():
    result = run([{"message": m} for m in CASE] + [{"action": "confirm"}, {"message": "タイトル: あとからの変更"}],
                 {"confirmed": True, "knowledge_not_contains": {"knowledge_title": "あとから"}})
    assert result.passed, result.failures
    # the interviewer did apply the edit: to a new draft, not to the confirmed entry
    assert "タイトル: あとからの変更" in result.final["message"]


def test_attachments_are_read_relative_to_the_scenario_file(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "contract.docx").write_bytes(make_docx(OUTSOURCING))
    scenarios = [{"name": "docx", "flow": "knowledge", "turns": [{"message": "この契約の件です",
                                                                  "attachments": ["docs/contract.docx"]}],
                  "expect": {"phase": "collect_case", "message_contains": ["contract.docx", "第12条(解除)"]}}]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenarios, allow_unicode=True), encoding="utf-8")
    [result] = run_files([path])
    assert result.passed, result.failures


@pytest.mark.parametrize("turns, fragment", [
    ([{"message": "x", "attachments": ["../secret.txt"]}], "outside the scenario directory"),
    ([{"message": "x", "attachments": ["missing.docx"]}], "not found"),
    ([{"action": "confirm"}], "no draft entry to confirm"),
    ([{"action": "rewind"}], "unknown knowledge turn"),
    (["hello"], "unknown knowledge turn"),
])
def test_bad_knowledge_turns_fail_the_scenario(tmp_path, turns, fragment):
    (tmp_path / "secret.txt").write_text("第1条（目的）", encoding="utf-8")
    inner = tmp_path / "inner"
    inner.mkdir()
    result = run(turns, {"phase": "collect_case"}, source=str(inner / "s.yaml"))
    assert not result.passed and fragment in result.failures[0], result.failures


def test_the_scenario_operator_confirms_as_eval():
    assert knowledge_scenario.OPERATOR.name == "eval" and knowledge_scenario.OPERATOR.can("entry.confirm")
