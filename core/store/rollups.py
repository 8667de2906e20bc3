"""分析's rollups (issue #25): what the figures need, counted once and kept current, so the first visitor
after a write pays for what that write touched, not for the whole period again.

* ``rollup_conversations`` — one row per conversation: whether someone spoke, its provider, furthest
  phase, final step, urgency, booking, answers and citations, its knowledge entries by status;
  ``rollup_faq`` — an FAQ conversation's exchanges per outcome (and not-found question).
* ``rollup_tasks`` / ``rollup_methods`` / ``rollup_errors`` / ``rollup_latency`` — the model calls of one
  Japan day grouped into tasks (a first call and its retries and repairs) per task, provider and prompt
  version, and for today per UTC hour too (``hour``: a task's the hour it started, a call's its own; a day
  before today is one hour ``""``, folded by the first refresh of the next day: :meth:`RollupsStore._fold_hours`);
  latencies as a histogram of ≈2 % wide buckets (:func:`latency_bucket`), so p50 / p95 come out within 1 % of
  the exact value.

**Kept current by the write path.** Triggers on ``conversations`` (insert, state), ``turns``, ``bookings``,
``knowledge_entries`` (insert, status) and ``debug_records`` append what a write touched (a conversation
id, a record's Japan day) to ``rollup_dirty``, in the writing transaction. The log has no unique key, so
writers never wait on each other for it (PostgreSQL: no row lock; SQLite serialises writers anyway).
:meth:`RollupsStore.refresh_rollups` (run by 分析 before it reads) recomputes exactly those conversations
and days, each batch in its own short transaction that first deletes the marks it handles and then
reads: a write that commits later leaves its mark for the next refresh, so nothing is lost between two
processes (READ COMMITTED on PostgreSQL: a mark the delete saw was committed, so the reads after it see its
data). ``rollup_versions`` is bumped when a refresh changed something: 分析's caches are keyed by it.

An inserted debug record's day mark names the record (``record_id``, 0010): a day whose marks are all such
inserts is not recounted; the records' conversations' calls of that day are counted without and with them and
the difference is added (:meth:`RollupsStore._add_records`), so a chat turn's refresh costs its conversation's
calls, not its day's. A day's rows are written as a difference (rows whose counts did not move are left).

A conversation's rows are computed by the same SQL 分析 ran over the period before (now per conversation);
a day's model calls by the same window functions, over that day only. Differences from reading the period
whole: a conversation whose turns name no provider takes it from its first debug record (of any day), and a
task is one provider's calls within one Japan day.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from datetime import date, datetime, time, timedelta, timezone
from functools import lru_cache
from itertools import zip_longest
from typing import Any, Iterable, Iterator

from sqlalchemy import bindparam, delete, func, insert, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from core.store import tables as t
from core.store.stamps import count_triggers

UNKNOWN = "—"  # a provider or prompt version that was not recorded
PHASES = ("collect_case", "organize_risks", "draft_knowledge", "review_knowledge")  # seed 003 §3.2.2, in order
# Diagnosis steps whose assistant turn is the model's answer (the intake, booking and done steps are fixed texts).
ANSWER_STEPS = ("spec_check", "diagnosing", "urgency_check", "reservation")
DAY_TZ = timezone(timedelta(hours=9))  # the days rollups count by: Japan days (no daylight saving)
BUCKETS_PER_E = 50  # latency buckets: e**(1/50) ≈ 2 % wide
BATCH = 400  # conversations recomputed per transaction
DAYS_PER_BATCH = 7
# The rollups of the settled days change rarely: the model calls of the days before today (Japan time; a
# record written now marks today), the conversations created before yesterday (yesterday's are still being
# talked in). A refresh that recounts an older day, or such a conversation, bumps these versions too, and 分析
# keeps the settled days' sums until they move.
SETTLED = {"conversations": "conversations_settled", "calls": "calls_settled"}
SETTLED_DAYS = {"conversations": 1, "calls": 0}  # the days back from today still being written
# Yesterday's conversations (still talked in, but far less than today's) have their own version too: a turn
# in a conversation created yesterday moves it, so a chat turn today makes 分析 read today's conversations only.
RECENT = {"conversations": "conversations_recent"}
# Today's conversations created before the last whole slot of today (``TODAY_SLOT``, Japan time), and today's
# model calls before the last whole hour, have their own versions as well: a chat turn in a conversation begun in
# the last minutes makes 分析 read only the conversations created since that cut and the calls of the last hour or
# two, not a busy day's thousands again (:func:`earlier_before`; the call rollups count per hour, 0013).
EARLIER = {"conversations": "conversations_earlier", "calls": "calls_earlier"}
TODAY_SLOT = {"conversations": timedelta(minutes=10), "calls": timedelta(hours=1)}
ROLLUP_TABLES = ("rollup_conversations", "rollup_faq", "rollup_tasks", "rollup_methods", "rollup_errors",
                 "rollup_latency")


# ---- days and buckets ------------------------------------------------------------------------------------
def day_of(iso: str) -> str:
    """The Japan day (``YYYY-MM-DD``) of a stored UTC timestamp."""
    return datetime.fromisoformat(iso).astimezone(DAY_TZ).date().isoformat()


def as_stored(at: datetime) -> str:
    """``at`` as stored-timestamp text (UTC ISO, milliseconds)."""
    return at.astimezone(timezone.utc).isoformat(timespec="milliseconds")


def day_bounds(day: str | date) -> tuple[str, str]:
    """``[start, end)`` of a Japan day as stored-timestamp text (UTC ISO, milliseconds)."""
    start = datetime.combine(date.fromisoformat(str(day)), time(), DAY_TZ)
    return as_stored(start), as_stored(start + timedelta(days=1))


def japan_days(marks: Iterable[str]) -> list[str]:
    """The Japan days of debug records' day marks: a Japan day (``YYYYMMDDa``: that date, ``YYYYMMDDb``: the
    next) is itself; a UTC date (``YYYY-MM-DD``) overlaps two, that date and the next; an unreadable mark (a
    record that named an odd time) is skipped."""
    days: set[str] = set()
    for value in marks:
        value = str(value)
        if len(value) == 9 and value[8] in "ab" and value[:8].isdigit():
            try:
                day = date(int(value[:4]), int(value[4:6]), int(value[6:8]))
            except ValueError:
                continue
            days.add((day + timedelta(days=1 if value[8] == "b" else 0)).isoformat())
            continue
        try:
            utc = date.fromisoformat(str(value)[:10])
        except ValueError:
            continue
        days.update((utc.isoformat(), (utc + timedelta(days=1)).isoformat()))
    return sorted(days)


def settled_before(part: str, today: date | None = None) -> str:
    """The first Japan day of ``part`` still being written (``SETTLED_DAYS``: yesterday for conversations,
    today for model calls): the days before it are settled (``SETTLED``)."""
    return ((today or datetime.now(DAY_TZ).date()) - timedelta(days=SETTLED_DAYS[part])).isoformat()


def slot_start(now: datetime | None = None, part: str = "conversations") -> datetime:
    """The start of ``part``'s ``TODAY_SLOT`` of the Japan day that ``now`` falls in (a model calls' slot, an
    hour, is a UTC hour: Japan is nine whole hours ahead)."""
    now = (now or datetime.now(DAY_TZ)).astimezone(DAY_TZ)
    midnight = datetime.combine(now.date(), time(), DAY_TZ)
    return midnight + TODAY_SLOT[part] * ((now - midnight) // TODAY_SLOT[part])


def earlier_before(now: datetime | None = None, part: str = "conversations") -> datetime:
    """Where 分析 cuts today's ``part`` (``EARLIER``): one slot before the start of ``now``'s. A refresh moves
    ``EARLIER`` when it recounts a conversation created today before the start of *its* slot (or a model
    call's hour of today before its hour), so a piece cut here is kept only while nothing in it changed,
    whoever refreshes, as long as the two processes' clocks differ by less than a slot. Before today's
    midnight (the first slot of a day): no cut."""
    return slot_start(now, part) - TODAY_SLOT[part]


def japan_now() -> datetime:
    """The present, Japan time (what a refresh counts "today" by)."""
    return datetime.now(DAY_TZ)


def hour_of(at: datetime) -> str:
    """The call rollups' ``hour`` of a time: its UTC hour as stored-timestamp text (``YYYY-MM-DDTHH``)."""
    return as_stored(at)[:13]


def latency_bucket(ms: float) -> int:
    return round(math.log(max(float(ms), 1.0)) * BUCKETS_PER_E)


def bucket_value(bucket: int) -> float:
    """The latency (ms) a bucket stands for (its centre, within 1 % of every latency in it)."""
    return math.exp(bucket / BUCKETS_PER_E)


# ---- the SQL of the figures (per conversation; per day of model calls) -------------------------------------
def urgency_sql(dialect: str) -> str:
    """A diagnosis conversation's ``session.urgency_level`` from its state, read by the database."""
    if dialect == "sqlite":
        return ("CASE WHEN c.flow = 'diagnosis' AND json_valid(c.state) = 1 "
                "THEN json_extract(c.state, '$.session.urgency_level') END")
    if dialect == "postgresql":
        return "CASE WHEN c.flow = 'diagnosis' THEN CAST(c.state AS json) #>> '{session,urgency_level}' END"
    return "NULL"


def cohort_sql(dialect: str, where: str, records: str = "1 = 1") -> str:
    """``cohort``: the conversations ``where`` selects (alias ``c``) with whether someone spoke and their
    provider (the first one their turns name, else their debug records ``records`` selects, alias ``d``)."""
    return f"""
WITH cohort AS (
  SELECT c.id, c.flow, c.created_at, {urgency_sql(dialect)} AS state_urgency,
    CASE WHEN EXISTS (SELECT 1 FROM turns t WHERE t.conversation_id = c.id AND t.role IN ('user', 'exchange'))
         THEN 1 ELSE 0 END AS started,
    COALESCE(
      (SELECT t.provider FROM turns t WHERE t.conversation_id = c.id AND t.role <> 'user'
         AND t.provider IS NOT NULL AND t.provider <> '' ORDER BY t.seq LIMIT 1),
      (SELECT d.provider FROM debug_records d WHERE d.conversation_id = c.id AND {records}
         AND d.provider IS NOT NULL AND d.provider <> '' ORDER BY d.id LIMIT 1),
      :unknown) AS provider
  FROM conversations c WHERE {where}
)"""


_RANK = ("CASE t.step WHEN 'collect_case' THEN 0 WHEN 'organize_risks' THEN 1 WHEN 'draft_knowledge' THEN 2 "
         "WHEN 'review_knowledge' THEN 3 END")
_ANSWER = "t.role = 'assistant' AND t.ok"
_ANSWER_STEPS = ", ".join(f"'{s}'" for s in ANSWER_STEPS)

CONVERSATIONS_CTES = f"""
, knowledge AS (
  SELECT t.conversation_id AS id,
    MAX(CASE WHEN {_ANSWER} THEN {_RANK} END) AS max_rank,
    MAX(CASE WHEN {_ANSWER} AND t.step IS NOT NULL THEN t.seq END) AS last_phase_seq,
    MAX(CASE WHEN {_ANSWER} AND t.mode = 'finalize' THEN 1 ELSE 0 END) AS finalized,
    MIN(CASE WHEN {_ANSWER} AND t.step IN ('draft_knowledge', 'review_knowledge') THEN t.seq END) AS draft_seq,
    MIN(CASE WHEN {_ANSWER} AND t.mode = 'finalize' THEN t.seq END) AS finalize_seq
  FROM turns t JOIN cohort c ON c.id = t.conversation_id
  WHERE c.flow = 'knowledge' AND c.started = 1 AND NOT t.superseded GROUP BY t.conversation_id
), diagnosis AS (
  SELECT t.conversation_id AS id,
    MAX(CASE WHEN t.role = 'assistant' AND t.step IS NOT NULL THEN t.seq END) AS final_seq,
    SUM(CASE WHEN t.role = 'assistant' AND t.step IN ({_ANSWER_STEPS}) THEN 1 ELSE 0 END) AS answers,
    SUM(CASE WHEN t.role = 'assistant' AND t.step IN ({_ANSWER_STEPS}) THEN COALESCE(t.citations, 0) ELSE 0 END)
      AS cited,
    SUM(CASE WHEN t.role = 'assistant' AND t.step IN ({_ANSWER_STEPS}) AND COALESCE(t.citations, 0) > 0
        THEN 1 ELSE 0 END) AS citing
  FROM turns t JOIN cohort c ON c.id = t.conversation_id
  WHERE c.flow = 'diagnosis' AND c.started = 1 AND NOT t.superseded GROUP BY t.conversation_id
), entries AS (
  SELECT e.conversation_id AS id, COUNT(*) AS entries,
    SUM(CASE WHEN e.status = 'draft' THEN 1 ELSE 0 END) AS entries_draft,
    SUM(CASE WHEN e.status = 'confirmed' THEN 1 ELSE 0 END) AS entries_confirmed,
    SUM(CASE WHEN e.status = 'archived' THEN 1 ELSE 0 END) AS entries_archived,
    SUM(CASE WHEN EXISTS (SELECT 1 FROM entry_history h WHERE h.entry_id = e.id AND h.action = 'confirm')
        THEN 1 ELSE 0 END) AS entries_ever
  FROM knowledge_entries e JOIN cohort c ON c.id = e.conversation_id
  WHERE e.conversation_id IN (SELECT id FROM cohort)  -- read by its index: SQLite would scan every entry
  GROUP BY e.conversation_id
)"""
CONVERSATIONS_SELECT = """
SELECT c.id, c.flow, c.created_at, c.started, c.provider,
  k.max_rank,
  (SELECT t.step FROM turns t WHERE t.conversation_id = c.id AND t.seq = k.last_phase_seq) AS last_phase,
  k.finalized,
  CASE WHEN c.flow = 'knowledge' AND COALESCE(x.entries_ever, 0) > 0 THEN 1 ELSE 0 END AS confirmed,
  CASE WHEN k.draft_seq IS NOT NULL THEN (SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id
     AND t.role = 'user' AND NOT t.superseded AND t.seq < k.draft_seq) END AS to_draft,
  CASE WHEN k.finalize_seq IS NOT NULL THEN (SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id
     AND t.role = 'user' AND NOT t.superseded AND t.seq < k.finalize_seq) END AS to_finalize,
  (SELECT t.step FROM turns t WHERE t.conversation_id = c.id AND t.seq = d.final_seq) AS final_step,
  COALESCE(c.state_urgency, (SELECT b.urgency FROM bookings b WHERE b.conversation_id = c.id AND b.urgency IS NOT NULL
     ORDER BY b.id DESC LIMIT 1)) AS urgency,
  CASE WHEN c.flow = 'diagnosis' AND EXISTS (SELECT 1 FROM bookings b WHERE b.conversation_id = c.id) THEN 1 ELSE 0 END
    AS booked,
  d.answers, d.cited, d.citing,
  COALESCE(x.entries, 0) AS entries, COALESCE(x.entries_draft, 0) AS entries_draft,
  COALESCE(x.entries_confirmed, 0) AS entries_confirmed, COALESCE(x.entries_archived, 0) AS entries_archived,
  COALESCE(x.entries_ever, 0) AS entries_ever
FROM cohort c LEFT JOIN knowledge k ON k.id = c.id LEFT JOIN diagnosis d ON d.id = c.id LEFT JOIN entries x ON x.id = c.id
ORDER BY c.created_at, c.id"""
CONVERSATIONS_SQL = CONVERSATIONS_CTES + CONVERSATIONS_SELECT  # after cohort_sql: a conversation's rollup row

CONVERSATION_ROW = ("id", "flow", "created_at", "started", "provider", "max_rank", "last_phase", "finalized",
                    "confirmed", "to_draft", "to_finalize", "final_step", "urgency", "booked", "answers", "cited",
                    "citing", "entries", "entries_draft", "entries_confirmed", "entries_archived", "entries_ever")
FAQ_ROW = ("conversation_id", "outcome", "question", "exchanges", "last_asked", "created_at",
           "provider")  # the columns FAQ_SQL selects

# the conversation's creation time and provider ride along (its rollup row's: both are recounted together),
# so 分析 reads a range's FAQ rows by their own index, without a lookup per conversation (0011)
FAQ_SQL = """
SELECT t.conversation_id, COALESCE(t.step, :unknown) AS outcome,
  CASE WHEN t.step = 'not_found' THEN t.user_input END AS question, COUNT(*) AS exchanges,
  MAX(t.created_at) AS last_asked, c.created_at, c.provider
FROM turns t JOIN cohort c ON c.id = t.conversation_id
WHERE c.flow = 'faq' AND c.started = 1 AND NOT t.superseded AND t.role = 'exchange'
GROUP BY t.conversation_id, COALESCE(t.step, :unknown), CASE WHEN t.step = 'not_found' THEN t.user_input END,
  c.created_at, c.provider"""


def calls_sql(where: str, providers: bool = False) -> str:
    """``calls`` (the model calls ``where`` selects, provider-filtered with ``:providers``) and ``tasks``
    (one row per model task: its first call, then its retries and repairs; a new task starts at
    ``attempt`` 1 within a conversation's flow/step and provider, in id order)."""
    provider_filter = " AND COALESCE(NULLIF(provider, ''), :unknown) IN :providers" if providers else ""
    return f"""
WITH calls AS (
  SELECT id, COALESCE(conversation_id, '') AS conv, COALESCE(flow, '') || '/' || COALESCE(step, '') AS task,
    COALESCE(NULLIF(provider, ''), :unknown) AS provider,
    COALESCE(NULLIF(prompt_version, ''), :unknown) AS prompt_version,
    outcome, strategy, kind, COALESCE(attempt, 1) AS attempt, latency_ms, created_at
  FROM debug_records WHERE {where}{provider_filter}
), numbered AS (
  SELECT calls.*, SUM(CASE WHEN attempt <= 1 THEN 1 ELSE 0 END)
    OVER (PARTITION BY conv, task, provider ORDER BY id ROWS UNBOUNDED PRECEDING) AS task_no
  FROM calls
), ranked AS (
  SELECT numbered.*,
    ROW_NUMBER() OVER (PARTITION BY conv, task, provider, task_no ORDER BY id) AS first_rank,
    ROW_NUMBER() OVER (PARTITION BY conv, task, provider, task_no ORDER BY id DESC) AS last_rank,
    ROW_NUMBER() OVER (PARTITION BY conv, task, provider, task_no
                       ORDER BY CASE WHEN strategy IS NULL THEN 1 ELSE 0 END, id DESC) AS strategy_rank
  FROM numbered
), tasks AS (
  SELECT conv, task, provider, task_no,
    MAX(CASE WHEN first_rank = 1 THEN prompt_version END) AS prompt_version,
    MAX(CASE WHEN first_rank = 1 AND outcome = 'ok' THEN 1 ELSE 0 END) AS first_try_valid,
    MAX(CASE WHEN last_rank = 1 AND outcome = 'ok' THEN 1 ELSE 0 END) AS valid,
    MAX(CASE WHEN strategy_rank = 1 THEN strategy END) AS method,
    COUNT(*) AS calls,
    SUM(CASE WHEN kind = 'repair' THEN 1 ELSE 0 END) AS repairs,
    MAX(CASE WHEN first_rank = 1 THEN created_at END) AS started_at
  FROM ranked GROUP BY conv, task, provider, task_no
)"""


def aggregates_sql(by_hour: bool, every_hour: bool = False) -> str:
    """After :func:`calls_sql`: every aggregate of the calls in one statement (``calls`` and ``tasks`` are
    evaluated once), told apart by ``kind``: ``task`` (per task, provider, prompt version, and with
    ``by_hour`` the UTC hour the task started), ``series_errors`` (failed calls per the same series),
    ``method`` (tasks per task, provider and last strategy), ``error`` (failed calls per provider and
    outcome), ``latency`` (one row per call with a latency). ``every_hour`` (the day rollups): every kind per
    UTC hour, a task's and its method's the hour it started, a call's its own."""
    task_hour = "SUBSTR(started_at, 1, 13)" if by_hour or every_hour else "NULL"
    group = "SUBSTR(started_at, 1, 13), " if by_hour or every_hour else ""
    call_hour, call_group = ("SUBSTR(created_at, 1, 13)", "SUBSTR(created_at, 1, 13), ") if every_hour else ("NULL", "")
    method_hour = task_hour if every_hour else "NULL"
    method_group = group if every_hour else ""
    return f"""
SELECT 'task' AS kind, {task_hour} AS hour, task, provider, prompt_version, CAST(NULL AS TEXT) AS method,
  COUNT(*) AS tasks, SUM(calls) AS calls, SUM(first_try_valid) AS first_try_valid, SUM(valid) AS valid,
  SUM(repairs) AS repairs, CAST(NULL AS FLOAT) AS latency_ms
FROM tasks GROUP BY {group}task, provider, prompt_version
UNION ALL
SELECT 'series_errors', {call_hour}, task, provider, prompt_version, NULL, NULL, COUNT(*), NULL, NULL, NULL, NULL
FROM calls WHERE COALESCE(outcome, '') <> 'ok' GROUP BY {call_group}task, provider, prompt_version
UNION ALL
SELECT 'method', {method_hour}, task, provider, NULL, method, COUNT(*), NULL, NULL, NULL, NULL, NULL
FROM tasks WHERE method IS NOT NULL GROUP BY {method_group}task, provider, method
UNION ALL
SELECT 'error', {call_hour}, NULL, provider, NULL, outcome, NULL, COUNT(*), NULL, NULL, NULL, NULL
FROM calls WHERE COALESCE(outcome, '') <> 'ok' GROUP BY {call_group}provider, outcome
UNION ALL
SELECT 'latency', {call_hour}, task, provider, prompt_version, NULL, NULL, NULL, NULL, NULL, NULL, latency_ms
FROM calls WHERE latency_ms IS NOT NULL"""


# ---- the triggers that keep the log ----------------------------------------------------------------------
# A debug record's mark is its Japan day when its ``created_at`` is a stored timestamp as the store writes
# them (``YYYY-MM-DDTHH:MM:SS.mmm+00:00``): ``YYYYMMDD`` and ``a`` (before 15:00 UTC: that date) or ``b``
# (from 15:00 UTC: the next day), string operations only, which cannot fail inside a writer's transaction;
# anything else is marked by its UTC date (the first ten characters), whose two Japan days the refresh
# recounts (as every mark did before 0009). A record also marks its conversation (whose provider it may name).
_SQLITE_TRIGGERS = (  # (name, table, event, conversation id, row whose date is marked)
    ("rollup_conversations_insert", "conversations", "INSERT", "NEW.id", None),
    ("rollup_conversations_state", "conversations", "UPDATE OF state", "NEW.id", None),
    ("rollup_turns_insert", "turns", "INSERT", "NEW.conversation_id", None),
    ("rollup_turns_update", "turns", "UPDATE", "NEW.conversation_id", None),
    ("rollup_bookings_insert", "bookings", "INSERT", "NEW.conversation_id", None),
    ("rollup_bookings_update", "bookings", "UPDATE OF urgency, conversation_id", "NEW.conversation_id", None),
    ("rollup_entries_insert", "knowledge_entries", "INSERT", "NEW.conversation_id", None),
    ("rollup_entries_update", "knowledge_entries", "UPDATE OF status, conversation_id", "NEW.conversation_id", None),
    ("rollup_debug_insert", "debug_records", "INSERT", "NEW.conversation_id", "NEW"),
    ("rollup_debug_update", "debug_records", "UPDATE", "NEW.conversation_id", "NEW"),
    ("rollup_debug_delete", "debug_records", "DELETE", "OLD.conversation_id", "OLD"),
)
_PG_EVENTS = {"conversations": "INSERT OR UPDATE OF state", "turns": "INSERT OR UPDATE",
              "bookings": "INSERT OR UPDATE OF urgency, conversation_id",
              "knowledge_entries": "INSERT OR UPDATE OF status, conversation_id",
              "debug_records": "INSERT OR UPDATE OR DELETE"}
_SQLITE_STORED = ("'[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]"
                  "+00:00'")  # GLOB: the whole value


def _stored(row: str, dialect: str) -> str:
    """Whether ``row``'s ``created_at`` is a stored timestamp (SQL)."""
    at = f"{row}.created_at"
    return (f"{at} GLOB {_SQLITE_STORED}" if dialect == "sqlite" else
            f"{at} ~ '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}T[0-9]{{2}}:[0-9]{{2}}:[0-9]{{2}}[.][0-9]{{3}}[+]00:00$'")


def record_mark(dialect: str) -> str:
    """The SQL of an inserted debug record's ``record_id`` mark (0010): its id when its day mark is a Japan
    day (the refresh then adds what the record changed to that day), else NULL (the day is recounted)."""
    return f"CASE WHEN {_stored('NEW', dialect)} THEN NEW.id END"


def day_mark(row: str, dialect: str, exact: bool = True) -> str:
    """The SQL of a debug record's day mark (``row``: ``NEW`` / ``OLD``): its Japan day (``YYYYMMDDa`` /
    ``YYYYMMDDb``) when ``created_at`` is a stored timestamp, else its UTC date (``exact=False``: always)."""
    at = f"{row}.created_at"
    utc_date = f"substr({at}, 1, 10)"
    if not exact:
        return utc_date
    stored = _stored(row, dialect)
    japan = (f"substr({at}, 1, 4) || substr({at}, 6, 2) || substr({at}, 9, 2) || "
             f"CASE WHEN substr({at}, 12, 2) >= '15' THEN 'b' ELSE 'a' END")
    return f"CASE WHEN {stored} THEN {japan} ELSE {utc_date} END"


def _pg_function(exact: bool = True, record_ids: bool = True) -> str:
    body = _PG_FUNCTION
    if record_ids:
        body = body.replace(
            "INSERT INTO rollup_dirty(conversation_id, day) VALUES (NEW.conversation_id, NULL), (NULL, {NEW});",
            "INSERT INTO rollup_dirty(conversation_id, day, record_id) VALUES (NEW.conversation_id, NULL, NULL), "
            "(NULL, {NEW}, CASE WHEN TG_OP = 'INSERT' THEN {NEWID} END);")
    return body.replace("{OLD}", day_mark("OLD", "postgresql", exact)).replace(
        "{NEW}", day_mark("NEW", "postgresql", exact)).replace("{NEWID}", record_mark("postgresql"))


_PG_FUNCTION = """
CREATE OR REPLACE FUNCTION kaiwa_rollup_mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'debug_records' THEN
    IF TG_OP <> 'INSERT' THEN
      INSERT INTO rollup_dirty(conversation_id, day) VALUES (OLD.conversation_id, NULL), (NULL, {OLD});
    END IF;
    IF TG_OP <> 'DELETE' THEN
      INSERT INTO rollup_dirty(conversation_id, day) VALUES (NEW.conversation_id, NULL), (NULL, {NEW});
    END IF;
  ELSIF TG_TABLE_NAME = 'conversations' THEN
    INSERT INTO rollup_dirty(conversation_id) VALUES (NEW.id);
  ELSIF NEW.conversation_id IS NOT NULL THEN
    INSERT INTO rollup_dirty(conversation_id) VALUES (NEW.conversation_id);
  END IF;
  RETURN NULL;
END $$"""


def create(conn: Any, exact_days: bool = True, record_ids: bool = True) -> None:
    """The log's triggers for this connection's engine (the migration; :func:`ensure` after one that copies
    a table) and the version rows. ``exact_days=False``: a debug record marks its UTC date (before 0009);
    ``record_ids=False``: an inserted record's day mark does not name the record (before 0010)."""
    dialect = conn.dialect.name
    for name in ("conversations", "calls"):
        if conn.execute(select(t.rollup_versions.c.name).where(t.rollup_versions.c.name == name)).first() is None:
            conn.execute(insert(t.rollup_versions).values(name=name, value=0))
    if dialect == "sqlite":
        for name, table, event, conversation, row in _SQLITE_TRIGGERS:
            if row and record_ids:
                record = record_mark(dialect) if event == "INSERT" else "NULL"
                body = (f"INSERT INTO rollup_dirty(conversation_id, day, record_id) VALUES ({conversation}, NULL, "
                        f"NULL), (NULL, {day_mark(row, dialect, exact_days)}, {record});")
                guard = ""
            elif row:
                body = (f"INSERT INTO rollup_dirty(conversation_id, day) VALUES ({conversation}, NULL), "
                        f"(NULL, {day_mark(row, dialect, exact_days)});")
                guard = ""
            else:
                body = f"INSERT INTO rollup_dirty(conversation_id) VALUES ({conversation});"
                guard = f" WHEN {conversation} IS NOT NULL"
            conn.exec_driver_sql(f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} ON {table}{guard} "
                                 f"BEGIN {body} END")
    elif dialect == "postgresql":
        conn.exec_driver_sql(_pg_function(exact_days, record_ids))
        for table, events in _PG_EVENTS.items():
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS rollup_{table} ON {table}")
            conn.exec_driver_sql(f"CREATE TRIGGER rollup_{table} AFTER {events} ON {table} "
                                 "FOR EACH ROW EXECUTE FUNCTION kaiwa_rollup_mark()")


