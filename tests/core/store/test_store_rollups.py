"""Store conformance, 分析's rollups (core.store.rollups): every write that changes a figure leaves a mark
in the writing transaction; a refresh recounts exactly the marked conversations and days (counted here,
never timed), agrees with a recount of everything, and loses no write that lands while it runs. SQLite and
PostgreSQL (``store_url``)."""
from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import delete, event, select

from core.store import rollups
from core.store import tables as t


def marks(store) -> set[tuple[str | None, str | None]]:
    with store._read() as conn:
        return {tuple(r) for r in conn.execute(select(t.rollup_dirty.c.conversation_id, t.rollup_dirty.c.day))}


def rollup_rows(store) -> dict[str, dict]:
    with store._read() as conn:
        rows = {r.id: r._asdict() for r in conn.execute(select(t.rollup_conversations))}
        for r in conn.execute(select(t.rollup_faq)):
            rows[r.conversation_id].setdefault("faq", set()).add((r.outcome, r.question, r.exchanges))
        return rows


def day_rows(store) -> dict[str, set]:
    out = {}
    with store._read() as conn:
        for table in (t.rollup_tasks, t.rollup_methods, t.rollup_errors, t.rollup_latency):
            out[table.name] = {tuple(v for k, v in r._asdict().items() if k != "id") for r in conn.execute(select(table))}
    return out


def record(cid: str | None, *, at: str = "2025-06-10T03:00:00.000+00:00", outcome: str = "ok", attempt: int = 1,
           latency: float = 420.0, provider: str = "openai") -> dict:
    return {"time": at, "session_id": cid, "flow": "faq", "step": "answered", "provider": provider, "model": "m",
            "strategy": "structured_output", "attempt": attempt, "kind": "call" if attempt == 1 else "repair",
            "outcome": outcome, "latency_ms": latency, "messages": []}


def test_every_write_that_changes_a_figure_marks_its_conversation_or_day(store, operator, admin):
    store.refresh_rollups()
    cid = store.create_conversation("knowledge", operator)
    assert marks(store) == {(cid, None)}
    store.refresh_rollups()
    assert marks(store) == set()
    writes = [
        lambda: store.append_turn(cid, {"role": "user", "content": "a"}, role="user"),
        lambda: store.update_conversation(cid, state={"session": {"urgency_level": "high"}}),
        lambda: store.supersede_turns(cid, [store.list_turns(cid)[0]["entry_id"]]),
        lambda: store.record_knowledge(cid, [{"knowledge_title": "上限"}], operator),
        lambda: store.set_entry_status(store.conversation_outputs(cid)[0]["id"], "confirm", admin),
        lambda: store.create_booking(cid, booking_type="visit", contact={"name": "客"}, urgency="high", actor=operator),
    ]
    for write in writes:
        write()
        assert marks(store) == {(cid, None)}, write
        store.refresh_rollups()
    store.add_debug_record(record(cid), operator)
    assert marks(store) == {(cid, None), (None, "20250610a")}  # its Japan day
    store.refresh_rollups()
    store.update_conversation(cid, title="題だけ")  # neither state nor turns: no figure changes
    store.set_booking_status(store.list_bookings(limit=1)[0]["number"], "confirmed", admin)  # status: not a figure
    assert marks(store) == set()
    store.clear_debug_records(admin)
    assert marks(store) == {(cid, None), (None, "20250610a")}  # its Japan day


def test_a_refresh_recounts_only_the_conversations_and_days_written(store, operator):
    ids = [store.create_conversation("faq", operator) for _ in range(5)]
    for i, cid in enumerate(ids):
        store.append_turn(cid, {"user": f"q{i}"}, role="exchange", step="answered")
        store.add_debug_record(record(cid, at=f"2025-06-1{i}T03:00:00.000+00:00"), operator)
    assert store.refresh_rollups() == {"conversations": 5, "days": 5}  # each record's Japan day
    assert store.refresh_rollups() == {"conversations": 0, "days": 0}
    versions = store.rollup_versions()
    store.append_turn(ids[2], {"user": "もう一度"}, role="exchange", step="not_found", user_input="もう一度")
    assert store.refresh_rollups() == {"conversations": 1, "days": 0}
    assert store.rollup_versions() == {**versions, "conversations": versions["conversations"] + 1}
    store.add_debug_record(record(ids[3], at="2025-06-13T20:00:00.000+00:00"), operator)  # 2025-06-14 in Japan
    assert store.refresh_rollups() == {"conversations": 1, "days": 1}
    row = rollup_rows(store)[ids[2]]
    assert row["started"] == 1 and row["faq"] == {("answered", None, 1), ("not_found", "もう一度", 1)}


def test_the_rollups_kept_by_refreshes_equal_a_recount_of_everything(store, operator, admin):
    knowledge = store.create_conversation("knowledge", operator)
    turn = {"control": {"schema_version": "1.0", "mode": "finalize"}, "state": {"phase": "draft_knowledge"}}
    store.append_turn(knowledge, {"role": "user", "content": "a"}, role="user")
    store.refresh_rollups()
    store.append_turn(knowledge, {"role": "assistant", "turn": turn}, role="assistant", turn_json=turn,
                      step="draft_knowledge", provider="openai")
    (entry,) = store.record_knowledge(knowledge, [{"knowledge_title": "上限"}], operator)
    store.refresh_rollups()
    store.set_entry_status(entry, "confirm", admin)
    diagnosis = store.create_conversation("diagnosis", operator, state={"session": {"urgency_level": "low"}})
    store.append_turn(diagnosis, {"role": "user", "text": "音"}, role="user")
    store.append_turn(diagnosis, {"role": "assistant", "sources": [{"s": 1}]}, role="assistant", step="diagnosing")
    for attempt, outcome in ((1, "schema_error"), (2, "ok"), (1, "ok")):
        store.add_debug_record(record(diagnosis, outcome=outcome, attempt=attempt, latency=100.0 * attempt), operator)
    store.refresh_rollups()
    store.create_booking(diagnosis, booking_type="visit", contact={"name": "客"}, actor=operator)
    store.add_debug_record(record(None, at="2025-06-11T01:00:00.000+00:00", provider=""), operator)
    store.refresh_rollups()
    kept, kept_days = rollup_rows(store), day_rows(store)
    assert kept[knowledge]["confirmed"] == 1 and kept[knowledge]["to_draft"] == 1 and kept[knowledge]["finalized"] == 1
    assert kept[diagnosis]["booked"] == 1 and kept[diagnosis]["cited"] == 1 and kept[diagnosis]["provider"] == "openai"
    with store._write() as conn:  # forget everything, then count it all again (what the migration does)
        for name in rollups.ROLLUP_TABLES:
            conn.execute(delete(t.metadata.tables[name]))
        rollups.mark_everything(conn)
    store.refresh_rollups()
    assert rollup_rows(store) == kept and day_rows(store) == kept_days
    assert kept_days["rollup_tasks"] >= {("2025-06-10", "", "faq/answered", "openai", rollups.UNKNOWN,
                                          2, 3, 1, 2, 1, 1)}  # a day before today: counted whole


