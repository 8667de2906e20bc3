"""The FAQ scenario adapter: final-state shape, faults, turn actions, errors for bad input."""
import pytest

from core.faq.scenario import run_scenario
from core.llm.offline import OfflineClient

KEYS = {"step", "urgency", "can_drive", "citations", "message", "outcome", "trace", "transcript"}


def play(turns, faults=None, name="adapter test"):
    log = []
    scenario = {"name": name, "flow": "faq", "turns": turns, "expect": {"outcome": "answered"}}
    if faults is not None:
        scenario["faults"] = faults
    return run_scenario(scenario, OfflineClient(), log), log


def test_final_state_has_the_contract_keys_and_the_users_own_words():
    final, log = play([{"message": "こんにちは"}, {"message": "電話は090-1234-5678です。値引きはいくらまでできますか"}])
    assert set(final) == KEYS
    assert final["step"] is None and final["urgency"] is None and final["can_drive"] is None
    assert final["outcome"] == "handoff" and final["citations"] == []
    assert [t["role"] for t in final["transcript"]] == ["user", "assistant"] * 2
    assert "090-1234-5678" in final["transcript"][2]["content"]
    assert {e["turn_id"] for e in final["trace"]} == {1, 2} and len(log) == 2
    assert not any(ch.isdigit() for ch in final["trace"][0]["session_id"])


def test_kb_fault_and_fault_action():
    final, _ = play([{"message": "車検の費用は？"}], faults={"kb": "timeout"})
    assert final["outcome"] == "fallback"
    tool = next(e for e in final["trace"] if e["node"] == "TOOL")
    assert tool["attempts"] == 3
    final, _ = play([{"action": "fault", "value": "error"}, {"message": "車検の費用は？"}])
    assert final["outcome"] == "fallback" and "エラー" in final["message"]


def test_reset_starts_a_new_session():
    final, _ = play([{"message": "こんにちは"}, {"action": "reset"}, {"message": "こんにちは"}])
    assert [e["turn_id"] for e in final["trace"] if e["node"] == "API"] == [1, 1]


@pytest.mark.parametrize("turns, faults, match", [
    ([{"message": "x"}], {"kb": "slow"}, "unknown KB fault"),
    ([{"message": "x"}], {"llm": "timeout"}, "unknown FAQ faults"),
    ([{"action": "dance"}], None, "unknown FAQ turn"),
])
def test_bad_scenarios_raise_clear_errors(turns, faults, match):
    with pytest.raises(ValueError, match=match):
        play(turns, faults)
