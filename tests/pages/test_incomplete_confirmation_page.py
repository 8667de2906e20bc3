"""契約ナレッジ作成: a draft without 対応方針 or 条文例 is never confirmed with one click (issue #24): the card
says what is missing and the button waits for an explicit tick."""
from __future__ import annotations


def test_the_confirm_button_of_an_incomplete_draft_waits_for_a_tick(app):
    app.chat_input[0].set_value("業務委託契約の第8条（損害賠償）で、賠償の上限がない点が問題でした。").run()
    app.chat_input[0].set_value("以上です").run()
    assert not app.exception
    [entry] = app.session_state.knowledge_outputs
    button = app.button(key=f"confirm_entry_{entry['id']}")
    assert button.disabled
    assert any("対応方針・条文例が未設定" in w.value for w in app.warning)
    app.checkbox(key=f"confirm_incomplete_{entry['id']}").check().run()
    assert not app.button(key=f"confirm_entry_{entry['id']}").disabled
    app.button(key=f"confirm_entry_{entry['id']}").click().run()
    assert not app.exception
    assert app.session_state.knowledge_outputs[0]["status"] == "confirmed"