def test_a_refresh_writes_only_the_day_rows_a_write_moved(store, operator):
    """Recounting a day writes only the rows whose counts moved (counted: the rows each statement inserts,
    updates or deletes; a stored row is updated in place, one statement per table on SQLite, on PostgreSQL
    all of them in the statement that moves the versions), a chat turn's conversation and day are recounted
    in one transaction, and the rows kept equal a recount of everything."""
    for i in range(12):  # one day, several series, methods, outcomes and latency buckets
        cid = store.create_conversation("faq", operator)
        store.add_debug_record({**record(cid, latency=100.0 + 40 * i, provider=("openai", "offline")[i % 2],
                                         outcome=("ok", "schema_error")[i % 3 == 0]), "step": f"s{i % 3}"}, operator)
    store.refresh_rollups()
    stored = sum(map(len, day_rows(store).values()))
    assert stored >= 20
    written: list[tuple[str, int]] = []

    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        words = statement.split()
        moved = [key for key in parameters if key.endswith("_row_id")] if words[0] == "WITH" else []
        for key in moved:  # PostgreSQL: each table's moved rows updated from arrays, in the versions' statement
            written.append(("UPDATE", len(parameters[key])))
        statements.extend(words[:1] * bool(moved))
        if words[0] in ("INSERT", "DELETE", "UPDATE") and any(
                w.startswith(("rollup_tasks", "rollup_methods", "rollup_errors", "rollup_latency")) for w in words[:4]):
            rows = len(parameters) if executemany else 1
            if words[0] in ("DELETE", "UPDATE"):
                rows = cursor.rowcount
            written.append((words[0], rows))
            statements.append(words[0])

    cid = store.create_conversation("faq", operator)
    store.add_debug_record({**record(cid, latency=140.0, provider="offline"), "step": "s1"}, operator)  # like #1
    commits: list[int] = []
    event.listen(store._writer, "after_cursor_execute", count)
    event.listen(store._writer, "commit", lambda conn: commits.append(1))
    try:
        assert store.refresh_rollups() == {"conversations": 1, "days": 1}
    finally:
        event.remove(store._writer, "after_cursor_execute", count)
    assert len(commits) == 1  # the conversation and its day in one transaction
    inserted = sum(n for kind, n in written if kind == "INSERT")
    deleted = sum(n for kind, n in written if kind == "DELETE")
    updated = sum(n for kind, n in written if kind == "UPDATE")
    assert (inserted, deleted, updated) == (0, 0, 3)  # the series' tasks row, its method row, one latency bucket
    assert len(written) == 3 and len(statements) == (3 if store.dialect == "sqlite" else 1)  # one per table moved,
    # or on PostgreSQL one for them all
    kept_days = day_rows(store)
    with store._write() as conn:
        for name in rollups.ROLLUP_TABLES:
            conn.execute(delete(t.metadata.tables[name]))
        rollups.mark_everything(conn)
    store.refresh_rollups()
    assert day_rows(store) == kept_days


def recount_everything(store) -> dict[str, set]:
    with store._write() as conn:
        for name in rollups.ROLLUP_TABLES:
            conn.execute(delete(t.metadata.tables[name]))
        rollups.mark_everything(conn)
    store.refresh_rollups()
    return day_rows(store)


def test_an_inserted_record_is_added_to_its_day_from_its_conversations_calls_alone(store, operator):
    """A refresh after records were inserted counts only their conversations' calls of the day (with and
    without them) and adds the difference (counted: the statements that read calls, and what they are
    given); repairs joining a task counted earlier, failed calls of a series that started no task, records
    without a conversation, several records at once and a deleted record all end equal to a recount of the
    whole day."""
    others = [store.create_conversation("faq", operator) for _ in range(3)]
    for i, cid in enumerate(others):  # the day already holds other conversations' calls
        store.add_debug_record(record(cid, latency=200.0 + i), operator)
    store.refresh_rollups()
    cid = store.create_conversation("faq", operator)
    store.add_debug_record(record(cid, outcome="schema_error"), operator)
    store.refresh_rollups()
    statements: list[tuple[str, dict]] = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        if "WITH calls AS" in statement:
            statements.append((statement, context.compiled_parameters[0] if context.compiled else {}))

    event.listen(store._writer, "before_cursor_execute", seen)
    try:
        store.add_debug_record(record(cid, attempt=2, latency=900.0), operator)  # the repair: same task
        assert store.refresh_rollups() == {"conversations": 1, "days": 1}
    finally:
        event.remove(store._writer, "before_cursor_execute", seen)
    # without and with the record, each its conversation's calls only: one statement, a subquery for each
    assert len(statements) == 1 and statements[0][0].count("WITH calls AS") == 2
    assert all([v for k, v in p.items() if k.startswith("conversations")] == [cid] for _, p in statements)
    assert day_rows(store) == recount_everything(store)
    tasks = {r[2:5]: r[5:] for r in day_rows(store)["rollup_tasks"]}  # (day, hour, series…, counts…)
    assert tasks[("faq/answered", "openai", rollups.UNKNOWN)] == (4, 5, 3, 4, 1, 1)

    store.add_debug_record({**record(cid, attempt=2, outcome="parse_error"), "prompt_version": "v9"}, operator)
    store.add_debug_record(record(None, latency=50.0), operator)
    store.add_debug_record(record(others[0], latency=75.0), operator)
    store.refresh_rollups()
    kept = day_rows(store)
    tasks = {r[2:5]: r[5:] for r in kept["rollup_tasks"]}
    assert tasks[("faq/answered", "openai", "v9")] == (0, 0, 0, 0, 0, 1)  # failed calls, no task: not shown
    assert kept == recount_everything(store)

    with store._write() as conn:  # a deleted record marks its day without a record: the day is recounted
        conn.execute(delete(t.debug_records).where(t.debug_records.c.conversation_id == others[1]))
    store.add_debug_record(record(others[2], latency=80.0), operator)
    store.refresh_rollups()
    assert day_rows(store) == recount_everything(store)


