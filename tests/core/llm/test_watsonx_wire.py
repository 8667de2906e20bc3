"""IBM watsonx.ai through the real ibm-watsonx-ai SDK, the service stubbed at the SDK's HTTP seam (an
``httpx.Client`` with a ``MockTransport`` given as ``APIClient(httpx_client=…)``): the IAM token, the project
lookup, ``/ml/v1/text/chat``, ``/ml/v1/text/chat_stream`` (SSE) and ``/ml/v1/text/embeddings``, with the
request and response shapes of the watsonx.ai API reference."""
from __future__ import annotations

import base64
import json
import time

import httpx
import pytest

from core.llm.base import ProviderError
from core.llm.strategies import PROMPT_EXTRACT, STRUCTURED_OUTPUT, TOOL_CALL
from core.llm.watsonx import WatsonxClient
from tests.core.llm.provider_cases import GOOD_TEXT, chunks, run, run_streamed

API_KEY = "wx-apikey-0123456789abcdefghijklmnop"
MODEL = "ibm/granite-3-3-8b-instruct"


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


TOKEN = f"{_b64({'alg': 'none'})}.{_b64({'exp': int(time.time()) + 3600, 'iat': int(time.time())})}.sig"


def chat(content=None, arguments=None, finish="stop"):
    message = {"role": "assistant", "content": content}
    if arguments is not None:
        message = {"role": "assistant", "tool_calls": [{"id": "chatcmpl-tool-1", "type": "function", "function": {
            "name": "knowledge_llm_turn", "arguments": arguments}}]}
    return {"id": "chatcmpl-1", "model_id": MODEL, "model": MODEL, "created": 1730000000,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 80, "completion_tokens": 30, "total_tokens": 110}}


def wx_error(status, code, message):
    return {"errors": [{"code": code, "message": message, "more_info": "https://cloud.ibm.com/apidocs/watsonx-ai"}],
            "trace": "0123abcd", "status_code": status}


class Watsonx:
    """IAM, the project and the inference endpoints as a MockTransport; ``replies`` answer chat / chat_stream /
    embeddings in order: (status, body) or a list of SSE chunks."""

    def __init__(self, *replies, stream=False, chain=(STRUCTURED_OUTPUT, TOOL_CALL, PROMPT_EXTRACT)):
        self.replies = list(replies)
        self.calls: list[tuple[str, dict]] = []
        self.headers: list[dict] = []
        http = httpx.Client(transport=httpx.MockTransport(self))
        self.client = WatsonxClient(model=MODEL, url="https://us-south.ml.cloud.ibm.com", api_key=API_KEY,
                                    project_id="proj-1", http_client=http, stream=stream, timeout=10)
        self.client.strategies = chain

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/identity/token"):
            return httpx.Response(200, json={"access_token": TOKEN, "refresh_token": "not_supported",
                                             "token_type": "Bearer", "expires_in": 3600,
                                             "expiration": int(time.time()) + 3600})
        if path.startswith("/v2/projects/"):
            return httpx.Response(200, json={"metadata": {"guid": "proj-1"},
                                             "entity": {"storage": {"type": "assetfiles"}, "compute": []}})
        self.calls.append((path, json.loads(request.content or b"{}")))
        self.headers.append(dict(request.headers))
        reply = self.replies.pop(0)
        if isinstance(reply, list):
            body = "".join(f"id: {i}\nevent: message\ndata: {json.dumps(c, ensure_ascii=False)}\n\n"
                           for i, c in enumerate(reply))
            return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})
        status, body = reply
        return httpx.Response(status, json=body)


def test_native_json_schema_turn():
    watsonx = Watsonx((200, chat(GOOD_TEXT)))
    log = []
    result = run(watsonx.client, log)
    assert result.ok and result.method == STRUCTURED_OUTPUT
    path, body = watsonx.calls[0]
    assert path == "/ml/v1/text/chat" and body["model_id"] == MODEL and body["project_id"] == "proj-1"
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["type"] == "object"
    assert body["max_tokens"] > 0 and body["messages"][0]["role"] == "system" and "tools" not in body
    assert watsonx.headers[0]["authorization"] == f"Bearer {TOKEN}"
    assert log[-1]["provider"] == "watsonx" and log[-1]["usage"]["prompt_tokens"] == 80
    assert API_KEY not in json.dumps(log, ensure_ascii=False)


def test_a_rejected_response_format_falls_back_to_a_forced_tool():
    watsonx = Watsonx((400, wx_error(400, "json_validation_error",
                                     "Json field 'response_format' of type json_schema is not supported for this model")),
                      (200, chat(arguments=GOOD_TEXT, finish="tool_calls")))
    result = run(watsonx.client)
    assert result.ok and result.method == TOOL_CALL
    body = watsonx.calls[1][1]
    assert body["tools"][0]["function"]["name"] == "knowledge_llm_turn"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "knowledge_llm_turn"}}
    assert "response_format" not in body


