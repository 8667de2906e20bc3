"""One turn of a conversation at a time, in the console: a message sent while another turn of the same
conversation is still running (another tab, the HTTP API) waits for it (``KAIWA_TURN_WAIT``) and, when
that is not enough, is kept with a Japanese notice and 「再送信」; nothing is lost or overwritten."""
from __future__ import annotations

from core.store import get_store

MIRAI = "kaiwa-mirai-hv-2022"


def test_a_message_while_another_turn_runs_is_kept_and_resent(app, monkeypatch):
    monkeypatch.setenv("KAIWA_TURN_WAIT", "0.2")
    at = app.switch_page("pages/diagnosis.py").run()
    at.button(key=f"diag_vehicle_{MIRAI}").click().run()
    at.button(key="diag_choice_yes").click().run()
    sid = at.session_state["diag_response"].session_id
    store = get_store()
    before = store.chat_entries(sid)
    token = store.acquire_turn(sid, hold=60)  # the API is in the middle of a turn of this conversation

    at.chat_input(key="diag_input").set_value("エアコンの風が弱い").run()
    assert not at.exception
    assert any("前のメッセージの処理が終わっていなかった" in w.value for w in at.warning)
    assert any(t.value == "エアコンの風が弱い" for t in at.text)
    assert store.chat_entries(sid) == before  # nothing half-written

    store.release_turn(sid, token)
    resend = next(b for b in at.button if b.label == "再送信")
    assert not resend.disabled
    resend.click().run()
    assert not at.exception
    assert [e["text"] for e in store.chat_entries(sid) if e["role"] == "user"][-1] == "エアコンの風が弱い"
    assert not [b for b in at.button if b.label == "再送信"]
