"""Google Gemini through the real google-genai SDK, the Gemini API stubbed at the SDK's HTTP seam (an
``httpx.Client`` with a ``MockTransport`` given as ``HttpOptions.httpx_client``). Shapes from the Gemini API
reference: generateContent, streamGenerateContent (SSE), batchEmbedContents, and its error bodies."""
from __future__ import annotations

import json

import httpx
import pytest

from core.llm.base import ProviderError
from core.llm.gemini import GeminiClient
from core.llm.strategies import PROMPT_EXTRACT, STRUCTURED_OUTPUT, TOOL_CALL
from tests.core.llm.provider_cases import GOOD, GOOD_TEXT, chunks, run, run_streamed

API_KEY = "AIzaSyD-test-key-0123456789abcdefghij"


def answer(text=None, call=None, finish="STOP"):
    part = {"text": text} if text is not None else {"functionCall": {"name": "knowledge_llm_turn", "args": call}}
    return {"candidates": [{"content": {"parts": [part], "role": "model"}, "finishReason": finish, "index": 0}],
            "usageMetadata": {"promptTokenCount": 90, "candidatesTokenCount": 35, "totalTokenCount": 125},
            "modelVersion": "gemini-2.5-flash"}


def google_error(code, status, message, reason=None):
    error = {"code": code, "message": message, "status": status}
    if reason:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                             "domain": "googleapis.com"}]
    return {"error": error}


class Gemini:
    """The Gemini API as a MockTransport: ``replies`` are (status, body) or a list of SSE chunks."""

    def __init__(self, *replies, stream=False, chain=(STRUCTURED_OUTPUT, TOOL_CALL, PROMPT_EXTRACT)):
        self.replies = list(replies)
        self.requests: list[tuple[str, dict, dict]] = []
        http = httpx.Client(transport=httpx.MockTransport(self))
        self.client = GeminiClient(model="gemini-2.5-flash", api_key=API_KEY, http_client=http, stream=stream,
                                   timeout=10)
        self.client.strategies = chain

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.url.path, json.loads(request.content or b"{}"), dict(request.headers)))
        reply = self.replies.pop(0)
        if isinstance(reply, list):  # server-sent events
            body = "".join(f"data: {json.dumps(chunk, ensure_ascii=False)}\r\n\r\n" for chunk in reply)
            return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})
        status, body = reply
        return httpx.Response(status, json=body)

    def body(self, i=0):
        return self.requests[i][1]


def test_native_json_schema_turn():
    gemini = Gemini((200, answer(GOOD_TEXT)))
    log = []
    result = run(gemini.client, log)
    assert result.ok and result.method == STRUCTURED_OUTPUT
    path, body, headers = gemini.requests[0]
    assert path.endswith("/models/gemini-2.5-flash:generateContent") and headers["x-goog-api-key"] == API_KEY
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json" and config["responseJsonSchema"]["type"] == "object"
    # thought tokens count against maxOutputTokens: the schema's limit plus room for thinking
    assert config["maxOutputTokens"] == log[-1]["call"]["max_tokens"] + 1024 and "thinkingConfig" not in config
    assert "tools" not in body
    assert body["systemInstruction"]["parts"][0]["text"] and body["contents"][0]["role"] == "user"
    assert log[-1]["provider"] == "gemini" and log[-1]["usage"]["completion_tokens"] == 35
    assert API_KEY not in json.dumps(log, ensure_ascii=False)


def test_a_rejected_schema_falls_back_to_a_forced_function_call():
    gemini = Gemini((400, google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received. Unknown name "
                                       "\"responseJsonSchema\": response_json_schema is not supported.")),
                    (200, answer(call=GOOD)))
    result = run(gemini.client)
    assert result.ok and result.method == TOOL_CALL
    body = gemini.body(1)
    declaration = body["tools"][0]["functionDeclarations"][0]
    # the SDK passes a declaration's fields as given (proto JSON takes snake_case names as well)
    assert declaration["name"] == "knowledge_llm_turn" and declaration["parameters_json_schema"]["type"] == "object"
    assert body["toolConfig"]["functionCallingConfig"] == {"mode": "ANY",
                                                           "allowedFunctionNames": ["knowledge_llm_turn"]}
    assert "responseJsonSchema" not in body.get("generationConfig", {})


def test_no_function_call_falls_back_to_the_schema_in_the_prompt_in_json_mode():
    gemini = Gemini((400, google_error(400, "INVALID_ARGUMENT", "response_schema is not supported for this model")),
                    (200, answer("関数は呼びません")), (200, answer(GOOD_TEXT)))
    result = run(gemini.client)
    assert result.ok and result.method == PROMPT_EXTRACT
    body = gemini.body(2)
    assert body["generationConfig"]["responseMimeType"] == "application/json" and "tools" not in body
    assert "【出力形式の指示】" in body["contents"][-1]["parts"][0]["text"]


