"""Amazon Bedrock through the real boto3 client, the service stubbed at botocore's own seams: ``Stubber`` for
Converse / InvokeModel and errors, a ``before-send`` hook answering ConverseStream with event-stream bytes.
Shapes from the Bedrock Runtime API reference (Converse, ConverseStream, InvokeModel for Titan / Cohere)."""
from __future__ import annotations

import binascii
import json
import struct

import botocore.session
import pytest
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber

from core.llm.bedrock import BedrockClient
from core.llm.strategies import PROMPT_EXTRACT, STRUCTURED_OUTPUT, TOOL_CALL
from tests.core.llm.provider_cases import BAD_TEXT, GOOD, GOOD_TEXT, chunks, run, run_streamed

MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def converse(text=None, tool=None, stop="end_turn"):
    content = [{"text": text}] if text is not None else [
        {"toolUse": {"toolUseId": "tooluse_1", "name": "knowledge_llm_turn", "input": tool}}]
    return {"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop,
            "usage": {"inputTokens": 120, "outputTokens": 40, "totalTokens": 160}, "metrics": {"latencyMs": 420}}


class Bedrock:
    """A botocore bedrock-runtime client with a Stubber on it; ``params`` keeps every call's parameters."""

    def __init__(self, stream=False, chain=(STRUCTURED_OUTPUT, TOOL_CALL, PROMPT_EXTRACT)):
        session = botocore.session.get_session()
        self.sdk = session.create_client("bedrock-runtime", region_name="us-east-1",
                                         aws_access_key_id="AKIAIOSFODNN7EXAMPLE", aws_secret_access_key=SECRET)
        self.params: list[tuple[str, dict]] = []
        self.sdk.meta.events.register("provide-client-params.bedrock-runtime.*", self._keep)
        self.stubber = Stubber(self.sdk)
        self.stubber.activate()
        self.client = BedrockClient(model=MODEL, client=self.sdk, stream=stream, timeout=10)
        self.client.strategies = chain

    def _keep(self, params, model, **kwargs):
        self.params.append((model.name, dict(params)))

    def ok(self, response):
        self.stubber.add_response("converse", response)

    def error(self, code, message, status=400):
        self.stubber.add_client_error("converse", service_error_code=code, service_message=message,
                                      http_status_code=status)


def test_native_json_schema_turn_sends_output_config():
    bedrock = Bedrock()
    bedrock.ok(converse(GOOD_TEXT))
    log = []
    result = run(bedrock.client, log)
    assert result.ok and result.method == STRUCTURED_OUTPUT and result.data["assistant_message"] == "どの契約書ですか？"
    name, params = bedrock.params[0]
    assert name == "Converse" and params["modelId"] == MODEL
    fmt = params["outputConfig"]["textFormat"]
    assert fmt["type"] == "json_schema" and json.loads(fmt["structure"]["jsonSchema"]["schema"])["type"] == "object"
    assert params["system"][0]["text"] and params["messages"][0]["role"] == "user"
    assert params["inferenceConfig"]["maxTokens"] > 0 and "toolConfig" not in params
    record = log[-1]
    assert record["provider"] == "bedrock" and record["usage"]["prompt_tokens"] == 120
    bedrock.stubber.assert_no_pending_responses()


def test_unsupported_json_schema_falls_back_to_a_forced_tool():
    bedrock = Bedrock()
    bedrock.error("ValidationException", "This model doesn't support the outputConfig.textFormat field.")
    bedrock.ok(converse(tool=GOOD, stop="tool_use"))
    result = run(bedrock.client)
    assert result.ok and result.method == TOOL_CALL
    tool_params = bedrock.params[1][1]
    assert "outputConfig" not in tool_params
    spec = tool_params["toolConfig"]["tools"][0]["toolSpec"]
    assert spec["name"] == "knowledge_llm_turn" and spec["inputSchema"]["json"]["type"] == "object"
    assert tool_params["toolConfig"]["toolChoice"] == {"tool": {"name": "knowledge_llm_turn"}}


def test_a_model_without_tools_falls_back_to_the_schema_in_the_prompt():
    bedrock = Bedrock()
    bedrock.error("ValidationException", "This model doesn't support the outputConfig.textFormat field.")
    bedrock.error("ValidationException", "This model doesn't support tool use.")
    bedrock.ok(converse("```json\n" + GOOD_TEXT + "\n```"))
    result = run(bedrock.client)
    assert result.ok and result.method == PROMPT_EXTRACT
    last = bedrock.params[2][1]
    assert "toolConfig" not in last and "【出力形式の指示】" in last["messages"][-1]["content"][0]["text"]


