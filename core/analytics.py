"""Analytics over the shared store (issue #9): pandas tables for the interview funnel, model quality,
diagnosis outcomes and FAQ rates. No Streamlit here: ``pages/analytics.py`` only draws these tables.

:func:`load_frames` reads the store once (``pandas.read_sql`` on SQLAlchemy Core selects) into a
:class:`Frames`; every other function is a pure pandas computation over it.

What is counted (the cohort): conversations *created* in the date range and their turns, knowledge
entries and bookings; debug records (one per model call) *made* in the range. A conversation counts
once somebody said something in it (a user turn or an FAQ exchange): a page that was only opened is
left out. Funnel, drop-off and outcome figures read the live turns (what a resume shows); a turn cut
by a rewind or replaced by a resend is left out of them.

The provider filter keeps conversations whose provider (the first one named by their turns, else by
their debug records, else ``UNKNOWN``) is selected, and debug records of the selected providers.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Iterable

import pandas as pd
from sqlalchemy import and_, case, cast, func, select, true
from sqlalchemy.dialects import postgresql

from core.store import tables as t
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
DEBUG_JSON_FIELDS = ("attempt", "kind", "latency_ms", "prompt", "prompt_version")


@dataclass(frozen=True)
class Frames:
    """The store's rows for one date range (and provider filter), as DataFrames."""

    conversations: pd.DataFrame  # id, flow, status, created_at, state (diagnosis only), started, provider
    turns: pd.DataFrame          # + flow, phase, mode, citations (parsed from turn_json / the chat entry)
    entries: pd.DataFrame        # knowledge_entries: id, conversation_id, status, created_at
    history: pd.DataFrame        # entry_history: entry_id, action, changed_at
    bookings: pd.DataFrame       # conversation_id, urgency, booking_type, status, created_at
    debug: pd.DataFrame          # one row per model call: ids, flow, step, provider, strategy, outcome + JSON fields
    since: str | None = None
    until: str | None = None


# ---- loading -----------------------------------------------------------------------------------------------
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


def _in_range(column: Any, since: str | None, until: str | None) -> Any:
    conditions = [true()]
    if since:
        conditions.append(column >= since)
    if until:
        conditions.append(column < until)
    return and_(*conditions)


def _json_field(column: Any, key: str, dialect: str) -> Any:
    """One top-level field of a JSON text column, extracted by the database (the record stays there)."""
    if dialect == "sqlite":
        return case((func.json_valid(column) == 1, func.json_extract(column, f"$.{key}")), else_=None)
    return func.json_extract_path_text(cast(column, postgresql.JSON), key)


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _get(value: Any, *path: str) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _named(values: pd.Series) -> pd.Series:
    """``values`` as text, with missing and empty ones ``UNKNOWN``."""
    return values.where(values.notna() & (values.astype(str) != ""), UNKNOWN).astype(str)


def _count(value: Any) -> int:
    return len(value) if isinstance(value, list) else 0


def _read(store: Store, since: str | None, until: str | None) -> dict[str, pd.DataFrame]:
    c, tc, e, h, b, d = (t.conversations.c, t.turns.c, t.knowledge_entries.c, t.entry_history.c, t.bookings.c,
                         t.debug_records.c)
    in_range = _in_range(c.created_at, since, until)
    diagnosis, faq = c.flow == "diagnosis", c.flow == "faq"
    queries = {
        "conversations": select(c.id, c.flow, c.status, c.created_at,
                                case((diagnosis, c.state), else_=None).label("state")).where(in_range),
        "turns": select(tc.conversation_id, c.flow, tc.seq, tc.role, tc.superseded, tc.created_at, tc.step,
                        tc.provider, tc.model, tc.method, tc.attempts, tc.latency_ms, tc.ok, tc.error_type,
                        tc.turn_json, case((diagnosis, tc.entry), else_=None).label("entry"),
                        case((faq, tc.user_input), else_=None).label("user_input"))
        .join(t.conversations, c.id == tc.conversation_id).where(in_range),
        "entries": select(e.id, e.conversation_id, e.status, e.created_at)
        .join(t.conversations, c.id == e.conversation_id).where(in_range),
        "history": select(h.entry_id, h.action, h.changed_at)
        .join(t.knowledge_entries, e.id == h.entry_id).join(t.conversations, c.id == e.conversation_id)
        .where(in_range),
        "bookings": select(b.conversation_id, b.urgency, b.booking_type, b.status, b.created_at)
        .join(t.conversations, c.id == b.conversation_id).where(in_range),
    }
    dialect = store.engine.dialect.name
    debug_columns = [d.id, d.conversation_id, d.created_at, d.flow, d.step, d.provider, d.model, d.strategy, d.outcome]
    if dialect in ("sqlite", "postgresql"):
        debug_columns += [_json_field(d.record, key, dialect).label(key) for key in DEBUG_JSON_FIELDS]
    else:  # another engine: the records are read whole and parsed here
        debug_columns.append(d.record)
    queries["debug"] = select(*debug_columns).where(_in_range(d.created_at, since, until)).order_by(d.id)
    with store.engine.connect() as conn:
        frames = {name: pd.read_sql(query, conn) for name, query in queries.items()}
    debug = frames["debug"]
    if "record" in debug:
        parsed = debug.pop("record").map(_loads)
        for key in DEBUG_JSON_FIELDS:
            debug[key] = parsed.map(lambda r, k=key: _get(r, k))
    return frames


