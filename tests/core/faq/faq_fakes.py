"""Fakes for the FAQ tests: three articles, a keyword retriever with fixed scores, a recording client."""
from __future__ import annotations

from core.faq.kb import Article
from tests.helpers.clients import RecordingClient  # noqa: F401 - the FAQ conftest takes it from here

ARTICLES = [
    Article("kb:101", "オイル交換の目安はどのくらいですか？", "オイル・消耗品", ("オイル交換",),
            "エンジンオイルは5,000kmまたは6か月ごとの交換をおすすめしています。\n作業時間は約30分です。"
            "交換時期はアプリの整備履歴で確認できます。"),
    Article("kb:102", "オイルフィルターはいつ交換しますか？", "オイル・消耗品", ("オイルフィルター",),
            "オイルフィルターはオイル交換2回に1回の交換が目安です。"),
    Article("kb:201", "タイヤの空気圧はどのくらいですか？", "タイヤ", ("空気圧",),
            "指定空気圧は運転席ドアの開口部のラベルに記載されています。月に1回の点検をおすすめします。"),
]
# keyword in the query → (article id, score)
SCORES = {"オイル": [("kb:101", 0.95), ("kb:102", 0.7)], "タイヤ": [("kb:201", 0.9)], "ナビ": [("kb:201", 0.2)]}


class FakeRetriever:
    def __init__(self, scores=None):
        self.scores = scores or SCORES
        self.queries: list[str] = []

    def search(self, query, n_results=5, mode="hybrid"):
        self.queries.append(query)
        found: dict[str, float] = {}
        for word, hits in self.scores.items():
            if word in query:
                for doc_id, score in hits:
                    found[doc_id] = max(found.get(doc_id, 0.0), score)
        ranked = sorted(found.items(), key=lambda kv: -kv[1])[:n_results]
        return [(doc_id, score, {"id": doc_id}) for doc_id, score in ranked]


