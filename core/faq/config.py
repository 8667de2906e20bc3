"""Tunable settings of the FAQ flow (UC-01): retries, backoff, relevance threshold, strict contracts."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class FAQConfig:
    kb_max_retries: int = 2          # retries after the first KB timeout (spec 05 §4.1 "N")
    kb_backoff_s: float = 0.5        # first backoff; doubles on every retry
    kb_backoff_max_s: float = 4.0
    top_k: int = 3                   # articles asked from the KB
    # Hits scoring below this hybrid score are ignored: core.rag's STRONG_THRESHOLD. Measured on
    # bench/data/faq_queries.yaml (75 answerable colloquial questions): 0.5 keeps 61 right top hits and
    # loses 7; 0.6 loses 15-19 (depending on the embedder's cosine_range). core.rag's KEEP_THRESHOLD (0.3, "worth showing") let unrelated
    # articles through for questions the KB does not answer.
    min_score: float = 0.5
    max_citations: int = 2
    plan_with_model: bool = True     # GE asks the model for the tool plan (else a rule plan)
    strict: bool = False             # contract violations raise (tests) instead of falling back
    history_turns: int = 3           # earlier user/assistant exchanges shown to the model
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)

    def backoff(self, retry_number: int) -> float:
        """Seconds to wait before retry ``retry_number`` (0-based): 0.5, 1.0, 2.0 … capped."""
        return min(self.kb_backoff_max_s, self.kb_backoff_s * (2 ** retry_number))
