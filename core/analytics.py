"""Analytics over the shared store (issue #9, computed in the database since #17): the interview funnel,
model quality, diagnosis outcomes and FAQ rates. No Streamlit here: ``pages/analytics.py`` only draws
these tables (and caches them per period until the store changes, ``ui.cache``).

:func:`load_frames` runs a handful of aggregate queries (CTEs, window functions and ``GROUP BY`` over
indexed columns, the same SQL on SQLite and PostgreSQL) that read only the selected period, and returns
small tables in a :class:`Frames`: one row per conversation of the period with what the figures need
(furthest phase, final step, answers and citations …), and the model calls already grouped per task,
provider, prompt version, method, outcome and hour. Every other function shapes those into the tables the
page shows; none reads a turn or a debug record itself. The JSON of turns and records is never parsed
here: what the figures need was read once when the row was written (``turns.mode`` / ``citations``,
``debug_records.attempt`` / ``kind`` / ``latency_ms`` / ``prompt_version``); only a diagnosis
conversation's urgency is read from its state, by the database.

What is counted (the cohort): conversations *created* in the date range and their turns, knowledge
entries and bookings; debug records (one per model call) *made* in the range. A conversation counts
once somebody said something in it (a user turn or an FAQ exchange): a page that was only opened is
left out. Funnel, drop-off and outcome figures read the live turns (what a resume shows); a turn cut
by a rewind or replaced by a resend is left out of them.

The provider filter keeps conversations whose provider (the first one named by their turns, else by
their debug records of the range, else ``UNKNOWN``) is selected, and debug records of the selected
providers; model calls are grouped into tasks after that filter.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Iterable

import pandas as pd
from sqlalchemy import bindparam, text

from core.store.store import Store
from core.text.pii import mask_pii

UNKNOWN = "—"  # a provider or prompt version that was not recorded
PHASES = ("collect_case", "organize_risks", "draft_knowledge", "review_knowledge")  # seed 003 §3.2.2, in order
PHASE_RANK = {phase: rank for rank, phase in enumerate(PHASES)}
NO_PHASE = "none"  # a knowledge conversation without any successful model turn
FUNNEL_STAGES = ("started", *PHASES, "finalize", "confirmed")
FAQ_OUTCOMES = ("answered", "not_found", "fallback", "refused", "handoff", "smalltalk")
URGENCY_LEVELS = ("critical", "high", "medium", "low", "none", UNKNOWN)
# Diagnosis steps whose assistant turn is the model's answer (the intake, booking and done steps are fixed texts).
ANSWER_STEPS = ("spec_check", "diagnosing", "urgency_check", "reservation")
INPUT_ROLES = ("user", "exchange")
MAX_QUESTION_CHARS = 300  # a not-found question is cut to this before masking and counting
QUALITY_KEYS = ["task", "provider", "prompt_version"]


@dataclass(frozen=True)
class Frames:
    """What the store holds for one date range (and provider filter), already aggregated by the database."""

    conversations: pd.DataFrame  # one row per conversation: id, flow, created_at, started, provider, per-flow figures
    entries: pd.DataFrame        # one row: entries, status_draft/confirmed/archived, ever_confirmed, conversations_with_confirmed
    quality: pd.DataFrame        # per task, provider, prompt_version: tasks, calls, first_try_valid, valid, repairs_per_task, ...
    methods: pd.DataFrame        # per task and method (the last strategy of each task): tasks
    hourly: pd.DataFrame         # per UTC hour, task, provider, prompt_version: tasks, first_try_valid (sum)
    errors: pd.DataFrame         # per outcome of the failed calls: calls
    calls: int                   # model calls in the range (and providers)
    faq: pd.DataFrame            # per outcome: exchanges
    not_found: pd.DataFrame      # per not-found question as typed: count, last_asked
    since: str | None = None
    until: str | None = None


# ---- bounds ------------------------------------------------------------------------------------------------
def utc_bound(value: str | date | datetime | None, *, end: bool = False) -> str | None:
    """A range bound as stored-timestamp text (UTC ISO, milliseconds). A ``date`` (or ``YYYY-MM-DD``)
    is a whole UTC day: as ``end`` it is inclusive (the bound is the next midnight). A ``datetime``
    (naive = UTC) is used as is; as ``end`` it is exclusive."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = date.fromisoformat(value) if len(value) == 10 else datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        value = datetime.combine(value + timedelta(days=1) if end else value, time(), timezone.utc)
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).isoformat(timespec="milliseconds")


