"""A diagnosis conversation with a booking promoted to a scenario (issue #24, 「シナリオ化」): the buttons and
the form are replayed as actions, the form with placeholder values (never the customer's own), and the
promoted scenario passes."""
from __future__ import annotations

from diagnosis_fakes import MIRAI, KeywordManualRetriever

from core import workbench as wb
from core.diagnosis.conversation import DiagnosisConversations
from core.diagnosis.models import ChatRequest
from core.llm.offline import OfflineClient
from core.store.store import Store

CUSTOMER = {"name": "山田 太郎", "phone": "090-8765-4321", "address": "東京都本物区9-9-9"}


def test_a_conversation_with_a_booking_promotes_to_a_passing_scenario(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'k.db'}")
    try:
        convs = DiagnosisConversations(store, client=OfflineClient(), retriever=KeywordManualRetriever(), owner="op")
        transcript: list = []
        r = convs.start(transcript)
        sid = r.session_id
        for req in (dict(action="select_vehicle", action_value=MIRAI), dict(action="confirm_photo", action_value="yes"),
                    dict(message="ブレーキペダルが床まで沈む"), dict(action="reserve", action_value="dispatch"),
                    dict(action="submit_booking", action_value=CUSTOMER), dict(action="booking", action_value="confirm")):
            r = convs.send(transcript, ChatRequest(session_id=sid, **req), prompt=r.prompt)
        assert r.current_step == "done"
        _, turns, final = wb.conversation_turns(store, sid)
        assert turns[0] == {"message": "ブレーキペダルが床まで沈む"}
        assert [t.get("action") for t in turns[1:]] == ["reserve", "submit_booking", "booking"]
        text = repr(turns)
        assert not any(v in text for v in CUSTOMER.values())  # the customer's data never reaches a scenario
        expect = wb.suggest_expectations(store, sid)
        assert expect["step"] == "done"
        scenario = wb.promote(store, sid, expect, name="予約まで")
        passed, failures = wb.run_scenario_check(scenario)
        assert passed, failures
    finally:
        store.engine.dispose()
