"""FAQState: immutability, deltas (replace / append), turn reset, declared-read views."""
import pytest

from core.faq.state import (FAQState, UndeclaredRead, UnknownStateKey, apply_delta, clear_turn, new_state,
                            set_values, thaw, turn_trace)


def test_state_is_immutable_and_deep_frozen():
    state = set_values(new_state("s1"), intent={"intent_type": "faq", "keywords": ["a"]})
    with pytest.raises(AttributeError):
        state.turn_id = 3
    with pytest.raises(TypeError):
        state["intent"]["intent_type"] = "oos"
    with pytest.raises(AttributeError):
        state["intent"]["keywords"].append("b")
    assert state.to_dict()["intent"] == {"intent_type": "faq", "keywords": ["a"]}


def test_apply_delta_replaces_and_appends_without_touching_the_old_state():
    s0 = new_state("s1")
    s1 = apply_delta(s0, {"turn_id": 1, "messages": [{"role": "user", "content": "こんにちは"}],
                          "tool.tool_status": "ok"})
    s2 = apply_delta(s1, {"messages": [{"role": "assistant", "content": "どうも"}]})
    assert s0["turn_id"] == 0 and s0["messages"] == ()
    assert [m["role"] for m in s2["messages"]] == ["user", "assistant"]
    assert s2["tool"]["tool_status"] == "ok" and s2["tool.tool_status"] == "ok"


def test_unknown_keys_are_rejected():
    with pytest.raises(UnknownStateKey):
        apply_delta(new_state("s"), {"tool.unknown": 1})
    with pytest.raises(UnknownStateKey):
        FAQState({"nope": 1})


def test_clear_turn_keeps_history_goal_and_turn_but_resets_turn_keys():
    state = apply_delta(new_state("s"), {"turn_id": 2, "goal": {"topic": "オイル"}, "intent": {"intent_type": "faq"},
                                         "response.message": "x", "response.citations": ["kb:1"],
                                         "trace": [{"turn_id": 2, "node": "API"}], "messages": [{"role": "user"}]})
    cleared = clear_turn(state)
    assert cleared["intent"] is None and cleared["response.message"] is None and cleared["response.citations"] == ()
    assert cleared["turn_id"] == 2 and cleared["goal"]["topic"] == "オイル"
    assert len(cleared["messages"]) == 1 and len(cleared["trace"]) == 1


def test_view_allows_only_declared_keys_and_expands_wildcards():
    state = apply_delta(new_state("s"), {"tool.tool_name": "kb_search", "last_error": {"error_type": "timeout"}})
    view = state.view(("tool.*",))
    assert view["tool.tool_name"] == "kb_search" and view["tool"]["tool_name"] == "kb_search"
    with pytest.raises(UndeclaredRead):
        view["last_error"]
    with pytest.raises(UndeclaredRead):
        state.view(("goal",))["response"]


def test_turn_trace_returns_only_the_current_turn():
    state = apply_delta(new_state("s"), {"turn_id": 2, "trace": [{"turn_id": 1, "node": "API"},
                                                                 {"turn_id": 2, "node": "IR"}]})
    assert [e["node"] for e in turn_trace(state)] == ["IR"]
    assert thaw(state["trace"])[0] == {"turn_id": 1, "node": "API"}