# ---- SQL ---------------------------------------------------------------------------------------------------
def _range(column: str, since: str | None, until: str | None) -> str:
    parts = ["1 = 1"]
    if since:
        parts.append(f"{column} >= :since")
    if until:
        parts.append(f"{column} < :until")
    return " AND ".join(parts)


def _urgency_sql(dialect: str) -> str:
    """A diagnosis conversation's ``session.urgency_level`` from its state, read by the database."""
    if dialect == "sqlite":
        return ("CASE WHEN c.flow = 'diagnosis' AND json_valid(c.state) = 1 "
                "THEN json_extract(c.state, '$.session.urgency_level') END")
    if dialect == "postgresql":
        return "CASE WHEN c.flow = 'diagnosis' THEN CAST(c.state AS json) #>> '{session,urgency_level}' END"
    return "NULL"


def _cohort_sql(dialect: str, since: str | None, until: str | None, providers: bool) -> str:
    """``cohort``: the range's conversations with whether someone spoke and their provider (filtered)."""
    return f"""
WITH base AS (
  SELECT c.id, c.flow, c.created_at, {_urgency_sql(dialect)} AS state_urgency,
    CASE WHEN EXISTS (SELECT 1 FROM turns t WHERE t.conversation_id = c.id AND t.role IN ('user', 'exchange'))
         THEN 1 ELSE 0 END AS started,
    COALESCE(
      (SELECT t.provider FROM turns t WHERE t.conversation_id = c.id AND t.role <> 'user'
         AND t.provider IS NOT NULL AND t.provider <> '' ORDER BY t.seq LIMIT 1),
      (SELECT d.provider FROM debug_records d WHERE d.conversation_id = c.id AND {_range('d.created_at', since, until)}
         AND d.provider IS NOT NULL AND d.provider <> '' ORDER BY d.id LIMIT 1),
      :unknown) AS provider
  FROM conversations c WHERE {_range('c.created_at', since, until)}
), cohort AS (SELECT * FROM base{' WHERE provider IN :providers' if providers else ''})"""


_RANK = ("CASE t.step WHEN 'collect_case' THEN 0 WHEN 'organize_risks' THEN 1 WHEN 'draft_knowledge' THEN 2 "
         "WHEN 'review_knowledge' THEN 3 END")
_ANSWER = "t.role = 'assistant' AND t.ok"
_ANSWER_STEPS = ", ".join(f"'{s}'" for s in ANSWER_STEPS)