def test_an_invalid_answer_is_repaired():
    bedrock = Bedrock(chain=(TOOL_CALL,))
    bedrock.ok(converse(tool={"assistant_message": "足りない"}, stop="tool_use"))
    bedrock.ok(converse(tool=GOOD, stop="tool_use"))
    result = run(bedrock.client)
    assert result.ok and result.repairs == 1
    repair = bedrock.params[1][1]["messages"]
    assert [m["role"] for m in repair][-2:] == ["assistant", "user"]


# ---- ConverseStream: event-stream bytes at botocore's before-send seam --------------------------------
def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack("!B", len(raw_name)) + raw_name + b"\x07" + struct.pack("!H", len(raw_value)) + raw_value


def event(kind: str, payload: dict, message_type: str = "event") -> bytes:
    """One AWS event-stream message (prelude, CRCs, string headers, JSON payload)."""
    type_header = ":exception-type" if message_type == "exception" else ":event-type"
    headers = (_header(":message-type", message_type) + _header(type_header, kind)
               + _header(":content-type", "application/json"))
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack("!II", total, len(headers))
    head = prelude + struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF) + headers + body
    return head + struct.pack("!I", binascii.crc32(head) & 0xFFFFFFFF)


class _Raw:
    def __init__(self, messages):
        self.messages = messages

    def stream(self, **kwargs):
        yield from self.messages

    def close(self):
        pass


