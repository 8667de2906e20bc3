"""The stored diagnosis conversation: resume after a restart, booking written once, expiry notice."""
from __future__ import annotations

import pytest
from diagnosis_fakes import MIRAI, KeywordManualRetriever
from sqlalchemy import event

from core.analytics import diagnosis_outcomes, load_frames
from core.diagnosis.conversation import DiagnosisConversations
from core.diagnosis.models import ChatRequest
from core.llm.offline import OfflineClient
from core.store.debug_sink import StoredDebugLog
from core.store.store import Store


def _convs(url: str, **kw) -> DiagnosisConversations:
    return DiagnosisConversations(Store(url), client=OfflineClient(), retriever=KeywordManualRetriever(), owner="op", **kw)


def _to_booking(convs: DiagnosisConversations) -> tuple[list, str]:
    transcript: list = []
    r = convs.start(transcript)
    sid = r.session_id
    for req in (dict(action="select_vehicle", action_value=MIRAI), dict(action="confirm_photo", action_value="yes"),
                dict(message="ブレーキペダルが床まで沈む"), dict(action="reserve", action_value="dispatch"),
                dict(action="submit_booking", action_value={"name": "山田 太郎", "phone": "090-1234-5678",
                                                            "address": "東京都テスト区1-2-3"})):
        r = convs.send(transcript, ChatRequest(session_id=sid, **req), prompt=r.prompt)
    return transcript, sid