_CONVERSATIONS_SQL = f"""
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
)
SELECT c.id, c.flow, c.created_at, c.started, c.provider,
  k.max_rank,
  (SELECT t.step FROM turns t WHERE t.conversation_id = c.id AND t.seq = k.last_phase_seq) AS last_phase,
  k.finalized,
  CASE WHEN c.flow = 'knowledge' AND EXISTS (SELECT 1 FROM knowledge_entries e JOIN entry_history h ON h.entry_id = e.id
       WHERE e.conversation_id = c.id AND h.action = 'confirm') THEN 1 ELSE 0 END AS confirmed,
  CASE WHEN k.draft_seq IS NOT NULL THEN (SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id
     AND t.role = 'user' AND NOT t.superseded AND t.seq < k.draft_seq) END AS to_draft,
  CASE WHEN k.finalize_seq IS NOT NULL THEN (SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id
     AND t.role = 'user' AND NOT t.superseded AND t.seq < k.finalize_seq) END AS to_finalize,
  (SELECT t.step FROM turns t WHERE t.conversation_id = c.id AND t.seq = d.final_seq) AS final_step,
  COALESCE(c.state_urgency, (SELECT b.urgency FROM bookings b WHERE b.conversation_id = c.id AND b.urgency IS NOT NULL
     ORDER BY b.id DESC LIMIT 1)) AS urgency,
  CASE WHEN c.flow = 'diagnosis' AND EXISTS (SELECT 1 FROM bookings b WHERE b.conversation_id = c.id) THEN 1 ELSE 0 END
    AS booked,
  d.answers, d.cited, d.citing
FROM cohort c LEFT JOIN knowledge k ON k.id = c.id LEFT JOIN diagnosis d ON d.id = c.id
ORDER BY c.created_at, c.id"""

_ENTRIES_SQL = """
SELECT COUNT(*) AS entries,
  COALESCE(SUM(CASE WHEN x.status = 'draft' THEN 1 ELSE 0 END), 0) AS status_draft,
  COALESCE(SUM(CASE WHEN x.status = 'confirmed' THEN 1 ELSE 0 END), 0) AS status_confirmed,
  COALESCE(SUM(CASE WHEN x.status = 'archived' THEN 1 ELSE 0 END), 0) AS status_archived,
  COALESCE(SUM(x.ever), 0) AS ever_confirmed,
  COUNT(DISTINCT CASE WHEN x.ever = 1 THEN x.conversation_id END) AS conversations_with_confirmed
FROM (SELECT e.status, e.conversation_id,
        CASE WHEN EXISTS (SELECT 1 FROM entry_history h WHERE h.entry_id = e.id AND h.action = 'confirm')
             THEN 1 ELSE 0 END AS ever
      FROM knowledge_entries e JOIN cohort c ON c.id = e.conversation_id) x"""

_FAQ_SQL = """
SELECT COALESCE(t.step, :unknown) AS outcome, COUNT(*) AS exchanges
FROM turns t JOIN cohort c ON c.id = t.conversation_id
WHERE c.flow = 'faq' AND c.started = 1 AND NOT t.superseded AND t.role = 'exchange'
GROUP BY 1"""

_NOT_FOUND_SQL = """
SELECT t.user_input AS question, COUNT(*) AS count, MAX(t.created_at) AS last_asked
FROM turns t JOIN cohort c ON c.id = t.conversation_id
WHERE c.flow = 'faq' AND c.started = 1 AND NOT t.superseded AND t.role = 'exchange' AND t.step = 'not_found'
GROUP BY t.user_input"""


