"""A content filter is its own typed error on the OpenAI-compatible client too (Azure OpenAI's 400
``content_filter`` and an answer stopped with ``finish_reason: content_filter``), as on Bedrock, Gemini and
watsonx (their wire tests)."""
from __future__ import annotations

from core.results import provider_error_ja
from tests.core.llm.provider_cases import run
from tests.core.llm.test_openai_wire import Server, completion

AZURE_FILTER = {"error": {"message": "The response was filtered due to the prompt triggering Azure OpenAI's content "
                                     "management policy.", "type": None, "param": "prompt", "code": "content_filter",
                          "status": 400}}


def test_an_azure_content_filter_400_is_content_filter():
    server = Server((400, AZURE_FILTER))
    result = run(server.client(("structured_output", "tool_call")))
    assert not result.ok and result.provider_error == "content_filter"
    assert len(server.bodies) == 1  # not a method problem: no fallback to the next strategy


def test_an_answer_stopped_by_the_filter_is_content_filter():
    body = completion(None)
    body["choices"][0]["finish_reason"] = "content_filter"
    server = Server((200, body))
    server_client = server.client(("structured_output",))
    server_client.stream = False
    result = run(server_client)
    assert not result.ok and result.provider_error == "content_filter"
    assert "安全フィルター" in provider_error_ja("content_filter")
