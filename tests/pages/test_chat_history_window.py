"""The knowledge and diagnosis chats with a long history draw the newest five exchanges (ten entries) and
the earlier ones on request (``ui.history``): a rerun draws what is on screen, not every past turn (issue
#25). Nothing is dropped: the toggle draws the whole transcript again."""
from __future__ import annotations

import copy

from tests.pages.test_diagnosis_page import open_diagnosis, say, to_symptom
from ui.history import SHOWN_EXCHANGES


def _window(at, key: str, total: int) -> None:
    assert len(at.chat_message) == 2 * SHOWN_EXCHANGES
    hidden = total - 2 * SHOWN_EXCHANGES
    assert [t.label for t in at.toggle if t.key == key] == [f"以前のやり取り {(hidden + 1) // 2} 件を表示"]
    at.toggle(key=key).set_value(True).run()
    assert not at.exception and len(at.chat_message) == total


def test_a_long_diagnosis_transcript_draws_the_newest_exchanges(app):
    at = to_symptom(open_diagnosis(app))
    say(at, "エアコンの風が弱い気がする")
    transcript = at.session_state["diag_transcript"]
    grown = [copy.deepcopy(transcript[k % len(transcript)]) for k in range(41)]
    for k, entry in enumerate(grown):
        if "turn" in entry:
            entry["turn"] = 1000 + k  # no rewind point: each user entry's own (no two buttons with one key)
    at.session_state["diag_transcript"] = grown
    at.run()
    assert not at.exception
    _window(at, "diag_history_all", 41)


def test_a_long_knowledge_chat_draws_the_newest_exchanges(app):
    at = app.switch_page("pages/knowledge.py").run()
    at.chat_input(key="knowledge_input").set_value("業務委託契約の第8条（損害賠償）で、賠償の上限がない点が問題でした。").run()
    assert not at.exception
    chat = at.session_state["chat"]
    at.session_state["chat"] = (chat * 20)[:40]
    at.run()
    assert not at.exception
    _window(at, "knowledge_history_all", 40)
