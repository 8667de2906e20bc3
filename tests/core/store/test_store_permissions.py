"""Store conformance, permissions: every permission check fails closed (``None``, a plain string, an
object without ``can``, an identity without the role), system-internal writes say so with ``SYSTEM``,
and nobody is recorded as the system by accident."""
from __future__ import annotations

import pytest

from core.identity import Identity
from core.store.base import SYSTEM

ENTRY = {"knowledge_title": "損害賠償の上限", "contract_type": "業務委託契約", "target_clause": "損害賠償",
         "review_points": "上限額の有無", "action_plan": "上限を設ける", "clause_sample": "第10条"}


class Anything:
    """An object that looks like an actor but has no ``can``."""

    user_id = "admin@example.jp"
    label = "管理者"
    roles = frozenset({"admin"})


NOBODY = [None, "admin", "admin@example.jp", "system", Anything(), Identity(name="admin", source="local")]


@pytest.mark.parametrize("actor", NOBODY, ids=repr)
def test_permission_checks_fail_closed(store, operator, actor):
    [eid] = store.record_knowledge(None, [ENTRY], operator)
    cid = store.create_conversation("diagnosis", operator)
    number = store.create_booking(cid, booking_type="visit", contact={"name": "佐藤"}, actor=operator)
    store.add_debug_record({"session_id": cid, "n": 1}, operator)
    if not isinstance(actor, Identity):  # an operator may edit and confirm; nobody else may
        with pytest.raises(PermissionError):
            store.edit_entry(eid, {"knowledge_title": "改ざん"}, actor)
        with pytest.raises(PermissionError):
            store.set_entry_status(eid, "confirm", actor)
        with pytest.raises(PermissionError):
            store.set_booking_status(number, "cancelled", actor)
    with pytest.raises(PermissionError):
        store.set_entry_status(eid, "archive", actor)
    with pytest.raises(PermissionError):
        store.clear_debug_records(actor)
    assert store.get_entry(eid)["status"] == "draft" and store.get_entry(eid)["knowledge_title"] == "損害賠償の上限"
    assert store.get_booking(number)["status"] == "requested" and store.count_debug_records() == 1
    assert {a["action"] for a in store.list_audit()} == {"booking.create"}


def test_system_internal_writes_say_so_explicitly(store, operator):
    [eid] = store.record_knowledge(None, [ENTRY], operator)
    assert store.set_entry_status(eid, "archive", SYSTEM)["status"] == "archived"
    [audit] = store.list_audit("knowledge_entry", eid)
    assert audit["actor"] == "system" and audit["actor_label"] == "システム"


def test_no_actor_is_recorded_as_unknown_never_as_the_system(store):
    cid = store.create_conversation("diagnosis", None)
    number = store.create_booking(cid, booking_type="visit", contact={"name": "佐藤"}, actor=None)
    assert store.get_conversation(cid)["owner"] == "unknown"
    booking = store.get_booking(number)
    assert booking["created_by"] == "unknown" and booking["created_by_label"] == "不明"
    [audit] = store.list_audit("booking", number)
    assert audit["actor"] == "unknown" and audit["actor_roles"] == "" and audit["verified"] is False
