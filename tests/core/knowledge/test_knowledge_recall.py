"""Recall of the knowledge retrieval over the paraphrased questions of bench/data/knowledge_queries.yaml
(real Sudachi BM25 + bundled e5 hybrid, the 28-entry library of bench/data/knowledge_library.yaml).
Measured with ``python -m bench.knowledge_recall``: recall@3 0.9, recall@1 0.8, every unanswerable
question rejected; the floors below leave room for an embedder or tokenizer update, not for a regression."""
from bench.knowledge_recall import load_library, load_queries, measure
from core.knowledge.retrieval import KnowledgeIndex
from core.store.store import Store


def test_recall_at_3_of_the_right_entry_has_a_floor(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'library.db'}")
    answerable, unanswerable = load_queries()
    assert len(answerable) >= 30 and len(unanswerable) >= 10
    figures = measure(KnowledgeIndex(store), load_library(store), answerable, unanswerable)
    assert figures["knowledge_recall_at_3"] >= 0.85, figures["knowledge_misses"]
    assert figures["knowledge_recall_at_1"] >= 0.7
    assert figures["knowledge_unanswerable_rejected"] >= 0.9  # 「該当するナレッジはありません」
    assert figures["knowledge_answerable_kept"] >= 0.7
