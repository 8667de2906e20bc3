"""Fakes for the diagnosis tests: retrievers with deterministic scores, a per-task client, and a
builder for diagnostic_response JSON."""
from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from core.llm.base import LLMRequest, LLMResponse
from core.llm.offline import OfflineClient
from core.paths import ROOT
from core.vehicles import default_catalog

MIRAI = "kaiwa-mirai-hv-2022"
TREK = "kaiwa-trek-4wd-2020"


@dataclass
class Hit:
    """Stand-in for core.rag.RetrievedChunk."""

    section_id: str
    section: str
    content_type: str = "general"
    has_warning: bool = False
    score: float = 0.6
    page: int = 10
    chapter: str = "テスト"
    text: str = "テスト用の本文です。"
    vehicle_id: str = MIRAI
    chunk_id: str = ""


class FakeRetriever:
    """Returns ``hits`` for every query (or ``by_query[substring]`` when a key occurs in the query)."""

    def __init__(self, hits: Iterable[Hit] = (), by_query: dict[str, list[Hit]] | None = None, error: bool = False):
        self.hits = list(hits)
        self.by_query = by_query or {}
        self.error = error
        self.queries: list[tuple[str, str | None]] = []

    def search(self, query: str, vehicle_id: str | None = None, n_results: int = 5, mode: str = "hybrid"):
        self.queries.append((query, vehicle_id))
        if self.error:
            raise RuntimeError("search backend down")
        for key, hits in self.by_query.items():
            if key in query:
                return list(hits)[:n_results]
        return list(self.hits)[:n_results]


def _bigrams(text: str) -> set[str]:
    text = unicodedata.normalize("NFKC", text)
    return {text[i:i + 2] for i in range(len(text) - 1)}


class KeywordManualRetriever:
    """A small deterministic retriever over the real sample manuals: a section scores by the best
    share of one of its keywords' (or its title's) character bigrams found in the query."""

    def __init__(self):
        self.sections: list[dict[str, Any]] = []
        for vehicle in default_catalog():
            manual = json.loads((ROOT / vehicle.manual).read_text(encoding="utf-8"))
            for section in manual["sections"]:
                self.sections.append({**section, "vehicle_id": manual["vehicle_id"]})

    def search(self, query: str, vehicle_id: str | None = None, n_results: int = 5, mode: str = "hybrid"):
        grams = _bigrams(query)
        scored = []
        for s in self.sections:
            if vehicle_id and s["vehicle_id"] != vehicle_id:
                continue
            best = 0.0
            for phrase in list(s["keywords"]) + [s["section"].split("（")[0]]:
                pg = _bigrams(phrase.replace(" ", ""))
                if pg:
                    best = max(best, len(pg & grams) / len(pg))
            if best > 0:
                scored.append((round(best, 4), s))
        scored.sort(key=lambda x: (-x[0], x[1]["section_id"]))
        return [Hit(section_id=s["section_id"], section=s["section"], content_type=s["content_type"],
                    has_warning=s["has_warning"], score=score, page=s["page"], chapter=s["chapter"], text=s["text"],
                    vehicle_id=s["vehicle_id"], chunk_id=s["section_id"]) for score, s in scored[:n_results]]


class TaskClient:
    """Scripted replies per task (str / dict / exception / callable); other tasks go to the offline
    policies. Every request is kept in ``requests``."""

    name = "task-scripted"
    model = "task-scripted"

    def __init__(self, scripts: dict[str, list[Any]] | None = None, fallback: Any = None):
        self.scripts = {k: list(v) for k, v in (scripts or {}).items()}
        self.fallback = fallback or OfflineClient()
        self.requests: list[LLMRequest] = []

    def tasks(self) -> list[str]:
        return [r.task for r in self.requests]

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        queue = self.scripts.get(request.task)
        if queue:
            item = queue.pop(0)
            if isinstance(item, BaseException):
                raise item
            if callable(item):
                item = item(request)
            text = item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)
            if request.tools:
                return LLMResponse(tool_arguments=text, model=self.model)
            return LLMResponse(content=text, model=self.model)
        return self.fallback.complete(request)


def diag(**overrides: Any) -> dict[str, Any]:
    """A valid diagnostic_response (an ask_question by default)."""
    data = {"action": "ask_question", "message": "音はどんなときに聞こえますか？", "urgency_flag": "none",
            "reasoning": "test", "choices": ["ブレーキを踏んだとき", "加速するとき", "曲がるとき"], "can_drive": None,
            "confidence_to_answer": 0.3, "rewritten_query": "", "question_topic": "異音が出るタイミング",
            "manual_coverage": "covered", "visit_urgency": None, "term_to_clarify": None}
    data.update(overrides)
    return data


def answer(**overrides: Any) -> dict[str, Any]:
    """A provide_answer diagnostic_response."""
    base = dict(action="provide_answer", message="ブレーキパッドの摩耗が考えられます。（取扱説明書「ブレーキ鳴き」p.198）",
                choices=None, confidence_to_answer=0.85, question_topic="ブレーキ鳴き", urgency_flag="low",
                can_drive=True, visit_urgency="when_convenient")
    base.update(overrides)
    return diag(**base)


Responder = Callable[[LLMRequest], str]
