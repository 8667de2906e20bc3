"""Node contracts: undeclared / missing writes and undeclared reads raise in strict mode; in
production the violation is logged, traced and answered by the Fallback node."""
import logging
from dataclasses import replace

import pytest

from core.faq import replies
from core.faq.config import FAQConfig
from core.faq.flow import TRANSITIONS, ask, build_graph, start_session
from core.faq.graph import ContractViolation, Graph, Node
from core.faq.nodes import NODES


def graph_with(name, fn, strict):
    nodes = [replace(n, fn=fn) if n.name == name else n for n in NODES]
    return Graph(nodes, TRANSITIONS, fallback="Fallback", strict=strict)


def original(name):
    return next(n.fn for n in NODES if n.name == name)


def extra_write(view, ctx):
    delta = dict(original("GE")(view, ctx))
    delta["response.message"] = "勝手な回答"
    return delta


def missing_write(view, ctx):
    delta = dict(original("TOOL")(view, ctx))
    del delta["last_error"]
    return delta


def undeclared_read(view, ctx):
    view["tool.tool_status"]  # NP does not declare tool.*
    return original("NP")(view, ctx)


@pytest.mark.parametrize("node, fn, problem", [
    ("GE", extra_write, "undeclared write 'response.message'"),
    ("TOOL", missing_write, "missing declared write 'last_error'"),
])
def test_strict_mode_raises_on_write_contract_violations(node, fn, problem, fake_kb, client, config):
    with pytest.raises(ContractViolation) as err:
        ask(start_session("s"), "オイル交換の目安は？", client=client, kb=fake_kb, config=config,
            graph=graph_with(node, fn, strict=True))
    assert err.value.node == node and problem in err.value.problems


def test_strict_mode_raises_on_undeclared_read(fake_kb, client, config):
    with pytest.raises(ContractViolation, match="undeclared read 'tool.tool_status'"):
        ask(start_session("s"), "こんにちは", client=client, kb=fake_kb, config=config,
            graph=graph_with("NP", undeclared_read, strict=True))


@pytest.mark.parametrize("node, fn, question", [
    ("GE", extra_write, "オイル交換の目安は？"),
    ("TOOL", missing_write, "オイル交換の目安は？"),
    ("NP", undeclared_read, "こんにちは"),
])
def test_production_mode_logs_and_falls_back(node, fn, question, fake_kb, client, caplog):
    with caplog.at_level(logging.ERROR, logger="core.faq.graph"):
        result = ask(start_session("s"), question, client=client, kb=fake_kb, config=FAQConfig(strict=False),
                     graph=graph_with(node, fn, strict=False))
    assert result.outcome == "fallback" and result.citations == []
    assert result.message == replies.FALLBACK["internal"]
    failed = [e for e in result.trace if e["node"] == node]
    assert failed[-1]["action"] == "failed" and failed[-1]["error_type"] == "contract_violation"
    assert result.trace[-1]["node"] == "Fallback"
    assert "勝手な回答" not in result.message
    assert any("contract_violation" in r.getMessage() and node in r.getMessage() for r in caplog.records)


def test_a_crashing_node_falls_back_in_production_and_raises_in_strict(fake_kb, client):
    def boom(view, ctx):
        raise RuntimeError("kaboom")

    with pytest.raises(RuntimeError):
        ask(start_session("s"), "オイル交換の目安は？", client=client, kb=fake_kb, config=FAQConfig(strict=True),
            graph=graph_with("NLG", boom, strict=True))
    result = ask(start_session("s"), "オイル交換の目安は？", client=client, kb=fake_kb, config=FAQConfig(),
                 graph=graph_with("NLG", boom, strict=False))
    assert result.outcome == "fallback"
    assert [e["error_type"] for e in result.trace if e["node"] == "NLG"] == ["node_error"]


def test_when_the_fallback_node_itself_fails_a_last_resort_message_is_given(fake_kb, client):
    def boom(view, ctx):
        raise RuntimeError("kaboom")

    graph = Graph([replace(n, fn=boom) if n.name in ("Fallback", "NLG") else n for n in NODES], TRANSITIONS,
                  fallback="Fallback", strict=False)
    result = ask(start_session("s"), "オイル交換の目安は？", client=client, kb=fake_kb, graph=graph)
    assert result.outcome == "fallback" and result.message == replies.FALLBACK["internal"]


def test_node_definitions_are_checked():
    with pytest.raises(Exception):
        Node("X", reads=("no_such_key",), writes=("trace",), fn=lambda v, c: {})
    with pytest.raises(ValueError, match="trace"):
        Node("X", reads=(), writes=("goal",), fn=lambda v, c: {})


def test_every_node_declares_the_spec_writes():
    writes = {n.name: set(n.writes) for n in NODES}
    assert {"session_id", "turn_id", "messages", "trace"} <= writes["API"]
    assert {"intent", "messages", "trace"} <= writes["IR"]
    assert {"goal", "dialogue_mode", "plan", "trace"} <= writes["GST"]
    assert {"tool.tool_name", "tool.tool_input", "trace"} <= writes["GE"]
    assert {"tool.tool_output_summary", "tool.tool_ref", "tool.tool_status", "messages", "last_error"} <= writes["TOOL"]
    assert {"response.message", "response.citations", "messages", "trace"} <= writes["NLG"]
    assert {"response.message", "trace"} <= writes["Fallback"]
    assert build_graph().fallback == "Fallback"