def ensure(conn: Any) -> None:
    """Create whatever trigger is missing (cheap when none is): SQLite drops a table's triggers when a
    migration copies the table to change it."""
    found = count_triggers(conn, "rollup")
    wanted = len(_SQLITE_TRIGGERS) if conn.dialect.name == "sqlite" else len(_PG_EVENTS)
    if found is not None and found != wanted:
        create(conn)


def drop(conn: Any) -> None:
    dialect = conn.dialect.name
    if dialect == "sqlite":
        for name, *_ in _SQLITE_TRIGGERS:
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
    elif dialect == "postgresql":
        for table in _PG_EVENTS:
            conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS rollup_{table} ON {table}")
        conn.exec_driver_sql("DROP FUNCTION IF EXISTS kaiwa_rollup_mark()")


def mark_everything(conn: Any) -> None:
    """Every conversation and every day with model calls to be (re)counted: the migration's backfill."""
    conn.execute(text("INSERT INTO rollup_dirty(conversation_id) SELECT id FROM conversations"))
    conn.execute(text("INSERT INTO rollup_dirty(day) SELECT DISTINCT substr(created_at, 1, 10) FROM debug_records"))


# ---- statements built once (the refresh runs after every write: building and parsing them was most of its
# Python time, issue #25) ------------------------------------------------------------------------------------
@lru_cache(maxsize=256)
def statement(sql: str, *expanding: str) -> Any:
    """``text(sql)`` built once per SQL (its bind parameters parsed once); ``expanding``: the parameters that
    take a list (``IN :name``)."""
    clause = text(sql)
    return clause.bindparams(*(bindparam(name, expanding=True) for name in expanding)) if expanding else clause


