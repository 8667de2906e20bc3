"""How answers enter the review queue, and feedback on them.

:func:`give_feedback` stores a 👍/👎 (and comment) on one answer, with its flow, prompt version and model, and
queues the answer on a 👎. :func:`consider` looks at a new answer once and queues it when one of the
reasons holds (strongest first, as ``core.store.review.REASONS``):

* ``failed_call`` — the model call failed and the flow's fallback was shown (from the entry and its debug
  records), ``repaired_call`` — it needed a repair or a retry (from the debug records);
* ``critical`` — a diagnosis answer of urgency ``critical``: every one, a safety sample;
* ``faq_not_found`` — the FAQ found no article that states the answer;
* ``sample`` — a random share of the rest: ``KAIWA_REVIEW_SAMPLE`` (default 0.1). The draw is a hash of the
  answer's address, so asking twice gives the same answer. Of the sample, ``KAIWA_REVIEW_DOUBLE`` (default
  0.2) is reviewed by two reviewers, for the agreement figures.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Mapping, Sequence

from core.review.answers import Answer, _facts, answer_at

SAMPLE_ENV = "KAIWA_REVIEW_SAMPLE"
DOUBLE_ENV = "KAIWA_REVIEW_DOUBLE"
DEFAULT_SAMPLE = 0.1
DEFAULT_DOUBLE = 0.2


def _rate(name: str, default: float, environ: Mapping[str, str] | None = None) -> float:
    raw = (os.environ if environ is None else environ).get(name, "")
    try:
        return min(1.0, max(0.0, float(raw))) if str(raw).strip() else default
    except ValueError:
        return default


def sample_rate(environ: Mapping[str, str] | None = None) -> float:
    return _rate(SAMPLE_ENV, DEFAULT_SAMPLE, environ)


def double_rate(environ: Mapping[str, str] | None = None) -> float:
    return _rate(DOUBLE_ENV, DEFAULT_DOUBLE, environ)


def _draw(conversation_id: str, turn: int, salt: str) -> float:
    digest = hashlib.sha256(f"{salt}:{conversation_id}#{turn}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def reason_for(answer: Answer, *, sample: float | None = None) -> str | None:
    """Why ``answer`` goes to the queue without anyone's feedback (None: it does not)."""
    if answer.failed:
        return "failed_call"
    if answer.flow == "diagnosis" and answer.urgency == "critical":
        return "critical"
    if answer.repaired:
        return "repaired_call"
    if answer.flow == "faq" and answer.outcome == "not_found":
        return "faq_not_found"
    rate = sample_rate() if sample is None else sample
    if _draw(answer.conversation_id, answer.turn, "sample") < rate:
        return "sample"
    return None


def _enqueue(store: Any, answer: Answer, reason: str) -> int:
    double = reason == "sample" and _draw(answer.conversation_id, answer.turn, "double") < double_rate()
    item_id, _ = store.enqueue_review(answer.conversation_id, answer.turn, answer.flow, reason,
                                      snapshot=answer.snapshot(), prompt_version=answer.prompt_version,
                                      model=answer.model, reviews_wanted=2 if double else 1)
    return item_id


def certainly_not_queued(conversation_id: str, turn: int, flow: str, entry: Mapping[str, Any],
                         calls: Sequence[Mapping[str, Any]]) -> bool:
    """True when :func:`consider` would queue nothing for the answer ``entry`` just stored, known without a
    read: its facts from the entry itself and the turn's own model calls (``calls``: the debug records of
    the turn, as the request's debug log holds them; none when the log is off) give no reason. False means
    "ask :func:`consider`" (it reads the stored answer and its records)."""
    answer = Answer(conversation_id, turn, flow)
    _facts(answer, entry, {})
    answer.repaired = any(c.get("kind") in ("repair", "retry") or (c.get("outcome") or "ok") != "ok" for c in calls)
    answer.failed = answer.failed or (bool(calls) and (calls[-1].get("outcome") or "ok") != "ok")
    return reason_for(answer) is None


def consider(store: Any, conversation_id: str, turn: int, *, answer: Answer | None = None,
             sample: float | None = None) -> int | None:
    """Queue the answer when a reason holds; the item id (None when it is not queued). ``answer`` is given
    for ナレッジに質問 (not stored); else it is read from the store."""
    answer = answer or answer_at(store, conversation_id, turn)
    reason = reason_for(answer, sample=sample)
    return None if reason is None else _enqueue(store, answer, reason)


def give_feedback(store: Any, conversation_id: str, turn: int, rating: str, actor: Any, *, comment: str = "",
                  answer: Answer | None = None) -> tuple[int, int | None]:
    """Store a 👍/👎 on the answer and queue it on a 👎: ``(feedback id, item id or None)``. LookupError for an
    unknown conversation, ``NotAnAnswer`` for a turn that is not an answer, ``ReviewInputError`` for a bad
    rating."""
    answer = answer or answer_at(store, conversation_id, turn)
    feedback_id = store.add_feedback(answer.conversation_id, answer.turn, answer.flow, rating, actor,
                                     comment=comment, prompt_version=answer.prompt_version, model=answer.model)
    item_id = _enqueue(store, answer, "thumbs_down") if rating == "down" else None
    return feedback_id, item_id