def test_a_new_process_resumes_the_transcript_and_prompt_exactly(tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    transcript, sid = _to_booking(_convs(url))
    resumed = _convs(url).resume(sid)  # as after a server restart: nothing shared but the database
    assert resumed is not None
    assert resumed.transcript == transcript
    assert resumed.response.current_step == "booking_confirm"
    assert resumed.response.prompt.type == "booking_confirm"


def test_confirming_writes_one_booking_visible_to_staff(tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    convs = _convs(url)
    transcript, sid = _to_booking(convs)
    prompt = convs.resume(sid).response.prompt
    r = convs.send(transcript, ChatRequest(session_id=sid, action="booking", action_value="confirm"), prompt=prompt)
    assert r.current_step == "done"
    [booking] = Store(url).list_bookings()
    assert booking["conversation_id"] == sid and booking["booking_type"] == "dispatch"
    assert booking["urgency"] == "critical" and booking["contact"]["name"] == "山田 太郎"
    assert booking["status"] == "requested" and booking["created_by"] == "op"


def test_handle_unknown_session_starts_a_new_one_with_the_notice(tmp_path):
    convs = _convs(f"sqlite:///{tmp_path / 'k.db'}")
    r = convs.handle(ChatRequest(session_id="does-not-exist", message="こんにちは"))
    assert r.session_id != "does-not-exist" and r.current_step == "vehicle_id"
    assert "見つかりません" in (r.notice or "") and "有効期限" not in (r.notice or "")  # unknown, not expired (issue #24)
    again = convs.handle(ChatRequest(session_id=r.session_id, action="select_vehicle", action_value=MIRAI))
    assert again.session_id == r.session_id and again.current_step == "photo_confirm"
    assert len(convs.resume(r.session_id).transcript) == 3


def test_rewind_cut_is_kept_out_of_the_resumed_transcript(tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    convs = _convs(url)
    transcript, sid = _to_booking(convs)
    point = convs.service.rewind_points(sid)[0]
    convs.send(transcript, ChatRequest(session_id=sid, rewind_to_turn=point))
    assert _convs(url).resume(sid).transcript == transcript
    assert len(Store(url).list_turns(sid, include_superseded=True)) > len(transcript)


def test_stored_assistant_turns_keep_the_response_provider_and_model(tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    _, sid = _to_booking(_convs(url))
    answers = [t for t in Store(url).list_turns(sid) if t["role"] == "assistant"]
    assert answers and all(t["turn_json"]["session_id"] == sid for t in answers)
    assert {t["provider"] for t in answers} == {"offline"} and all(t["model"] for t in answers)
    assert answers[-1]["turn_json"]["current_step"] == "booking_confirm" and answers[-1]["step"] == "booking_confirm"


def test_a_stored_turn_loads_the_session_once(tmp_path):
    convs = _convs(f"sqlite:///{tmp_path / 'k.db'}")
    transcript: list = []
    r = convs.start(transcript)
    for req in (dict(action="select_vehicle", action_value=MIRAI), dict(action="confirm_photo", action_value="yes")):
        r = convs.send(transcript, ChatRequest(session_id=r.session_id, **req), prompt=r.prompt)
    loads = []
    real_get = convs.sessions.get
    convs.sessions.get = lambda sid: loads.append(sid) or real_get(sid)
    r = convs.send(transcript, ChatRequest(session_id=r.session_id, message="エアコンの風が弱い"), prompt=r.prompt)
    assert loads == [r.session_id]  # was three: rewind points before, the turn, rewind points after
    assert transcript[-2]["turn"] == r.snapshot_turn == 1


def test_starting_over_is_a_new_conversation_and_the_finished_one_stays(tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    convs = _convs(url)
    transcript, sid = _to_booking(convs)
    prompt = convs.resume(sid).response.prompt
    done = convs.send(transcript, ChatRequest(session_id=sid, action="booking", action_value="confirm"), prompt=prompt)
    finished = Store(url).chat_entries(sid)
    again = convs.send(transcript, ChatRequest(session_id=sid, action="restart"), prompt=done.prompt)
    assert again.session_id != sid and again.current_step == "vehicle_id" and len(transcript) == 1
    store = Store(url)
    assert store.chat_entries(sid) == finished  # nothing superseded, nothing overwritten
    assert convs.sessions.get(sid).current_step.value == "done" and store.get_conversation(sid)["status"] == "done"
    [booking] = store.list_bookings()
    assert booking["conversation_id"] == sid  # 「問診の会話を開く」 opens the conversation that booked
    assert any("ブレーキペダルが床まで沈む" == e.get("text") for e in store.chat_entries(booking["conversation_id"]))
    convs.send(transcript, ChatRequest(session_id=again.session_id, action="select_vehicle", action_value=MIRAI),
               prompt=again.prompt)
    frames = load_frames(store)
    assert int(diagnosis_outcomes(frames)["conversations"].sum()) == 2  # 分析 counts both


def test_a_typed_restart_at_done_is_a_new_conversation_too(tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    convs = _convs(url)
    transcript, sid = _to_booking(convs)
    prompt = convs.resume(sid).response.prompt
    done = convs.send(transcript, ChatRequest(session_id=sid, action="booking", action_value="confirm"), prompt=prompt)
    again = convs.send(transcript, ChatRequest(session_id=sid, message="新しい問診を始めたい"), prompt=done.prompt)
    assert again.session_id != sid and again.current_step == "vehicle_id"
    assert convs.sessions.get(sid).current_step.value == "done"


@pytest.fixture(params=["sqlite", "postgresql"])
def any_url(request, tmp_path) -> str:
    """A fresh store on each engine (PostgreSQL: a scratch database in ``KAIWA_TEST_PG_URL``'s cluster)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'k.db'}"
    from core.store.db import create_scratch_database
    from tests.helpers.pg import shared_pg_url

    return create_scratch_database(shared_pg_url())


def _count_store_work(store):
    """Write transactions (the writer's ``begin``), reads of the conversation row and of its turns."""
    counted = {"writes": 0, "conversation_reads": 0, "turn_reads": 0}

    def begin(conn):
        if conn.get_execution_options().get("kaiwa_write"):
            counted["writes"] += 1

    def counting(name, key):
        real = getattr(store, name)

        def wrapper(*args, **kwargs):
            counted[key] += 1
            return real(*args, **kwargs)
        return wrapper

    event.listen(store.engine, "begin", begin)
    for name, key in (("get_conversation", "conversation_reads"), ("chat_entries", "turn_reads"),
                      ("entry_hashes", "turn_reads"), ("list_turns", "turn_reads")):
        setattr(store, name, counting(name, key))

    def stop():
        event.remove(store.engine, "begin", begin)
        for name in ("get_conversation", "chat_entries", "entry_hashes", "list_turns"):
            delattr(store, name)
    return counted, stop


def test_an_api_turn_takes_two_write_transactions_and_reads_the_conversation_once(any_url):
    """Issue #25: the lease, then the session, the transcript, the last response and the release in one
    transaction (the session's own write was a third); the conversation's row comes back from the statement
    that takes the lease (no read of its own since) and serves the service's load too, and the turns read to
    refresh the transcript serve the write's diff (they were read twice). Both engines; counted, never timed."""
    convs = _convs(any_url)
    sid = convs.handle(ChatRequest()).session_id
    for req in (dict(action="select_vehicle", action_value=MIRAI), dict(action="confirm_photo", action_value="yes")):
        convs.handle(ChatRequest(session_id=sid, **req))
    counted, stop = _count_store_work(convs.store)
    try:
        r = convs.handle(ChatRequest(session_id=sid, message="エアコンの風が弱い気がする"))
    finally:
        stop()
    assert counted == {"writes": 2, "conversation_reads": 0, "turn_reads": 1}
    stored = Store(any_url).get_conversation(sid)
    session = stored["state"]["session"]
    assert session["current_step"] == r.current_step and session["symptom_text"] == "エアコンの風が弱い気がする"
    assert stored["state"]["last_response"] == r.model_dump(mode="json")
    assert "エアコンの風が弱い" in stored["title"] and stored["turn_token"] is None
    assert convs.sessions.pending == {} and convs.sessions.held == set() and convs.sessions.loaded == {}
    again = _convs(any_url).resume(sid)  # another process sees exactly this turn
    assert again.response == r and [e["role"] for e in again.transcript][-2:] == ["user", "assistant"]


def test_an_api_turn_reads_its_turns_once_and_its_conversation_with_the_lease(any_url):
    """Issue #25: under the lease the turn reads its turns once (one read transaction); the conversation's
    row came back with the lease (it was a read of its own, and before that two transactions), and together
    they give what the reads gave. Both engines; counted."""
    convs = _convs(any_url)
    sid = convs.handle(ChatRequest()).session_id
    convs.handle(ChatRequest(session_id=sid, action="select_vehicle", action_value=MIRAI))
    reads: list[int] = []

    def begin(conn):
        if not conn.get_execution_options().get("kaiwa_write"):
            reads.append(1)

    counted, stop = _count_store_work(convs.store)
    event.listen(convs.store.engine, "begin", begin)
    try:
        r = convs.handle(ChatRequest(session_id=sid, action="confirm_photo", action_value="yes"))
    finally:
        event.remove(convs.store.engine, "begin", begin)
        stop()
    assert counted == {"writes": 2, "conversation_reads": 0, "turn_reads": 1} and len(reads) == 1
    assert r.current_step == "free_text"
    assert [e["role"] for e in convs.transcript] == [e["role"] for e in Store(any_url).chat_entries(sid)]
    assert len(convs.transcript) >= 5  # the earlier turns were read back, the new one added


def _in_transaction(dbapi_connection) -> bool:
    """Whether the driver's connection is inside a transaction it began (psycopg: its status; sqlite3)."""
    info = getattr(dbapi_connection, "info", None)
    if info is not None and hasattr(info, "transaction_status"):
        return info.transaction_status.name != "IDLE"
    return bool(dbapi_connection.in_transaction)


def test_on_postgresql_an_api_turns_reads_and_lease_send_no_begin_or_rollback(any_url):
    """Issue #25: on PostgreSQL the turn's lease (one ``UPDATE``, returning the conversation's row) and its
    read (its turns) run in autocommit, so only the chat write is a transaction (``BEGIN`` … ``COMMIT``): at
    READ COMMITTED each statement had its own snapshot inside a transaction too, and the read's ``BEGIN`` and
    ``ROLLBACK`` and the lease's ``BEGIN`` and ``COMMIT`` were four round trips of a turn's ≈ 13. SQLite
    keeps every statement in a transaction. Checked at the driver, after each statement."""
    convs = _convs(any_url)
    sid = convs.handle(ChatRequest()).session_id
    convs.handle(ChatRequest(session_id=sid, action="select_vehicle", action_value=MIRAI))
    seen: list[tuple[str, bool]] = []
    lease_sql: list[str] = []

    def after(conn, cursor, statement, parameters, context, executemany):
        seen.append((statement.split()[0].upper(), _in_transaction(conn.connection.dbapi_connection)))
        lease_sql.append(statement)

    event.listen(convs.store.engine, "after_cursor_execute", after)
    try:
        convs.handle(ChatRequest(session_id=sid, action="confirm_photo", action_value="yes"))
    finally:
        event.remove(convs.store.engine, "after_cursor_execute", after)
    first_insert = next(i for i, (verb, _) in enumerate(seen) if verb == "INSERT")
    reads = [inside for verb, inside in seen[:first_insert] if verb == "SELECT"]
    lease = seen[0]
    assert lease[0] == "UPDATE" and len(reads) == 1 and "RETURNING" in lease_sql[0].upper()
    chat_write = seen[first_insert - 1:]  # its fence check, the turn's rows, the conversation's update
    assert [verb for verb, _ in chat_write][:2] == ["UPDATE", "INSERT"] and all(inside for _, inside in chat_write)
    if convs.store.dialect == "postgresql":
        assert not lease[1] and not any(reads)
    else:
        assert lease[1] and all(reads)


def test_a_turn_that_fails_stores_neither_its_session_nor_its_transcript(tmp_path, monkeypatch):
    """The session's write waits for the transcript's: a turn whose transcript write fails leaves the stored
    conversation as it was (the next turn answers the same prompt again)."""
    url = f"sqlite:///{tmp_path / 'k.db'}"
    convs = _convs(url)
    sid = convs.handle(ChatRequest()).session_id
    convs.handle(ChatRequest(session_id=sid, action="select_vehicle", action_value=MIRAI))
    before = Store(url).get_conversation(sid)["state"]
    turns = len(Store(url).list_turns(sid))

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(convs.store, "write_chat", broken)
    with pytest.raises(RuntimeError):
        convs.handle(ChatRequest(session_id=sid, action="confirm_photo", action_value="yes"))
    monkeypatch.undo()
    assert Store(url).get_conversation(sid)["state"] == before and len(Store(url).list_turns(sid)) == turns
    r = convs.handle(ChatRequest(session_id=sid, action="confirm_photo", action_value="yes"))
    assert r.current_step == "free_text"



def _at_symptom(convs: DiagnosisConversations) -> str:
    sid = convs.handle(ChatRequest()).session_id
    for req in (dict(action="select_vehicle", action_value=MIRAI), dict(action="confirm_photo", action_value="yes")):
        convs.handle(ChatRequest(session_id=sid, **req))
    return sid


def _without_ids(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("id", "owner", "time", "session_id", "latency_ms")}


def test_an_api_turn_with_the_debug_log_on_stores_its_calls_in_its_chat_write(any_url):
    """Issue #25: a turn's model calls' debug records are written in the turn's one fenced chat transaction
    (there was one more transaction per call): still 2 write transactions, and the デバッグログ page and the
    review intake see the same records as a log written call by call. Both engines; counted."""
    convs = _convs(any_url)
    sid = _at_symptom(convs)
    log = StoredDebugLog(convs.store, "op")
    counted, stop = _count_store_work(convs.store)
    try:
        convs.handle(ChatRequest(session_id=sid, message="エアコンの風が弱い気がする"), log=log)
    finally:
        stop()
    stored = convs.store.list_debug_records(conversation_id=sid)
    assert len(stored) >= 2 and counted["writes"] == 2  # the lease, then the chat with every call's record
    assert [r["_store_id"] for r in log] == [r["id"] for r in stored] and {r["owner"] for r in stored} == {"op"}
    assert convs.store.get_debug_records(r["_store_id"] for r in log).keys() == {r["id"] for r in stored}
    plain: list = []  # the same turn of another conversation, its records kept in a plain list (never held)
    other = _at_symptom(convs)
    convs.handle(ChatRequest(session_id=other, message="エアコンの風が弱い気がする"), log=plain)
    assert [_without_ids(r) for r in stored] == [_without_ids(r) for r in plain]


def test_an_api_turn_builds_no_statement_of_its_lease_reads_and_chat_write(any_url, monkeypatch):
    """Issue #25: the turn's lease, its reads, its chat write and its debug records use statements built
    once (values bound), not built (and looked up in the compiled cache by their tree) on every call.
    Counted: the SQL constructors of those store modules are not called during a turn."""
    from core.store import conversations, debug_records

    convs = _convs(any_url)
    sid = _at_symptom(convs)
    built: list[str] = []
    for module in (conversations, debug_records):
        for name in ("select", "update", "insert", "delete"):
            real = getattr(module, name, None)
            if real is not None:
                monkeypatch.setattr(module, name, lambda *a, _real=real, _name=name, **k: built.append(_name)
                                    or _real(*a, **k))
    log = StoredDebugLog(convs.store, "op")
    r = convs.handle(ChatRequest(session_id=sid, message="エアコンの風が弱い気がする"), log=log)
    assert built == [] and len(log) >= 2 and r.current_step in ("spec_check", "diagnosing", "urgency_check")

def test_a_failed_turns_calls_are_kept_in_one_transaction_of_their_own(any_url, monkeypatch):
    """A turn whose chat write fails stores neither its session nor its transcript, but its model calls'
    records are kept (written together when the turn ends), as when each was written on its own."""
    convs = _convs(any_url)
    sid = _at_symptom(convs)
    log = StoredDebugLog(convs.store, "op")

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(convs.store, "write_chat", broken)
    counted, stop = _count_store_work(convs.store)
    try:
        with pytest.raises(RuntimeError):
            convs.handle(ChatRequest(session_id=sid, message="エアコンの風が弱い気がする"), log=log)
    finally:
        stop()
    monkeypatch.undo()
    assert counted["writes"] == 3  # the lease, its release, the records
    stored = convs.store.list_debug_records(conversation_id=sid)
    assert stored and [r["_store_id"] for r in log] == [r["id"] for r in stored]
    assert not any(e.get("text") == "エアコンの風が弱い気がする" for e in convs.store.chat_entries(sid))

def test_a_start_is_two_write_transactions_and_reads_no_turns(any_url):
    """The new conversation, then its session, welcome message and last response in one transaction (there
    were four: the create, the session's update, the read of its turns, the chat). Both engines."""
    convs = _convs(any_url)
    counted, stop = _count_store_work(convs.store)
    try:
        r = convs.handle(ChatRequest())
    finally:
        stop()
    assert counted["writes"] == 2 and counted["turn_reads"] == 0
    stored = Store(any_url).get_conversation(r.session_id)
    assert stored["state"]["session"]["current_step"] == "vehicle_id" and stored["state"]["last_response"] == r.model_dump(mode="json")
    assert convs.sessions.held == set() and convs.sessions.pending == {}
    unknown = convs.handle(ChatRequest(session_id="no-such-session", message="こんにちは"))  # a new one, held too
    assert unknown.session_id != "no-such-session" and convs.sessions.held == set()
    assert Store(any_url).get_conversation(unknown.session_id)["state"]["last_response"]["notice"]
