"""One FAQ turn: the UC-01 graph (spec 05 §2–4) and ``ask``, which runs it on a session's state.

Route: API → IR → GST → (NP | GE → TOOL → (NLG | Fallback)); NLG goes to Fallback when its model
call fails. GST's plan decides the branch: ``["NP"]`` for policy refuse / handoff and for the
non-task intents (oos / question), ``["GE", "TOOL", "NLG"]`` for faq / procedure.

Outcomes per turn (``response.outcome``): ``answered`` (KB answer with citations), ``not_found``
(no relevant article, or no valid citation), ``fallback`` (KB timeout / error, model or internal
failure: reason + next step), ``refused`` / ``handoff`` (policy), ``smalltalk`` (NP's non-task
answer: greeting, thanks, questions about the bot, out-of-scope redirect).

Input longer than ``core.text.pii.MAX_MESSAGE_CHARS`` never enters the graph (``core.text.input_gate``):
the turn is a ``fallback`` with the Japanese "too long" message. Questions without Japanese are
the policy's language rule (GST), not a gate here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, MutableSequence

import core.faq  # noqa: F401 - registers the offline policies
from core.engine import client_deadline, turn_deadline
from core.faq import replies
from core.faq.config import FAQConfig
from core.faq.graph import Graph
from core.faq.kb import default_kb
from core.faq.nodes import NODES, FlowContext
from core.faq.state import FAQState, apply_delta, clear_turn, new_state, turn_trace
from core.text.input_gate import check_length

OUTCOMES = ("answered", "not_found", "fallback", "refused", "handoff", "smalltalk")

TRANSITIONS = {
    "API": [(None, "IR")],
    "IR": [(None, "GST")],
    "GST": [(lambda s: list(s["plan"])[:1] == ["NP"], "NP"), (None, "GE")],
    "GE": [(None, "TOOL")],
    "TOOL": [(lambda s: s["tool.tool_status"] == "error", "Fallback"), (None, "NLG")],
    "NLG": [(lambda s: s["response.message"] is None, "Fallback"), (None, None)],
    "NP": [(None, None)],
    "Fallback": [(None, None)],
}


def build_graph(strict: bool = False) -> Graph:
    return Graph(NODES, TRANSITIONS, fallback="Fallback", strict=strict)


@dataclass
class TurnResult:
    state: FAQState
    user_text: str                     # what the user typed, unmasked (their own view)
    message: str
    citations: list[str]
    outcome: str
    trace: list[dict[str, Any]] = field(default_factory=list)  # this turn's entries


def start_session(session_id: str) -> FAQState:
    return new_state(session_id)


def _gated(state: FAQState, text: str, message: str) -> TurnResult:
    """The turn of an input stopped by ``core.text.input_gate``: only the assistant's notice is added."""
    new = apply_delta(clear_turn(state), {"response.message": message, "response.citations": [],
                                          "response.outcome": "fallback",
                                          "messages": [{"role": "assistant", "content": message}]})
    return TurnResult(state=new, user_text=text, message=message, citations=[], outcome="fallback", trace=[])


def ask(state: FAQState, text: str, *, client: Any, kb: Any = None, config: FAQConfig | None = None,
        log: MutableSequence[dict[str, Any]] | None = None, graph: Graph | None = None) -> TurnResult:
    """Run one turn for ``text`` on ``state``; never raises in production mode (``config.strict`` False)."""
    gate = check_length(text)
    if gate is not None:  # too long: no model call, no KB search, nothing stored but the notice
        return _gated(state, text, gate.message)
    config = config or FAQConfig()
    graph = graph or build_graph(strict=config.strict)
    ctx = FlowContext(client=client, kb=kb if kb is not None else default_kb(), config=config, log=log,
                      session_id=state["session_id"], user_text=text)
    with turn_deadline(client_deadline(client)):  # the turn's model calls share one deadline
        new = graph.run(clear_turn(state), ctx, start="API")
    if new["response.message"] is None:  # even the fallback node failed: last-resort message
        new = apply_delta(new, {"response.message": replies.FALLBACK["internal"], "response.citations": [],
                                "response.outcome": "fallback",
                                "messages": [{"role": "assistant", "content": replies.FALLBACK["internal"]}]})
    return TurnResult(state=new, user_text=text, message=new["response.message"],
                      citations=list(new["response.citations"]), outcome=new["response.outcome"],
                      trace=turn_trace(new))