@lru_cache(maxsize=64)  # a fixed set of (name, table) pairs: about 20
def _core(name: str, table: str | None = None) -> Any:
    """The refresh's Core statements, built once (parameters bound by name at execution)."""
    ids = bindparam("ids", expanding=True)
    dirty, versions = t.rollup_dirty, t.rollup_versions
    if name == "versions":
        return select(versions)
    if name == "marks":
        return select(dirty.c.conversation_id, dirty.c.day).distinct()
    if name == "take_conversations":
        return delete(dirty).where(dirty.c.conversation_id.in_(ids))
    if name == "take_days":
        return (delete(dirty).where(dirty.c.day.in_(ids))
                .returning(dirty.c.day, dirty.c.record_id, _record_conversation()))
    if name == "take_both":
        return (delete(dirty).where(or_(dirty.c.conversation_id.in_(ids),
                                        dirty.c.day.in_(bindparam("days", expanding=True))))
                .returning(dirty.c.day, dirty.c.record_id, _record_conversation()))
    if name == "bump":
        return update(versions).where(versions.c.name.in_(ids)).values(value=versions.c.value + 1)
    if name == "version_names":
        return select(versions.c.name).where(versions.c.name.in_(ids))
    if name == "delete_conversations":
        return (delete(t.rollup_conversations).where(t.rollup_conversations.c.id.in_(ids))
                .returning(t.rollup_conversations.c.created_at))
    if name == "delete_faq":
        return delete(t.rollup_faq).where(t.rollup_faq.c.conversation_id.in_(ids))
    if name == "insert":
        return insert(getattr(t, table))
    if name == "delete_ids":
        rollup = getattr(t, table)
        return delete(rollup).where(rollup.c.id.in_(ids))
    if name == "update_counts":  # a call rollup row's counts, by its id
        rollup = _TABLES[table]
        return (update(rollup).where(rollup.c.id == bindparam("row_id"))
                .values({c: bindparam(c) for c in _COUNTED[table]}))
    raise KeyError(name)


