"""Scenario-runner adapter for the FAQ flow (``core.eval`` contract).

``run_scenario(scenario, client, log)`` plays ``turns`` on one FAQ session and returns the final
observable state ``{"step": None, "urgency": None, "can_drive": None, "citations", "message",
"outcome", "trace", "transcript"}`` of the last turn (trace: every turn's entries).

Turns: ``{message: "..."}``; ``{action: "reset"}`` (a new session); ``{action: "fault", value:
"timeout" | "error" | "none"}`` (change the KB fault for the following turns).
``faults: {kb: timeout}`` makes every KB search time out, ``{kb: {timeout: 1}}`` only the first
one (the retry then succeeds), ``{kb: error}`` fails without retry. Contracts are strict (a
violation fails the scenario) and the retry backoff does not sleep.
"""
from __future__ import annotations

import re
from typing import Any

from core.faq.config import FAQConfig
from core.faq.flow import ask, start_session
from core.faq.kb import FaultyKB, default_kb

FAULT_KEYS = ("kb",)


def _kb_with_fault(spec: Any) -> Any:
    kb = default_kb()
    if spec in (None, "none", False):
        return kb
    if isinstance(spec, str):
        return FaultyKB(kb, mode=spec)
    if isinstance(spec, dict) and len(spec) == 1:
        (mode, times), = spec.items()
        return FaultyKB(kb, mode=str(mode), times=int(times))
    raise ValueError(f"unknown KB fault {spec!r} (expected timeout, error, none or {{timeout: N}})")


def _session_id(name: str) -> str:
    slug = re.sub(r"[^a-z]+", "-", name.lower()).strip("-")[:24] or "faq"
    return f"scenario-{slug}"  # letters only: a digit run could look like a phone number in the trace


def run_scenario(scenario: dict[str, Any], client: Any, log: list) -> dict[str, Any]:
    faults = scenario.get("faults") or {}
    if not isinstance(faults, dict) or set(faults) - set(FAULT_KEYS):
        raise ValueError(f"unknown FAQ faults {faults!r} (expected a mapping with key: kb)")
    kb = _kb_with_fault(faults.get("kb"))
    config = FAQConfig(strict=True, sleep=lambda seconds: None)
    state = start_session(_session_id(str(scenario.get("name", ""))))
    transcript: list[dict[str, Any]] = []
    trace: list[dict[str, Any]] = []
    last = None
    for turn in scenario.get("turns") or []:
        if "message" in turn:
            last = ask(state, str(turn["message"]), client=client, kb=kb, config=config, log=log)
            state = last.state
            trace += last.trace
            transcript += [{"role": "user", "content": last.user_text},
                           {"role": "assistant", "content": last.message, "outcome": last.outcome,
                            "citations": last.citations}]
        elif turn.get("action") == "reset":
            state = start_session(state["session_id"] + "-r")
        elif turn.get("action") == "fault":
            kb = _kb_with_fault(turn.get("value"))
        else:
            raise ValueError(f"unknown FAQ turn {turn!r}")
    return {"step": None, "urgency": None, "can_drive": None,
            "citations": list(last.citations) if last else [], "message": last.message if last else "",
            "outcome": last.outcome if last else None, "trace": trace, "transcript": transcript}