def test_a_chat_turns_refresh_is_the_same_few_statements_however_much_the_day_holds(store, operator):
    """After another user's FAQ exchange (a conversation, its exchange, its model call) the refresh runs the
    same few statements whether the day holds 3 or 40 conversations' calls (counted, never timed; issue #25):
    the log read and its marks taken (one statement each), the conversation's rows made again by ``INSERT …
    SELECT`` (only its creation time read back, from that statement and the delete before it), its calls
    counted without and with the record (one statement), the moved keys' stored rows read in one statement
    (never a whole day's) and updated in place (one statement per table), the versions bumped and every version
    read back in one statement on PostgreSQL (no read of their own after the refresh; SQLite: a read in the
    same transaction). On PostgreSQL the marks are taken in the statement that takes its lock, deletes the
    conversation's rows and brings back their records' conversations, and the moved rows' counts are written
    in the versions' statement."""
    from core.store.chat_sync import faq_columns

    def exchange() -> None:
        cid = store.create_conversation("faq", operator)
        entry = {"user": "オイル交換の目安は？", "message": "回答", "outcome": "answered", "provider": "openai",
                 "citations": ["kb-001"]}
        columns = faq_columns(entry)
        columns.pop("role")
        store.append_turn(cid, entry, role="exchange", author=operator, **columns)
        store.add_debug_record(record(cid), operator)

    def refresh_statements() -> list[str]:
        seen: list[str] = []
        listener = (lambda conn, cursor, statement, *args: seen.append(" ".join(statement.split()))
                    if statement.split()[0] not in ("BEGIN", "COMMIT") else None)
        event.listen(store.engine, "before_cursor_execute", listener)
        try:
            versions = store.refreshed_versions()  # what 分析 runs: the refresh, then the versions
        finally:
            event.remove(store.engine, "before_cursor_execute", listener)
        assert versions == store.rollup_versions() and store.refresh_rollups() == {"conversations": 0, "days": 0}
        return seen

    for _ in range(3):
        exchange()
    store.refresh_rollups()
    exchange()
    few = refresh_statements()
    for i in range(37):  # the same day, more conversations, series and latency buckets
        cid = store.create_conversation("faq", operator)
        store.add_debug_record({**record(cid, latency=100.0 + 30 * i, provider=("openai", "offline")[i % 2]),
                                "step": f"s{i % 4}"}, operator)
    store.refresh_rollups()
    exchange()
    many = refresh_statements()
    assert len(few) == len(many) == (13 if store.dialect == "sqlite" else 6), many  # PostgreSQL: the marks taken
    # with its lock and the conversation's two deletes, its two inserts in one statement, the moved rows' counts
    # written with the versions moved and read back, in one
    calls = ("rollup_tasks", "rollup_methods", "rollup_errors", "rollup_latency")
    reads = [s for s in many if s.startswith("SELECT") and any(f"FROM {name}" in s for name in calls)]
    assert len(reads) == 1 and reads[0].count(" IN (") == 7, reads  # the moved keys' rows only (by hour and
    # key, three tables; latency: by bucket too), in one read
    if store.dialect == "sqlite":
        assert sum(s.startswith("UPDATE") and any(name in s.split()[1] for name in calls) for s in many) == 3
    else:
        assert [s.count(f"UPDATE {name} AS r") for s in many if s.startswith("WITH moved_") for name in calls] == [
            1, 1, 0, 1]  # the three tables moved, by their rows' ids: one statement
    assert not any("FROM debug_records WHERE debug_records.id IN" in s for s in many)  # the records' conversations
    # come back with their marks
    assert not any(s.startswith("WITH cohort") and "INSERT INTO rollup_conversations" not in s for s in many)  # the
    # conversation's rows: INSERT … SELECT only
    assert day_rows(store) == recount_everything(store)


def test_a_chat_turns_refresh_reads_its_conversation_by_index_not_every_entry_or_the_days_records(tmp_path, operator):
    """The statements of a chat turn's refresh find the conversation's knowledge entries and model calls by
    their conversation's index (SQLite's query plans, counted: no scan of every entry, no range over the
    day's records), so the refresh costs the same at 30k conversations as at 1k (issue #25)."""
    from core.store.store import Store

    store = Store(f"sqlite:///{tmp_path / 'plans.db'}")
    for i in range(3):  # other conversations' entries and calls
        cid = store.create_conversation("knowledge", operator)
        store.record_knowledge(cid, [{"knowledge_title": f"条項 {i}"}], operator)
        store.add_debug_record(record(cid), operator)
    store.refresh_rollups()
    cid = store.create_conversation("faq", operator)
    store.add_debug_record(record(cid), operator)
    seen: list[tuple[str, tuple]] = []
    listener = (lambda conn, cursor, statement, parameters, *args: seen.append((statement, tuple(parameters)))
                if statement.lstrip().upper().startswith(("SELECT", "WITH", "INSERT")) else None)
    event.listen(store.engine, "before_cursor_execute", listener)
    try:
        store.refresh_rollups()
    finally:
        event.remove(store.engine, "before_cursor_execute", listener)
    raw = store.engine.raw_connection()
    try:
        plans = [" | ".join(row[3] for row in raw.cursor().execute("EXPLAIN QUERY PLAN " + sql, parameters).fetchall())
                 for sql, parameters in seen if "knowledge_entries" in sql or "debug_records" in sql]
    finally:
        raw.close()
    assert len(plans) >= 3  # the conversation's rows, its calls without and with the record
    assert not [p for p in plans if "SCAN e " in p or "ix_debug_records_time" in p], plans
    store.engine.dispose()