def _versions(conn: Any) -> dict[str, int]:
    """Every rollup version as ``conn`` sees it."""
    return {name: int(value) for name, value in conn.execute(_core("versions"))}


def _record_conversation() -> Any:
    """A taken mark's inserted record's conversation (``""``: none; NULL: no such record, deleted since)."""
    records = t.debug_records
    return (select(func.coalesce(records.c.conversation_id, "")).where(records.c.id == t.rollup_dirty.c.record_id)
            .scalar_subquery())


# ---- the refresh -----------------------------------------------------------------------------------------
def _chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


class RollupsStore:
    """The rollups part of :class:`~core.store.store.Store`."""

    def rollup_versions(self) -> dict[str, int]:
        """``{"conversations": n, "calls": m}``: they change when a refresh changed those rollups."""
        with self._read() as conn:
            return _versions(conn)

    def refresh_rollups(self) -> dict[str, int]:
        """Recount the conversations and days written since the last refresh (``rollup_dirty``); returns how
        many of each were recounted."""
        return self._refresh()[0]

    def refreshed_versions(self) -> dict[str, int]:
        """:meth:`refresh_rollups`, then :meth:`rollup_versions`: read in the refresh's own transaction when it
        counted something (on PostgreSQL in the statement that moves them: no read of their own after it)."""
        versions = self._refresh()[1]
        return versions if versions is not None else self.rollup_versions()

    def _refresh(self) -> tuple[dict[str, int], dict[str, int] | None]:
        """How many conversations and days :meth:`refresh_rollups` recounted, and the versions as its last
        transaction left them (``None``: nothing to count, nothing moved)."""
        now = japan_now()
        today = now.date()
        if getattr(self, "_folded_before", None) != today:  # once a day per process: yesterday's hours
            self._fold_hours(today)
            self._folded_before = today
        with self._read() as conn:
            marks = conn.execute(_core("marks")).all()
        if not marks:
            return {"conversations": 0, "days": 0}, None
        conversations = sorted({c for c, _ in marks if c})
        dates = sorted({d for _, d in marks if d})
        batches = list(zip_longest(_chunks(conversations, BATCH), _chunks(dates, DAYS_PER_BATCH), fillvalue=[]))
        days, versions = 0, None
        for ids, marked in batches:  # one transaction for a chat turn's conversation and day (one commit)
            with self._write() as conn, _planned_once(conn) as prepared:  # the marks first: a mark written
                taken, gone = self._take_marks(conn, ids, marked, prepared)  # after this: the next refresh's
                # PostgreSQL: the rows' moved counts are written with the versions, in one statement
                pending: dict[str, list[dict[str, int]]] | None = {} if self.dialect == "postgresql" else None
                bumped: list[str] = []
                if ids:
                    created = self._recount_conversations(conn, ids, gone)
                    settled_at, today_at = (day_bounds(settled_before("conversations", today))[0],
                                            day_bounds(today)[0])
                    earlier_at = as_stored(slot_start(now, "conversations"))
                    bumped += ["conversations", *([SETTLED["conversations"]] if any(c < settled_at for c in created)
                                                  else []),
                               *([RECENT["conversations"]] if any(settled_at <= c < today_at for c in created) else []),
                               *([EARLIER["conversations"]] if any(today_at <= c < earlier_at for c in created)
                                 else [])]
                if marked:
                    recount, added = _plan(taken)
                    recounted = sorted(set(recount) | set(added))
                    whole = [day for day in recounted if day in recount or len(added[day]) > ADD_LIMIT]
                    if whole and prepared:  # a whole day's records by their time: its custom plan (see above)
                        conn.execute(statement(f"SELECT {CUSTOM_PLANS}"))
                    hours: set[str] = set()  # today's hours whose rows moved
                    for day in recounted:
                        hourly = day >= today.isoformat()  # a day before today: counted per day (_fold_hours)
                        if day in whole:
                            moved = self._recount_day(conn, day, hourly)
                        else:
                            moved = self._add_records(conn, day, added[day], hourly, pending)
                        if day == today.isoformat():
                            hours |= moved
                        days += 1
                    settled = recounted and recounted[0] < settled_before("calls", today)
                    this_hour = hour_of(slot_start(now, "calls"))
                    yesterday = (today - timedelta(days=1)).isoformat()  # still today for a clock a little behind
                    earlier = any(hour < this_hour for hour in hours) or yesterday in recounted
                    bumped += ["calls", *([SETTLED["calls"]] if settled else []),
                               *([EARLIER["calls"]] if earlier else [])]
                versions = self._bump_rollups(conn, *bumped, counts=pending)
        return {"conversations": len(conversations), "days": days}, versions

    def _take_marks(self, conn: Any, ids: list[str], marked: list[str], prepared: bool
                    ) -> tuple[list[tuple[str, int | None, str | None]], set[str] | None]:
        """Take (delete) a batch's marks: the conversations ``ids`` and the days ``marked``. Returns the day
        marks' ``(day, inserted record or None, the record's conversation)`` (``""``: none; ``None``: the record
        is gone) and, on PostgreSQL, the creation times of the conversations' rollup rows, deleted in the same
        statement (:meth:`_recount_conversations` makes them again; elsewhere ``None``: it deletes them). That
        statement also plans the refresh generically (``prepared``) and takes the lock when the refresh counts
        model calls (one refresh of them at a time: :meth:`_add_records`)."""
        if self.dialect != "postgresql":
            if ids and marked:  # both kinds of marks in one statement (a day mark names no conversation)
                rows = conn.execute(_core("take_both"), {"ids": ids, "days": marked})
            elif ids:
                conn.execute(_core("take_conversations"), {"ids": ids})
                return [], None
            else:
                rows = conn.execute(_core("take_days"), {"ids": marked})
            return [(day, record, conversation) for day, record, conversation in rows if day is not None], None
        first = [GENERIC_PLANS] * prepared + ["pg_advisory_xact_lock(:key)"] * bool(marked)
        where = " OR ".join(["conversation_id IN :ids"] * bool(ids) + ["day IN :days"] * bool(marked))
        taken = (f"SELECT taken.*, NULL AS created_at FROM (SELECT {', '.join(first)}) AS first LEFT JOIN taken ON true"
                 if first else "SELECT *, NULL AS created_at FROM taken")
        sql = (f"WITH taken AS (DELETE FROM rollup_dirty WHERE {where} RETURNING day, record_id, "
               f"{RECORD_CONVERSATION_PG})" + (RECOUNT_DELETE_PG if ids else "") + f" {taken}"
               + (" UNION ALL SELECT NULL, NULL, NULL, created_at FROM rows_gone" if ids else ""))
        marks, gone = [], set()
        for day, record, conversation, created in conn.execute(
                statement(sql, *["ids"] * bool(ids), *["days"] * bool(marked)),
                {"ids": ids, "days": marked, "key": CALLS_LOCK}):
            if day is not None:
                marks.append((day, record, conversation))
            elif created is not None:
                gone.add(created)
        return marks, gone

    def _bump_rollups(self, conn: Any, *names: str, counts: dict[str, list[dict[str, int]]] | None = None
                      ) -> dict[str, int]:
        """Move the versions ``names`` (a settled version's row is made on its first bump) and return every
        version as this transaction leaves them: on PostgreSQL one statement (the ``UPDATE`` in a CTE, the rows
        it did not move beside it), which also writes ``counts`` (per call rollup, the rows whose counts moved:
        :func:`_add_counts`); elsewhere the ``UPDATE`` and a read."""
        if self.dialect == "postgresql":
            moved_rows, params = [], {"names": list(names)}
            for name, rows in sorted((counts or {}).items()):
                columns = ("row_id", *_COUNTED[name])
                arrays = ", ".join(f"CAST(:{name}_{column} AS INTEGER[])" for column in columns)
                moved_rows.append(f"moved_{name} AS (UPDATE {_TABLES[name].name} AS r SET "
                                  + ", ".join(f"{column} = v.{column}" for column in columns[1:])
                                  + f" FROM unnest({arrays}) AS v({', '.join(columns)}) WHERE r.id = v.row_id), ")
                params.update({f"{name}_{column}": [row[column] for row in rows] for column in columns})
            rows = conn.execute(statement(BUMP_AND_READ_PG.format(moved="".join(moved_rows)), "names"), params).all()
            versions = {name: int(value) for name, value, _ in rows}
            moved = sum(bumped for _, _, bumped in rows)
        else:
            moved, versions = conn.execute(_core("bump"), {"ids": list(names)}).rowcount, None
        if moved < len(names):
            have = {name for name, in conn.execute(_core("version_names"), {"ids": list(names)})}
            dialect = {"sqlite": sqlite_insert, "postgresql": pg_insert}.get(self.dialect)
            for name in names:
                if name in have:
                    continue
                if dialect is None:
                    conn.execute(insert(t.rollup_versions).values(name=name, value=1))
                else:
                    conn.execute(dialect(t.rollup_versions).values(name=name, value=1).on_conflict_do_nothing())
            versions = None
        return versions if versions is not None else _versions(conn)

    def _recount_conversations(self, conn: Any, ids: list[str], gone: set[str] | None = None) -> set[str]:
        """The rollup rows of the conversations ``ids`` made again, computed and written by the database
        (``INSERT … SELECT``: only their creation times come back), and when those conversations were
        created: their rollup rows' times (as deleted) and the conversations' own (as counted again) — which
        of 分析's pieces the recount changes. ``gone``: the creation times of their rows, already deleted
        with the marks (PostgreSQL: :meth:`_take_marks`); ``None``: deleted here first."""
        params = {"ids": ids, "unknown": UNKNOWN}
        cohort = cohort_sql(self.dialect, "c.id IN :ids")
        insert_faq = f"INSERT INTO rollup_faq ({', '.join(FAQ_ROW)}) "
        insert_rows = f"INSERT INTO rollup_conversations ({', '.join(CONVERSATION_ROW)}) "
        if gone is not None:  # PostgreSQL: one statement, not four: the rows deleted with the marks, the FAQ rows'
            # insert riding in a data-modifying CTE (the cohort evaluated once for both inserts)
            created = set(gone)
            created |= {row[0] for row in conn.execute(statement(
                cohort + CONVERSATIONS_CTES + f", faq_rows AS ({insert_faq}{FAQ_SQL})\n" + insert_rows
                + CONVERSATIONS_SELECT + " RETURNING created_at", "ids"), params)}
            return {at for at in created if at is not None}
        created = {row[0] for row in conn.execute(_core("delete_conversations"), {"ids": ids})}
        conn.execute(_core("delete_faq"), {"ids": ids})
        created |= {row[0] for row in conn.execute(statement(
            insert_rows + cohort + CONVERSATIONS_SQL + " RETURNING created_at", "ids"), params)}
        conn.execute(statement(insert_faq + cohort + FAQ_SQL, "ids"), params)
        return {at for at in created if at is not None}

    def _fold_hours(self, today: date) -> None:
        """Mark the days before ``today`` still counted per hour (the last day a refresh counted as today), so
        that they are counted again per day: only today is read in hours (:func:`earlier_before`), and a day's
        rows per hour are several times its rows per day (``rollup_tasks`` of a 30k store: ×7), which the
        settled days' read would sum again."""
        with self._write() as conn:
            conn.execute(statement(FOLD_HOURS), {"today": today.isoformat()})

    def _recount_day(self, conn: Any, day: str, hourly: bool = True) -> set[str]:
        """Count the model calls of ``day`` again (per hour when ``hourly``, else per day), all of them but
        those whose insert is still marked (each is added by the refresh that takes its mark:
        :meth:`_add_records`); returns the hours whose rows moved."""
        (counts,) = _day_counts(conn, day, [PENDING], hourly=hourly)
        return _write_counts(conn, day, counts)

    def _add_records(self, conn: Any, day: str, records: dict[int, str | None], hourly: bool = True,
                     pending: dict[str, list[dict[str, int]]] | None = None) -> set[str]:
        """Add the inserted debug records ``records`` (their marks taken by this refresh) to ``day``'s rollups:
        their conversations' calls of that day counted without them and with them (a task groups a
        conversation's calls), the difference added to the stored rows. Cost: those conversations' calls,
        not the day's. The stored rows are the day's calls but the still-marked inserts (:meth:`_recount_day`
        counts so too); PostgreSQL: one refresh of the calls at a time (an advisory lock), both counts read
        in one statement (a subquery each), a still-marked insert left out of both. ``records``: each record's
        conversation as its mark was taken (``""``: none; ``None``: the record is gone). ``pending``: the rows
        whose counts moved are left there (per rollup) to be written with the versions
        (:meth:`_bump_rollups`), not updated here. Returns the hours whose rows moved."""
        conversations = sorted({conversation for conversation in records.values() if conversation is not None})
        if not conversations:
            return set()  # deleted since (their delete marked the day: it is recounted)
        where = PENDING + (" AND COALESCE(conversation_id, '') IN :conversations" if "" in conversations else
                           " AND conversation_id IN :conversations")  # by its index, not the day's records
        before, after = _day_counts(conn, day, [where + " AND id NOT IN :records", where], conversations,
                                    sorted(records), hourly=hourly)
        moved = {name: {key: (after[name].get(key), before[name].get(key))
                        for key in set(after[name]) | set(before[name]) if after[name].get(key) != before[name].get(key)}
                 for name in _TABLES}
        moved = {name: keys for name, keys in moved.items() if keys}
        stored = _stored_rows(conn, day, moved)
        for name, keys in moved.items():
            _add_counts(conn, name, day, keys, stored[name], pending)
        return {key[0] for keys in moved.values() for key in keys}


