"""Streaming replies on the three flow pages, offline: the provider hands its text over in pieces, the
page's placeholder shows the user-facing field growing, and the final turn is the validated one."""
from __future__ import annotations

from tests.pages.test_diagnosis_page import open_diagnosis, say, to_symptom


def last_stats(at, key):
    return [s for s in at.session_state["stream_stats"] if s["key"] == key][-1]


def test_the_knowledge_reply_streams_into_the_page(app):
    app.chat_input(key="knowledge_input").set_value("業務委託契約の第8条（損害賠償）で上限がない点が問題でした。").run()
    assert not app.exception
    stats = last_stats(app, "knowledge_llm_turn")
    assert stats["ok"] and stats["updates"] >= 3 and stats["restarts"] == 0
    assert stats["chars"] == len(app.session_state["chat"][-1]["content"])  # the streamed text is the answer
    assert stats["token_to_page_ms"] >= 0


def test_the_diagnosis_answer_streams_into_the_page(app):
    at = to_symptom(open_diagnosis(app))
    say(at, "ブレーキを踏むとキーキー鳴ります")
    stats = last_stats(at, "diagnostic_response")
    assert stats["ok"] and stats["updates"] >= 2
    assert at.session_state["diag_transcript"][-1]["message"]


def test_the_faq_answer_streams_into_the_page(app):
    app.switch_page("pages/faq.py").run()
    app.chat_input(key="faq_input").set_value("オイル交換の目安は？").run()
    assert not app.exception
    stats = last_stats(app, "faq_answer")
    assert stats["ok"] and stats["updates"] >= 2


class _Slot:
    def markdown(self, *_):
        pass

    caption = empty = markdown


class _Container:
    def empty(self):
        return _Slot()


def test_a_second_call_of_the_same_task_is_timed_and_counted_on_its_own():
    """The answer guards regenerate a turn with a second call of the same task (same placeholder): its figures
    are its own, never the first call's first character against the second call's first token (which made
    token_to_page_ms negative)."""
    import time

    from ui.streaming import PageStream

    stream = PageStream(_Container())
    stream.update("knowledge_llm_turn", "a")
    stream.update("knowledge_llm_turn", "ab")
    first_char = stream.first_char_at["knowledge_llm_turn"]
    stream.finish("knowledge_llm_turn", True, {"sent_at": first_char - 0.2, "first_token_at": first_char - 0.1})
    second_token = time.perf_counter()
    stream.update("knowledge_llm_turn", "xyz")
    stream.finish("knowledge_llm_turn", True, {"sent_at": second_token - 0.05, "first_token_at": second_token})
    first, second = stream.stats
    assert (first["updates"], first["chars"]) == (2, 2) and (second["updates"], second["chars"]) == (1, 3)
    assert first["token_to_page_ms"] >= 0 and second["token_to_page_ms"] >= 0
