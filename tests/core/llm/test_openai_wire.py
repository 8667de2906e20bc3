"""The real openai SDK over httpx.MockTransport: request bodies per strategy and error handling."""
import json

import httpx
import pytest

from core.knowledge.turn import call_llm, entry_schema, system_prompt, turn_schema
from core.llm.openai_compat import OpenAICompatibleClient
from core.llm.strategies import PROMPT_EXTRACT, STRUCTURED_OUTPUT, TOOL_CALL

GOOD = {"control": {"schema_version": "1.0", "mode": "interview"},
        "state": {"phase": "collect_case", "missing_info": []},
        "assistant_message": "どの契約書ですか？", "knowledge_json": None}
API_KEY = "sk-test-wire-0123456789"


def completion(content=None, tool_args=None):
    message = {"role": "assistant", "content": content}
    if tool_args is not None:
        message["tool_calls"] = [{"id": "call_1", "type": "function",
                                  "function": {"name": "knowledge_llm_turn", "arguments": tool_args}}]
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-test",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}


class Server:
    def __init__(self, *replies):
        self.replies = list(replies)
        self.bodies, self.headers = [], []

    def __call__(self, request: httpx.Request):
        self.bodies.append(json.loads(request.content))
        self.headers.append(dict(request.headers))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        status, body = reply
        return httpx.Response(status, json=body)

    def client(self, strategies):
        http = httpx.Client(transport=httpx.MockTransport(self), base_url="http://llm.local/v1")
        client = OpenAICompatibleClient(model="gpt-test", api_key=API_KEY, base_url="http://llm.local/v1",
                                        http_client=http)
        client.strategies = strategies
        return client


def run(client, log=None):
    return call_llm("NDA の件", [], system_prompt(), [], client, turn_schema(), entry_schema(), log=log)


def walk_objects(node):
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            yield node
        for value in node.values():
            yield from walk_objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk_objects(value)


def assert_strict(schema):
    objects = list(walk_objects(schema))
    assert objects
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])
    text = json.dumps(schema)
    for keyword in ("minLength", "$schema", "uniqueItems", '"const"'):
        assert keyword not in text


def test_structured_output_request_body():
    server = Server((200, completion(json.dumps(GOOD, ensure_ascii=False))))
    log = []
    result = run(server.client((STRUCTURED_OUTPUT,)), log)
    assert result.ok and result.method == STRUCTURED_OUTPUT
    body = server.bodies[0]
    assert body["model"] == "gpt-test" and body["messages"][0]["role"] == "system"
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == "knowledge_llm_turn"
    schema = fmt["json_schema"]["schema"]
    assert_strict(schema)
    entry = schema["properties"]["knowledge_json"]["anyOf"][0]
    assert set(entry["properties"]) == {"contract_type", "knowledge_title", "target_clause", "review_points",
                                        "action_plan", "clause_sample"}
    assert schema["properties"]["control"]["properties"]["schema_version"]["enum"] == ["1.0"]
    assert "tools" not in body
    assert log[0]["usage"]["total_tokens"] == 18 and log[0]["model"] == "gpt-test"
    assert server.headers[0]["authorization"] == f"Bearer {API_KEY}"
    assert API_KEY not in json.dumps(log) and "Bearer" not in json.dumps(log)


def test_tool_call_request_body_and_arguments():
    server = Server((200, completion(tool_args=json.dumps(GOOD))))
    result = run(server.client((TOOL_CALL,)))
    assert result.ok and result.method == TOOL_CALL
    body = server.bodies[0]
    tool = body["tools"][0]
    assert tool["type"] == "function" and tool["function"]["name"] == "knowledge_llm_turn"
    assert tool["function"]["strict"] is True
    assert_strict(tool["function"]["parameters"])
    assert body["tool_choice"] == {"type": "function", "function": {"name": "knowledge_llm_turn"}}
    assert "response_format" not in body


def test_prompt_extract_request_body():
    server = Server((200, completion("```json\n" + json.dumps(GOOD, ensure_ascii=False) + "\n```")))
    result = run(server.client((PROMPT_EXTRACT,)))
    assert result.ok and result.parse_stage == "code_block"
    body = server.bodies[0]
    assert "response_format" not in body and "tools" not in body
    assert "IMPORTANT: You MUST respond with ONLY a valid JSON object" in body["messages"][-1]["content"]
    assert '"minLength": 1' in body["messages"][-1]["content"]  # the full schema is shown in the prompt


def test_fallback_chain_after_400():
    server = Server((400, {"error": {"message": "response_format json_schema not supported"}}),
                    (200, completion(tool_args=json.dumps(GOOD))))
    result = run(server.client((STRUCTURED_OUTPUT, TOOL_CALL, PROMPT_EXTRACT)))
    assert result.ok and result.method == TOOL_CALL and len(server.bodies) == 2
    assert "response_format" in server.bodies[0] and "tools" in server.bodies[1]


def test_429_then_success_is_retried_by_the_engine_only():
    server = Server((429, {"error": {"message": "slow down"}}), (200, completion(json.dumps(GOOD))))
    result = run(server.client((STRUCTURED_OUTPUT,)))
    assert result.ok and result.attempts == 2 and len(server.bodies) == 2  # SDK retries are off


@pytest.mark.parametrize("reply,kind", [
    ((500, {"error": {"message": "oops"}}), "server_error"),
    ((503, {"error": {"message": "overloaded"}}), "server_error"),
    (httpx.ReadTimeout("timed out"), "timeout"),
    (httpx.ConnectError("refused"), "connection"),
])
def test_persistent_failures_become_provider_errors(reply, kind):
    server = Server(reply, reply, reply)
    log = []
    result = run(server.client((STRUCTURED_OUTPUT, TOOL_CALL)), log)
    assert not result.ok and result.error_type == "provider_error" and result.provider_error == kind
    assert len(server.bodies) == 3  # 1 call + 2 retries, no fallback to another strategy
    assert [r["outcome"] for r in log] == [f"provider_error:{kind}"] * 3


def test_401_is_not_retried():
    server = Server((401, {"error": {"message": "bad key"}}))
    result = run(server.client((STRUCTURED_OUTPUT,)))
    assert not result.ok and result.provider_error == "auth" and len(server.bodies) == 1
    assert "API キー" in result.errors[0]


def test_invalid_output_is_repaired_over_the_wire():
    server = Server((200, completion("申し訳ありません")), (200, completion(json.dumps(GOOD))))
    result = run(server.client((STRUCTURED_OUTPUT,)))
    assert result.ok and result.repairs == 1
    assert server.bodies[1]["messages"][-2] == {"role": "assistant", "content": "申し訳ありません"}