def _stored_rows(conn: Any, day: str, moved: dict[str, dict[tuple, tuple]]) -> dict[str, dict[tuple, tuple]]:
    """The stored rows of ``day`` that the keys of ``moved`` (per call rollup) may hit, read in one statement
    (each table's rows narrowed by the keys' hours and by the first key column after the hour, a task or a
    provider; the latency buckets also by bucket, not the task's every bucket): per table, key → (row id,
    counts)."""
    selects, params, expanding = [], {"day": day}, ["hours", *moved]
    params["hours"] = sorted({key[0] for hits in moved.values() for key in hits})
    for name, hits in moved.items():
        keys, counted = _KEYS[name][1:], _COUNTED[name]  # after the hour
        padding = ["CAST(NULL AS TEXT)"] * (3 - min(len(keys), 3)) + ["CAST(NULL AS INTEGER)"] * (len(keys) < 4)
        columns = ["hour", *keys, *padding, *counted, *["CAST(NULL AS INTEGER)"] * (6 - len(counted))]
        narrow = " AND bucket IN :buckets" if name == "latency" else ""
        selects.append(f"SELECT '{name}' AS rollup, id, {', '.join(columns)} FROM {_TABLES[name].name} "
                       f"WHERE day = :day AND hour IN :hours AND {keys[0]} IN :{name}{narrow}")
        params[name] = sorted({key[1] for key in hits})
        if narrow:
            params["buckets"] = sorted({int(key[4]) for key in hits})
            expanding.append("buckets")
    stored: dict[str, dict[tuple, tuple]] = {name: {} for name in moved}
    if selects:
        rows = conn.execute(statement(" UNION ALL ".join(selects), *expanding), params)
        for rollup, row_id, hour, *values in rows:
            width, counted = len(_KEYS[rollup]) - 1, len(_COUNTED[rollup])
            key = (hour, *(int(v) if rollup == "latency" and i == 3 else v for i, v in enumerate(values[:width])))
            stored[rollup][key] = (row_id, tuple(int(v) for v in values[4:4 + counted]))
    return stored