def test_a_write_that_lands_while_a_refresh_runs_is_counted_by_the_next(store, operator):
    """The refresh deletes its marks before it reads: a turn written meanwhile (PostgreSQL: at once; SQLite:
    queued behind the refresh's transaction) leaves its own mark, and the next refresh counts it."""
    cid = store.create_conversation("faq", operator)
    store.append_turn(cid, {"user": "一つ目"}, role="exchange", step="answered")
    recount = store._recount_conversations
    writer: list[threading.Thread] = []

    def recount_while_writing(conn, ids, gone=None):
        if not writer:
            writer.append(threading.Thread(target=store.append_turn, args=(cid, {"user": "二つ目"}),
                                           kwargs={"role": "exchange", "step": "not_found"}))
            writer[0].start()
            time.sleep(0.5)
        return recount(conn, ids, gone)

    store._recount_conversations = recount_while_writing
    try:
        store.refresh_rollups()
    finally:
        writer[0].join(30)
        del store._recount_conversations
    assert (cid, None) in marks(store)
    store.refresh_rollups()
    assert rollup_rows(store)[cid]["faq"] == {("answered", None, 1), ("not_found", None, 1)}


def refreshed(store) -> dict[str, int]:
    """``Store.refreshed_versions`` (what 分析 runs), checked against a read of the versions of its own."""
    versions = store.refreshed_versions()
    assert versions == store.rollup_versions()
    return versions


def test_only_a_write_to_a_settled_day_or_conversation_moves_the_settled_versions(store, operator, monkeypatch):
    """分析 keeps the sums of the days before yesterday (Japan time), and yesterday's conversations, until
    their own version moves: today's chat turn moves the parts' versions only; a record of an old day, or a
    turn in a conversation created before yesterday, moves the settled one too, a turn in one created
    yesterday the recent one (counted, not timed). The versions come back from the refresh that moved them
    (``refreshed_versions``), a version's first move (its row made) too."""
    import core.store.base as store_base

    settled = rollups.SETTLED
    now = store_base.now_iso()
    cid = store.create_conversation("faq", operator)
    store.append_turn(cid, {"user": "一つ目"}, role="exchange", step="answered")
    store.add_debug_record(record(cid, at=now), operator)
    before = refreshed(store)
    store.append_turn(cid, {"user": "二つ目"}, role="exchange", step="answered")
    store.add_debug_record(record(cid, at=now), operator)
    after = refreshed(store)
    assert after["conversations"] > before["conversations"] and after["calls"] > before["calls"]
    assert [after.get(settled[p], 0) for p in settled] == [before.get(settled[p], 0) for p in settled]
    recent = rollups.RECENT["conversations"]
    assert after.get(recent, 0) == before.get(recent, 0)

    store.add_debug_record(record(None, at="2025-06-10T03:00:00.000+00:00"), operator)  # an old day's record
    moved = refreshed(store)
    assert moved[settled["calls"]] > after.get(settled["calls"], 0)
    assert moved.get(settled["conversations"], 0) == after.get(settled["conversations"], 0)

    monkeypatch.setattr(store_base, "now_iso", lambda: "2025-06-10T03:00:00.000+00:00")
    old = store.create_conversation("faq", operator)  # created long ago …
    monkeypatch.undo()
    moved = refreshed(store)
    store.append_turn(old, {"user": "続き"}, role="exchange", step="answered")  # … and written to today
    versions = refreshed(store)  # the settled version's row made by its first bump, read back with the others
    assert versions[settled["conversations"]] > moved.get(settled["conversations"], 0)
    assert versions.get(recent, 0) == moved.get(recent, 0)

    yesterday = (datetime.now(rollups.DAY_TZ) - timedelta(days=1)).replace(hour=12).astimezone(timezone.utc)
    monkeypatch.setattr(store_base, "now_iso", lambda: yesterday.isoformat(timespec="milliseconds"))
    late = store.create_conversation("faq", operator)  # created yesterday …
    monkeypatch.undo()
    moved = refreshed(store)
    store.append_turn(late, {"user": "続き"}, role="exchange", step="answered")  # … and written to today
    versions = refreshed(store)
    assert versions[recent] > moved.get(recent, 0)
    assert versions.get(settled["conversations"], 0) == moved.get(settled["conversations"], 0)


def test_a_turn_in_a_conversation_begun_before_the_current_slot_moves_the_earlier_version(store, operator,
                                                                                          monkeypatch):
    """Today's conversations created before the start of the refresh's slot (``rollups.slot_start``) have
    their own version: a turn in one of them moves it, a turn in one begun since does not (counted)."""
    import core.store.base as store_base

    today = datetime.combine(datetime.now(rollups.DAY_TZ).date(), datetime.min.time(), rollups.DAY_TZ)
    monkeypatch.setattr(rollups, "slot_start", lambda now=None, part="conversations": today + timedelta(hours=12))
    earlier = rollups.EARLIER["conversations"]
    ids = {}
    for name, minutes in (("before", -1), ("since", 1)):
        at = (today + timedelta(hours=12, minutes=minutes)).astimezone(UTC).isoformat(timespec="milliseconds")
        monkeypatch.setattr(store_base, "now_iso", lambda at=at: at)
        ids[name] = store.create_conversation("faq", operator)
    store.refresh_rollups()
    for name, moves in (("since", False), ("before", True)):
        before = store.rollup_versions()
        store.append_turn(ids[name], {"user": "続き"}, role="exchange", step="answered")
        store.refresh_rollups()
        after = store.rollup_versions()
        assert after["conversations"] > before["conversations"]
        assert (after.get(earlier, 0) > before.get(earlier, 0)) is moves, name
        assert after.get(rollups.RECENT["conversations"], 0) == before.get(rollups.RECENT["conversations"], 0)


