"""Checks of a scenario's ``expect`` block against the final observable state of a flow.

Known keys: step, urgency, can_drive, outcome, outcome_in, citations_min, citations_max,
message_contains (str or list: all must appear), message_not_contains (none may appear),
first_citation (the first citation's id ends with it: 「s052」「kb:007」「No.12」; where the flow reports its
citations' titles — ナレッジに質問, ``citation_titles`` — the first title equal to it also holds),
citations_include (each value is cited somewhere: a citation's id ends with it or, with titles, a title
equals it; titles compared after NFKC folding), no_pii_in_trace (no phone / e-mail / card number
in the trace or the debug records, via ``core.text.pii.find_pii``), trace_nodes_include.
Knowledge flow: phase, mode (a value or a list of allowed values), knowledge_fields (entry fields
that must be non-empty), knowledge_contains / knowledge_not_contains (``{field: substring or list}``;
field ``"*"`` means every field; compared after NFKC folding, so 「第8条(解除)」 matches 「第８条（解除）」),
knowledge_typed (``{field: substring}`` compared exactly: the typography as typed), confirmed (bool), turns_max (the first state, after any turn,
in which every other expectation holds was reached within this many user turns).
Any other key is a failure ("unknown expectation"), so a typo cannot pass silently.
"""
from __future__ import annotations

import json
import unicodedata
from typing import Any, Callable

from core.text.pii import find_pii
from core.validation import ENTRY_FIELDS


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


def _message_not_contains(expected: Any, final: dict, log: list) -> str | None:
    unwanted = [expected] if isinstance(expected, str) else list(expected)
    message = final.get("message") or ""
    found = [w for w in unwanted if str(w) in message]
    return None if not found else f"message_not_contains: found {found!r} in {message[:200]!r}"


def _cites(citation: Any, title: Any, expected: Any) -> bool:
    """One cited source is ``expected``: its id ends with it, or its title (when reported) is it."""
    wanted = str(expected)
    return bool(wanted) and (str(citation).endswith(wanted) or (
        title is not None and _fold(str(title)).strip() == _fold(wanted).strip()))


def _cited(final: dict) -> list[tuple[Any, Any]]:
    citations = list(final.get("citations") or [])
    titles = list(final.get("citation_titles") or [])
    return [(c, titles[i] if i < len(titles) else None) for i, c in enumerate(citations)]


def _first_citation(expected: Any, final: dict, log: list) -> str | None:
    """The first citation (a section or article id) ends with ``expected`` (「s052」「kb:007」), or its
    reported title is ``expected``."""
    cited = _cited(final)
    if cited and _cites(*cited[0], expected):
        return None
    shown = [f"{c} {t}" if t else c for c, t in cited] if final.get("citation_titles") else final.get("citations") or []
    return f"first_citation: expected …{expected!r}, got {shown!r}"


def _citations_include(expected: Any, final: dict, log: list) -> str | None:
    """Every expected id or title is among the citations (in any position)."""
    wanted = [expected] if isinstance(expected, str) else list(expected)
    cited = _cited(final)
    missing = [w for w in wanted if not any(_cites(c, t, w) for c, t in cited)]
    shown = [f"{c} {t}" if t else c for c, t in cited]
    return None if not missing else f"citations_include: missing {missing!r} in {shown!r}"


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


def _one_of(key: str) -> Callable[[Any, dict, list], str | None]:
    def check(expected: Any, final: dict, log: list) -> str | None:
        options = list(expected) if isinstance(expected, (list, tuple)) else [expected]
        actual = final.get(key)
        return None if actual in options else f"{key}: expected {expected!r}, got {actual!r}"
    return check


def _entry(final: dict) -> dict:
    return final.get("knowledge") or {}


def _values(entry: dict, field: str) -> list[str]:
    """The field's text, or every field's text for ``"*"``."""
    return [str(entry.get(f) or "") for f in (ENTRY_FIELDS if field == "*" else (field,))]


def _knowledge_fields(expected: Any, final: dict, log: list) -> str | None:
    wanted = [expected] if isinstance(expected, str) else list(expected)
    if not final.get("knowledge"):
        return f"knowledge_fields: no knowledge entry (expected non-empty {wanted!r})"
    unknown = [f for f in wanted if f not in ENTRY_FIELDS and f != "*"]
    if unknown:
        return f"knowledge_fields: unknown field(s) {unknown!r} (known: {', '.join(ENTRY_FIELDS)}, *)"
    empty = [f for f in wanted if not all(v.strip() for v in _values(_entry(final), f))]
    return None if not empty else f"knowledge_fields: empty {empty!r}"


