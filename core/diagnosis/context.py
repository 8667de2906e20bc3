"""What every step handler gets besides the session and the request: the model client, the manual
retriever, the debug log, the catalog, the urgency rules and the tuning thresholds.

Handlers never reach for globals: tests build a ``DiagnosisContext`` with a ``ScriptedClient`` and a
fake retriever (anything with ``search(query, vehicle_id=None, n_results=5, mode="hybrid")``).
When ``retriever`` is not given, the process-wide ``core.rag.get_manual_retriever()`` is used on
first need; if it cannot be built the flow goes on without manual excerpts.

One context may serve many concurrent requests (a shared ``ChatService``): :meth:`for_request`
gives each request its own shallow copy with its own client, log and RAG cache, while the
retriever is still resolved once, on the shared context.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, MutableSequence

from core.diagnosis.urgency_rules import UrgencyRules, default_rules
from core.engine import RetryPolicy
from core.vehicles import Vehicle, default_catalog

logger = logging.getLogger(__name__)

UNSET = object()


@dataclass
class Thresholds:
    """Tuning constants (seed 000 §3, §4, §10)."""

    keep_score: float = 0.3  # §10: RAG hits with score > this are used
    strong_score: float = 0.5  # §3: spec routing needs a hit at least this strong
    spec_min_count: int = 2  # §3: at least this many spec-type hits
    spec_min_ratio: float = 0.5  # §3: spec-type share of the hits
    spec_hint_score: float = 0.4  # §3 soft threshold for the spec hint
    candidates_confidence: float = 0.7  # §4 D6
    candidates_turn: int = 4  # §4 D6
    summary_every: int = 3  # §4 D5
    max_solutions_tried: int = 3  # §4 B: more than this → URGENCY_CHECK
    recent_turns: int = 4  # §4 D7
    n_results: int = 5


def _default_retriever_factory() -> Any:
    from core.rag import get_manual_retriever  # lazy: core.rag loads chromadb (~1.4 s), only on first retrieval

    return get_manual_retriever()


@dataclass
class DiagnosisContext:
    client: Any
    retriever: Any = UNSET
    log: MutableSequence[dict[str, Any]] | None = None
    catalog: tuple[Vehicle, ...] = field(default_factory=default_catalog)
    rules: UrgencyRules = field(default_factory=default_rules)
    thresholds: Thresholds = field(default_factory=Thresholds)
    retriever_factory: Callable[[], Any] = _default_retriever_factory
    retry: RetryPolicy | None = None  # None = the engine's default backoff
    rag_cache: dict[tuple[str, str | None], list] = field(default_factory=dict)
    _retriever_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def get_retriever(self) -> Any | None:
        if self.retriever is UNSET:
            with self._retriever_lock:
                if self.retriever is UNSET:
                    try:
                        self.retriever = self.retriever_factory()
                    except Exception as exc:  # noqa: BLE001 - the flow works without manual excerpts
                        logger.warning("manual retriever unavailable: %s", exc)
                        self.retriever = None
        return self.retriever

    def for_request(self, *, client: Any = None, log: Any = UNSET) -> "DiagnosisContext":
        """A copy for one request: ``client`` / ``log`` replace this context's for that request
        only, and it gets a fresh RAG cache; an unresolved retriever is resolved (once) here."""
        retriever = self.retriever
        factory = self.retriever_factory
        if retriever is UNSET:  # resolve lazily, on the shared context
            factory = self.get_retriever
        return replace(self, client=client if client is not None else self.client,
                       log=self.log if log is UNSET else log, rag_cache={}, retriever=retriever,
                       retriever_factory=factory, _retriever_lock=threading.Lock())