def test_a_model_call_in_an_hour_of_today_before_the_present_one_moves_the_earlier_version(store, operator,
                                                                                            monkeypatch):
    """Today's model calls are counted per hour: a call (or a repair joining a task begun) in an hour before
    the refresh's (``rollups.slot_start`` of the calls) moves their earlier version, a call in the present hour
    does not (counted)."""
    today = datetime.combine(datetime.now(rollups.DAY_TZ).date(), datetime.min.time(), rollups.DAY_TZ)
    monkeypatch.setattr(rollups, "slot_start", lambda now=None, part="conversations": today + timedelta(hours=12))
    earlier = rollups.EARLIER["calls"]

    def at(minutes: int) -> str:
        return (today + timedelta(hours=12, minutes=minutes)).astimezone(UTC).isoformat(timespec="milliseconds")

    cid = store.create_conversation("faq", operator)
    store.refresh_rollups()
    for when, attempt, moves in ((5, 1, False), (-5, 1, True), (10, 1, False), (20, 2, False), (-70, 1, True)):
        before = store.rollup_versions()
        store.add_debug_record(record(cid, at=at(when), attempt=attempt), operator)
        store.refresh_rollups()
        after = store.rollup_versions()
        assert after["calls"] > before["calls"]
        assert (after.get(earlier, 0) > before.get(earlier, 0)) is moves, when
        assert after.get(rollups.SETTLED["calls"], 0) == before.get(rollups.SETTLED["calls"], 0)
    hours = {row[1] for row in day_rows(store)["rollup_latency"]}
    assert hours == {at(m)[:13] for m in (5, -5, -70)}  # a call's own hour
    assert day_rows(store) == recount_everything(store)


def test_today_is_counted_per_hour_and_folded_into_its_day_by_the_first_refresh_of_the_next(store, operator,
                                                                                            monkeypatch):
    """Only today's model calls are counted per hour (分析 cuts nothing else): a day before today is one row
    per key (hour ``""``), and the first refresh of the next day counts yesterday again per day — the same
    totals, fewer rows, the settled version moved."""
    day = datetime(2025, 6, 10, 15, tzinfo=rollups.DAY_TZ)
    monkeypatch.setattr(rollups, "japan_now", lambda: day)
    cid = store.create_conversation("faq", operator)
    for hour, outcome in ((1, "ok"), (3, "schema_error"), (5, "ok")):
        store.add_debug_record(record(cid, at=f"2025-06-10T0{hour}:00:00.000+00:00", outcome=outcome), operator)
    store.add_debug_record(record(cid, at="2025-06-09T03:00:00.000+00:00"), operator)  # the day before
    store.refresh_rollups()

    def tasks() -> dict[tuple, tuple]:
        return {r[:2]: r[5:] for r in day_rows(store)["rollup_tasks"]}

    assert tasks() == {("2025-06-09", ""): (1, 1, 1, 1, 0, 0), ("2025-06-10", "2025-06-10T01"): (1, 1, 1, 1, 0, 0),
                       ("2025-06-10", "2025-06-10T03"): (1, 1, 0, 0, 0, 1),
                       ("2025-06-10", "2025-06-10T05"): (1, 1, 1, 1, 0, 0)}
    before = store.rollup_versions()
    monkeypatch.setattr(rollups, "japan_now", lambda: day + timedelta(days=1))
    store.refresh_rollups()  # nothing written since: yesterday folded all the same
    assert tasks() == {("2025-06-09", ""): (1, 1, 1, 1, 0, 0), ("2025-06-10", ""): (3, 3, 2, 2, 0, 1)}
    after = store.rollup_versions()
    assert after[rollups.SETTLED["calls"]] > before.get(rollups.SETTLED["calls"], 0)
    # a process whose clock is a little behind still cuts that day in hours: its piece before the cut is read again
    assert after[rollups.EARLIER["calls"]] > before.get(rollups.EARLIER["calls"], 0)
    assert store.refresh_rollups() == {"conversations": 0, "days": 0}  # once a day


def test_the_call_hours_migration_goes_down_and_up(store_url, operator):
    """0013 counts the model calls per hour: up from 0012 the days counted per day are counted again per hour
    (the same totals), down again per day."""
    from sqlalchemy import create_engine, inspect

    from core.store.store import Store
    from tests.core.store.test_people_names import _alembic

    store = Store(store_url)
    cid = store.create_conversation("faq", operator)
    today = datetime.now(rollups.DAY_TZ).date()
    start = datetime.combine(today, datetime.min.time(), rollups.DAY_TZ)
    for hour, outcome in ((1, "ok"), (3, "schema_error"), (5, "ok")):
        at = (start + timedelta(hours=hour)).astimezone(UTC).isoformat(timespec="milliseconds")
        store.add_debug_record(record(cid, at=at, outcome=outcome), operator)
    store.refresh_rollups()
    per_hour = day_rows(store)
    assert len({row[1] for row in per_hour["rollup_tasks"]}) == 3  # today: per hour
    store.engine.dispose()

    def tasks_by_day() -> tuple[set[str], list[tuple]]:
        engine = create_engine(store_url)
        try:
            with engine.connect() as conn:
                columns = {c["name"] for c in inspect(conn).get_columns("rollup_tasks")}
                rows = conn.exec_driver_sql("SELECT day, SUM(tasks), SUM(calls), SUM(error_calls) FROM rollup_tasks "
                                            "GROUP BY day").all()
                return columns, [tuple(int(v) if i else v for i, v in enumerate(row)) for row in rows]
        finally:
            engine.dispose()

    _alembic(store_url, "0012", down=True)
    columns, rows = tasks_by_day()
    assert "hour" not in columns and rows == []  # marked for the next refresh (0012's code counts per day)
    _alembic(store_url, "head")
    store = Store(store_url)
    store.refresh_rollups()
    columns, rows = tasks_by_day()
    assert "hour" in columns and rows == [(today.isoformat(), 3, 3, 1)]
    assert day_rows(store) == per_hour
    store.engine.dispose()


def test_the_cut_of_today_is_one_slot_before_the_start_of_the_present_one():
    jst = rollups.DAY_TZ
    assert rollups.slot_start(datetime(2025, 6, 10, 12, 9, 59, tzinfo=jst)) == datetime(2025, 6, 10, 12, 0, tzinfo=jst)
    assert rollups.slot_start(datetime(2025, 6, 10, 3, 10, tzinfo=UTC)) == datetime(2025, 6, 10, 12, 10,
                                                                                             tzinfo=jst)
    assert rollups.earlier_before(datetime(2025, 6, 10, 12, 10, tzinfo=jst)) == datetime(2025, 6, 10, 12, 0, tzinfo=jst)
    assert rollups.earlier_before(datetime(2025, 6, 10, 0, 5, tzinfo=jst)) < datetime(2025, 6, 10, tzinfo=jst)