def _prepare(raw: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    conversations, turns, debug = raw["conversations"], raw["turns"], raw["debug"]
    turns = turns.sort_values(["conversation_id", "seq"], kind="stable").reset_index(drop=True)
    turns["superseded"] = turns["superseded"].astype(bool)
    turns["ok"] = turns["ok"].astype(bool)
    parsed = turns["turn_json"].map(_loads)
    entry = turns.pop("entry").map(_loads)
    turns["phase"] = parsed.map(lambda j: _get(j, "state", "phase")).where(turns["flow"] == "knowledge")
    turns["mode"] = parsed.map(lambda j: _get(j, "control", "mode")).where(turns["flow"] == "knowledge")
    # Citations: an FAQ exchange's ``citations``; a diagnosis answer's ``rag_sources`` (the response), else the
    # chat entry's ``sources`` (what the page shows).
    cited = parsed.map(lambda j: _get(j, "citations") or _get(j, "rag_sources"))
    turns["citations"] = cited.combine_first(entry.map(lambda j: _get(j, "sources"))).map(_count).astype(int)
    turns = turns.drop(columns=["turn_json"])

    for key in ("attempt", "latency_ms"):
        debug[key] = pd.to_numeric(debug[key], errors="coerce")
    debug["provider"] = _named(debug["provider"])
    debug["prompt_version"] = _named(debug["prompt_version"])
    debug["conversation_id"] = debug["conversation_id"].fillna("")
    debug["task"] = debug["flow"].fillna("").astype(str) + "/" + debug["step"].fillna("").astype(str)

    named = turns[(turns["role"] != "user") & turns["provider"].notna() & (turns["provider"] != "")]
    by_turns = named.groupby("conversation_id")["provider"].first()
    by_debug = debug[debug["provider"] != UNKNOWN].groupby("conversation_id")["provider"].first()
    conversations["provider"] = (conversations["id"].map(by_turns).fillna(conversations["id"].map(by_debug))
                                 .fillna(UNKNOWN))
    speakers = turns.loc[turns["role"].isin(INPUT_ROLES), "conversation_id"]
    conversations["started"] = conversations["id"].isin(speakers)
    return {**raw, "conversations": conversations, "turns": turns, "debug": debug}


def filter_providers(frames: Frames, providers: Iterable[str] | None) -> Frames:
    """Only the conversations (and their rows) and debug records of ``providers`` (all when empty)."""
    chosen = list(providers or [])
    if not chosen:
        return frames
    conversations = frames.conversations[frames.conversations["provider"].isin(chosen)]
    ids = conversations["id"]
    entries = frames.entries[frames.entries["conversation_id"].isin(ids)]
    return replace(frames, conversations=conversations, turns=frames.turns[frames.turns["conversation_id"].isin(ids)],
                   entries=entries, history=frames.history[frames.history["entry_id"].isin(entries["id"])],
                   bookings=frames.bookings[frames.bookings["conversation_id"].isin(ids)],
                   debug=frames.debug[frames.debug["provider"].isin(chosen)])


def load_frames(store: Store, since: str | date | datetime | None = None, until: str | date | datetime | None = None,
                providers: Iterable[str] | None = None) -> Frames:
    """The cohort of ``[since, until)`` (see :func:`utc_bound`), read once, filtered to ``providers``."""
    lo, hi = utc_bound(since), utc_bound(until, end=True)
    frames = Frames(**_prepare(_read(store, lo, hi)), since=lo, until=hi)
    return filter_providers(frames, providers)


def provider_options(frames: Frames) -> list[str]:
    """The providers seen in ``frames`` (conversations and debug records), for the filter."""
    seen = pd.concat([frames.conversations["provider"], frames.debug["provider"]]).dropna().unique()
    return sorted(seen, key=lambda p: (p == UNKNOWN, p))


# ---- interview (knowledge) -----------------------------------------------------------------------------
def _started(frames: Frames, flow: str) -> pd.Series:
    conversations = frames.conversations
    return conversations.loc[(conversations["flow"] == flow) & conversations["started"], "id"]


def _live(frames: Frames, ids: pd.Series) -> pd.DataFrame:
    turns = frames.turns
    return turns[turns["conversation_id"].isin(ids) & ~turns["superseded"]]


def _knowledge_progress(frames: Frames) -> pd.DataFrame:
    """Per started knowledge conversation: furthest phase rank, last phase, finalized, any entry confirmed."""
    ids = _started(frames, "knowledge")
    turns = _live(frames, ids)
    answers = turns[(turns["role"] == "assistant") & turns["ok"]]
    per = pd.DataFrame(index=pd.Index(ids, name="conversation_id"))
    rank = answers["phase"].map(PHASE_RANK)
    per["max_rank"] = rank.groupby(answers["conversation_id"]).max()
    per["last_phase"] = answers.dropna(subset=["phase"]).groupby("conversation_id")["phase"].last()
    finalized = (answers["mode"] == "finalize").groupby(answers["conversation_id"]).any()
    per["finalized"] = per.index.isin(finalized[finalized].index)
    confirmed = frames.history.loc[frames.history["action"] == "confirm", "entry_id"]
    confirmed_convs = frames.entries.loc[frames.entries["id"].isin(confirmed), "conversation_id"]
    per["confirmed"] = per.index.isin(confirmed_convs)
    return per


def _share(part: pd.Series, whole: pd.Series | int) -> pd.Series:
    return (part / whole).where(pd.Series(whole, index=part.index) > 0, 0.0).astype(float).round(3)


def interview_funnel(frames: Frames) -> pd.DataFrame:
    """Conversations reaching each stage: started, each phase (or a later one), ``finalize`` mode, an
    entry confirmed; ``share`` of the started ones."""
    per = _knowledge_progress(frames)
    by_rank = per["max_rank"].value_counts().reindex(range(len(PHASES)), fill_value=0)
    reached = by_rank[::-1].cumsum()[::-1].set_axis(PHASES)
    counts = pd.concat([pd.Series({"started": len(per)}), reached,
                        pd.Series({"finalize": per["finalized"].sum(), "confirmed": per["confirmed"].sum()})])
    out = counts.astype(int).rename("conversations").rename_axis("stage").reset_index()
    out["share"] = _share(out["conversations"], len(per))
    return out


def turns_to_phase(frames: Frames) -> pd.DataFrame:
    """User turns it took to reach ``draft_knowledge`` (or later) and ``finalize``: per target, how many
    conversations got there and the mean / median / min / max of the user turns sent until then."""
    turns = _live(frames, _started(frames, "knowledge")).copy()
    turns["user_turns"] = (turns["role"] == "user").groupby(turns["conversation_id"]).cumsum()
    answers = turns[(turns["role"] == "assistant") & turns["ok"]]
    draft = answers[answers["phase"].map(PHASE_RANK) >= PHASE_RANK["draft_knowledge"]]
    first = {"draft_knowledge": draft.groupby("conversation_id")["user_turns"].first(),
             "finalize": answers[answers["mode"] == "finalize"].groupby("conversation_id")["user_turns"].first()}
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
    by_rank = per["max_rank"].value_counts().reindex(range(len(PHASES)), fill_value=0)
    reached = pd.concat([pd.Series({NO_PHASE: len(per)}), by_rank[::-1].cumsum()[::-1].set_axis(PHASES)])
    out = pd.DataFrame({"phase": order, "reached": reached.to_numpy(), "ended_here": ended.to_numpy()})
    out["dropoff_rate"] = _share(out["ended_here"], out["reached"])
    return out


def entries_confirmed(frames: Frames) -> pd.DataFrame:
    """The knowledge entries of the period's conversations: total, by current status, ever confirmed, and
    conversations with at least one confirmed entry."""
    entries, history = frames.entries, frames.history
    status = entries["status"].value_counts().reindex(["draft", "confirmed", "archived"], fill_value=0)
    ever = entries["id"].isin(history.loc[history["action"] == "confirm", "entry_id"])
    values = {"entries": len(entries), **{f"status_{k}": int(v) for k, v in status.items()},
              "ever_confirmed": int(ever.sum()),
              "conversations_with_confirmed": int(entries.loc[ever, "conversation_id"].nunique())}
    return pd.DataFrame({"metric": list(values), "value": list(values.values())})


# ---- model quality (debug records) ----------------------------------------------------------------------
def _tasks(frames: Frames) -> pd.DataFrame:
    """One row per model task (a ``structured_call`` / ``text_call``: its first call, then its retries and
    repairs): a new task starts at ``attempt`` 1 within a conversation's flow/step."""
    debug = frames.debug.sort_values("id")
    keys = [debug["conversation_id"], debug["task"]]
    number = (debug["attempt"].fillna(1) <= 1).groupby(keys).cumsum()
    grouped = (debug.assign(task_no=number, repair=debug["kind"] == "repair")
               .groupby(["conversation_id", "task", "task_no"], sort=False))
    tasks = grouped.agg(provider=("provider", "first"), prompt_version=("prompt_version", "first"),
                        first_outcome=("outcome", "first"), final_outcome=("outcome", "last"),
                        method=("strategy", "last"), calls=("id", "size"),
                        repairs=("repair", "sum"),
                        started_at=("created_at", "first"))
    tasks["first_try_valid"] = tasks["first_outcome"] == "ok"
    tasks["valid"] = tasks["final_outcome"] == "ok"
    return tasks.reset_index()


QUALITY_KEYS = ["task", "provider", "prompt_version"]


def model_quality(frames: Frames) -> pd.DataFrame:
    """Per task (flow/step), provider and prompt version: tasks, calls, first-try validity (share of
    tasks whose first call was valid), final validity, repairs per task, error calls, and the p50 / p95
    latency of one model call (ms)."""
    tasks, calls = _tasks(frames), frames.debug
    columns = [*QUALITY_KEYS, "tasks", "calls", "first_try_valid", "valid", "repairs_per_task", "error_calls",
               "latency_p50_ms", "latency_p95_ms"]
    if tasks.empty:
        return pd.DataFrame(columns=columns)
    per_task = tasks.groupby(QUALITY_KEYS).agg(tasks=("calls", "size"), calls=("calls", "sum"),
                                               first_try_valid=("first_try_valid", "mean"),
                                               valid=("valid", "mean"), repairs_per_task=("repairs", "mean"))
    per_call = calls.assign(error=calls["outcome"] != "ok").groupby(QUALITY_KEYS).agg(
                                               error_calls=("error", "sum"),
                                               latency_p50_ms=("latency_ms", lambda s: s.quantile(0.5)),
                                               latency_p95_ms=("latency_ms", lambda s: s.quantile(0.95)))
    out = per_task.join(per_call).round({"first_try_valid": 3, "valid": 3, "repairs_per_task": 2,
                                         "latency_p50_ms": 1, "latency_p95_ms": 1})
    return out.reset_index()[columns]


def method_mix(frames: Frames) -> pd.DataFrame:
    """Tasks per structured-output method (the strategy of each task's last call), per task (flow/step)."""
    tasks = _tasks(frames)
    if tasks.empty:
        return pd.DataFrame(columns=["task"])
    mix = tasks.pivot_table(index="task", columns="method", values="calls", aggfunc="size", fill_value=0)
    return mix.rename_axis(columns=None).reset_index()


def error_types(frames: Frames) -> pd.DataFrame:
    """Failed model calls by outcome (parse_error, schema_error, provider_error:<kind>, …), most frequent first."""
    failed = frames.debug.loc[frames.debug["outcome"].fillna("") != "ok", "outcome"].fillna(UNKNOWN)
    out = failed.value_counts().rename("calls").rename_axis("error_type").reset_index()
    out["share_of_calls"] = _share(out["calls"], len(frames.debug))
    return out


def quality_over_time(frames: Frames, *, tz: str = "Asia/Tokyo", freq: str = "D") -> pd.DataFrame:
    """First-try validity per day (in ``tz``) for each ``task · provider · prompt version``: a prompt change
    shows up as a step. Index: the day; one column per series."""
    tasks = _tasks(frames)
    if tasks.empty:
        return pd.DataFrame()
    stamp = pd.to_datetime(tasks["started_at"], utc=True, format="ISO8601").dt.tz_convert(tz).dt.tz_localize(None)
    tasks["day"] = stamp.dt.to_period(freq).dt.start_time
    tasks["series"] = tasks["task"] + " · " + tasks["provider"] + " · " + tasks["prompt_version"]
    return tasks.pivot_table(index="day", columns="series", values="first_try_valid", aggfunc="mean").round(3)


# ---- diagnosis -------------------------------------------------------------------------------------------
def _diagnosis_progress(frames: Frames) -> pd.DataFrame:
    """Per started diagnosis conversation: urgency, final step, booked."""
    conversations = frames.conversations
    started = conversations[(conversations["flow"] == "diagnosis") & conversations["started"]].set_index("id")
    turns = _live(frames, started.index.to_series())
    answers = turns[turns["role"] == "assistant"]
    per = pd.DataFrame(index=started.index.rename("conversation_id"))
    per["final_step"] = answers.dropna(subset=["step"]).groupby("conversation_id")["step"].last()
    per["final_step"] = per["final_step"].fillna(UNKNOWN)
    urgency = started["state"].map(lambda s: _get(_loads(s), "session", "urgency_level"))
    booked_urgency = frames.bookings.dropna(subset=["conversation_id"]).groupby("conversation_id")["urgency"].last()
    per["urgency"] = urgency.fillna(per.index.to_series().map(booked_urgency)).fillna(UNKNOWN)
    per["booked"] = per.index.isin(frames.bookings["conversation_id"].dropna())
    per["done"] = per["final_step"] == "done"
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
    turns = _live(frames, per.index.to_series())
    answers = turns[(turns["role"] == "assistant") & turns["step"].isin(ANSWER_STEPS)]
    conversations, booked = len(per), int(per["booked"].sum())
    values = {"conversations": conversations, "booked_conversations": booked,
              "booking_rate": round(booked / conversations, 3) if conversations else 0.0,
              "answers": len(answers),
              "citations_per_answer": round(float(answers["citations"].mean()), 2) if len(answers) else 0.0,
              "answers_with_citations": round(float((answers["citations"] > 0).mean()), 3) if len(answers) else 0.0}
    return pd.DataFrame({"metric": list(values), "value": list(values.values())})


# ---- FAQ -------------------------------------------------------------------------------------------------
def _faq_exchanges(frames: Frames) -> pd.DataFrame:
    turns = _live(frames, _started(frames, "faq"))
    return turns[turns["role"] == "exchange"]


def faq_rates(frames: Frames) -> pd.DataFrame:
    """FAQ exchanges per outcome and their rate (answered / not_found / fallback / refused / handoff / smalltalk)."""
    outcome = _faq_exchanges(frames)["step"].fillna(UNKNOWN)
    counts = outcome.value_counts()
    order = list(FAQ_OUTCOMES) + sorted(set(counts.index) - set(FAQ_OUTCOMES))
    out = counts.reindex(order, fill_value=0).astype(int).rename("exchanges").rename_axis("outcome").reset_index()
    out["rate"] = _share(out["exchanges"], len(outcome))
    return out


def _question_key(text: Any) -> str:
    """A not-found question as counted: capped, personal data masked, whitespace collapsed."""
    return " ".join(mask_pii(str(text or "")[:MAX_QUESTION_CHARS]).split())


def faq_top_not_found(frames: Frames, n: int = 10) -> pd.DataFrame:
    """The ``n`` most frequent not-found questions (masked): what the KB editors should write next."""
    exchanges = _faq_exchanges(frames)
    missed = exchanges[exchanges["step"] == "not_found"]
    questions = missed.assign(question=missed["user_input"].map(_question_key))
    questions = questions[questions["question"] != ""]
    out = (questions.groupby("question").agg(count=("question", "size"), last_asked=("created_at", "max"))
           .sort_values(["count", "last_asked"], ascending=[False, False]).head(n))
    return out.reset_index()[["question", "count", "last_asked"]]