def _add_counts(conn: Any, name: str, day: str, moved: dict[tuple, tuple], stored: dict[tuple, tuple],
                pending: dict[str, list[dict[str, int]]] | None = None) -> None:
    """Add ``now - then`` to the stored rows of ``day`` in the rollup ``name`` for each key of ``moved``
    (``{key: (now, then)}``, either ``None`` for nothing; ``stored``: :func:`_stored_rows`): updated in
    place (or, with ``pending``, left there to be updated later in the transaction), inserted or (left
    counting nothing) deleted."""
    table, keys, counted = _TABLES[name], _KEYS[name], _COUNTED[name]
    gone, changed, new = [], [], []
    for key, (now, then) in moved.items():
        zero = _zero(now or then)
        row_id, value = stored.get(key, (None, zero))
        total = _plus(value, now or zero, then or zero, -1)
        if row_id is not None and not any(total):
            gone.append(row_id)
        elif row_id is not None:
            changed.append({"row_id": row_id, **dict(zip(counted, total))})
        elif any(total):
            new.append({"day": day, **dict(zip(keys, key)), **dict(zip(counted, total))})
    if gone:
        conn.execute(_core("delete_ids", table.name), {"ids": gone})
    if changed and pending is not None:
        pending.setdefault(name, []).extend(changed)
    elif changed:  # a stored row's counts moved: updated in place
        conn.execute(_core("update_counts", name), changed)
    if new:
        conn.execute(_core("insert", table.name), new)


