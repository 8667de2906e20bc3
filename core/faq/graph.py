"""A small Burr-style graph runner: nodes declare what they read and write, transitions pick the next node.

A node is ``fn(view, ctx) -> delta``: ``view`` holds only the keys the node declared in ``reads``;
``delta`` must write exactly the keys declared in ``writes`` (``trace`` is the node's partial trace
entry ``{action, outcome, error_type?}``, completed here with session/turn/latency and the UC-01
fields of spec 05 §5). A delta that writes an undeclared key or misses a declared one breaks the
contract: in strict mode (tests) :class:`ContractViolation` is raised; in production the problem
is logged, recorded in the trace and ``last_error``, and the graph goes to the fallback node.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from core.faq.state import FAQState, StateView, UndeclaredRead, append_items, apply_delta, expand, set_values
from core.text.pii import scrub

logger = logging.getLogger(__name__)

NodeFn = Callable[[StateView, Any], Mapping[str, Any]]
Condition = Callable[[FAQState], bool]
END = None
# Optional details a node may add to its trace entry besides action / outcome / error_type.
EXTRA_TRACE_KEYS = ("attempts", "hits", "model_ok", "pii_masked", "rule_id", "dropped_citations", "guard")


class ContractViolation(RuntimeError):
    """A node's delta did not match its declared writes (or it read an undeclared key)."""

    def __init__(self, node: str, problems: list[str]):
        super().__init__(f"{node}: " + "; ".join(problems))
        self.node = node
        self.problems = problems


@dataclass(frozen=True)
class Node:
    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    fn: NodeFn

    def __post_init__(self) -> None:
        expand(self.reads)
        expand(self.writes)  # unknown key names fail at definition time
        if "trace" not in self.writes:
            raise ValueError(f"{self.name}: every node must write 'trace'")


def contract_problems(node: Node, delta: Mapping[str, Any]) -> list[str]:
    declared = set(expand(node.writes))
    written = set(delta)
    problems = [f"undeclared write '{k}'" for k in sorted(written - declared)]
    problems += [f"missing declared write '{k}'" for k in sorted(declared - written)]
    return problems


def trace_entry(state: FAQState, node: str, partial: Mapping[str, Any], latency_ms: float) -> dict[str, Any]:
    """A complete trace entry: the node's action/outcome plus the UC-01 observability fields."""
    intent = state["intent"] or {}
    last_error = state["last_error"] or {}
    entry = {
        "node": node,
        "action": partial.get("action", ""),
        "latency_ms": round(latency_ms, 3),
        "outcome": partial.get("outcome", ""),
        "intent_type": intent.get("intent_type"),
        "confidence": intent.get("confidence"),
        "tool_name": state["tool.tool_name"],
        "tool_status": state["tool.tool_status"],
        "tool_ref": list(state["tool.tool_ref"] or []),
        "citations": len(state["response.citations"] or []),
        "error_type": partial.get("error_type") or last_error.get("error_type"),
    }
    for key in EXTRA_TRACE_KEYS:
        if key in partial:
            entry[key] = partial[key]
    # The ids are the console's own (a generated hex id's digit run is no phone number): not scrubbed.
    return {"session_id": state["session_id"], "turn_id": state["turn_id"], **scrub(entry)}


class Graph:
    """Runs nodes from ``start`` following ``transitions`` (first matching condition wins)."""

    def __init__(self, nodes: Sequence[Node], transitions: Mapping[str, Sequence[tuple[Condition | None, str | None]]],
                 *, fallback: str, strict: bool = False, max_steps: int = 20):
        self.nodes = {n.name: n for n in nodes}
        self.transitions = transitions
        self.fallback = fallback
        self.strict = strict
        self.max_steps = max_steps
        missing = [t for opts in transitions.values() for _, t in opts if t is not None and t not in self.nodes]
        if missing or fallback not in self.nodes:
            raise ValueError(f"transitions to unknown nodes: {missing or [fallback]}")

    def next_node(self, current: str, state: FAQState) -> str | None:
        for condition, target in self.transitions.get(current, ()):
            if condition is None or condition(state):
                return target
        return END

    def run_node(self, node: Node, state: FAQState, ctx: Any) -> FAQState:
        """Run one node, enforce its contract and append its trace entry."""
        started = time.perf_counter()
        try:
            delta = dict(node.fn(state.view(node.reads), ctx))
        except UndeclaredRead as exc:
            raise ContractViolation(node.name, [f"undeclared read '{exc.args[0]}'"]) from exc
        problems = contract_problems(node, delta)
        if problems:
            raise ContractViolation(node.name, problems)
        partial = delta.pop("trace") or {}
        new = apply_delta(state, delta)
        entry = trace_entry(new, node.name, partial, (time.perf_counter() - started) * 1000)
        return append_items(new, "trace", [entry])

    def _fail(self, state: FAQState, node: str, exc: Exception, started: float) -> FAQState:
        kind = "contract_violation" if isinstance(exc, ContractViolation) else "node_error"
        logger.error("FAQ node %s failed (%s): %s", node, kind, exc)
        detail = "; ".join(exc.problems) if isinstance(exc, ContractViolation) else type(exc).__name__
        state = set_values(state, last_error={"error_type": kind, "node": node, "detail": detail})
        entry = trace_entry(state, node, {"action": "failed", "outcome": "error", "error_type": kind},
                            (time.perf_counter() - started) * 1000)
        return append_items(state, "trace", [entry])

    def run(self, state: FAQState, ctx: Any, start: str) -> FAQState:
        current: str | None = start
        steps = 0
        while current is not None:
            steps += 1
            if steps > self.max_steps:
                raise RuntimeError(f"graph did not finish within {self.max_steps} steps")
            started = time.perf_counter()
            try:
                state = self.run_node(self.nodes[current], state, ctx)
            except Exception as exc:  # noqa: BLE001 - production mode degrades to the fallback node
                if self.strict:
                    raise
                state = self._fail(state, current, exc, started)
                if current == self.fallback:
                    return state  # the caller supplies the last-resort message
                current = self.fallback
                continue
            current = self.next_node(current, state)
        return state