def _substrings(expected: Any, key: str) -> list[tuple[str, str]] | str:
    """``[(field, substring)]`` of a ``{field: substring or [substrings]}`` mapping, or a problem."""
    if not isinstance(expected, dict) or not expected:
        return f"{key}: expected a mapping {{field: substring}}, got {expected!r}"
    pairs = []
    for field, words in expected.items():
        if field not in ENTRY_FIELDS and field != "*":
            return f"{key}: unknown field {field!r} (known: {', '.join(ENTRY_FIELDS)}, *)"
        pairs += [(str(field), str(w)) for w in ([words] if isinstance(words, str) else list(words))]
    return pairs


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _contains(key: str, fold: bool) -> Callable[[Any, dict, list], str | None]:
    def check(expected: Any, final: dict, log: list) -> str | None:
        """Each substring appears in its field (``"*"``: in some field), folded or exactly."""
        pairs = _substrings(expected, key)
        if isinstance(pairs, str):
            return pairs
        if not final.get("knowledge"):
            return f"{key}: no knowledge entry"
        entry = _entry(final)
        same = (lambda w, v: _fold(w) in _fold(v)) if fold else (lambda w, v: w in v)
        missing = [(f, w) for f, w in pairs if not any(same(w, v) for v in _values(entry, f))]
        return None if not missing else f"{key}: " + "; ".join(
            f"{f} lacks {w!r} ({' | '.join(_values(entry, f))[:120]!r})" for f, w in missing)
    return check


_knowledge_contains = _contains("knowledge_contains", fold=True)


def _knowledge_not_contains(expected: Any, final: dict, log: list) -> str | None:
    """No substring appears in its field (``"*"``: in any field). Holds when there is no entry."""
    pairs = _substrings(expected, "knowledge_not_contains")
    if isinstance(pairs, str):
        return pairs
    entry = _entry(final)
    found = [(f, w) for f, w in pairs if any(w in v for v in _values(entry, f))]
    return None if not found else "knowledge_not_contains: " + "; ".join(
        f"{f} contains {w!r} ({' | '.join(_values(entry, f))[:120]!r})" for f, w in found)


def _confirmed(expected: Any, final: dict, log: list) -> str | None:
    actual = bool(final.get("confirmed"))
    return None if actual == bool(expected) else f"confirmed: expected {bool(expected)!r}, got {actual!r}"


def _turns_max(expected: Any, final: dict, log: list) -> str | None:
    return None  # checked in check_expectations, which knows the other expectations


CHECKS: dict[str, Callable[[Any, dict, list], str | None]] = {
    "step": _equal("step"),
    "urgency": _equal("urgency"),
    "can_drive": _equal("can_drive"),
    "outcome": _equal("outcome"),
    "outcome_in": _outcome_in,
    "citations_min": _citations_min,
    "citations_max": _citations_max,
    "message_contains": _message_contains,
    "message_not_contains": _message_not_contains,
    "first_citation": _first_citation,
    "citations_include": _citations_include,
    "no_pii_in_trace": _no_pii_in_trace,
    "trace_nodes_include": _trace_nodes_include,
    "phase": _one_of("phase"),
    "mode": _one_of("mode"),
    "knowledge_fields": _knowledge_fields,
    "knowledge_contains": _knowledge_contains,
    "knowledge_typed": _contains("knowledge_typed", fold=False),
    "knowledge_not_contains": _knowledge_not_contains,
    "confirmed": _confirmed,
    "turns_max": _turns_max,
}


def _turns_max_problem(expect: dict[str, Any], final: dict[str, Any], log: list) -> str | None:
    limit = expect["turns_max"]
    snapshots = final.get("snapshots")
    if not isinstance(snapshots, list):
        return "turns_max: this flow reports no per-turn states"
    others = {k: v for k, v in expect.items() if k != "turns_max"}
    for state in snapshots:
        if not check_expectations(others, {**final, **state}, log):
            turns = int(state.get("user_turns") or 0)
            return None if turns <= int(limit) else f"turns_max: expected within {limit} user turns, took {turns}"
    return f"turns_max: the expectations never held together (within {limit} user turns)"


def check_expectations(expect: dict[str, Any], final: dict[str, Any], log: list) -> list[str]:
    """Failure messages (empty when every expectation holds)."""
    failures = []
    for key, expected in (expect or {}).items():
        check = CHECKS.get(key)
        if check is None:
            failures.append(f"unknown expectation '{key}' (known: {', '.join(CHECKS)})")
            continue
        problem = _turns_max_problem(expect, final, log) if key == "turns_max" else check(expected, final, log)
        if problem:
            failures.append(problem)
    return failures