def test_no_tool_call_falls_back_to_the_schema_in_the_prompt_in_json_mode():
    watsonx = Watsonx((400, wx_error(400, "invalid_input_argument", "response_format json_schema is not supported")),
                      (200, chat("ツールは使いません")), (200, chat(GOOD_TEXT)))
    result = run(watsonx.client)
    assert result.ok and result.method == PROMPT_EXTRACT
    body = watsonx.calls[2][1]
    assert body["response_format"] == {"type": "json_object"} and "tools" not in body
    assert "【出力形式の指示】" in body["messages"][-1]["content"]


def test_an_invalid_answer_is_repaired():
    watsonx = Watsonx((200, chat(json.dumps({"assistant_message": "x"}))), (200, chat(GOOD_TEXT)),
                      chain=(STRUCTURED_OUTPUT,))
    result = run(watsonx.client)
    assert result.ok and result.repairs == 1
    assert [m["role"] for m in watsonx.calls[1][1]["messages"]][-2:] == ["assistant", "user"]


def _delta_chunks(text):
    out = [{"id": "c1", "model_id": MODEL, "choices": [{"index": 0, "delta": {"role": "assistant", "content": part},
                                                        "finish_reason": None}]} for part in chunks(text)]
    out[-1]["choices"][0]["finish_reason"] = "stop"
    out.append({"id": "c1", "model_id": MODEL, "choices": [],
                "usage": {"prompt_tokens": 80, "completion_tokens": 30, "total_tokens": 110}})
    return out


def test_a_streamed_answer_reaches_the_page_as_it_is_written():
    watsonx = Watsonx(_delta_chunks(GOOD_TEXT), stream=True, chain=(STRUCTURED_OUTPUT,))
    result, sink, log = run_streamed(watsonx.client)
    assert result.ok and watsonx.calls[0][0] == "/ml/v1/text/chat_stream"
    assert len(sink.updates()) > 1 and sink.updates()[-1] == "どの契約書ですか？"
    assert log[-1]["call"]["streamed"] is True and log[-1]["usage"]["completion_tokens"] == 30


def test_a_streamed_error_is_typed():
    watsonx = Watsonx((429, wx_error(429, "rate_limit_reached", "Rate limit reached, retry later")), stream=True,
                      chain=(STRUCTURED_OUTPUT,))
    result, _, _ = run_streamed(watsonx.client)
    assert not result.ok and result.provider_error == "rate_limit"


def test_a_content_filter_finish_is_typed():
    watsonx = Watsonx((200, chat("", finish="content_filter")), chain=(STRUCTURED_OUTPUT,))
    result = run(watsonx.client)
    assert not result.ok and result.provider_error == "content_filter"


@pytest.mark.parametrize("status,code,message,kind", [
    (429, "rate_limit_reached", "Rate limit reached, retry later", "rate_limit"),
    (401, "authentication_token_expired", "Failed to authenticate the request due to an expired token", "auth"),
    (403, "authorization_rejected", "The user is not authorized to use the project", "forbidden"),
    (404, "model_not_supported", "Model 'ibm/nope' is not supported", "not_found"),
    (400, "invalid_input_argument", ("the number of input tokens 9000 cannot exceed the total tokens limit 8192 "
                                    "for this model"), "context_overflow"),
    (400, "content_moderation_blocked", "Potentially harmful text detected by moderation (HAP)", "content_filter"),
    (500, "internal_server_error", "Internal server error", "server_error"),
    (503, "service_unavailable", "Service is temporarily unavailable", "server_error"),
])
def test_service_errors_are_typed(status, code, message, kind):
    watsonx = Watsonx(*[(status, wx_error(status, code, message))] * 3, chain=(STRUCTURED_OUTPUT,))
    result = run(watsonx.client)
    assert not result.ok and result.provider_error == kind
    assert any(code in e for e in result.errors)


def test_embeddings():
    watsonx = Watsonx((200, {"model_id": "intfloat/multilingual-e5-large", "created_at": "2026-01-01T00:00:00Z",
                             "results": [{"embedding": [0.1, 0.2]}, {"embedding": [0.2, 0.1]}],
                             "input_token_count": 8}))
    assert watsonx.client.embed(["契約書", "解除"]) == [[0.1, 0.2], [0.2, 0.1]]
    path, body = watsonx.calls[0]
    assert path == "/ml/v1/text/embeddings" and body["inputs"] == ["契約書", "解除"]
    assert body["model_id"] == "intfloat/multilingual-e5-large"


def test_an_embedding_error_is_typed():
    watsonx = Watsonx((403, wx_error(403, "authorization_rejected", "Not authorized")))
    with pytest.raises(ProviderError) as caught:
        watsonx.client.embed(["a"])
    assert caught.value.kind == "forbidden"


def test_a_key_echoed_by_the_service_reaches_no_log(caplog):
    from core.text.pii import KNOWN_SECRETS

    KNOWN_SECRETS.add(API_KEY)  # the registry adds every configured key (test_provider_registry)
    watsonx = Watsonx((401, wx_error(401, "authentication_token_not_valid", f"Invalid key {API_KEY}")),
                      chain=(STRUCTURED_OUTPUT,))
    log = []
    result = run(watsonx.client, log)
    assert not result.ok and result.provider_error == "auth"
    assert log and API_KEY not in json.dumps(log, ensure_ascii=False)
    assert API_KEY not in " ".join(result.errors) and API_KEY not in caplog.text
