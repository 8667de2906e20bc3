"""Local models on this machine (issue #26): the settings ``python -m core.llm.llamacpp`` prints name the model
it serves, threads default to what a busy two-core box can use, and at a small context the prompt estimate
does not run low: the model check counts the console's prompt texts with llama.cpp's own tokenizer
(``/tokenize``), and a prompt that then cannot fit is never sent (a typed ``context_overflow``)."""
from __future__ import annotations

import json

import httpx
import pytest

from core.engine import structured_call
from core.llm import llamacpp
from core.llm.llamacpp import GEMMA, SMOLLM, ServerConfig, served_name, settings_line
from core.llm.messages import text_tokens
from core.llm.openai_compat import OpenAICompatibleClient

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
          "additionalProperties": False}


@pytest.mark.parametrize("model,name", [(GEMMA, GEMMA), (SMOLLM, SMOLLM),
                                        ("/models/qwen2.5-1.5b-instruct-q4_k_m.gguf", "qwen2.5-1.5b-instruct-q4_k_m")])
def test_the_printed_openai_model_is_the_name_the_server_answers_to(model, name):
    config = ServerConfig(model=model)
    assert served_name(config) == name
    line = settings_line(config, 8081)
    assert f"OPENAI_MODEL={name} " in line and "OPENAI_BASE_URL=http://127.0.0.1:8081/v1" in line
    assert "KAIWA_FIRST_TOKEN_TIMEOUT=" in line and "KAIWA_TURN_DEADLINE=" in line
    assert served_name(ServerConfig(model=model, alias="mine")) == "mine"


def test_main_prints_the_served_name_for_a_gguf_path(monkeypatch, capsys):
    monkeypatch.setattr(llamacpp, "serve", lambda config: None)
    llamacpp.main(["--model", "/x/SmolLM2-135M-Instruct.Q4_1.gguf", "--port", "9"])
    assert "OPENAI_MODEL=SmolLM2-135M-Instruct.Q4_1 " in capsys.readouterr().out


def test_threads_default_to_one_less_than_the_usable_cores(monkeypatch):
    monkeypatch.setattr(llamacpp.os, "sched_getaffinity", lambda pid: {0, 1})
    assert llamacpp.default_threads() == 1
    monkeypatch.setattr(llamacpp.os, "sched_getaffinity", lambda pid: {0})
    assert llamacpp.default_threads() == 1
    monkeypatch.setattr(llamacpp.os, "sched_getaffinity", lambda pid: set(range(8)))
    assert llamacpp.default_threads() == 7


class LlamaCpp:
    """A llama.cpp-shaped server over MockTransport: /v1/models, /props, /tokenize at ``per_char`` tokens a
    character (SmolLM2 writes Japanese at ~1.5× the estimate), chat completions counted."""

    def __init__(self, n_ctx=512, per_char=1.8):
        self.n_ctx, self.per_char, self.completions = n_ctx, per_char, 0

    def __call__(self, request: httpx.Request):
        path = request.url.path
        if path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "smollm2-135m", "owned_by": "llamacpp"}]})
        if path.endswith("/props"):
            return httpx.Response(200, json={"default_generation_settings": {"n_ctx": self.n_ctx}})
        if path.endswith("/tokenize"):
            text = json.loads(request.content)["content"]
            return httpx.Response(200, json={"tokens": list(range(int(len(text) * self.per_char)))})
        self.completions += 1
        return httpx.Response(400, json={"error": {"type": "exceed_context_size_error", "n_ctx": self.n_ctx,
                                                   "message": "request exceeds the available context size"}})


def client_for(server):
    http = httpx.Client(transport=httpx.MockTransport(server))
    client = OpenAICompatibleClient(model="smollm2-135m", base_url="http://127.0.0.1:8080/v1", http_client=http,
                                    stream=False)
    client.strategies = ("structured_output",)
    return client


def test_the_model_check_measures_the_token_ratio_with_the_servers_tokenizer():
    client = client_for(LlamaCpp(per_char=1.8))
    client.probe()
    assert client.context_tokens == 512 and client.token_ratio_exact is True
    assert client.token_ratio > 1.4  # Japanese at 1.8 a character against the estimate's 1.2


def test_a_prompt_that_cannot_fit_at_512_tokens_is_never_sent():
    server = LlamaCpp(per_char=1.8)
    client = client_for(server)
    client.probe()
    system = "あなたは契約審査の担当者を助けるアシスタントです。" * 12  # ~320 estimated tokens, ~480 real
    log = []
    result = structured_call(client, [{"role": "system", "content": system}, {"role": "user", "content": "質問"}],
                             schema=SCHEMA, name="t", max_repairs=0, log=log)
    assert text_tokens(system) < 512 - 64  # the raw estimate alone would have sent it
    assert result.provider_error == "context_overflow" and server.completions == 0
    assert log[-1]["call"]["not_sent"] is True and "コンテキスト長 512" in " ".join(result.errors)


def test_a_prompt_the_estimate_overrates_is_counted_and_sent():
    server = LlamaCpp(per_char=0.7)  # Gemma writes Japanese at ~0.6× the estimate
    client = client_for(server)
    client.probe()
    system = "あなたは契約審査の担当者を助けるアシスタントです。" * 14  # ~370 estimated tokens, ~215 real
    log = []
    structured_call(client, [{"role": "system", "content": system}, {"role": "user", "content": "質問"}],
                    schema=SCHEMA, name="t", max_repairs=0, log=log)
    assert server.completions == 1 and log[0]["call"]["prompt_tokens_counted"] < 300  # counted near the end: sent