# PostgreSQL: the refresh's statements are the same few after every write, and planning them was about half of
# the database's time in a refresh (the recount's INSERT … SELECT ≈ 0.7 ms, the calls' counts ≈ 0.9 ms). In the
# refresh's transaction they are prepared on their first execution (psycopg keeps them with the connection) and
# planned generically (``SET LOCAL plan_cache_mode``): each is planned once per connection, not after every
# write. A chat turn's statements read by a key (a conversation, a record, a row id, a day's rows of a task),
# whose generic plan is the custom one. Recounting a whole day (an update or delete of a record, many inserts)
# reads the day's records by their time, where only the custom plan knows how few a day is (30k store: the
# generic plan took 116 ms, the custom one 11): the refresh goes back to custom plans before it.
GENERIC_PLANS = "set_config('plan_cache_mode', 'force_generic_plan', true)"
CUSTOM_PLANS = "set_config('plan_cache_mode', 'force_custom_plan', true)"


@contextmanager
def _planned_once(conn: Any) -> Iterator[bool]:
    """PostgreSQL (psycopg): the statements run inside the block are prepared on their first execution
    (yields True); the connection's own threshold is put back after (other statements are prepared only once
    they repeat). A connection that prepares nothing (``prepare_threshold`` None) and SQLite: unchanged (False)."""
    dbapi = getattr(getattr(conn, "connection", None), "dbapi_connection", None)
    threshold = getattr(dbapi, "prepare_threshold", None) if conn.dialect.name == "postgresql" else None
    if threshold is None:
        yield False
        return
    dbapi.prepare_threshold = 0
    try:
        yield True
    finally:
        dbapi.prepare_threshold = threshold


# PostgreSQL: the versions moved and every version read in one statement (the outer read sees the rows as they were
# before the CTE's UPDATE: the moved ones come from the CTE, flagged 1); ``{moved}``: the call rollups' rows whose
# counts moved, updated from arrays in CTEs of their own (``_bump_rollups``)
BUMP_AND_READ_PG = ("WITH {moved}bumped AS (UPDATE rollup_versions SET value = value + 1 WHERE name IN :names "
                    "RETURNING name, value) SELECT name, value, 1 FROM bumped UNION ALL "
                    "SELECT name, value, 0 FROM rollup_versions WHERE name NOT IN (SELECT name FROM bumped)")
# PostgreSQL: a taken mark's inserted record's conversation, as _record_conversation
RECORD_CONVERSATION_PG = ("(SELECT COALESCE(r.conversation_id, '') FROM debug_records r "
                          "WHERE r.id = rollup_dirty.record_id)")