@pytest.mark.parametrize("at, mark, days", [
    ("2025-06-10T14:59:59.999+00:00", "20250610a", ["2025-06-10"]),
    ("2025-06-10T15:00:00.000+00:00", "20250610b", ["2025-06-11"]),
    ("2025-06-30T23:00:00.000+00:00", "20250630b", ["2025-07-01"]),
    ("2025-06-10T15:00:00+09:00", "2025-06-10", ["2025-06-10", "2025-06-11"]),  # not as the store writes them
    ("いつか", "いつか", []),
])
def test_a_debug_record_marks_its_japan_day_when_its_time_is_a_stored_timestamp(store, operator, at, mark, days):
    """A record written at a stored timestamp marks the one Japan day it falls in (string operations in the
    trigger: nothing a record says can fail the write); any other time marks its UTC date, whose two Japan
    days are recounted; an unreadable one is skipped."""
    store.refresh_rollups()
    store.add_debug_record(record(None, at=at), operator)
    assert {day for _, day in marks(store)} == {mark, None}
    assert rollups.japan_days([mark]) == days
    assert store.refresh_rollups()["days"] == len(days)


@pytest.mark.parametrize("ms", [1.0, 9.0, 100.0, 432.1, 2500.0, 60_000.0])
def test_a_latency_bucket_stands_for_its_latencies_within_one_percent(ms):
    assert abs(rollups.bucket_value(rollups.latency_bucket(ms)) - ms) / ms < 0.01


def test_japan_days_of_a_utc_date_and_odd_dates_skipped():
    assert rollups.japan_days(["2025-06-10", "nonsense", "2025-06-11"]) == ["2025-06-10", "2025-06-11", "2025-06-12"]
    assert rollups.day_bounds("2025-06-10") == ("2025-06-09T15:00:00.000+00:00", "2025-06-10T15:00:00.000+00:00")


def test_the_exact_day_migration_keeps_the_marks_meaning_both_ways(store_url, operator):
    """0009 changes only the triggers: down to 0008 a pending Japan-day mark becomes the UTC date it was made
    on (recounted with the next day, as 0008's code does) and records mark UTC dates; up again, Japan days."""
    from sqlalchemy import create_engine

    from core.store.store import Store
    from tests.core.store.test_people_names import _alembic

    store = Store(store_url)
    store.refresh_rollups()
    store.add_debug_record(record(None, at="2025-06-10T20:00:00.000+00:00"), operator)
    store.engine.dispose()
    _alembic(store_url, "0008", down=True)
    engine = create_engine(store_url)  # the database as 0008 left it (a Store would migrate it)
    with engine.begin() as conn:
        assert {r[0] for r in conn.exec_driver_sql("SELECT day FROM rollup_dirty WHERE day IS NOT NULL")} == {
            "2025-06-10"}
        conn.exec_driver_sql("DELETE FROM rollup_dirty")
        conn.exec_driver_sql("INSERT INTO debug_records (owner, created_at, record) "
                             "VALUES ('x', '2025-06-11T03:00:00.000+00:00', '{}')")
        assert {r[0] for r in conn.exec_driver_sql("SELECT day FROM rollup_dirty WHERE day IS NOT NULL")} == {
            "2025-06-11"}
    engine.dispose()
    _alembic(store_url, "head")
    store = Store(store_url)
    store.add_debug_record(record(None, at="2025-06-12T03:00:00.000+00:00"), operator)
    assert {day for _, day in marks(store) if day} == {"2025-06-11", "20250612a"}
    store.engine.dispose()


def test_a_ranges_faq_rows_are_read_by_their_own_time_without_a_lookup_per_conversation(tmp_path, operator):
    """分析's FAQ outcomes and not-found questions of a range read ``rollup_faq`` by its creation-time index
    (the conversation's time and provider ride in its rows: 0011), not through ``rollup_conversations`` one
    conversation at a time (PostgreSQL: a nested loop over today's ≈ 800 conversations, ≈ 1.5 ms after every
    write; issue #25). SQLite's query plan; the rows carry their conversation's time and provider."""
    from core.analytics import read_part
    from core.store.store import Store

    store = Store(f"sqlite:///{tmp_path / 'faq.db'}")
    cids = [store.create_conversation("faq", operator) for _ in range(3)]
    for i, cid in enumerate(cids):
        store.append_turn(cid, {"user": f"質問 {i}", "provider": "offline"}, role="exchange",
                          step="not_found" if i else "answered", provider="offline", user_input=f"質問 {i}")
    store.refresh_rollups()
    with store.read_connection() as conn:
        rows = conn.execute(select(t.rollup_faq.c.conversation_id, t.rollup_faq.c.created_at,
                                   t.rollup_faq.c.provider)).all()
        conversations = {r.id: (r.created_at, r.provider) for r in conn.execute(
            select(t.rollup_conversations.c.id, t.rollup_conversations.c.created_at, t.rollup_conversations.c.provider))}
    assert len(rows) == 3 and all((r.created_at, r.provider) == conversations[r.conversation_id] for r in rows)
    seen: list[tuple[str, tuple]] = []
    listener = (lambda conn, cursor, statement, parameters, *args: seen.append((statement, tuple(parameters)))
                if "rollup_faq" in statement else None)
    event.listen(store.engine, "before_cursor_execute", listener)
    try:
        got = read_part(store, "conversations", datetime(2000, 1, 1, tzinfo=timezone.utc),
                        datetime(2100, 1, 1, tzinfo=timezone.utc))
    finally:
        event.remove(store.engine, "before_cursor_execute", listener)
    assert dict(got["faq"]) == {"answered": 1, "not_found": 2} and len(got["missed"]) == 2
    raw = store.engine.raw_connection()
    try:
        (plan,) = [[row[3] for row in raw.cursor().execute("EXPLAIN QUERY PLAN " + sql, parameters).fetchall()]
                   for sql, parameters in seen]
    finally:
        raw.close()
    faq_reads = [step for step in plan if " f " in f" {step} "]
    assert faq_reads and all("ix_rollup_faq_created" in step for step in faq_reads), plan
    assert not [step for step in plan if "rollup_conversations" in step and "USING INDEX ix_rollup_conversations_created"
                not in step], plan  # the providers' half reads the conversations by time too; nothing per row
    store.engine.dispose()


