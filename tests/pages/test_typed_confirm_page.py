"""契約ナレッジ作成 (AppTest): typing 「確定」 under a draft confirms it in the library, as the button does,
and the chat and the draft card say so (issue #15)."""
from __future__ import annotations

from core.store import get_store


def test_typing_kakutei_confirms_the_draft_and_the_page_shows_it(app):
    for text in ("業務委託契約の第8条（損害賠償）で、賠償の上限がない点が問題でした。",
                 "委託料総額を上限とするよう修正を求めるべきです。「賠償額は委託料総額を上限とする。」"):
        app.chat_input[0].set_value(text).run()
    entry_id = app.session_state.knowledge_outputs[0]["id"]
    app.chat_input[0].set_value("確定").run()
    assert not app.exception
    assert get_store().get_entry(entry_id)["status"] == "confirmed"
    last = app.chat_message[-1].markdown[0].value
    assert "ライブラリで確定済みにしました" in last and "記録: 匿名" in last
    assert any("🟢 確定済み" in c.value for c in app.caption)  # the draft card follows
    assert not [b for b in app.button if b.key == f"confirm_entry_{entry_id}"]  # nothing left to press
