"""The FAQ KB: articles file, hit mapping, vector cache, fault injection, and the real hybrid retriever."""
import re

import numpy as np
import pytest

from core.faq.config import FAQConfig
from core.faq.kb import CachedEmbedder, FaultyKB, KBError, KBTimeout, KnowledgeBase, default_kb, documents, load_articles
from faq_fakes import ARTICLES, FakeRetriever


def test_articles_file_is_complete():
    articles = load_articles()
    ids = [a.id for a in articles]
    assert len(articles) >= 55 and len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"kb:\d{3}", i) for i in ids)
    assert all(a.title and a.body and a.category for a in articles)
    doc_id, text, meta = documents(articles[:1])[0]
    assert doc_id == articles[0].id and articles[0].title in text and articles[0].keywords[0] in text
    assert meta == {"id": articles[0].id, "title": articles[0].title, "category": articles[0].category}


def test_search_maps_to_articles_and_drops_unknown_ids():
    kb = KnowledgeBase(ARTICLES, retriever=FakeRetriever({"オイル": [("kb:999", 0.99), ("kb:101", 0.9)]}))
    hits = kb.search("オイル", 3)
    assert [h.id for h in hits] == ["kb:101"] and hits[0].body.startswith("エンジンオイル")
    assert kb.categories() == ["オイル・消耗品", "タイヤ"]


def test_retriever_is_built_lazily_once():
    built = []

    def factory(articles):
        built.append(len(articles))
        return FakeRetriever()

    kb = KnowledgeBase(ARTICLES, retriever_factory=factory)
    assert not kb.ready and built == []
    kb.search("オイル")
    kb.search("タイヤ")
    assert built == [3] and kb.ready


def test_faulty_kb_modes():
    kb = KnowledgeBase(ARTICLES, retriever=FakeRetriever())
    with pytest.raises(KBTimeout):
        FaultyKB(kb).search("オイル")
    assert isinstance(KBTimeout(), TimeoutError)
    with pytest.raises(KBError):
        FaultyKB(kb, mode="error").search("オイル")
    once = FaultyKB(kb, times=1)
    with pytest.raises(KBTimeout):
        once.search("オイル")
    assert once.search("オイル")[0].id == "kb:101" and once.calls == 2
    assert once.article("kb:101").title.startswith("オイル")  # everything else is the real KB
    with pytest.raises(ValueError):
        FaultyKB(kb, mode="slow")


class CountingEmbedder:
    cosine_range = (0.1, 0.9)
    key = "fake"

    def __init__(self):
        self.calls = 0

    def passages(self, texts):
        self.calls += 1
        return np.ones((len(texts), 4), dtype=np.float32)

    def query_vector(self, text):
        return np.ones(4, dtype=np.float32)


def test_cached_embedder_reuses_vectors_for_the_same_texts(tmp_path):
    inner = CountingEmbedder()
    CachedEmbedder(inner, tmp_path).passages(["a", "b"])
    again = CachedEmbedder(inner, tmp_path).passages(["a", "b"])
    assert inner.calls == 1 and again.shape == (2, 4)
    CachedEmbedder(inner, tmp_path).passages(["a", "c"])
    assert inner.calls == 2
    for path in tmp_path.iterdir():
        path.write_bytes(b"broken")
    CachedEmbedder(inner, tmp_path).passages(["a", "b"])
    assert inner.calls == 3
    assert CachedEmbedder(inner, tmp_path).cosine_range == (0.1, 0.9)


def test_real_hybrid_retriever_finds_the_article_and_rejects_unanswerable_questions():
    kb = default_kb()
    threshold = FAQConfig().min_score
    hits = kb.search("オイル交換の目安は？", 3)
    assert hits[0].id == "kb:007" and hits[0].score >= threshold
    assert all(h.id in kb.articles for h in hits)
    assert all(h.score < threshold for h in kb.search("ETCカードの作り方を知りたい", 3))
    assert type(kb.retriever).__module__ == "core.rag.text_retriever"