# PostgreSQL: a recount's deletes, as CTEs of the statement that takes the marks (:meth:`RollupsStore._take_marks`:
# the rows' creation times come back from ``rows_gone``)
RECOUNT_DELETE_PG = (", faq_gone AS (DELETE FROM rollup_faq WHERE conversation_id IN :ids), "
                     "rows_gone AS (DELETE FROM rollup_conversations WHERE id IN :ids RETURNING created_at)")
# The days before today still counted per hour, marked as Japan days (``YYYYMMDDa``) to be counted per day: any
# day with model calls has a row in ``rollup_tasks`` (a failed call of a series without a task: a row of 0 tasks).
FOLD_HOURS = ("INSERT INTO rollup_dirty(day) SELECT DISTINCT REPLACE(day, '-', '') || 'a' FROM rollup_tasks "
              "WHERE day < :today AND hour <> ''")
ADD_LIMIT = 500  # more inserted records than this on one day: recounting the day is as cheap (and one statement)
CALLS_LOCK = 0x6B61697761  # PostgreSQL advisory lock key of the model calls' refresh ("kaiwa")
# a day's records but those whose insert is still marked (each added by the refresh that takes its mark): an
# anti-join by ``ix_rollup_dirty_record``, one index lookup per record. (``id NOT IN (SELECT record_id …)``
# scanned the whole backlog of marks once per record on PostgreSQL whenever its list outgrew ``work_mem``:
# after a busy stretch with no refresh, hours for the first one.)
PENDING = ("created_at >= :since AND created_at < :until AND NOT EXISTS "
           "(SELECT 1 FROM rollup_dirty pending WHERE pending.record_id = debug_records.id)")
_COUNTED = {"tasks": ("tasks", "calls", "first_try_valid", "valid", "repairs", "error_calls"),
            "methods": ("tasks",), "errors": ("calls",), "latency": ("calls",)}
_TABLES = {"tasks": t.rollup_tasks, "methods": t.rollup_methods, "errors": t.rollup_errors,
           "latency": t.rollup_latency}
_KEYS = {"tasks": ("hour", "task", "provider", "prompt_version"), "methods": ("hour", "task", "provider", "method"),
         "errors": ("hour", "provider", "error_type"),
         "latency": ("hour", "task", "provider", "prompt_version", "bucket")}


def _zero(value: tuple) -> tuple:
    return (0,) * len(value)


def _plus(a: tuple, b: tuple, c: tuple, sign: int) -> tuple:
    """``a + b + sign * c``, element by element."""
    return tuple(x + y + sign * z for x, y, z in zip(a, b, c))


def _plan(taken: Iterable[tuple[str, int | None, str | None]]
          ) -> tuple[set[str], dict[str, dict[int, str | None]]]:
    """The Japan days to recount (a mark without a record: an update, a delete, an odd time) and, for the
    other days, the inserted records to add with their conversations (``_add_records``), from the marks taken
    (``(day, record, the record's conversation)``: :meth:`RollupsStore._take_marks`)."""
    recount: set[str] = set()
    added: dict[str, dict[int, str | None]] = {}
    for mark, record, conversation in taken:
        if record is None:
            recount.update(japan_days([mark]))
        else:
            for day in japan_days([mark]):
                added.setdefault(day, {})[int(record)] = conversation
    return recount, {day: records for day, records in added.items() if day not in recount}


def _day_counts(conn: Any, day: str, wheres: list[str], conversations: list[str] | None = None,
                records: list[int] | None = None, hourly: bool = True) -> list[dict[str, dict[tuple, tuple]]]:
    """The model calls of ``day`` that each of ``wheres`` selects, counted as the day rollups hold them (per
    UTC hour when ``hourly``, else the hour ``""``: the whole day), in one statement (a subquery per
    ``where``, told apart by ``side``): per ``where``, per table (``_KEYS``) a key → counts (``_COUNTED``). A
    series' failed calls are kept even when it started no task in an hour (a row of 0 tasks, which 分析 adds
    to the series' rows of tasks), so that adding calls stays exact."""
    lo, hi = day_bounds(day)
    params: dict[str, Any] = {"since": lo, "until": hi, "unknown": UNKNOWN}
    expanding = []
    if conversations is not None:
        params["conversations"] = conversations
        expanding.append("conversations")
    if records is not None:
        params["records"] = records
        expanding.append("records")
    sql = (calls_sql(wheres[0]) + aggregates_sql(False, hourly) if len(wheres) == 1 else " UNION ALL ".join(
        f"SELECT {side} AS side, q{side}.* FROM ({calls_sql(where) + aggregates_sql(False, hourly)}) q{side}"
        for side, where in enumerate(wheres)))
    sides: list[dict[str, dict[tuple, tuple]]] = [{name: {} for name in _KEYS} for _ in wheres]
    errors: list[dict[tuple, int]] = [{} for _ in wheres]
    for row in conn.execute(statement(sql, *expanding), params):
        side = 0 if len(wheres) == 1 else int(row[0])
        kind, hour, task, provider, version, method, tasks, calls, first, valid, repairs, ms = row[-12:]
        hour = hour or ""  # not hourly: the whole day
        counts = sides[side]
        if kind == "task":
            counts["tasks"][(hour, task, provider, version)] = (
                int(tasks), int(calls), int(first), int(valid), int(repairs or 0), 0)
        elif kind == "series_errors":
            errors[side][(hour, task, provider, version)] = int(calls)
        elif kind == "method":
            counts["methods"][(hour, task, provider, method)] = (int(tasks),)
        elif kind == "error":
            counts["errors"][(hour, provider, method)] = (int(calls),)
        elif kind == "latency":
            key = (hour, task, provider, version, latency_bucket(ms))
            counts["latency"][key] = (counts["latency"].get(key, (0,))[0] + 1,)
    for counts, side_errors in zip(sides, errors):
        for series, n in side_errors.items():
            counts["tasks"][series] = counts["tasks"].get(series, (0, 0, 0, 0, 0, 0))[:5] + (n,)
    return sides


def _write_counts(conn: Any, day: str, counts: dict[str, dict[tuple, tuple]]) -> set[str]:
    """Store ``counts`` (:func:`_day_counts`) as ``day``'s rollups; a key counted nothing is no row. Returns
    the hours whose rows moved."""
    hours: set[str] = set()
    for name, table in _TABLES.items():
        keys, counted = _KEYS[name], _COUNTED[name]
        hours |= _write_day(conn, table, day, [{"day": day, **dict(zip(keys, key)), **dict(zip(counted, value))}
                                               for key, value in counts[name].items() if any(value)])
    return hours


def _write_day(conn: Any, table: Any, day: str, values: list[dict[str, Any]]) -> set[str]:
    """Make ``table``'s rows of ``day`` the rows ``values``, writing only the difference: a stored row that
    is not among them is deleted, a row not stored yet is inserted (a row whose count moved is both), the
    rest are left alone. One chat turn moves a few of a day's hundreds of rows (its series' counts, one
    latency bucket), so a refresh writes a few rows instead of rewriting the day. Returns the hours of the
    rows written."""
    columns = [c.name for c in table.columns if c.name != "id"]
    stored = {tuple(row[1:]): row[0] for row in conn.execute(
        select(table.c.id, *(table.c[c] for c in columns)).where(table.c.day == day))}
    wanted = {tuple(value[c] for c in columns): value for value in values}
    gone = {key: row_id for key, row_id in stored.items() if key not in wanted}
    new = [value for key, value in wanted.items() if key not in stored]
    for batch in _chunks(list(gone.values()), 500):
        conn.execute(delete(table).where(table.c.id.in_(batch)))
    if new:
        conn.execute(insert(table), new)
    at = columns.index("hour")
    return {key[at] for key in gone} | {value["hour"] for value in new}