def _calls_sql(since: str | None, until: str | None, providers: bool) -> str:
    """``calls`` (the range's model calls, provider-filtered) and ``tasks`` (one row per model task: its
    first call, then its retries and repairs; a new task starts at ``attempt`` 1 within a conversation's
    flow/step, in id order)."""
    provider_filter = " AND COALESCE(NULLIF(provider, ''), :unknown) IN :providers" if providers else ""
    return f"""
WITH calls AS (
  SELECT id, COALESCE(conversation_id, '') AS conv, COALESCE(flow, '') || '/' || COALESCE(step, '') AS task,
    COALESCE(NULLIF(provider, ''), :unknown) AS provider,
    COALESCE(NULLIF(prompt_version, ''), :unknown) AS prompt_version,
    outcome, strategy, kind, COALESCE(attempt, 1) AS attempt, latency_ms, created_at
  FROM debug_records WHERE {_range('created_at', since, until)}{provider_filter}
), numbered AS (
  SELECT calls.*, SUM(CASE WHEN attempt <= 1 THEN 1 ELSE 0 END)
    OVER (PARTITION BY conv, task ORDER BY id ROWS UNBOUNDED PRECEDING) AS task_no
  FROM calls
), ranked AS (
  SELECT numbered.*,
    ROW_NUMBER() OVER (PARTITION BY conv, task, task_no ORDER BY id) AS first_rank,
    ROW_NUMBER() OVER (PARTITION BY conv, task, task_no ORDER BY id DESC) AS last_rank,
    ROW_NUMBER() OVER (PARTITION BY conv, task, task_no
                       ORDER BY CASE WHEN strategy IS NULL THEN 1 ELSE 0 END, id DESC) AS strategy_rank
  FROM numbered
), tasks AS (
  SELECT conv, task, task_no,
    MAX(CASE WHEN first_rank = 1 THEN provider END) AS provider,
    MAX(CASE WHEN first_rank = 1 THEN prompt_version END) AS prompt_version,
    MAX(CASE WHEN first_rank = 1 AND outcome = 'ok' THEN 1 ELSE 0 END) AS first_try_valid,
    MAX(CASE WHEN last_rank = 1 AND outcome = 'ok' THEN 1 ELSE 0 END) AS valid,
    MAX(CASE WHEN strategy_rank = 1 THEN strategy END) AS method,
    COUNT(*) AS calls,
    SUM(CASE WHEN kind = 'repair' THEN 1 ELSE 0 END) AS repairs,
    MAX(CASE WHEN first_rank = 1 THEN created_at END) AS started_at
  FROM ranked GROUP BY conv, task, task_no
)"""


_QUALITY_SQL = """
, per_task AS (
  SELECT task, provider, prompt_version, COUNT(*) AS tasks, SUM(calls) AS calls,
    AVG(first_try_valid * 1.0) AS first_try_valid, AVG(valid * 1.0) AS valid, AVG(repairs * 1.0) AS repairs_per_task
  FROM tasks GROUP BY task, provider, prompt_version
), latency AS (
  SELECT task, provider, prompt_version, latency_ms AS v,
    ROW_NUMBER() OVER (PARTITION BY task, provider, prompt_version ORDER BY latency_ms) - 1 AS rn,
    COUNT(*) OVER (PARTITION BY task, provider, prompt_version) AS n
  FROM calls WHERE latency_ms IS NOT NULL
), quantiles AS (
  SELECT task, provider, prompt_version, MAX(n) AS n,
    MAX(CASE WHEN rn = (n - 1) / 2 THEN v END) AS p50_lo, MAX(CASE WHEN rn = (n - 1) / 2 + 1 THEN v END) AS p50_hi,
    MAX(CASE WHEN rn = (95 * (n - 1)) / 100 THEN v END) AS p95_lo,
    MAX(CASE WHEN rn = (95 * (n - 1)) / 100 + 1 THEN v END) AS p95_hi
  FROM latency GROUP BY task, provider, prompt_version
), errors AS (
  SELECT task, provider, prompt_version, SUM(CASE WHEN COALESCE(outcome, '') <> 'ok' THEN 1 ELSE 0 END) AS error_calls
  FROM calls GROUP BY task, provider, prompt_version
)
SELECT p.task, p.provider, p.prompt_version, p.tasks, p.calls, p.first_try_valid, p.valid, p.repairs_per_task,
  e.error_calls, q.n, q.p50_lo, q.p50_hi, q.p95_lo, q.p95_hi
FROM per_task p JOIN errors e ON e.task = p.task AND e.provider = p.provider AND e.prompt_version = p.prompt_version
LEFT JOIN quantiles q ON q.task = p.task AND q.provider = p.provider AND q.prompt_version = p.prompt_version
ORDER BY p.task, p.provider, p.prompt_version"""

_METHODS_SQL = """
SELECT task, method, COUNT(*) AS tasks FROM tasks WHERE method IS NOT NULL GROUP BY task, method ORDER BY task, method"""

