"""Output sized to the answer (issue #26): each request's limit is its schema's measured need
(``data/output_limits.json``, ``python -m bench.output_sizes --write``), not the 2,048-token cap."""
import json

from core.engine import structured_call
from core.llm.limits import OUTPUT_LIMITS_PATH, measured_limit, output_limit, schema_output_tokens
from core.llm.scripted import ScriptedClient
from core.paths import ROOT
from core.schemas import load_schema


def test_every_measured_task_is_a_schema_and_its_limit_is_below_the_schema_estimate():
    table = {k: v for k, v in json.loads(OUTPUT_LIMITS_PATH.read_text(encoding="utf-8")).items() if not k.startswith("_")}
    assert {"diagnostic_response", "faq_answer", "faq_intent", "knowledge_llm_turn", "rag_answer"} <= set(table)
    for task, row in table.items():
        assert (ROOT / "schemas" / f"{task}.schema.json").exists()
        assert row["limit"] >= row["longest_tokens"]  # never below what the offline provider itself writes
        assert output_limit(load_schema(task), task=task, cap=2048) <= min(row["limit"], 2048)


def test_the_faq_intent_no_longer_gets_1380_tokens():
    schema = load_schema("faq_intent")
    assert output_limit(schema, cap=2048) >= 1000  # what it was: the schema's loose estimate
    assert output_limit(schema, cap=2048, task="faq_intent") == measured_limit("faq_intent") < 300


def test_the_engine_sends_the_measured_limit_and_the_switch_turns_it_off(monkeypatch):
    schema = load_schema("faq_plan")
    reply = json.dumps({"tool_name": "kb_search", "query": "q", "top_k": 3, "reason": "r"})
    client = ScriptedClient([reply, reply])
    measured = measured_limit("faq_plan")
    structured_call(client, [{"role": "user", "content": "q"}], schema=schema, name="faq_plan")
    assert client.requests[0].max_tokens == measured
    monkeypatch.setenv("KAIWA_OUTPUT_LIMITS", "schema")
    structured_call(client, [{"role": "user", "content": "q"}], schema=schema, name="faq_plan")
    assert client.requests[1].max_tokens == min(2048, schema_output_tokens(schema)) > measured
