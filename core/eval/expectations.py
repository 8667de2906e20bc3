"""Checks of a scenario's ``expect`` block against the final observable state of a flow.

Known keys: step, urgency, can_drive, outcome, outcome_in, citations_min, citations_max,
message_contains (str or list: all must appear), no_pii_in_trace (no phone / e-mail / card number
in the trace or the debug records, via ``core.pii.find_pii``), trace_nodes_include. Any other key
is a failure ("unknown expectation"), so a typo cannot pass silently.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from core.pii import find_pii


def _equal(key: str) -> Callable[[Any, dict, list], str | None]:
    def check(expected: Any, final: dict, log: list) -> str | None:
        actual = final.get(key)
        return None if actual == expected else f"{key}: expected {expected!r}, got {actual!r}"
    return check


def _outcome_in(expected: Any, final: dict, log: list) -> str | None:
    options = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    actual = final.get("outcome")
    return None if actual in options else f"outcome_in: expected one of {options!r}, got {actual!r}"


def _citations_min(expected: Any, final: dict, log: list) -> str | None:
    n = len(final.get("citations") or [])
    return None if n >= int(expected) else f"citations_min: expected >= {expected}, got {n} {final.get('citations')!r}"


def _citations_max(expected: Any, final: dict, log: list) -> str | None:
    n = len(final.get("citations") or [])
    return None if n <= int(expected) else f"citations_max: expected <= {expected}, got {n} {final.get('citations')!r}"


def _message_contains(expected: Any, final: dict, log: list) -> str | None:
    wanted = [expected] if isinstance(expected, str) else list(expected)
    message = final.get("message") or ""
    missing = [w for w in wanted if str(w) not in message]
    return None if not missing else f"message_contains: missing {missing!r} in {message[:200]!r}"


def _no_pii_in_trace(expected: Any, final: dict, log: list) -> str | None:
    if not expected:
        return None
    dump = json.dumps({"trace": final.get("trace") or [], "debug": list(log or [])}, ensure_ascii=False, default=str)
    found = find_pii(dump)
    return None if not found else f"no_pii_in_trace: found {', '.join(found)} in the trace / debug records"


def _trace_nodes_include(expected: Any, final: dict, log: list) -> str | None:
    wanted = [expected] if isinstance(expected, str) else list(expected)
    nodes = [str(e.get("node")) for e in final.get("trace") or [] if isinstance(e, dict)]
    missing = [n for n in wanted if n not in nodes]
    return None if not missing else f"trace_nodes_include: missing {missing!r} (trace nodes: {sorted(set(nodes))!r})"


CHECKS: dict[str, Callable[[Any, dict, list], str | None]] = {
    "step": _equal("step"),
    "urgency": _equal("urgency"),
    "can_drive": _equal("can_drive"),
    "outcome": _equal("outcome"),
    "outcome_in": _outcome_in,
    "citations_min": _citations_min,
    "citations_max": _citations_max,
    "message_contains": _message_contains,
    "no_pii_in_trace": _no_pii_in_trace,
    "trace_nodes_include": _trace_nodes_include,
}


def check_expectations(expect: dict[str, Any], final: dict[str, Any], log: list) -> list[str]:
    """Failure messages (empty when every expectation holds)."""
    failures = []
    for key, expected in (expect or {}).items():
        check = CHECKS.get(key)
        if check is None:
            failures.append(f"unknown expectation '{key}' (known: {', '.join(CHECKS)})")
            continue
        problem = check(expected, final, log)
        if problem:
            failures.append(problem)
    return failures