_HOURLY_SQL = """
SELECT SUBSTR(started_at, 1, 13) AS hour, task, provider, prompt_version, COUNT(*) AS tasks,
  SUM(first_try_valid) AS first_try_valid
FROM tasks GROUP BY SUBSTR(started_at, 1, 13), task, provider, prompt_version"""

_ERRORS_SQL = """
SELECT outcome AS error_type, COUNT(*) AS calls FROM calls WHERE COALESCE(outcome, '') <> 'ok' GROUP BY outcome"""

_CALLS_SQL = "SELECT COUNT(*) AS calls FROM calls"


def _quantile(n: Any, lo: Any, hi: Any, q: float) -> float:
    """The ``q`` quantile with linear interpolation (pandas' default) from the two values around it."""
    if pd.isna(n) or pd.isna(lo):
        return float("nan")
    position = q * (int(n) - 1)
    fraction = position - int(position)
    if pd.isna(hi) or fraction == 0:
        return float(lo)
    return float(lo) + (float(hi) - float(lo)) * fraction


def _query(conn: Any, sql: str, params: dict[str, Any], providers: bool) -> pd.DataFrame:
    statement = text(sql)
    if providers:
        statement = statement.bindparams(bindparam("providers", expanding=True))
    result = conn.execute(statement, params)
    return pd.DataFrame(result.fetchall(), columns=list(result.keys()))


def load_frames(store: Store, since: str | date | datetime | None = None, until: str | date | datetime | None = None,
                providers: Iterable[str] | None = None) -> Frames:
    """The cohort of ``[since, until)`` (see :func:`utc_bound`), filtered to ``providers`` (all when empty),
    aggregated by the database."""
    lo, hi = utc_bound(since), utc_bound(until, end=True)
    chosen = sorted(set(providers or []))
    params: dict[str, Any] = {"since": lo, "until": hi, "unknown": UNKNOWN}
    if chosen:
        params["providers"] = chosen
    cohort = _cohort_sql(store.dialect, lo, hi, bool(chosen))
    calls = _calls_sql(lo, hi, bool(chosen))
    with store.engine.connect() as conn:
        conversations = _query(conn, cohort + _CONVERSATIONS_SQL, params, bool(chosen))
        entries = _query(conn, cohort + _ENTRIES_SQL, params, bool(chosen))
        faq = _query(conn, cohort + _FAQ_SQL, params, bool(chosen))
        not_found = _query(conn, cohort + _NOT_FOUND_SQL, params, bool(chosen))
        quality = _query(conn, calls + _QUALITY_SQL, params, bool(chosen))
        methods = _query(conn, calls + _METHODS_SQL, params, bool(chosen))
        hourly = _query(conn, calls + _HOURLY_SQL, params, bool(chosen))
        errors = _query(conn, calls + _ERRORS_SQL, params, bool(chosen))
        total = int(_query(conn, calls + _CALLS_SQL, params, bool(chosen))["calls"].iloc[0])
    for column in ("started", "finalized", "confirmed", "booked"):
        conversations[column] = conversations[column].fillna(0).astype(int).astype(bool)
    return Frames(conversations=conversations, entries=entries, quality=quality, methods=methods, hourly=hourly,
                  errors=errors, calls=total, faq=faq, not_found=not_found, since=lo, until=hi)


def provider_options(store: Store, since: str | date | datetime | None = None,
                     until: str | date | datetime | None = None) -> list[str]:
    """The providers seen in the range (its conversations' and its model calls'), for the filter."""
    lo, hi = utc_bound(since), utc_bound(until, end=True)
    sql = (_cohort_sql(store.dialect, lo, hi, False) + " SELECT DISTINCT provider FROM cohort UNION "
           f"SELECT DISTINCT COALESCE(NULLIF(provider, ''), :unknown) FROM debug_records "
           f"WHERE {_range('created_at', lo, hi)}")
    with store.engine.connect() as conn:
        seen = [row[0] for row in conn.execute(text(sql), {"since": lo, "until": hi, "unknown": UNKNOWN})]
    return sorted({p for p in seen if p is not None}, key=lambda p: (p == UNKNOWN, p))


