"""The model check (``OpenAICompatibleClient.probe``) over httpx.MockTransport: what vLLM, Ollama, Azure
OpenAI and an unreachable server say, and what the client takes from it."""
from __future__ import annotations

import httpx

from core.llm.openai_compat import OpenAICompatibleClient


def client_for(base_url: str, handler, **kwargs) -> OpenAICompatibleClient:
    http = httpx.Client(transport=httpx.MockTransport(handler))
    return OpenAICompatibleClient(model=kwargs.pop("model", "m"), base_url=base_url, http_client=http, **kwargs)


def models(*entries):
    return lambda request: httpx.Response(200, json={"object": "list", "data": list(entries)})


def test_vllm_says_its_context_in_max_model_len():
    client = client_for("http://vllm:8000/v1", models({"id": "m", "owned_by": "vllm", "max_model_len": 8192}))
    info = client.probe()
    assert info.server == "vllm" and client.context_tokens == 8192 and not info.notice


def test_ollama_gets_the_older_limit_name_and_a_notice_for_a_model_it_lacks():
    client = client_for("http://localhost:11434/v1", models({"id": "qwen2.5:7b", "owned_by": "library"}),
                        model="llama3:8b")
    info = client.probe()
    assert info.server == "ollama" and client.limit_param == "max_tokens"
    assert "llama3:8b" in info.notice and "qwen2.5:7b" in info.notice and "OPENAI_MODEL" in info.notice
    fixed = client_for("http://localhost:11434/v1", models({"id": "m", "owned_by": "library"}),
                       limit_param="max_completion_tokens")
    fixed.probe()
    assert fixed.limit_param == "max_completion_tokens"  # configured: kept


def test_an_azure_deployment_is_never_reported_missing():
    client = client_for("https://res.openai.azure.com/openai/v1/", models({"id": "gpt-4o", "owned_by": "system"}),
                        model="my-deployment")
    assert client.probe().notice == ""


def test_an_unreachable_server_leaves_the_check_unknown():
    def refuse(request):
        raise httpx.ConnectError("refused", request=request)

    client = client_for("http://nowhere:1/v1", refuse, context_tokens=None)
    info = client.probe()
    assert not info.reachable and info.error == "connection" and info.notice == "" and client.context_tokens is None
