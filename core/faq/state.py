"""The FAQ conversation state: an immutable mapping changed only through small named operations.

Keys follow spec 05 §2.2 (plus ``policy`` and ``response.outcome``). Nested keys are addressed with
dots (``tool.tool_status``, ``response.citations``). Every value is deep-frozen (dicts become
read-only mappings, lists become tuples), so a node cannot change the state it was given: it can
only return a delta, which :func:`apply_delta` turns into a new state.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Iterable, Mapping

# Keys whose delta value is a list of items to append (``messages+`` / ``trace+`` in the spec).
APPEND_KEYS = frozenset({"messages", "trace"})

# Every addressable key and its initial value.
STATE_KEYS: dict[str, Any] = {
    "session_id": "",
    "turn_id": 0,
    "messages": [],
    "intent": None,
    "goal": None,
    "dialogue_mode": None,
    "plan": [],
    "policy": None,
    "tool.tool_name": None,
    "tool.tool_input": None,
    "tool.tool_output_summary": None,
    "tool.tool_ref": [],
    "tool.tool_status": None,
    "response.message": None,
    "response.citations": [],
    "response.outcome": None,
    "last_error": None,
    "trace": [],
}
# Keys that belong to one turn and are cleared when the next turn starts (goal, messages, trace persist).
TURN_KEYS = ("intent", "dialogue_mode", "plan", "policy", "tool.tool_name", "tool.tool_input",
             "tool.tool_output_summary", "tool.tool_ref", "tool.tool_status", "response.message",
             "response.citations", "response.outcome", "last_error")


class UnknownStateKey(KeyError):
    """A key that is not part of the FAQ state."""


def freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable, JSON-friendly copy of a frozen value."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def key_matches(pattern: str, key: str) -> bool:
    """``tool.*`` matches every ``tool.`` key; anything else matches itself."""
    if pattern.endswith(".*"):
        return key.startswith(pattern[:-1])
    return pattern == key


def expand(patterns: Iterable[str]) -> tuple[str, ...]:
    keys = tuple(k for k in STATE_KEYS if any(key_matches(p, k) for p in patterns))
    unknown = [p for p in patterns if not any(key_matches(p, k) for k in STATE_KEYS)]
    if unknown:
        raise UnknownStateKey(f"unknown state keys: {unknown}")
    return keys


class FAQState:
    """Read-only state. ``state["tool.tool_status"]``, ``state.get(...)``, ``state.to_dict()``."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any] | None = None):
        data = {k: values[k] if values and k in values else v for k, v in STATE_KEYS.items()}
        extra = set(values or {}) - set(STATE_KEYS)
        if extra:
            raise UnknownStateKey(f"unknown state keys: {sorted(extra)}")
        object.__setattr__(self, "_values", MappingProxyType({k: freeze(v) for k, v in data.items()}))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FAQState is immutable: return a delta instead")

    def __getitem__(self, key: str) -> Any:
        if key in self._values:
            return self._values[key]
        if key in ("tool", "response"):  # the whole namespace as one mapping
            return MappingProxyType({k.split(".", 1)[1]: v for k, v in self._values.items()
                                     if k.startswith(key + ".")})
        raise UnknownStateKey(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except UnknownStateKey:
            return default

    def keys(self) -> tuple[str, ...]:
        return tuple(self._values)

    def to_dict(self) -> dict[str, Any]:
        return {k: thaw(v) for k, v in self._values.items()}

    def view(self, patterns: Iterable[str]) -> "StateView":
        return StateView(self, expand(patterns))

    def __repr__(self) -> str:
        return f"FAQState(session_id={self['session_id']!r}, turn_id={self['turn_id']})"


class UndeclaredRead(KeyError):
    """A node read a key it did not declare in ``reads``."""


class StateView:
    """The part of the state a node declared it reads; any other key raises :class:`UndeclaredRead`."""

    __slots__ = ("_state", "_allowed")

    def __init__(self, state: FAQState, allowed: tuple[str, ...]):
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_allowed", allowed)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("StateView is read-only")

    def __getitem__(self, key: str) -> Any:
        if key in ("tool", "response"):
            if not any(k.startswith(key + ".") for k in self._allowed):
                raise UndeclaredRead(key)
            return MappingProxyType({k: v for k, v in self._state[key].items() if f"{key}.{k}" in self._allowed})
        if key not in self._allowed:
            raise UndeclaredRead(key)
        return self._state[key]

    def get(self, key: str, default: Any = None) -> Any:
        value = self[key]
        return default if value is None else value


# ---- named operations -------------------------------------------------------------------------

def new_state(session_id: str) -> FAQState:
    """A fresh session: turn 0, nothing said yet."""
    return FAQState({"session_id": session_id})


def set_values(state: FAQState, **changes: Any) -> FAQState:
    """A new state with ``changes`` (dotted keys via ``**{"tool.tool_name": ...}``)."""
    values = dict(state._values)
    for key, value in changes.items():
        if key not in STATE_KEYS:
            raise UnknownStateKey(key)
        values[key] = value
    return FAQState(values)


def append_items(state: FAQState, key: str, items: Iterable[Any]) -> FAQState:
    """A new state with ``items`` appended to the list under ``key``."""
    if key not in APPEND_KEYS:
        raise UnknownStateKey(f"{key} is not an append-only key")
    return set_values(state, **{key: tuple(state[key]) + tuple(freeze(i) for i in items)})


def apply_delta(state: FAQState, delta: Mapping[str, Any]) -> FAQState:
    """Apply a node's delta: append for ``messages`` / ``trace``, replace for every other key."""
    replaced = {k: v for k, v in delta.items() if k not in APPEND_KEYS}
    new = set_values(state, **replaced) if replaced else state
    for key in APPEND_KEYS & set(delta):
        items = delta[key]
        new = append_items(new, key, items if isinstance(items, (list, tuple)) else [items])
    return new


def clear_turn(state: FAQState) -> FAQState:
    """Reset the per-turn keys before a new turn (messages, trace, goal and turn_id are kept)."""
    return set_values(state, **{k: STATE_KEYS[k] for k in TURN_KEYS})


def turn_trace(state: FAQState, turn_id: int | None = None) -> list[dict[str, Any]]:
    """The trace entries of one turn (default: the current one), as plain dicts."""
    wanted = state["turn_id"] if turn_id is None else turn_id
    return [thaw(e) for e in state["trace"] if e.get("turn_id") == wanted]