# ---- interview (knowledge) -----------------------------------------------------------------------------
def _started(frames: Frames, flow: str) -> pd.DataFrame:
    conversations = frames.conversations
    return conversations[(conversations["flow"] == flow) & conversations["started"]].set_index("id")


def _knowledge_progress(frames: Frames) -> pd.DataFrame:
    """Per started knowledge conversation: furthest phase rank, last phase, finalized, any entry confirmed."""
    per = _started(frames, "knowledge").rename_axis("conversation_id")
    return per[["max_rank", "last_phase", "finalized", "confirmed", "to_draft", "to_finalize"]]


def _share(part: pd.Series, whole: pd.Series | int) -> pd.Series:
    return (part / whole).where(pd.Series(whole, index=part.index) > 0, 0.0).astype(float).round(3)


def _reached_by_rank(per: pd.DataFrame) -> pd.Series:
    by_rank = per["max_rank"].dropna().astype(int).value_counts().reindex(range(len(PHASES)), fill_value=0)
    return by_rank[::-1].cumsum()[::-1].set_axis(PHASES)


def interview_funnel(frames: Frames) -> pd.DataFrame:
    """Conversations reaching each stage: started, each phase (or a later one), ``finalize`` mode, an
    entry confirmed; ``share`` of the started ones."""
    per = _knowledge_progress(frames)
    counts = pd.concat([pd.Series({"started": len(per)}), _reached_by_rank(per),
                        pd.Series({"finalize": per["finalized"].sum(), "confirmed": per["confirmed"].sum()})])
    out = counts.astype(int).rename("conversations").rename_axis("stage").reset_index()
    out["share"] = _share(out["conversations"], len(per))
    return out


def turns_to_phase(frames: Frames) -> pd.DataFrame:
    """User turns it took to reach ``draft_knowledge`` (or later) and ``finalize``: per target, how many
    conversations got there and the mean / median / min / max of the user turns sent until then."""
    per = _knowledge_progress(frames)
    first = {"draft_knowledge": per["to_draft"].dropna(), "finalize": per["to_finalize"].dropna()}
    reached = pd.concat(first, names=["target", "conversation_id"]).astype(float)
    out = (reached.groupby(level="target").agg(["count", "mean", "median", "min", "max"])
           .reindex(list(first)).rename(columns={"count": "conversations"}))
    out["conversations"] = out["conversations"].fillna(0).astype(int)
    return out.round(2).rename_axis("target").reset_index()


def phase_dropoff(frames: Frames) -> pd.DataFrame:
    """Where conversations that neither reached ``finalize`` nor had an entry confirmed stopped: their last
    phase (``none`` = no successful model turn), against the conversations that reached that phase."""
    per = _knowledge_progress(frames)
    stopped = per[~(per["finalized"] | per["confirmed"])]
    order = [NO_PHASE, *PHASES]
    ended = stopped["last_phase"].fillna(NO_PHASE).value_counts().reindex(order, fill_value=0)
    reached = pd.concat([pd.Series({NO_PHASE: len(per)}), _reached_by_rank(per)])
    out = pd.DataFrame({"phase": order, "reached": reached.to_numpy(), "ended_here": ended.to_numpy()})
    out["dropoff_rate"] = _share(out["ended_here"], out["reached"])
    return out


def entries_confirmed(frames: Frames) -> pd.DataFrame:
    """The knowledge entries of the period's conversations: total, by current status, ever confirmed, and
    conversations with at least one confirmed entry."""
    row = frames.entries.iloc[0] if len(frames.entries) else pd.Series(dtype=object)
    names = ["entries", "status_draft", "status_confirmed", "status_archived", "ever_confirmed",
             "conversations_with_confirmed"]
    values = {name: int(row.get(name, 0) or 0) for name in names}
    return pd.DataFrame({"metric": list(values), "value": list(values.values())})