def stream_events(text=None, tool=None, stop="end_turn", fail=None):
    out = [event("messageStart", {"role": "assistant"})]
    if tool is not None:
        out.append(event("contentBlockStart", {"contentBlockIndex": 0, "start": {
            "toolUse": {"toolUseId": "tooluse_1", "name": "knowledge_llm_turn"}}}))
        out += [event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": part}}})
                for part in chunks(tool)]
    else:
        out += [event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": part}}) for part in chunks(text)]
    if fail:
        out.append(event(fail[0], {"message": fail[1]}, "exception"))
        return out
    out.append(event("contentBlockStop", {"contentBlockIndex": 0}))
    out.append(event("messageStop", {"stopReason": stop}))
    out.append(event("metadata", {"usage": {"inputTokens": 100, "outputTokens": 30, "totalTokens": 130},
                                  "metrics": {"latencyMs": 300}}))
    return out


def streaming(bedrock: Bedrock, *answers):
    queue = list(answers)

    def send(request, **kwargs):
        return AWSResponse(request.url, 200, {"content-type": "application/vnd.amazon.eventstream"},
                           _Raw(queue.pop(0)))

    bedrock.stubber.deactivate()
    bedrock.sdk.meta.events.register("before-send.bedrock-runtime.ConverseStream", send)


def test_a_streamed_answer_reaches_the_page_as_it_is_written():
    bedrock = Bedrock(stream=True, chain=(STRUCTURED_OUTPUT,))
    streaming(bedrock, stream_events(GOOD_TEXT))
    result, sink, log = run_streamed(bedrock.client)
    assert result.ok and bedrock.params[0][0] == "ConverseStream"
    updates = sink.updates()
    assert len(updates) > 1 and updates[-1] == "どの契約書ですか？"
    assert log[-1]["call"]["streamed"] is True and log[-1]["usage"]["completion_tokens"] == 30


def test_streamed_tool_input_deltas_are_the_answer():
    bedrock = Bedrock(stream=True, chain=(TOOL_CALL,))
    streaming(bedrock, stream_events(tool=GOOD_TEXT, stop="tool_use"))
    result, sink, _ = run_streamed(bedrock.client)
    assert result.ok and result.method == TOOL_CALL and sink.updates()[-1] == "どの契約書ですか？"


def test_an_exception_inside_the_stream_is_typed():
    bedrock = Bedrock(stream=True, chain=(STRUCTURED_OUTPUT,))
    streaming(bedrock, stream_events(BAD_TEXT, fail=("throttlingException", "Too many tokens, please wait.")))
    result, _, _ = run_streamed(bedrock.client)
    assert not result.ok and result.provider_error == "rate_limit"


def test_a_guardrail_stop_is_content_filter():
    bedrock = Bedrock(stream=True, chain=(STRUCTURED_OUTPUT,))
    streaming(bedrock, stream_events("申し訳ありませんが、この内容にはお答えできません。", stop="guardrail_intervened"))
    result, _, _ = run_streamed(bedrock.client)
    assert not result.ok and result.provider_error == "content_filter"
    assert "安全フィルター" in result.errors[0]


# ---- every error kind ---------------------------------------------------------------------------
@pytest.mark.parametrize("code,message,status,kind", [
    ("ThrottlingException", "Too many requests, please wait before trying again.", 429, "rate_limit"),
    ("ServiceQuotaExceededException", "Your request exceeds the service quota for your account.", 400, "rate_limit"),
    ("AccessDeniedException", "You don't have access to the model with the specified model ID.", 403, "forbidden"),
    ("UnrecognizedClientException", "The security token included in the request is invalid.", 403, "auth"),
    ("ResourceNotFoundException", "Model not found.", 404, "not_found"),
    ("ValidationException", "The provided model identifier is invalid.", 400, "not_found"),
    ("ValidationException", "Input is too long for requested model.", 400, "context_overflow"),
    ("ValidationException", ("The model returned the following errors: prompt is too long: 210000 tokens > "
                            "200000 maximum"), 400, "context_overflow"),
    ("ModelTimeoutException", "Model has timed out in processing the request.", 408, "timeout"),
    ("ServiceUnavailableException", "Service unavailable. Try your request again.", 503, "server_error"),
    ("ModelNotReadyException", "Model is not ready to serve inference requests.", 429, "server_error"),
])
def test_service_errors_are_typed_with_japanese_messages(code, message, status, kind):
    bedrock = Bedrock(chain=(STRUCTURED_OUTPUT,))
    bedrock.error(code, message, status)
    if kind == "context_overflow":  # the engine refits a smaller prompt: the service refuses again
        bedrock.error(code, message, status)
        bedrock.error(code, message, status)
    result = run(bedrock.client)
    assert not result.ok and result.provider_error == kind
    assert any(code in e for e in result.errors)  # the service's code, after a Japanese sentence
    assert all(SECRET not in e for e in result.errors)


def test_missing_credentials_are_an_auth_error_in_japanese(monkeypatch):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = BedrockClient(model=MODEL, region="us-east-1", stream=False, timeout=5)
    client.strategies = (STRUCTURED_OUTPUT,)
    result = run(client)
    assert not result.ok and result.provider_error == "auth" and "AWS の認証情報" in " ".join(result.errors)


# ---- embeddings ---------------------------------------------------------------------------------
def _body(data):
    from io import BytesIO

    from botocore.response import StreamingBody

    raw = json.dumps(data).encode()
    return StreamingBody(BytesIO(raw), len(raw))


def test_titan_embeddings_one_call_a_text():
    bedrock = Bedrock()
    for vector in ([0.1, 0.2, 0.3], [0.3, 0.2, 0.1]):
        bedrock.stubber.add_response("invoke_model", {"body": _body({"embedding": vector, "inputTextTokenCount": 4}),
                                                      "contentType": "application/json"})
    assert bedrock.client.embed(["契約書", "解除"]) == [[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]]
    names = [(name, json.loads(params["body"])) for name, params in bedrock.params]
    assert names == [("InvokeModel", {"inputText": "契約書"}), ("InvokeModel", {"inputText": "解除"})]
    assert bedrock.params[0][1]["modelId"] == "amazon.titan-embed-text-v2:0"


def test_cohere_embeddings_in_one_batch():
    bedrock = Bedrock()
    bedrock.client.embedding_model = "cohere.embed-multilingual-v3"
    bedrock.stubber.add_response("invoke_model", {"body": _body({
        "id": "e1", "embeddings": [[1.0, 0.0], [0.0, 1.0]], "texts": ["a", "b"], "response_type": "embeddings_floats"}),
        "contentType": "application/json"})
    assert bedrock.client.embed(["a", "b"], query=True) == [[1.0, 0.0], [0.0, 1.0]]
    assert json.loads(bedrock.params[0][1]["body"]) == {"texts": ["a", "b"], "input_type": "search_query"}


def test_an_embedding_error_is_typed():
    from core.llm.base import ProviderError

    bedrock = Bedrock()
    bedrock.stubber.add_client_error("invoke_model", service_error_code="AccessDeniedException",
                                     service_message="You don't have access to the model.", http_status_code=403)
    with pytest.raises(ProviderError) as caught:
        bedrock.client.embed(["a"])
    assert caught.value.kind == "forbidden"


def test_a_model_refusing_tools_while_streaming_gets_converse_from_then_on():
    bedrock = Bedrock(stream=True, chain=(TOOL_CALL,))
    bedrock.stubber.add_client_error("converse_stream", service_error_code="ValidationException",
                                     service_message="This model doesn't support tool use in streaming mode.",
                                     http_status_code=400)
    bedrock.ok(converse(tool=GOOD, stop="tool_use"))
    result = run(bedrock.client)
    assert result.ok and result.method == TOOL_CALL
    assert [name for name, _ in bedrock.params] == ["ConverseStream", "Converse"] and bedrock.client.stream is False
