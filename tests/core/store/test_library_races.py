"""Store conformance, the knowledge library under concurrent writes (issue 23): two replicas (real worker
processes with their own engines, ``bench.races``) write one entry at the same moment, on SQLite and
PostgreSQL; every write is one serialised step per entry, versions are unique and the audit trail pairs up.
A form's version (``expected_version``) refuses a save or confirm over a newer entry (:class:`StaleEntry`)."""
from __future__ import annotations

import pytest
from sqlalchemy import insert
from sqlalchemy.exc import IntegrityError

from bench.races import ENTRY, LIBRARY_CASES, Workers, library_round
from core.store import tables as t
from core.store.library import StaleEntry, changed_fields
from core.store.store import Store

ROUNDS = 10
PROBLEMS = ("lost_edits", "undone_archive", "edit_after_archive", "double_confirm", "duplicate_versions",
            "audit_mismatch")


@pytest.fixture
def workers(store_url, monkeypatch):
    monkeypatch.setenv("KAIWA_URGENCY_SEMANTIC", "off")
    Store(store_url)
    pool = Workers(store_url)
    yield pool
    pool.close()


@pytest.mark.parametrize("case", list(LIBRARY_CASES))
def test_two_replicas_writing_one_entry_at_once_lose_nothing(store, workers, case):
    totals = dict.fromkeys(PROBLEMS, 0)
    for n in range(ROUNDS):
        result = library_round(store, workers, case, n)
        assert result["errors"] == [], result
        for key in PROBLEMS:
            totals[key] += result[key]
    assert totals == dict.fromkeys(PROBLEMS, 0), (case, totals)


def test_two_stores_with_their_own_engines_edit_different_fields_and_both_stay(store_url, admin):
    first, second = Store(store_url), Store(store_url, run_migrations=False)
    try:
        entry_id = first.record_knowledge(None, [ENTRY], "race")[0]
        first.edit_entry(entry_id, {"review_points": "A の変更"}, admin)
        second.edit_entry(entry_id, {"action_plan": "B の変更"}, admin)
        entry = first.get_entry(entry_id)
        assert (entry["review_points"], entry["action_plan"], entry["version"]) == ("A の変更", "B の変更", 3)
        assert [h["version"] for h in first.entry_history(entry_id)] == [1, 2, 3]
    finally:
        first.engine.dispose()
        second.engine.dispose()


def test_a_form_of_an_older_version_is_refused_and_shows_what_changed(store, operator, admin):
    entry_id = store.record_knowledge(None, [ENTRY], "u")[0]
    shown = store.get_entry(entry_id)  # the form opens at version 1
    store.edit_entry(entry_id, {"action_plan": "同僚の変更"}, admin, expected_version=shown["version"])
    with pytest.raises(StaleEntry) as stale:
        store.edit_entry(entry_id, {"review_points": "自分の変更"}, operator, expected_version=shown["version"])
    assert stale.value.shown == 1 and stale.value.current["version"] == 2
    assert "入力した内容はそのまま残しています" in str(stale.value)
    assert changed_fields(shown, stale.value.current) == ["action_plan"]
    with pytest.raises(StaleEntry):  # 確定する never confirms text the person did not see
        store.set_entry_status(entry_id, "confirm", operator, expected_version=shown["version"])
    entry = store.get_entry(entry_id)
    assert (entry["status"], entry["action_plan"], entry["review_points"]) == ("draft", "同僚の変更", ENTRY["review_points"])
    store.set_entry_status(entry_id, "confirm", operator, expected_version=2)
    assert store.get_entry(entry_id)["status"] == "confirmed"


def test_an_archived_entry_is_not_archived_again(store, admin):
    entry_id = store.record_knowledge(None, [ENTRY], "u")[0]
    store.set_entry_status(entry_id, "archive", admin)
    with pytest.raises(ValueError):
        store.set_entry_status(entry_id, "archive", admin)
    assert [h["action"] for h in store.entry_history(entry_id)] == ["drafted", "archive"]


def test_history_versions_are_unique_in_the_database(store):
    entry_id = store.record_knowledge(None, [ENTRY], "u")[0]
    with pytest.raises(IntegrityError), store._write() as conn:
        conn.execute(insert(t.entry_history).values(entry_id=entry_id, version=1, action="edit", data="{}",
                                                    status="draft", changed_at=store.now()))