# ---- model quality (debug records) ----------------------------------------------------------------------
def model_quality(frames: Frames) -> pd.DataFrame:
    """Per task (flow/step), provider and prompt version: tasks, calls, first-try validity (share of
    tasks whose first call was valid), final validity, repairs per task, error calls, and the p50 / p95
    latency of one model call (ms)."""
    columns = [*QUALITY_KEYS, "tasks", "calls", "first_try_valid", "valid", "repairs_per_task", "error_calls",
               "latency_p50_ms", "latency_p95_ms"]
    quality = frames.quality
    if quality.empty:
        return pd.DataFrame(columns=columns)
    out = quality.assign(
        latency_p50_ms=[_quantile(n, lo, hi, 0.5) for n, lo, hi in zip(quality["n"], quality["p50_lo"], quality["p50_hi"])],
        latency_p95_ms=[_quantile(n, lo, hi, 0.95) for n, lo, hi in zip(quality["n"], quality["p95_lo"], quality["p95_hi"])])
    for column in ("tasks", "calls", "error_calls"):
        out[column] = out[column].astype(int)
    for column in ("first_try_valid", "valid", "repairs_per_task"):
        out[column] = out[column].astype(float)
    out = out.round({"first_try_valid": 3, "valid": 3, "repairs_per_task": 2, "latency_p50_ms": 1, "latency_p95_ms": 1})
    return out.sort_values(QUALITY_KEYS).reset_index(drop=True)[columns]


def method_mix(frames: Frames) -> pd.DataFrame:
    """Tasks per structured-output method (the strategy of each task's last call), per task (flow/step)."""
    methods = frames.methods
    if methods.empty:
        return pd.DataFrame(columns=["task"])
    mix = methods.pivot_table(index="task", columns="method", values="tasks", aggfunc="sum", fill_value=0)
    return mix.astype(int).rename_axis(columns=None).reset_index()


def error_types(frames: Frames) -> pd.DataFrame:
    """Failed model calls by outcome (parse_error, schema_error, provider_error:<kind>, …), most frequent first."""
    errors = frames.errors.assign(error_type=frames.errors["error_type"].fillna(UNKNOWN))
    out = (errors.groupby("error_type", as_index=False)["calls"].sum()
           .sort_values(["calls", "error_type"], ascending=[False, True]).reset_index(drop=True))
    out["calls"] = out["calls"].astype(int)
    out["share_of_calls"] = _share(out["calls"], frames.calls)
    return out[["error_type", "calls", "share_of_calls"]]


def quality_over_time(frames: Frames, *, tz: str = "Asia/Tokyo", freq: str = "D") -> pd.DataFrame:
    """First-try validity per day (in ``tz``) for each ``task · provider · prompt version``: a prompt change
    shows up as a step. Index: the day; one column per series."""
    hourly = frames.hourly
    if hourly.empty:
        return pd.DataFrame()
    stamp = pd.to_datetime(hourly["hour"] + ":00:00+00:00", utc=True, format="ISO8601")
    hourly = hourly.assign(day=stamp.dt.tz_convert(tz).dt.tz_localize(None).dt.to_period(freq).dt.start_time,
                           series=hourly["task"] + " · " + hourly["provider"] + " · " + hourly["prompt_version"])
    sums = hourly.groupby(["day", "series"])[["first_try_valid", "tasks"]].sum()
    share = (sums["first_try_valid"].astype(float) / sums["tasks"].astype(float)).rename("first_try_valid")
    return share.unstack("series").rename_axis(index="day", columns="series").round(3)