def test_the_faq_time_migration_fills_the_rows_already_counted(store_url, operator):
    """0011 adds the conversation's time and provider to the FAQ rows already counted (from their conversation's
    rollup row), so a range's figures are the same before and after it; down to 0010 and up again."""
    from sqlalchemy import create_engine

    from core.analytics import read_part
    from core.store.store import Store
    from tests.core.store.test_people_names import _alembic

    store = Store(store_url)
    for i in range(2):
        cid = store.create_conversation("faq", operator)
        store.append_turn(cid, {"user": f"質問 {i}"}, role="exchange", step="not_found", provider="offline")
    store.refresh_rollups()
    span = (datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2100, 1, 1, tzinfo=timezone.utc))
    before = read_part(store, "conversations", *span)
    store.engine.dispose()
    _alembic(store_url, "0010", down=True)
    engine = create_engine(store_url)  # the database as 0010 left it: no such columns
    with engine.begin() as conn:
        columns = {row[1] for row in conn.exec_driver_sql("PRAGMA table_info(rollup_faq)")} if (
            engine.dialect.name == "sqlite") else {row[0] for row in conn.exec_driver_sql(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'rollup_faq'")}
        assert "created_at" not in columns and "provider" not in columns
    engine.dispose()
    _alembic(store_url, "head")
    store = Store(store_url)
    with store.read_connection() as conn:
        filled = conn.execute(select(t.rollup_faq.c.created_at, t.rollup_faq.c.provider)).all()
    assert len(filled) == 2 and all(at and provider == "offline" for at, provider in filled)
    after = read_part(store, "conversations", *span)
    assert after["faq"] == before["faq"] and after["missed"] == before["missed"]
    assert dict(after["faq"]) == {"not_found": 2}
    store.engine.dispose()


def test_on_postgresql_a_refresh_plans_its_statements_once_per_connection(operator):
    """Issue #25: the refresh's statements are prepared on their first execution and planned generically, so
    the recount's ``INSERT … SELECT`` and the calls' counts are planned once per connection, not after every
    write (planning was about half of the database's time in a refresh). PostgreSQL's own record of the
    connection's prepared statements (``pg_prepared_statements``: how often each used a generic or a custom
    plan); the connection's threshold for other statements is left as it was."""
    from sqlalchemy import create_engine

    from core.store.db import create_scratch_database
    from core.store.store import Store
    from tests.helpers.pg import shared_pg_url

    url = create_scratch_database(shared_pg_url())
    store = Store(url, engine=create_engine(url, pool_size=1, max_overflow=0))  # every refresh on one connection
    try:
        for i in range(4):  # four chat turns, each with its model call, each refreshed
            cid = store.create_conversation("faq", operator)
            store.append_turn(cid, {"user": f"質問 {i}"}, role="exchange", step="answered", provider="offline")
            store.add_debug_record(record(cid), operator)
            assert store.refresh_rollups() == {"conversations": 1, "days": 1}
        with store.engine.connect() as conn:
            plans = {" ".join(sql.split()): (generic, custom) for sql, generic, custom in conn.exec_driver_sql(
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")}
            threshold = conn.connection.dbapi_connection.prepare_threshold
        recount = next(v for k, v in plans.items() if "INSERT INTO rollup_conversations (id, fl" in k)
        counts = next(v for k, v in plans.items() if k.startswith("SELECT 0 AS side"))
        assert recount == (4, 0) and counts == (4, 0), plans  # one plan each, used four times: none made anew
        assert threshold == 5  # psycopg's default: outside a refresh a statement is prepared once it repeats
        assert day_rows(store) == recount_everything(store)  # and what it counted is what counting anew gives
    finally:
        store.engine.dispose()


def test_on_postgresql_a_connection_that_prepares_nothing_is_left_so_by_a_refresh(operator):
    """A deployment that turned psycopg's prepared statements off (``prepare_threshold=None``: a pooler that
    cannot keep them) gets none from the refresh either, and the same rollups."""
    from sqlalchemy import create_engine

    from core.store.db import create_scratch_database
    from core.store.store import Store
    from tests.helpers.pg import shared_pg_url

    url = create_scratch_database(shared_pg_url())
    store = Store(url, engine=create_engine(url, pool_size=1, max_overflow=0,
                                            connect_args={"prepare_threshold": None}))
    try:
        for i in range(3):
            cid = store.create_conversation("faq", operator)
            store.append_turn(cid, {"user": f"質問 {i}"}, role="exchange", step="answered", provider="offline")
            store.add_debug_record(record(cid), operator)
            store.refresh_rollups()
        store.append_turn(cid, {"user": "続き"}, role="exchange", step="not_found")  # a turn alone: no lock, no plans
        assert store.refresh_rollups() == {"conversations": 1, "days": 0}
        assert rollup_rows(store)[cid]["faq"] == {("answered", None, 1), ("not_found", None, 1)}
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM pg_prepared_statements").scalar() == 0
            assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar() == "auto"
            assert conn.connection.dbapi_connection.prepare_threshold is None
        assert day_rows(store) == recount_everything(store)
    finally:
        store.engine.dispose()


def test_on_postgresql_a_whole_days_recount_is_planned_for_its_day(operator):
    """Recounting a whole day (here: a record updated) reads the day's records by their time: the refresh
    plans that statement for the day it counts (a custom plan: the generic one, which cannot know how few
    records one day holds, took ten times as long on the 30k store), while a chat turn's keyed statements keep
    their generic plans. PostgreSQL's ``pg_prepared_statements``; the rollups equal counting anew."""
    from sqlalchemy import create_engine

    from core.store.db import create_scratch_database
    from core.store.store import Store
    from tests.helpers.pg import shared_pg_url

    url = create_scratch_database(shared_pg_url())
    store = Store(url, engine=create_engine(url, pool_size=1, max_overflow=0))
    try:
        ids = []
        for i in range(2):
            cid = store.create_conversation("faq", operator)
            ids.append(store.add_debug_record(record(cid), operator))
            store.refresh_rollups()
        store.annotate_debug_record(ids[0], {"outcome": "validation_error"})  # an update: its day is recounted
        assert store.refresh_rollups()["days"] == 1
        with store.engine.connect() as conn:
            plans = {" ".join(sql.split())[:16]: (generic, custom) for sql, generic, custom in conn.exec_driver_sql(
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")}
        assert plans["WITH calls AS ( "] == (0, 1), plans  # the day's recount: planned for its day
        assert plans["SELECT 0 AS side"] == (2, 0), plans  # each inserted record's count: the generic plan
        assert day_rows(store) == recount_everything(store)
    finally:
        store.engine.dispose()


def test_behind_a_backlog_of_marks_a_refresh_looks_its_marks_up_by_index(store):
    """Behind a backlog of marks (20,000 writes no refresh has taken yet: after an upgrade, or days of API
    traffic while nobody opened 分析), a refresh takes each batch's marks and a day's recount leaves out its
    records still marked through the marks' indexes (0012), not by a scan of the backlog per batch or per
    record (``NOT IN`` on PostgreSQL once its list outgrew ``work_mem``: a fresh 30k store's first refresh ran
    for over 15 minutes). The engines' own query plans of the statements a refresh sent; and the records left
    out are exactly those."""
    from sqlalchemy import text

    day = "2025-06-10"
    lo, hi = rollups.day_bounds(day)
    with store.engine.begin() as conn:
        conn.execute(t.debug_records.insert(), [
            {"conversation_id": f"c{i}", "created_at": lo, "flow": "faq", "step": "answered", "provider": "offline",
             "kind": "call", "outcome": "ok", "attempt": 1, "latency_ms": 100.0, "record": "{}"} for i in range(3)])
        ids = sorted(conn.execute(select(t.debug_records.c.id).where(t.debug_records.c.created_at == lo)).scalars())

    def backlog() -> None:
        with store.engine.begin() as conn:
            conn.execute(delete(t.rollup_dirty))
            conn.execute(t.rollup_dirty.insert(), [{"conversation_id": f"old{i}", "day": None, "record_id": None}
                                                   for i in range(10_000)]
                         + [{"conversation_id": None, "day": "2025-07-01", "record_id": 10_000_000 + i}
                            for i in range(10_000)] + [{"conversation_id": None, "day": day, "record_id": ids[0]}])
            if store.dialect == "postgresql":
                conn.execute(text("ANALYZE rollup_dirty"))
                conn.execute(text("ANALYZE debug_records"))

    backlog()
    sent: list[tuple[str, object]] = []
    listener = (lambda conn, cursor, statement, parameters, *args: sent.append((statement, parameters))
                if statement.lstrip().startswith(("DELETE FROM rollup_dirty",
                                                  "WITH taken AS (DELETE FROM rollup_dirty")) else None)
    event.listen(store.engine, "before_cursor_execute", listener)
    try:
        store.refresh_rollups()  # takes the backlog, 400 conversations a batch
    finally:
        event.remove(store.engine, "before_cursor_execute", listener)
    takes = {"both" if " OR " in statement else "conversations": (statement, parameters)
             for statement, parameters in reversed(sent)}  # the first of each kind
    assert set(takes) == {"both", "conversations"} and len(sent) == 25, [s for s, _ in sent]
    backlog()  # planned behind the whole backlog again
    pending = f"SELECT id FROM debug_records WHERE {rollups.PENDING} ORDER BY id"
    with store.engine.connect() as conn:
        assert list(conn.execute(text(pending), {"since": lo, "until": hi}).scalars()) == ids[1:]
        compiled = text(pending).compile(dialect=store.engine.dialect)
        plans = {"recount": (str(compiled), compiled.construct_params({"since": lo, "until": hi})), **takes}
        explain = "EXPLAIN QUERY PLAN " if store.dialect == "sqlite" else "EXPLAIN "
        cursor = conn.connection.cursor()
        steps = {}
        for name, (statement, parameters) in plans.items():
            if store.dialect == "postgresql" and name != "recount":  # 20,000 marks: a scan is cheaper than 400
                cursor.execute("SET enable_seqscan = off")  # lookups; that the index serves the take is the point
            if store.dialect == "sqlite" and isinstance(parameters, dict):
                parameters = tuple(parameters[k] for k in compiled.positiontup)
            cursor.execute(explain + statement, parameters)
            steps[name] = " | ".join(str(row[-1] if store.dialect == "sqlite" else row[0]) for row in cursor.fetchall())
        if store.dialect == "postgresql":
            cursor.execute("RESET enable_seqscan")
        cursor.close()
    recount = steps.pop("recount")
    if store.dialect == "postgresql":
        assert "ix_rollup_dirty_record" in recount and "Anti Join" in recount and "SubPlan" not in recount, recount
    else:  # a lookup per record, not the backlog read into a list for each recount
        assert "ix_rollup_dirty_record (record_id=?)" in recount and "LIST SUBQUERY" not in recount, recount
    for name, plan in steps.items():  # PostgreSQL: usable (on 843,270 marks it chose it: docs/performance.md)
        assert "ix_rollup_dirty_conversation" in plan and ("ix_rollup_dirty_day" in plan or name != "both"), plan
        assert "Seq Scan" not in plan and "SCAN rollup_dirty" not in plan, plan


def test_the_marks_index_migration_goes_down_and_up(store_url, operator):
    """0012 adds the marks' three indexes; down to 0011 they are gone, up again they are back."""
    from sqlalchemy import create_engine, inspect

    from core.store.store import Store
    from tests.core.store.test_people_names import _alembic

    Store(store_url).engine.dispose()

    def indexes() -> set[str]:
        engine = create_engine(store_url)
        try:
            return {i["name"] for i in inspect(engine).get_indexes("rollup_dirty")}
        finally:
            engine.dispose()

    added = {"ix_rollup_dirty_conversation", "ix_rollup_dirty_day", "ix_rollup_dirty_record"}
    assert added <= indexes()
    _alembic(store_url, "0011", down=True)
    assert not added & indexes()
    _alembic(store_url, "head")
    assert added <= indexes()