def test_an_invalid_answer_is_repaired():
    gemini = Gemini((200, answer(json.dumps({"assistant_message": "x"}))), (200, answer(GOOD_TEXT)),
                    chain=(STRUCTURED_OUTPUT,))
    result = run(gemini.client)
    assert result.ok and result.repairs == 1
    assert [c["role"] for c in gemini.body(1)["contents"]][-2:] == ["model", "user"]


def test_a_streamed_answer_reaches_the_page_as_it_is_written():
    events = [answer(part, finish=None) for part in chunks(GOOD_TEXT)]
    for event in events:
        event["candidates"][0].pop("finishReason")
    events[-1]["candidates"][0]["finishReason"] = "STOP"
    gemini = Gemini(events, stream=True, chain=(STRUCTURED_OUTPUT,))
    result, sink, log = run_streamed(gemini.client)
    assert result.ok and gemini.requests[0][0].endswith(":streamGenerateContent")
    assert len(sink.updates()) > 1 and sink.updates()[-1] == "どの契約書ですか？"
    assert log[-1]["call"]["streamed"] is True


def test_a_blocked_prompt_is_content_filter():
    blocked = {"promptFeedback": {"blockReason": "SAFETY", "safetyRatings": [
        {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}]},
        "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12}, "modelVersion": "gemini-2.5-flash"}
    gemini = Gemini((200, blocked), chain=(STRUCTURED_OUTPUT,))
    result = run(gemini.client)
    assert not result.ok and result.provider_error == "content_filter" and "安全フィルター" in result.errors[0]


def test_an_answer_stopped_for_safety_is_content_filter():
    gemini = Gemini((200, answer("", finish="SAFETY")), chain=(STRUCTURED_OUTPUT,))
    result = run(gemini.client)
    assert not result.ok and result.provider_error == "content_filter"


@pytest.mark.parametrize("status,google_status,message,reason,kind", [
    (429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).", None, "rate_limit"),
    (403, "PERMISSION_DENIED", "Permission denied: Consumer does not have access to the model.", None, "forbidden"),
    (400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", "API_KEY_INVALID", "auth"),
    (404, "NOT_FOUND", ("models/gemini-9 is not found for API version v1beta, or is not supported for "
                       "generateContent."), None, "not_found"),
    (400, "INVALID_ARGUMENT", ("The input token count (1200000) exceeds the maximum number of tokens allowed "
                              "(1048576)."), None, "context_overflow"),
    (500, "INTERNAL", "An internal error has occurred.", None, "server_error"),
    (503, "UNAVAILABLE", "The model is overloaded. Please try again later.", None, "server_error"),
    (504, "DEADLINE_EXCEEDED", "Deadline expired before operation could complete.", None, "timeout"),
])
def test_service_errors_are_typed(status, google_status, message, reason, kind):
    body = google_error(status, google_status, message, reason)
    gemini = Gemini(*[(status, body)] * 3, chain=(STRUCTURED_OUTPUT,))
    result = run(gemini.client)
    assert not result.ok and result.provider_error == kind
    assert any(google_status in e for e in result.errors)
    if kind == "context_overflow":
        assert gemini.client.context_tokens == 1048576  # learnt from the message, for the next prompt


def test_embeddings_in_one_batch():
    gemini = Gemini((200, {"embeddings": [{"values": [0.1, 0.2]}, {"values": [0.2, 0.1]}]}))
    assert gemini.client.embed(["契約書", "解除"]) == [[0.1, 0.2], [0.2, 0.1]]
    path, body, _ = gemini.requests[0]
    assert path.endswith("/models/gemini-embedding-001:batchEmbedContents")
    assert [r["content"]["parts"][0]["text"] for r in body["requests"]] == ["契約書", "解除"]
    assert body["requests"][0]["taskType"] == "RETRIEVAL_DOCUMENT"


def test_an_embedding_error_is_typed():
    gemini = Gemini((429, google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded.")))
    with pytest.raises(ProviderError) as caught:
        gemini.client.embed(["a"])
    assert caught.value.kind == "rate_limit"


def test_thinking_can_be_switched_off():
    gemini = Gemini((200, answer(GOOD_TEXT)), chain=(STRUCTURED_OUTPUT,))
    gemini.client.thinking_tokens = 0
    log = []
    assert run(gemini.client, log).ok
    config = gemini.body()["generationConfig"]
    assert config["thinkingConfig"] == {"thinking_budget": 0}  # as the SDK writes it (proto JSON takes both)
    assert config["maxOutputTokens"] == log[-1]["call"]["max_tokens"]


def test_a_key_echoed_by_the_service_reaches_no_log(caplog):
    from core.text.pii import KNOWN_SECRETS

    KNOWN_SECRETS.add(API_KEY)  # the registry adds every configured key (test_provider_registry)
    echoed = google_error(400, "INVALID_ARGUMENT", f"API key not valid: {API_KEY}", "API_KEY_INVALID")
    gemini = Gemini((400, echoed), chain=(STRUCTURED_OUTPUT,))
    log = []
    result = run(gemini.client, log)
    assert not result.ok and result.provider_error == "auth"
    assert log and API_KEY not in json.dumps(log, ensure_ascii=False)
    assert API_KEY not in " ".join(result.errors) and API_KEY not in caplog.text