# ---- diagnosis -------------------------------------------------------------------------------------------
def _diagnosis_progress(frames: Frames) -> pd.DataFrame:
    """Per started diagnosis conversation: urgency, final step, booked, answers and their citations."""
    started = _started(frames, "diagnosis").rename_axis("conversation_id")
    per = pd.DataFrame(index=started.index)
    per["final_step"] = started["final_step"].fillna(UNKNOWN)
    per["urgency"] = started["urgency"].fillna(UNKNOWN)
    per["booked"] = started["booked"].astype(bool)
    per["done"] = per["final_step"] == "done"
    for column in ("answers", "cited", "citing"):
        per[column] = started[column].fillna(0).astype(int)
    return per


def diagnosis_outcomes(frames: Frames) -> pd.DataFrame:
    """By urgency (session state, else the booking): conversations, reached ``done``, booked, booking rate."""
    per = _diagnosis_progress(frames)
    out = (per.groupby("urgency").agg(conversations=("booked", "size"), done=("done", "sum"), booked=("booked", "sum"))
           .reindex([u for u in URGENCY_LEVELS if u in set(per["urgency"])] +
                    sorted(set(per["urgency"]) - set(URGENCY_LEVELS))))
    out = out.astype(int).rename_axis("urgency").reset_index()
    out["booking_rate"] = _share(out["booked"], out["conversations"])
    return out


def diagnosis_end_steps(frames: Frames) -> pd.DataFrame:
    """The step each diagnosis conversation is at (where it ended, or stands), most frequent first."""
    per = _diagnosis_progress(frames)
    out = per["final_step"].value_counts().rename("conversations").rename_axis("step").reset_index()
    out["share"] = _share(out["conversations"], len(per))
    return out


def diagnosis_summary(frames: Frames) -> pd.DataFrame:
    """Conversations, booked conversations, booking rate (booked / conversations), model answers (assistant
    turns of ``ANSWER_STEPS``), citations per answer and the share of answers citing the manual."""
    per = _diagnosis_progress(frames)
    conversations, booked = len(per), int(per["booked"].sum())
    answers, cited, citing = int(per["answers"].sum()), int(per["cited"].sum()), int(per["citing"].sum())
    values = {"conversations": conversations, "booked_conversations": booked,
              "booking_rate": round(booked / conversations, 3) if conversations else 0.0,
              "answers": answers,
              "citations_per_answer": round(cited / answers, 2) if answers else 0.0,
              "answers_with_citations": round(citing / answers, 3) if answers else 0.0}
    return pd.DataFrame({"metric": list(values), "value": list(values.values())})


# ---- FAQ -------------------------------------------------------------------------------------------------
def faq_rates(frames: Frames) -> pd.DataFrame:
    """FAQ exchanges per outcome and their rate (answered / not_found / fallback / refused / handoff / smalltalk)."""
    counts = frames.faq.set_index("outcome")["exchanges"].astype(int) if len(frames.faq) else pd.Series(dtype=int)
    order = list(FAQ_OUTCOMES) + sorted(set(counts.index) - set(FAQ_OUTCOMES))
    out = counts.reindex(order, fill_value=0).astype(int).rename("exchanges").rename_axis("outcome").reset_index()
    out["rate"] = _share(out["exchanges"], int(counts.sum()))
    return out


def _question_key(text: Any) -> str:
    """A not-found question as counted: capped, personal data masked, whitespace collapsed."""
    return " ".join(mask_pii(str(text or "")[:MAX_QUESTION_CHARS]).split())


def faq_top_not_found(frames: Frames, n: int = 10) -> pd.DataFrame:
    """The ``n`` most frequent not-found questions (masked): what the KB editors should write next."""
    missed = frames.not_found
    if missed.empty:
        return pd.DataFrame(columns=["question", "count", "last_asked"])
    questions = missed.assign(question=missed["question"].map(_question_key), count=missed["count"].astype(int))
    questions = questions[questions["question"] != ""]
    out = (questions.groupby("question").agg(count=("count", "sum"), last_asked=("last_asked", "max"))
           .sort_values(["count", "last_asked"], ascending=[False, False]).head(n))
    return out.reset_index()[["question", "count", "last_asked"]]
