"""Provider 400s typed by cause, not status: context overflow as llama.cpp, vLLM (three wordings) and
OpenAI say it, a chat template refusing the roles, a refused method, a refused parameter."""
from __future__ import annotations

import json

import pytest

from core.llm.base import UNSUPPORTED_KINDS, classify_bad_request
from core.results import provider_error_ja

LLAMA = {"error": {"code": 400, "message": "request (1981 tokens) exceeds the available context size (512 tokens), "
                   "try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 1981, "n_ctx": 512}}
VLLM_OLD = {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you requested "
            "5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or "
            "completion.", "type": "BadRequestError", "param": None, "code": 400}
VLLM_MAX_TOKENS = {"object": "error", "message": "'max_tokens' or 'max_completion_tokens' is too large: 1000. This "
                   "model's maximum context length is 1024 tokens and your request has 25 input tokens (1000 > 1024 - 25).",
                   "type": "BadRequestError", "param": None, "code": 400}
VLLM_016 = {"error": {"message": "You passed 1015 input tokens and requested 10 output tokens. However, the model's "
            "context length is only 1024 tokens, resulting in a maximum input length of 1014 tokens. Please reduce the "
            "length of the input prompt. (parameter=input_tokens, value=1015)", "type": "BadRequestError",
            "param": "input_tokens", "code": 400}}
OPENAI = {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted "
                    "in 130000 tokens. Please reduce the length of the messages.", "type": "invalid_request_error",
                    "param": "messages", "code": "context_length_exceeded"}}


@pytest.mark.parametrize("body,n_ctx,n_prompt", [(LLAMA, 512, 1981), (VLLM_OLD, 4096, 4000), (VLLM_MAX_TOKENS, 1024, 25),
                                                  (VLLM_016, 1024, 1015), (OPENAI, 128000, 130000)],
                         ids=["llama.cpp", "vllm", "vllm-max-tokens", "vllm-0.16", "openai"])
def test_context_overflow_is_its_own_error_with_the_servers_numbers(body, n_ctx, n_prompt):
    err = classify_bad_request(400, body, json.dumps(body))
    assert err.kind == "context_overflow" and err.kind not in UNSUPPORTED_KINDS and not err.transient
    assert (err.n_ctx, err.n_prompt_tokens) == (n_ctx, n_prompt)
    assert "コンテキスト長" in str(err) and "コンテキスト長" in provider_error_ja(err.kind)


def test_a_template_refusal_is_typed_as_the_template():
    body = {"error": {"code": 400, "type": "invalid_request_error", "message": "Unable to generate parser for this "
                      "template. Automatic parser generation failed: ... Jinja Exception: Conversation roles must "
                      "alternate user/assistant/user/assistant/..."}}
    err = classify_bad_request(400, body, json.dumps(body))
    assert err.kind == "template" and err.kind not in UNSUPPORTED_KINDS
    assert "チャットテンプレート" in provider_error_ja(err.kind)


@pytest.mark.parametrize("message,kind,param", [
    ("Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.", "unsupported", None),
    ("Unable to generate parser for this template. Automatic parser generation failed: JSON schema error at "
     "#/properties/a: unrecognized type foo", "unsupported", None),
    ("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
     "unsupported_param", "max_tokens"),
    ("Unrecognized request argument supplied: max_completion_tokens", "unsupported_param", "max_completion_tokens"),
    ("Invalid parameter: 'stream': streaming is not supported", "unsupported_param", "stream"),
    ("something else went wrong upstream", "bad_request", None),
])
def test_other_400s_by_what_the_server_says(message, kind, param):
    body = {"error": {"message": message, "type": "invalid_request_error"}}
    err = classify_bad_request(400, body, json.dumps(body))
    assert (err.kind, err.param) == (kind, param)
    assert "構造化出力の方式を受け付けませんでした" not in provider_error_ja(err.kind)  # never the old blanket text
