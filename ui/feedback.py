"""👍/👎 under every assistant answer (``st.feedback``) with an optional comment, and the review intake of each
new answer: one call per answer on the diagnosis, FAQ, knowledge and ナレッジに質問 pages.

A rating is stored at once (``core.review.intake.give_feedback``: the answer's flow, prompt version, model and
who gave it); a 👎 puts the answer in the review queue. The newest answer of a page is also looked at once per
browser session (``core.review.intake.consider``): a failed or repaired model call, a critical urgency, an FAQ
answer without an article, or the random sample put it in the queue. A database that does not answer is a
toast, never a traceback (the answer stays on screen).
"""
from __future__ import annotations

import logging
from typing import Any, Mapping

import streamlit as st

from core.review.answers import Answer, NotAnAnswer, ask_answer
from core.review.intake import consider, give_feedback
from core.store.review import MAX_COMMENT_CHARS
from ui.session import identity, store

logger = logging.getLogger(__name__)
SEEN_KEY = "_review_intake_seen"
RATINGS = {0: "down", 1: "up"}


def _key(flow: str, conversation_id: str, turn: int) -> str:
    return f"fb_{flow}_{conversation_id}_{turn}"


def _rate(flow: str, conversation_id: str, turn: int, answer: Answer | None) -> None:
    key = _key(flow, conversation_id, turn)
    rating = RATINGS.get(st.session_state.get(key))
    if rating is None:
        return
    try:
        feedback_id, _ = give_feedback(store(), conversation_id, turn, rating, identity(), answer=answer)
    except (LookupError, NotAnAnswer):
        st.toast("この回答はまだ保存されていないため、評価を記録できませんでした。", icon="⚠️")
        return
    except Exception:  # noqa: BLE001 - the database is down: say so, keep the page
        logger.warning("feedback could not be stored", exc_info=True)
        st.toast("評価を記録できませんでした（データベースに接続できません）。", icon="⚠️")
        return
    st.session_state[f"{key}_id"] = feedback_id
    st.session_state[f"{key}_rating"] = st.session_state.get(key)  # kept while the answer is out of view
    st.toast("評価を記録しました。" + ("レビュー待ちに追加しました。" if rating == "down" else ""), icon="📝")


def _comment(key: str) -> None:
    feedback_id = st.session_state.get(f"{key}_id")
    text = str(st.session_state.get(f"{key}_comment") or "").strip()
    if feedback_id is None or not text:
        return
    try:
        store().set_feedback_comment(feedback_id, text, identity())
        st.toast("コメントを記録しました。", icon="📝")
    except Exception:  # noqa: BLE001 - the database is down
        logger.warning("feedback comment could not be stored", exc_info=True)
        st.toast("コメントを記録できませんでした（データベースに接続できません）。", icon="⚠️")


def _intake(flow: str, conversation_id: str, turn: int, answer: Answer | None) -> None:
    seen = st.session_state.setdefault(SEEN_KEY, set())
    key = _key(flow, conversation_id, turn)
    if key in seen:
        return
    seen.add(key)
    try:
        consider(store(), conversation_id, turn, answer=answer)
    except (LookupError, NotAnAnswer):
        seen.discard(key)  # not stored yet: look again on the next run
    except Exception:  # noqa: BLE001 - review intake never breaks a page
        logger.warning("review intake failed", exc_info=True)


def answer_feedback(flow: str, conversation_id: str | None, turn: int, *, latest: bool = False,
                    answer: Answer | None = None) -> None:
    """The 👍/👎 (and, once rated, a comment box) of the answer ``turn`` of ``conversation_id``; the newest
    answer (``latest``) is also considered for the review queue. ``answer`` is given for ナレッジに質問."""
    if not conversation_id:
        return
    if latest:
        _intake(flow, conversation_id, turn, answer)
    key = _key(flow, conversation_id, turn)
    if key not in st.session_state and f"{key}_rating" in st.session_state:  # drawn again after being out of
        st.session_state[key] = st.session_state[f"{key}_rating"]  # view (ui.history): Streamlit dropped it
    st.feedback("thumbs", key=key, on_change=_rate, args=(flow, conversation_id, turn, answer))
    if st.session_state.get(f"{key}_id") is not None:
        st.text_input("コメント（任意）", key=f"{key}_comment", max_chars=MAX_COMMENT_CHARS, on_change=_comment,
                      args=(key,), placeholder="どこが良かったか・違っていたか", label_visibility="collapsed")


def ask_feedback(last: Mapping[str, Any] | None, session_id: str | None, model: str = "") -> None:
    """The feedback of ナレッジに質問's last answer (``ui.knowledge_base.answer_view``'s ``last``): each new answer
    gets the next number in the page's ``ask-…`` session."""
    if not last or not session_id:
        return
    if "turn" not in last:
        state = st.session_state
        state["ask_feedback_turns"] = int(state.get("ask_feedback_turns") or 0) + 1
        last["turn"] = state["ask_feedback_turns"] - 1  # type: ignore[index]
    answer = ask_answer(session_id, int(last["turn"]), question=str(last.get("question") or ""),
                        text=str(last.get("answer") or ""), sources=list(last.get("sources") or []),
                        ok=bool(last.get("ok")), model=model)
    answer_feedback("ask", session_id, answer.turn, latest=True, answer=answer)
