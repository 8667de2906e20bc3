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
their debug records, else ``UNKNOWN``) is selected, and debug records of the selected providers; a model
task is one provider's calls.

Since #25 nothing is counted twice: :func:`load_frames` reads the rollups the store keeps current
(``core.store.rollups``: one row per conversation, the model calls per Japan day), after recounting only
what was written since the last look (:func:`refresh`). A range of whole Japan days (what 分析 shows)
reads the calls' day rollups summed by the database (latency p50 / p95 from ≈2 % buckets: within 1 %);
any other range reads its debug records in one statement (exact).

What 分析 itself reads (:func:`read_part` / :func:`shape`) is summed by the database too: the conversations
one row per *kind* (``grouped``: ``n`` conversations alike in every figure), so what comes back is the
size of the figures, not of the period; and it is read in pieces (:func:`settled_split`): the settled
days (model calls before today, conversations created before yesterday) and yesterday's conversations, kept
by ``ui.cache`` until a write touches one of them (the rollups' ``SETTLED`` and ``RECENT`` versions), and
today, read again after each write.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from functools import lru_cache
from typing import Any, Iterable
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

from core.store import rollups
from core.store.rollups import PHASES, UNKNOWN
from core.store.store import Store
from core.text.pii import mask_pii

PHASE_RANK = {phase: rank for rank, phase in enumerate(PHASES)}
NO_PHASE = "none"  # a knowledge conversation without any successful model turn
FUNNEL_STAGES = ("started", *PHASES, "finalize", "confirmed")
FAQ_OUTCOMES = ("answered", "not_found", "fallback", "refused", "handoff", "smalltalk")
URGENCY_LEVELS = ("critical", "high", "medium", "low", "none", UNKNOWN)
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
    return rollups.as_stored(value)


# ---- reading ------------------------------------------------------------------------------------------------
CONVERSATION_COLUMNS = ("id", "flow", "created_at", "started", "provider", "max_rank", "last_phase", "finalized",
                        "confirmed", "to_draft", "to_finalize", "final_step", "urgency", "booked", "answers", "cited",
                        "citing")
ENTRY_COLUMNS = ("entries", "entries_draft", "entries_confirmed", "entries_archived", "entries_ever")


def _range(column: str, since: str | None, until: str | None) -> str:
    parts = ["1 = 1"]
    if since:
        parts.append(f"{column} >= :since")
    if until:
        parts.append(f"{column} < :until")
    return " AND ".join(parts)


def _created_in(alias: str, since: str | None, until: str | None, chosen: list[str]) -> str:
    """The rows of ``alias`` (``rollup_conversations`` or ``rollup_faq``: both carry the conversation's time and
    provider) created in ``[since, until)``, of the ``chosen`` providers when there are any (``:providers``)."""
    return _range(f"{alias}.created_at", since, until) + (f" AND {alias}.provider IN :providers" if chosen else "")


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
    result = conn.execute(rollups.statement(sql, *(["providers"] if providers else [])), params)
    columns = list(result.keys())  # plain tuples: pandas probes a Row's attributes one by one (slow)
    return pd.DataFrame([tuple(row) for row in result], columns=columns)


def _japan_day(bound: str | None) -> str | None:
    """The Japan day a bound starts, when it is a Japan midnight (else None: the range is read from the calls)."""
    if bound is None:
        return None
    at = datetime.fromisoformat(bound).astimezone(rollups.DAY_TZ)
    return at.date().isoformat() if at.time() == time() else None


def _call_days(lo: str | None, hi: str | None) -> tuple[str | None, str | None]:
    """The Japan days ``[first, last)`` of the call rollups that ``[lo, hi)`` overlaps (a bound within a day:
    that day)."""
    first = None if lo is None else datetime.fromisoformat(lo).astimezone(rollups.DAY_TZ).date()
    last = None if hi is None else datetime.fromisoformat(hi).astimezone(rollups.DAY_TZ)
    end = None if last is None else (last.date() if last.time() == time() else last.date() + timedelta(days=1))
    return (None if first is None else first.isoformat()), (None if end is None else end.isoformat())


def _call_hours(lo: str | None, hi: str | None) -> tuple[str | None, str | None]:
    """The call rollups' hours ``[from, to)`` of a range whose bounds are within a day (a cut of
    :func:`settled_split`, at a whole hour); ``None`` for a bound at a Japan midnight (whole days)."""
    def hour(bound: str | None) -> str | None:
        if bound is None or _japan_day(bound) is not None:
            return None
        at = datetime.fromisoformat(bound)
        if (at.minute, at.second, at.microsecond) != (0, 0, 0):
            raise ValueError(f"the model calls are counted per hour: {bound} is within one")
        return rollups.hour_of(at)

    return hour(lo), hour(hi)


def refresh(store: Store) -> dict[str, int]:
    """Count what was written since the last look (``Store.refresh_rollups``: with nothing written, one read
    of the empty log) and return the rollups' versions: equal versions mean equal figures
    (``Store.refreshed_versions``: after a count, read by the transaction that counted)."""
    return store.refreshed_versions()


def _value_at(values: Any, ends: Any, rank: int) -> float | None:
    """The ``rank``-th smallest (0-based) of sorted ``values`` counted ``ends`` (cumulative counts) times."""
    return float(values[int((ends > rank).argmax())]) if rank < int(ends[-1]) else None


def _latency_quantiles(latency: pd.DataFrame) -> pd.DataFrame:
    """Per series: ``n`` and the values at the ranks around p50 and p95 (``_quantile`` interpolates), from
    ``value`` / ``calls`` rows (one per call, or one per histogram bucket)."""
    out = []
    for key, group in latency.groupby(QUALITY_KEYS, sort=True):
        group = group.sort_values("value")
        counts = group["calls"].astype(int).to_numpy()
        ends = counts.cumsum()
        values = group["value"].astype(float).to_numpy()
        n = int(ends[-1])
        p50, p95 = (n - 1) // 2, (95 * (n - 1)) // 100
        out.append((*key, n, *(_value_at(values, ends, rank) for rank in (p50, p50 + 1, p95, p95 + 1))))
    return pd.DataFrame(out, columns=[*QUALITY_KEYS, "n", "p50_lo", "p50_hi", "p95_lo", "p95_hi"])


def _call_frames(tasks: pd.DataFrame, methods: pd.DataFrame, errors: pd.DataFrame, latency: pd.DataFrame
                 ) -> dict[str, Any]:
    """quality / methods / hourly / errors / calls of :class:`Frames` from task rows (per hour, task, provider,
    prompt version: tasks, calls, first_try_valid, valid, repairs, error_calls), method rows, error rows and
    latency rows: the same shaping whether they come from the rollups or from the calls of a range."""
    if tasks.empty:
        quality = pd.DataFrame(columns=[*QUALITY_KEYS, "tasks", "calls", "first_try_valid", "valid",
                                        "repairs_per_task", "error_calls", "n", "p50_lo", "p50_hi", "p95_lo", "p95_hi"])
        hourly = pd.DataFrame(columns=["hour", *QUALITY_KEYS, "tasks", "first_try_valid"])
    else:
        numeric = ["tasks", "calls", "first_try_valid", "valid", "repairs", "error_calls"]
        tasks = tasks.astype({c: int for c in numeric})
        sums = tasks.groupby(QUALITY_KEYS, as_index=False)[numeric].sum()
        quality = sums.assign(first_try_valid=sums["first_try_valid"] / sums["tasks"],
                              valid=sums["valid"] / sums["tasks"], repairs_per_task=sums["repairs"] / sums["tasks"])
        quality = quality.drop(columns="repairs").merge(_latency_quantiles(latency), on=QUALITY_KEYS, how="left")
        hourly = tasks.groupby(["hour", *QUALITY_KEYS], as_index=False)[["tasks", "first_try_valid"]].sum()
    if methods.empty:
        methods = pd.DataFrame(columns=["task", "method", "tasks"])
    else:
        methods = methods.astype({"tasks": int}).groupby(["task", "method"], as_index=False)["tasks"].sum()
    if errors.empty:
        errors = pd.DataFrame(columns=["error_type", "calls"])
    else:
        errors = errors.astype({"calls": int}).groupby("error_type", as_index=False, dropna=False)["calls"].sum()
    return {"quality": quality.sort_values(QUALITY_KEYS).reset_index(drop=True), "methods": methods,
            "hourly": hourly, "errors": errors, "calls": int(tasks["calls"].sum()) if len(tasks) else 0}


def _histograms(rows: Iterable[tuple]) -> dict[tuple, dict[int, int]]:
    """Latency histograms per series (``{(task, provider, prompt_version): {bucket: calls}}``) from
    ``(task, provider, prompt_version, bucket, calls)`` rows (a series may come in several rows per bucket:
    they are added)."""
    hist: dict[tuple, dict[int, int]] = {}
    for task, provider, version, bucket, calls in rows:
        buckets = hist.setdefault((task, provider, version), {})
        buckets[int(bucket)] = buckets.get(int(bucket), 0) + int(calls)
    return hist


def _added_histograms(parts: Iterable[dict[tuple, dict[int, int]]]) -> dict[tuple, dict[int, int]]:
    """:func:`_histograms` of several ranges added up; a series found in one range only is that range's own
    dict (shared: never changed here)."""
    out: dict[tuple, dict[int, int]] = {}
    owned: set[tuple] = set()
    for hist in parts:
        for key, buckets in hist.items():
            have = out.get(key)
            if have is None:
                out[key] = buckets
                continue
            if key not in owned:
                have = out[key] = dict(have)
                owned.add(key)
            for bucket, calls in buckets.items():
                have[bucket] = have.get(bucket, 0) + calls
    return out


def _histogram_quantile_values(buckets: dict[int, int]) -> tuple:
    """``(n, p50_lo, p50_hi, p95_lo, p95_hi)`` of one series' histogram (as :func:`_latency_quantiles`:
    the bucket values at the ranks around p50 and p95, ``None`` past the last call), in one pass."""
    ordered = sorted(buckets.items())
    n = sum(buckets.values())
    p50, p95 = (n - 1) // 2, (95 * (n - 1)) // 100
    ranks = (p50, p50 + 1, p95, p95 + 1)
    wanted, found, end, i = sorted(set(ranks)), {}, 0, 0
    for bucket, calls in ordered:
        end += calls
        while i < len(wanted) and wanted[i] < end:
            found[wanted[i]] = rollups.bucket_value(bucket)
            i += 1
        if i == len(wanted):
            break
    return (n, *(found.get(rank) for rank in ranks))


def _histogram_arrays(hist: dict[tuple, dict[int, int]]) -> tuple[list[tuple], Any, Any, Any]:
    """:func:`_histograms` as arrays, made once when a piece is read: ``(series, series_at, bucket, calls)``
    (the series named, and per bucket row the index of its series, its bucket and its calls), so that the
    quantiles of several pieces added up are found for every series at once (:func:`_quantile_values`)."""
    series = list(hist)
    sizes = [len(buckets) for buckets in hist.values()]
    return (series, np.repeat(np.arange(len(series), dtype=np.int64), sizes),
            np.fromiter((b for buckets in hist.values() for b in buckets), dtype=np.int64, count=sum(sizes)),
            np.fromiter((c for buckets in hist.values() for c in buckets.values()), dtype=np.int64, count=sum(sizes)))


def _quantile_values(raws: list[dict[str, Any]], keys: list[tuple]) -> list[tuple]:
    """Per series of ``keys``: :func:`_histogram_quantile_values` of its histograms in ``raws`` added up
    (``(nan,) * 5`` for a series without one), from :func:`_quantile_arrays`."""
    n, values, there = _quantile_arrays(raws, keys)
    return [(int(n[i]), *(None if math.isnan(v) else float(v) for v in values[i])) if there[i]
            else (float("nan"),) * 5 for i in range(len(keys))]


def _quantile_arrays(raws: list[dict[str, Any]], keys: list[tuple]) -> tuple[Any, Any, Any]:
    """Per series of ``keys``, for every series at once: ``n`` (calls), the bucket values at the ranks around
    p50 and p95 (``(series, 4)``, nan past the last call) and whether the series has a histogram at all —
    :func:`_histogram_quantile_values` of its histograms in ``raws`` added up. The pieces' bucket rows
    (:func:`_histogram_arrays`) are sorted by series and bucket and their running total searched for each
    rank; each bucket's value is ``rollups.bucket_value``'s (the same float). A series whose calls add up to
    0 is left to :func:`_histogram_quantile_values` (its ranks are negative)."""
    index = {key: i for i, key in enumerate(keys)}
    at, buckets, calls = [], [], []
    for raw in raws:
        series, series_at, bucket, count = raw["latency_arrays"]
        if len(series):
            at.append(np.array([index.get(key, -1) for key in series], dtype=np.int64)[series_at])
            buckets.append(bucket)
            calls.append(count)
    size = len(keys)
    if not at:
        return np.full(size, np.nan), np.full((size, 4), np.nan), np.zeros(size, dtype=bool)
    at, buckets, calls = np.concatenate(at), np.concatenate(buckets), np.concatenate(calls)
    kept = at >= 0
    at, buckets, calls = at[kept], buckets[kept], calls[kept]
    if len(buckets):  # by series, then bucket: one integer key (np.lexsort of the two took 6× as long); the
        low = int(buckets.min())  # order of equal keys (one series' bucket in several pieces) changes nothing found
        order = np.argsort(at * (int(buckets.max()) - low + 1) + (buckets - low))
        at, buckets, calls = at[order], buckets[order], calls[order]
    ends = np.cumsum(calls)
    numbers = np.arange(size)
    first, past = np.searchsorted(at, numbers, side="left"), np.searchsorted(at, numbers, side="right")
    there = past > first
    before = np.where(first > 0, ends[np.maximum(first - 1, 0)], 0)
    n = np.where(there, ends[np.maximum(past - 1, 0)] - before, 0)
    p50, p95 = (n - 1) // 2, (95 * (n - 1)) // 100
    ranks = np.stack([p50, p50 + 1, p95, p95 + 1], axis=1)
    valid = there[:, None] & (ranks < n[:, None])
    found = np.minimum(np.searchsorted(ends, before[:, None] + ranks, side="right"), max(len(buckets) - 1, 0))
    chosen = buckets[found] if len(buckets) else np.zeros(found.shape, dtype=np.int64)
    distinct = np.unique(chosen[valid])
    worth = np.array([rollups.bucket_value(int(b)) for b in distinct], dtype=float)
    values = np.full((size, 4), np.nan)
    values[valid] = worth[np.searchsorted(distinct, chosen[valid])]
    zero = np.flatnonzero(there & (n <= 0))  # calls adding up to 0: walked as one histogram
    added = _added_histograms(raw["latency"] for raw in raws) if len(zero) else {}
    for i in zero:
        walked = _histogram_quantile_values(added[keys[i]])
        values[i] = [np.nan if v is None else v for v in walked[1:]]
    return np.where(there, n, np.nan).astype(float), values, there


CALL_SUMS = ("tasks", "calls", "first_try_valid", "valid", "repairs", "error_calls")
HOURLY_COLUMNS = ["hour", *QUALITY_KEYS, "tasks", "first_try_valid"]


def _rows(conn: Any, sql: str, params: dict[str, Any], providers: bool) -> list[tuple]:
    """The rows of ``sql`` as plain tuples, fetched at once (not row by row)."""
    return list(map(tuple, conn.execute(rollups.statement(sql, *(["providers"] if providers else [])), params).all()))


def _call_rows(conn: Any, first: str | None, last: str | None, providers: list[str],
               hours: tuple[str | None, str | None] = (None, None)) -> dict[str, Any]:
    """The model calls of the Japan days ``[first, last)`` (``None``: open) as the day rollups hold them,
    within the UTC hours ``[hours[0], hours[1])`` when given (``YYYY-MM-DDTHH``, the rollups' ``hour``: a
    piece of today, ``analytics.settled_split``), summed by the database and shaped as far as they can be
    alone: per series (``sums``, tuples), per series and latency bucket (``latency``: :func:`_histograms`),
    per day and series (``hourly``: the chart), per task and method and per outcome (tuples).
    :func:`_call_shape` adds ranges up and makes the frames."""
    # the hours bound the day they fall in only (a bound's day is ``first`` / the day before ``last``)
    where = (_range("day", first, last) + (" AND (day > :since OR hour >= :from_hour)" if hours[0] else "")
             + (" AND (day < :last_day OR hour < :to_hour)" if hours[1] else "")
             + (" AND provider IN :providers" if providers else ""))
    last_day = None if last is None else (date.fromisoformat(last) - timedelta(days=1)).isoformat()
    params: dict[str, Any] = {"since": first, "until": last, "providers": providers, "from_hour": hours[0],
                              "to_hour": hours[1], "last_day": last_day}
    series = ", ".join(QUALITY_KEYS)
    # a row of 0 tasks holds only failed calls of a series that started no task in its hour: they are added to
    # the series' (a series that started no task in the whole range is not shown: _series_totals), and left
    # out of the chart's day. One statement, its rows told apart by ``kind`` (each table's columns in the same
    # places; NULL where a table has none).
    text_null, none = "CAST(NULL AS TEXT)", ", ".join(["CAST(NULL AS INTEGER)"] * (len(CALL_SUMS) - 1))
    rows = _rows(conn, f"""
SELECT 'day' AS kind, day, {series}, CAST(NULL AS INTEGER) AS bucket, {', '.join(f'SUM({n})' for n in CALL_SUMS)}
FROM rollup_tasks WHERE {where} GROUP BY day, {series}
UNION ALL SELECT 'method', {text_null}, task, {text_null}, method, NULL, SUM(tasks), {none}
FROM rollup_methods WHERE {where} GROUP BY task, method
UNION ALL SELECT 'error', {text_null}, {text_null}, {text_null}, error_type, NULL, SUM(calls), {none}
FROM rollup_errors WHERE {where} GROUP BY error_type
UNION ALL SELECT 'latency', {text_null}, {series}, bucket, SUM(calls), {none}
FROM rollup_latency WHERE {where} GROUP BY {series}, bucket""", params, bool(providers))
    days = [row[1:5] + row[6:] for row in rows if row[0] == "day"]
    latency = _histograms(row[2:7] for row in rows if row[0] == "latency")
    labels = {day: rollups.day_bounds(day)[0][:13] for day in {row[0] for row in days}}  # quality_over_time: that day
    totals: dict[tuple, list[int]] = {}
    for day, task, provider, version, *values in days:
        sums = totals.setdefault((task, provider, version), [0] * len(CALL_SUMS))
        for i, value in enumerate(values):
            sums[i] += int(value or 0)
    return {
        "sums": [(*key, *values) for key, values in totals.items()],
        "latency": latency,
        "latency_arrays": _histogram_arrays(latency),
        "hourly": [(labels[day], task, provider, version, int(tasks), int(first))  # the chart's rows, as read
                   for day, task, provider, version, tasks, _, first, *_ in days if int(tasks or 0) > 0],
        "methods": [(task, method, int(tasks)) for kind, _, task, _, method, _, tasks, *_ in rows if kind == "method"],
        "errors": [(error, int(calls)) for kind, _, _, _, error, _, calls, *_ in rows if kind == "error"],
        # unfiltered: the providers of the days' tasks (the filter's options, as providers_seen)
        "providers": None if providers else sorted({key[1] for key, sums in totals.items() if sums[0] > 0}, key=str),
    }


def _hourly_frame(raws: list[dict[str, Any]]) -> pd.DataFrame:
    """The pieces' per-day rows of the chart as one frame of Python values (quality_over_time reads them so)."""
    return pd.DataFrame([row for raw in raws for row in raw["hourly"]], columns=HOURLY_COLUMNS, dtype=object)


def _series_totals(raws: list[dict[str, Any]]) -> dict[tuple, list[int]]:
    """The pieces' per-series sums (:data:`CALL_SUMS`) added up, per series key; a series that started no task
    (only failed calls under a prompt version no task began with) is left out."""
    totals: dict[tuple, list[int]] = {}
    for raw in raws:
        for row in raw["sums"]:
            values = totals.setdefault(row[:3], [0] * len(CALL_SUMS))
            for i, value in enumerate(row[3:]):
                values[i] += value
    return {key: values for key, values in totals.items() if values[0] > 0}


def _call_shape(raws: list[dict[str, Any]]) -> dict[str, Any]:
    """quality / methods / hourly / errors / calls of :class:`Frames` from :func:`_call_rows` of one range,
    or of several disjoint ranges: the per-series sums and latency histograms are added up in plain Python,
    and each frame is made once from the rows (the figures add up methods and outcomes themselves)."""
    totals = _series_totals(raws)
    if not totals:
        return _call_frames(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    keys = sorted(totals)
    latency = _quantile_values(raws, keys)
    sums = {name: np.array([totals[key][i] for key in keys], dtype=int) for i, name in enumerate(CALL_SUMS)}
    quality = pd.DataFrame({
        **{name: [key[i] for key in keys] for i, name in enumerate(QUALITY_KEYS)},
        "tasks": sums["tasks"], "calls": sums["calls"], "first_try_valid": sums["first_try_valid"] / sums["tasks"],
        "valid": sums["valid"] / sums["tasks"], "error_calls": sums["error_calls"],
        "repairs_per_task": sums["repairs"] / sums["tasks"],
        **{name: [row[i] for row in latency] for i, name in enumerate(("n", "p50_lo", "p50_hi", "p95_lo", "p95_hi"))}})
    return {"quality": quality,
            "hourly": _hourly_frame(raws),
            "methods": pd.DataFrame([row for raw in raws for row in raw["methods"]], columns=["task", "method", "tasks"]),
            "errors": pd.DataFrame([row for raw in raws for row in raw["errors"]], columns=["error_type", "calls"]),
            "calls": int(sums["calls"].sum())}


class CallPieces:
    """The model calls of :func:`read_part`'s pieces added up in plain Python (per series sums and latency
    quantiles, methods, outcomes, the chart's cells), from which 分析's four model-call tables are made
    directly (:data:`CALL_TABLES`), each one DataFrame: the same tables as :func:`shape`'s frames give
    (``test_the_model_call_tables_made_from_the_pieces_equal_those_from_the_frames``), without making those
    frames first (after every model call these four tables are made again, issue #25)."""

    def __init__(self, raws: list[dict[str, Any]]) -> None:
        totals = _series_totals(raws)
        self.raws = raws
        self.keys = sorted(totals)
        self.sums = {name: np.array([totals[key][i] for key in self.keys], dtype=int) for i, name in enumerate(CALL_SUMS)}
        self.calls = int(self.sums["calls"].sum()) if self.keys else 0


def _model_quality_of(pieces: CallPieces) -> pd.DataFrame:
    """:func:`model_quality` of the pieces (sorted, summed and rounded as it does)."""
    columns = [*QUALITY_KEYS, "tasks", "calls", "first_try_valid", "valid", "repairs_per_task", "error_calls",
               "latency_p50_ms", "latency_p95_ms"]
    if not pieces.keys:
        return pd.DataFrame(columns=columns)
    sums, keys = pieces.sums, pieces.keys
    n, values, _ = _quantile_arrays(pieces.raws, keys)
    out: dict[str, Any] = {name: [key[i] for key in keys] for i, name in enumerate(QUALITY_KEYS)}
    out["tasks"], out["calls"] = sums["tasks"], sums["calls"]
    out["first_try_valid"] = np.round(sums["first_try_valid"] / sums["tasks"], 3)
    out["valid"] = np.round(sums["valid"] / sums["tasks"], 3)
    out["repairs_per_task"] = np.round(sums["repairs"] / sums["tasks"], 2)
    out["error_calls"] = sums["error_calls"]
    for column, q, lo in (("latency_p50_ms", 0.5, 0), ("latency_p95_ms", 0.95, 2)):
        out[column] = np.round(_quantiles(n, values[:, lo], values[:, lo + 1], q), 1)
    return pd.DataFrame(out, columns=columns)


def _quantiles(n: Any, lo: Any, hi: Any, q: float) -> Any:
    """:func:`_quantile` of arrays, element by element (the same arithmetic, in the same order)."""
    position = q * (n - 1)
    fraction = position - np.trunc(position)
    with np.errstate(invalid="ignore"):
        between = lo + (hi - lo) * fraction
    out = np.where(np.isnan(hi) | (fraction == 0), lo, between)
    return np.where(np.isnan(n) | np.isnan(lo), np.nan, out)


def _faq_rates_of(raws: list[dict[str, Any]]) -> pd.DataFrame:
    """:func:`faq_rates` of the conversations' pieces (their outcomes added up as for ``_faq_counts``)."""
    return _rates(_faq_totals(raws))


def _method_mix_of(pieces: CallPieces) -> pd.DataFrame:
    """:func:`method_mix` of the pieces (their rows read as it reads its frame's)."""
    return _method_mix_table(row for raw in pieces.raws for row in raw["methods"])


def _error_types_of(pieces: CallPieces) -> pd.DataFrame:
    """:func:`error_types` of the pieces."""
    rows = [row for raw in pieces.raws for row in raw["errors"]]
    if not rows:  # no failed call: the empty table (made once: as error_types makes it of empty frames)
        return _no_error_types().copy()
    return _error_types_table(rows, pieces.calls)


@lru_cache(maxsize=1)
def _no_error_types() -> pd.DataFrame:
    return error_types(Frames(**{**_EMPTY_CONVERSATIONS, **_EMPTY_CALLS}))


def _quality_over_time_of(pieces: CallPieces, *, tz: str = "Asia/Tokyo") -> pd.DataFrame:
    """:func:`quality_over_time` of the pieces: each piece's cells (days × series: tasks, first-try valid,
    :func:`_day_cells`, made once per piece) are added into one grid, then divided as one array."""
    grids = [_day_cells(raw, tz) for raw in pieces.raws]
    days = sorted({day for grid in grids for day in grid[0]})
    series = sorted({name for grid in grids for name in grid[1]})
    if not days:
        return pd.DataFrame()
    day_at, series_at = {day: i for i, day in enumerate(days)}, {name: i for i, name in enumerate(series)}
    tasks_sum, first_valid = np.zeros((len(days), len(series))), np.zeros((len(days), len(series)))
    present = np.zeros((len(days), len(series)), dtype=bool)
    for grid_days, grid_series, tasks, first, there in grids:
        if grid_days:
            at = np.ix_([day_at[day] for day in grid_days], [series_at[name] for name in grid_series])
            tasks_sum[at] += tasks
            first_valid[at] += first
            present[at] |= there
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.round(np.where(present, first_valid, np.nan) / np.where(present, tasks_sum, np.nan), 3)
    return pd.DataFrame(share, index=pd.DatetimeIndex(days, name="day").as_unit("us"),
                        columns=pd.Index(series, name="series"))


def _day_cells(raw: dict[str, Any], tz: str) -> tuple[list, list, Any, Any, Any]:
    """One piece's chart cells as a grid: ``(days, series names, tasks, first-try valid, present)`` (local
    days × series, arrays), from its per-day rows, a row left out where a key is missing (as
    ``quality_over_time``'s groupby), each distinct hour converted once. Made once per piece (kept in it)."""
    made = raw.get("day_cells")
    if made is not None and made[0] == tz:
        return made[1]
    zone, local, cells = ZoneInfo(tz), {}, {}
    for hour, task, provider, version, tasks, first in raw["hourly"]:
        if not (_present(hour) and _present(task) and _present(provider) and _present(version)):
            continue
        day = local.get(hour)
        if day is None:
            day = local[hour] = datetime.combine(
                datetime.fromisoformat(f"{hour}:00:00+00:00").astimezone(zone).date(), time())
        key = (day, f"{task} · {provider} · {version}")
        have = cells.get(key, (0.0, 0.0))
        cells[key] = (have[0] + float(tasks), have[1] + float(first))
    days = sorted({day for day, _ in cells})
    series = sorted({name for _, name in cells})
    day_at, series_at = {day: i for i, day in enumerate(days)}, {name: i for i, name in enumerate(series)}
    tasks, first = np.zeros((len(days), len(series))), np.zeros((len(days), len(series)))
    present = np.zeros((len(days), len(series)), dtype=bool)
    for (day, name), (n, valid) in cells.items():
        i, j = day_at[day], series_at[name]
        tasks[i, j], first[i, j], present[i, j] = n, valid, True
    grid = (days, series, tasks, first, present)
    raw["day_cells"] = (tz, grid)  # derived from the piece's own rows: the same whoever makes it first
    return grid


# 分析's model-call tables straight from the pieces (:class:`CallPieces`), as ``figure`` makes them
CALL_TABLES = {"model_quality": _model_quality_of, "quality_over_time": _quality_over_time_of,
               "method_mix": _method_mix_of, "error_types": _error_types_of}


def _calls_from_rollups(conn: Any, first: str | None, last: str | None, providers: list[str]) -> dict[str, Any]:
    """The model calls of the Japan days ``[first, last)`` (``None``: open), from the day rollups: what comes
    back from the database is the size of the tables shown, however many calls the days hold."""
    return _call_shape([_call_rows(conn, first, last, providers)])


def _calls_from_records(conn: Any, lo: str | None, hi: str | None, providers: list[str]) -> dict[str, Any]:
    """The model calls of ``[lo, hi)`` read from the debug records (a range that is not whole Japan days):
    one statement, every aggregate in it; latencies exact."""
    sql = rollups.calls_sql(_range("created_at", lo, hi), bool(providers)) + rollups.aggregates_sql(True)
    rows = _query(conn, sql, {"since": lo, "until": hi, "unknown": UNKNOWN, "providers": providers}, bool(providers))
    kind = rows["kind"]
    tasks = rows[kind == "task"].drop(columns=["kind", "method", "latency_ms"])
    series_errors = rows[kind == "series_errors"][[*QUALITY_KEYS, "calls"]].rename(columns={"calls": "error_calls"})
    tasks = tasks.drop(columns="error_calls", errors="ignore").merge(series_errors, on=QUALITY_KEYS, how="left")
    tasks["error_calls"] = tasks["error_calls"].fillna(0)
    tasks.loc[tasks.duplicated(QUALITY_KEYS), "error_calls"] = 0  # counted once per series, not per hour
    methods = rows[kind == "method"][["task", "method", "tasks"]]
    errors = rows[kind == "error"][["method", "calls"]].rename(columns={"method": "error_type"})
    latency = rows[kind == "latency"][[*QUALITY_KEYS, "latency_ms"]].rename(columns={"latency_ms": "value"})
    return _call_frames(tasks, methods, errors, latency.assign(calls=1))


GROUP_COLUMNS = ("flow", "started", "max_rank", "last_phase", "finalized", "confirmed", "to_draft", "to_finalize",
                 "final_step", "urgency", "booked")  # what tells two conversations apart in a figure


def _conversation_rows(conn: Any, lo: str | None, hi: str | None, chosen: list[str]) -> dict[str, Any]:
    """The conversations of ``[lo, hi)`` summed by the database: one row per kind of conversation
    (``GROUP_COLUMNS``) with how many there are (``n``) and their answers and citations; the entries' totals;
    the FAQ exchanges per outcome and per not-found question. What comes back is the size of the figures,
    not of the period; :func:`_conversation_shape` adds ranges up."""
    params: dict[str, Any] = {"since": lo, "until": hi, "providers": chosen}
    where = _created_in("c", lo, hi, chosen)
    keys = ", ".join(f"c.{n}" for n in GROUP_COLUMNS)
    sums = ", ".join(f"SUM(c.{n}) AS {n}" for n in ("answers", "cited", "citing") + ENTRY_COLUMNS)
    width = len(GROUP_COLUMNS) + 4  # the kind, n, answers, cited, citing (then the entries' sums)
    # One statement, its rows told apart by ``part``: the kinds of conversation; the FAQ exchanges per outcome
    # and question (in the kinds' columns of the same types: the outcome in ``flow``, the question in
    # ``last_phase``, the last time asked in ``final_step``, the exchanges in ``n``); unfiltered, the providers
    # the conversations name (in ``flow``: the filter's options, no query of their own).
    at = {name: i for i, name in enumerate(GROUP_COLUMNS + ("n",))}

    def cells(**given: str) -> str:  # a row of the kinds' columns (and with_confirmed), NULL but where given
        row = ["NULL"] * (width + len(ENTRY_COLUMNS) + 1)
        for name, cell in given.items():
            row[at[name]] = cell
        return ", ".join(row)

    faq_cells = cells(flow="f.outcome", last_phase="f.question", final_step="MAX(f.last_asked)",
                      n="CAST(SUM(f.exchanges) AS BIGINT)")
    sql = (f"SELECT 'kind' AS part, {keys}, COUNT(*) AS n, {sums}, "
           "SUM(CASE WHEN c.entries_ever > 0 THEN 1 ELSE 0 END) AS with_confirmed "
           f"FROM rollup_conversations c WHERE {where} GROUP BY {keys} "
           f"UNION ALL SELECT 'faq', {faq_cells} FROM rollup_faq f WHERE {_created_in('f', lo, hi, chosen)} "
           "GROUP BY f.outcome, f.question")
    if not chosen:
        sql += (f" UNION ALL SELECT 'provider', {cells(flow='c.provider')} FROM rollup_conversations c "
                f"WHERE {where} GROUP BY c.provider")
    rows: list[tuple] = []
    faq: dict[str, int] = {}  # per outcome, and per not-found question
    missed, providers = [], []
    for part, *row in _rows(conn, sql, params, bool(chosen)):
        if part == "kind":
            rows.append(tuple(row))
        elif part == "provider":
            providers.append(row[at["flow"]])
        else:
            outcome, exchanges = row[at["flow"]], int(row[at["n"]])
            faq[outcome] = faq.get(outcome, 0) + exchanges
            if outcome == "not_found":
                missed.append((row[at["last_phase"]], exchanges, row[at["final_step"]]))
    flags = {GROUP_COLUMNS.index(c) for c in ("started", "finalized", "confirmed", "booked")}
    kinds = [tuple(bool(int(v or 0)) if i in flags else int(v) if i == len(GROUP_COLUMNS) else v
                   for i, v in enumerate(row[:width])) for row in rows]
    return {"rows": kinds, "entries": [sum(int(row[i] or 0) for row in rows) for i in range(width, width + 6)],
            "faq": list(faq.items()), "missed": missed, "providers": None if chosen else providers}


def _conversation_kinds(raws: list[dict[str, Any]]) -> pd.DataFrame:
    """The conversations, one row per kind (``n``) and piece, put one after the other (a kind may then have
    two rows; the figures add them up)."""
    conversations = pd.DataFrame([row for raw in raws for row in raw["rows"]],
                                 columns=[*GROUP_COLUMNS, "n", "answers", "cited", "citing"])
    if conversations.empty:  # the columns' types, as when there are rows
        conversations = conversations.astype({**{c: bool for c in ("started", "finalized", "confirmed", "booked")},
                                              "n": int})
    return conversations


def _entry_totals(raws: list[dict[str, Any]]) -> pd.DataFrame:
    totals = [sum(values) for values in zip(*(raw["entries"] for raw in raws))]
    names = ["entries", "status_draft", "status_confirmed", "status_archived", "ever_confirmed",
             "conversations_with_confirmed"]
    return pd.DataFrame([dict(zip(names, totals))])


def _faq_totals(raws: list[dict[str, Any]]) -> dict[str, int]:
    """The pieces' FAQ exchanges added up per outcome, in the order first met."""
    faq: dict[str, int] = {}
    for raw in raws:
        for outcome, exchanges in raw["faq"]:
            faq[outcome] = faq.get(outcome, 0) + exchanges
    return faq


def _faq_counts(raws: list[dict[str, Any]]) -> pd.DataFrame:
    faq = _faq_totals(raws)
    return pd.DataFrame({"outcome": list(faq), "exchanges": np.array(list(faq.values()), dtype=int)})


def _not_found_rows(raws: list[dict[str, Any]]) -> pd.DataFrame:
    missed = [row for raw in raws for row in raw["missed"]]
    return pd.DataFrame(missed, columns=["question", "count", "last_asked"]) if missed else pd.DataFrame()


# conversations / entries / faq / not_found of Frames from _conversation_rows of one range or several disjoint
# ones, each made on its own (PartFrames makes only those a figure reads)
CONVERSATION_FRAMES = {"conversations": _conversation_kinds, "entries": _entry_totals, "faq": _faq_counts,
                       "not_found": _not_found_rows}


def _conversation_shape(raws: list[dict[str, Any]]) -> dict[str, Any]:
    """conversations (one row per kind, ``n``) / entries / faq / not_found of :class:`Frames` from
    :func:`_conversation_rows` of one range, or of several disjoint ranges (``CONVERSATION_FRAMES``)."""
    return {name: make(raws) for name, make in CONVERSATION_FRAMES.items()}


def read_part(store: Store, part: str, since: datetime, until: datetime, providers: Iterable[str] = (), *,
              planned: bool = False) -> dict[str, pd.DataFrame]:
    """What one part of 分析 (``conversations`` / ``calls``) reads for ``[since, until)`` (datetimes at Japan
    midnights; a bound within a day — a cut of :func:`settled_split` — at a whole hour for the model calls),
    summed by the database; :func:`shape` makes the frames, from one range or several (``ui.cache`` keeps the
    settled days' apart: :func:`settled_split`). Does not refresh. Without ``providers`` it also names the
    providers the range holds (``providers``: what :func:`providers_seen` finds for it, in the same
    statements; ``None`` when filtered). ``planned``: a piece read again after every write (today's), its
    statements planned once (``Store.planned_read_connection``); a settled piece's range is planned for itself."""
    lo, hi = utc_bound(since), utc_bound(until, end=True)
    chosen = sorted(set(providers or []))
    with store.planned_read_connection() if planned else store.read_connection() as conn:
        if part == "conversations":
            return _conversation_rows(conn, lo, hi, chosen)
        return _call_rows(conn, *_call_days(lo, hi), chosen, hours=_call_hours(lo, hi))


def shape(part: str, raws: list[dict[str, pd.DataFrame]]) -> Frames:
    """The :class:`Frames` of one part from :func:`read_part` of disjoint ranges (the other part empty)."""
    loaded = {**_EMPTY_CONVERSATIONS, **_EMPTY_CALLS}
    loaded.update(_conversation_shape(raws) if part == "conversations" else _call_shape(raws))
    return Frames(**loaded)


class PartFrames:
    """:func:`shape`'s :class:`Frames` of one part, each frame made when a figure first reads it: after an FAQ
    exchange only the FAQ tables are computed again, so the conversations' other frames are not made at all.
    The conversations part's frames are made one by one (``CONVERSATION_FRAMES``); any other is
    :func:`shape`'s."""

    def __init__(self, part: str, raws: list[dict[str, Any]]) -> None:
        self._part, self._raws = part, raws
        self._calls: CallPieces | None = None

    @property
    def raws(self) -> list[dict[str, Any]]:
        return self._raws

    def call_pieces(self) -> CallPieces | None:
        """The model calls part's pieces added up (:class:`CallPieces`, made once), ``None`` for the other part."""
        if self._part != "calls":
            return None
        if self._calls is None:
            self._calls = CallPieces(self._raws)
        return self._calls

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._part == "conversations" and name in CONVERSATION_FRAMES:
            value = CONVERSATION_FRAMES[name](self._raws)
            setattr(self, name, value)  # made once
            return value
        whole = shape(self._part, self._raws)  # the others: all made at once, once
        for field in Frames.__dataclass_fields__:
            if field not in self.__dict__:
                setattr(self, field, getattr(whole, field))
        return getattr(whole, name)


def piece_sources(part: str, raw: dict[str, Any]) -> dict[str, list[Any]]:
    """What each source of figures (``FIGURE_SOURCES``) is made from in one piece of :func:`read_part`:
    equal values in every piece (and, for a flow's conversations, equal ``types`` in every piece: one frame
    holds every flow, and pandas makes a column's type from all of its values), equal figures. ``ui.cache``
    digests them once per piece, when it is read, so naming a table's inputs after a write costs only the
    piece read again."""
    if part == "conversations":
        flow = GROUP_COLUMNS.index("flow")
        return {"knowledge": [row for row in raw["rows"] if row[flow] == "knowledge"],
                "diagnosis": [row for row in raw["rows"] if row[flow] == "diagnosis"],
                "entries": raw["entries"], "faq": raw["faq"], "not_found": raw["missed"],
                # the Python types in each column: with the values, what the frame's column types are made of
                "types": [sorted({type(row[i]).__name__ for row in raw["rows"]})
                          for i in range(len(GROUP_COLUMNS) + 4)]}
    return {"quality": [raw["sums"], raw["latency"]], "hourly": [raw["hourly"]], "methods": raw["methods"],
            "errors": [raw["errors"], raw["sums"]]}


def settled_split(since: datetime, until: datetime, part: str, now: datetime | None = None
                  ) -> list[tuple[datetime, datetime, str]]:
    """``[since, until)`` (Japan midnights) cut where ``part``'s days still being written begin
    (``rollups.settled_before``: yesterday for conversations, today for model calls), for the conversations
    again at today, and at the last whole slot of today (``rollups.earlier_before``: ten minutes for the
    conversations, an hour for the model calls), as ``(start, end, version)``: the rollup version whose moves
    are the only ones that change that piece (``rollups.SETTLED`` for the settled days, ``rollups.RECENT`` for
    yesterday's conversations, ``rollups.EARLIER`` for today's before the cut, the part's own for the rest),
    so the first run after a write reads again only the conversations created in the last minutes and the
    model calls of the last hour or two. A range that is not whole Japan days is one piece of the part's own
    version. ``now``: the present (Japan time)."""
    if _japan_day(utc_bound(since)) is None or _japan_day(utc_bound(until, end=True)) is None:
        return [(since, until, part)]
    now = (now or datetime.now(rollups.DAY_TZ)).astimezone(rollups.DAY_TZ)
    today = datetime.combine(now.date(), time(), rollups.DAY_TZ)
    cuts = [(datetime.combine(date.fromisoformat(rollups.settled_before(part, today.date())), time(), rollups.DAY_TZ),
             rollups.SETTLED[part])]
    if part in rollups.RECENT:
        cuts.append((today, rollups.RECENT[part]))
    if part in rollups.EARLIER:
        cuts.append((rollups.earlier_before(now, part), rollups.EARLIER[part]))
    pieces, start = [], since
    for at, version in cuts:
        cut = max(start, min(until, at))
        if start < cut:
            pieces.append((start, cut, version))
        start = cut
    return pieces + ([(start, until, part)] if start < until else [])


def _conversation_parts(conn: Any, lo: str | None, hi: str | None, chosen: list[str]) -> dict[str, Any]:
    """conversations / entries / faq / not_found of :class:`Frames`, from the conversation rollups."""
    params: dict[str, Any] = {"since": lo, "until": hi, "providers": chosen}
    where = _created_in("c", lo, hi, chosen)
    rows = _query(conn, f"SELECT {', '.join('c.' + n for n in CONVERSATION_COLUMNS + ENTRY_COLUMNS)} "
                        f"FROM rollup_conversations c WHERE {where} ORDER BY c.created_at, c.id", params, bool(chosen))
    faq_where = _created_in("f", lo, hi, chosen)
    faq = _query(conn, "SELECT f.outcome, f.question, f.exchanges, f.last_asked FROM rollup_faq f "
                       f"WHERE {faq_where}", params, bool(chosen))
    conversations = rows[list(CONVERSATION_COLUMNS)].copy()
    for column in ("started", "finalized", "confirmed", "booked"):
        conversations[column] = conversations[column].fillna(0).astype(int).astype(bool)
    totals = rows[list(ENTRY_COLUMNS)].fillna(0).astype(int)
    entries = pd.DataFrame([{"entries": int(totals["entries"].sum()), "status_draft": int(totals["entries_draft"].sum()),
                             "status_confirmed": int(totals["entries_confirmed"].sum()),
                             "status_archived": int(totals["entries_archived"].sum()),
                             "ever_confirmed": int(totals["entries_ever"].sum()),
                             "conversations_with_confirmed": int((totals["entries_ever"] > 0).sum())}])
    faq = faq.astype({"exchanges": int})
    missed = faq[faq["outcome"] == "not_found"]
    return {"conversations": conversations, "entries": entries,
            "faq": faq.groupby("outcome", as_index=False)["exchanges"].sum(),
            "not_found": (missed.groupby("question", as_index=False, dropna=False)
                          .agg(count=("exchanges", "sum"), last_asked=("last_asked", "max")))}


def _call_parts(conn: Any, lo: str | None, hi: str | None, chosen: list[str]) -> dict[str, Any]:
    first, last = _japan_day(lo), _japan_day(hi)
    if (lo is None or first is not None) and (hi is None or last is not None):
        return _calls_from_rollups(conn, first, last, chosen)
    return _calls_from_records(conn, lo, hi, chosen)


_EMPTY_CALLS = {"quality": pd.DataFrame(), "methods": pd.DataFrame(), "hourly": pd.DataFrame(),
                "errors": pd.DataFrame(columns=["error_type", "calls"]), "calls": 0}
_EMPTY_CONVERSATIONS = {"conversations": pd.DataFrame(columns=list(CONVERSATION_COLUMNS)), "entries": pd.DataFrame(),
                        "faq": pd.DataFrame(columns=["outcome", "exchanges"]), "not_found": pd.DataFrame()}
PARTS = {"conversations": _conversation_parts, "calls": _call_parts}


def load_frames(store: Store, since: str | date | datetime | None = None, until: str | date | datetime | None = None,
                providers: Iterable[str] | None = None, *, parts: Iterable[str] = tuple(PARTS),
                grouped: bool = False) -> Frames:
    """The cohort of ``[since, until)`` (see :func:`utc_bound`), filtered to ``providers`` (all when empty),
    read from the rollups (brought up to date first: :func:`refresh`). The model calls of a range of whole
    Japan days come from the day rollups; of any other range, from the debug records (one statement).
    ``parts`` (``conversations``, ``calls``) leaves the other part's tables empty (not read). ``grouped``: the
    conversations come summed by the database (one row per kind of conversation, ``n`` of them: what 分析
    reads, the same figures) instead of one row per conversation."""
    refresh(store)
    lo, hi = utc_bound(since), utc_bound(until, end=True)
    chosen = sorted(set(providers or []))
    loaded = {**_EMPTY_CONVERSATIONS, **_EMPTY_CALLS}
    with store.read_connection() as conn:
        for part in parts:
            if grouped and part == "conversations":
                loaded.update(_conversation_shape([_conversation_rows(conn, lo, hi, chosen)]))
            else:
                loaded.update(PARTS[part](conn, lo, hi, chosen))
    return Frames(since=lo, until=hi, **loaded)


# What 分析 shows, by the rollups each table is made from (``ui.cache`` keeps each part until its rollups change).
FIGURES = {"conversations": ("interview_funnel", "turns_to_phase", "phase_dropoff", "entries_confirmed",
                             "diagnosis_summary", "diagnosis_outcomes", "diagnosis_end_steps", "faq_rates"),
           "calls": ("model_quality", "quality_over_time", "method_mix", "error_types")}


# What each table is computed from (:func:`piece_sources`): a table is computed again only when its source
# changed (``ui.cache``).
FIGURE_SOURCES = {"interview_funnel": "knowledge", "turns_to_phase": "knowledge", "phase_dropoff": "knowledge",
                  "diagnosis_summary": "diagnosis", "diagnosis_outcomes": "diagnosis",
                  "diagnosis_end_steps": "diagnosis", "entries_confirmed": "entries", "faq_rates": "faq",
                  "faq_top_not_found": "not_found", "model_quality": "quality", "quality_over_time": "hourly",
                  "method_mix": "methods", "error_types": "errors"}


def figure(frames: Frames, name: str) -> pd.DataFrame:
    """The table ``name`` of 分析 (a function of this module; ``faq_top_not_found``: the top 20)."""
    if name in CALL_TABLES and isinstance(frames, PartFrames) and frames.call_pieces() is not None:
        return CALL_TABLES[name](frames.call_pieces())  # 分析: straight from the pieces read
    if name == "faq_rates" and isinstance(frames, PartFrames) and frames.call_pieces() is None:
        return _faq_rates_of(frames.raws)
    return faq_top_not_found(frames, 20) if name == "faq_top_not_found" else globals()[name](frames)


def figures(store: Store, part: str, since: str | date | datetime | None = None,
            until: str | date | datetime | None = None, providers: Iterable[str] | None = None,
            top_not_found: int = 20) -> dict[str, pd.DataFrame]:
    """The tables of one part of 分析 (``FIGURES``; the conversations part also ``faq_top_not_found``),
    reading only that part's rollups."""
    frames = load_frames(store, since, until, providers, parts=(part,))
    tables = {name: globals()[name](frames) for name in FIGURES[part]}
    if part == "conversations":
        tables["faq_top_not_found"] = faq_top_not_found(frames, top_not_found)
    return tables


def provider_options(store: Store, since: str | date | datetime | None = None,
                     until: str | date | datetime | None = None) -> list[str]:
    """The providers seen in the range (its conversations' and its model calls'), for the filter."""
    refresh(store)
    return provider_order(providers_seen(store, {part: (since, until) for part in PARTS}))


def providers_seen(store: Store, ranges: dict[str, tuple[Any, Any]]) -> list[str]:
    """The providers the parts name in their ranges (``{part: (since, until)}``), in one statement: the
    conversations' (``conversations``), the model calls' (``calls``: from the day rollups for whole Japan
    days, else from the records). Does not refresh."""
    selects, params = [], {"unknown": UNKNOWN}
    for i, (part, (since, until)) in enumerate(ranges.items()):
        lo, hi = utc_bound(since), utc_bound(until, end=True)
        first, last = _japan_day(lo), _japan_day(hi)
        params.update({f"since{i}": lo, f"until{i}": hi, f"first{i}": first, f"last{i}": last})
        moments = " AND ".join(["1 = 1"] + ([f"created_at >= :since{i}"] if lo else []) +
                               ([f"created_at < :until{i}"] if hi else []))
        days = " AND ".join(["1 = 1"] + ([f"day >= :first{i}"] if first else []) + ([f"day < :last{i}"] if last else []))
        if part == "conversations":
            selects.append(f"SELECT DISTINCT provider FROM rollup_conversations WHERE {moments}")
        elif (lo is None or first) and (hi is None or last):
            selects.append(f"SELECT DISTINCT provider FROM rollup_tasks WHERE tasks > 0 AND {days}")
        else:
            selects.append(f"SELECT DISTINCT COALESCE(NULLIF(provider, ''), :unknown) FROM debug_records WHERE {moments}")
    if not selects:
        return []
    with store.read_connection() as conn:
        return [row[0] for row in conn.execute(rollups.statement(" UNION ".join(selects)), params) if row[0] is not None]


def provider_order(providers: Iterable[str]) -> list[str]:
    """Providers as the filter lists them: by name, ``UNKNOWN`` last, each once."""
    return sorted({p for p in providers if p is not None}, key=lambda p: (p == UNKNOWN, p))


# ---- interview (knowledge) -----------------------------------------------------------------------------
def _started(frames: Frames, flow: str) -> pd.DataFrame:
    """The started conversations of ``flow``: one row per conversation, or per kind of conversation (grouped
    frames); ``n`` is how many conversations a row stands for (1 without grouping)."""
    conversations = frames.conversations
    per = conversations[(conversations["flow"] == flow) & conversations["started"]]
    per = per.set_index("id") if "id" in per else per
    return per if "n" in per else per.assign(n=1)


def _knowledge_progress(frames: Frames) -> pd.DataFrame:
    """Per started knowledge conversation (or kind of them, ``n``): furthest phase rank, last phase,
    finalized, any entry confirmed."""
    per = _started(frames, "knowledge").rename_axis("conversation_id")
    return per[["max_rank", "last_phase", "finalized", "confirmed", "to_draft", "to_finalize", "n"]]


def _counts(per: pd.DataFrame, by: pd.Series) -> pd.Series:
    """How many conversations there are per value of ``by`` (``per``'s rows weighted by ``n``)."""
    return per["n"].groupby(by).sum()


def _share(part: pd.Series, whole: pd.Series | int) -> pd.Series:
    return (part / whole).where(pd.Series(whole, index=part.index) > 0, 0.0).astype(float).round(3)


def _reached_by_rank(per: pd.DataFrame) -> pd.Series:
    reached = per[per["max_rank"].notna()]
    by_rank = _counts(reached, reached["max_rank"].astype(int)).reindex(range(len(PHASES)), fill_value=0)
    return by_rank[::-1].cumsum()[::-1].set_axis(PHASES)


def interview_funnel(frames: Frames) -> pd.DataFrame:
    """Conversations reaching each stage: started, each phase (or a later one), ``finalize`` mode, an
    entry confirmed; ``share`` of the started ones."""
    per = _knowledge_progress(frames)
    started = int(per["n"].sum())
    counts = pd.concat([pd.Series({"started": started}), _reached_by_rank(per),
                        pd.Series({"finalize": per["n"][per["finalized"]].sum(),
                                   "confirmed": per["n"][per["confirmed"]].sum()})])
    out = counts.astype(int).rename("conversations").rename_axis("stage").reset_index()
    out["share"] = _share(out["conversations"], started)
    return out


def turns_to_phase(frames: Frames) -> pd.DataFrame:
    """User turns it took to reach ``draft_knowledge`` (or later) and ``finalize``: per target, how many
    conversations got there and the mean / median / min / max of the user turns sent until then."""
    per = _knowledge_progress(frames)
    first = {"draft_knowledge": per["to_draft"].repeat(per["n"]).dropna(),
             "finalize": per["to_finalize"].repeat(per["n"]).dropna()}
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
    ended = _counts(stopped, stopped["last_phase"].fillna(NO_PHASE)).reindex(order, fill_value=0)
    reached = pd.concat([pd.Series({NO_PHASE: int(per["n"].sum())}), _reached_by_rank(per)])
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
def _present(value: Any) -> bool:
    """Whether a cell holds a value (not ``None`` / NaN): what pandas' ``groupby`` keeps as a key."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def model_quality(frames: Frames) -> pd.DataFrame:
    """Per task (flow/step), provider and prompt version: tasks, calls, first-try validity (share of
    tasks whose first call was valid), final validity, repairs per task, error calls, and the p50 / p95
    latency of one model call (ms). Built column by column from arrays (one table, no pandas operation per
    column: this table is computed again after every model call, issue #25)."""
    columns = [*QUALITY_KEYS, "tasks", "calls", "first_try_valid", "valid", "repairs_per_task", "error_calls",
               "latency_p50_ms", "latency_p95_ms"]
    quality = frames.quality
    if quality.empty:
        return pd.DataFrame(columns=columns)
    keys = list(zip(*(quality[k].tolist() for k in QUALITY_KEYS)))
    order = sorted(range(len(keys)), key=keys.__getitem__)  # stable, as sort_values
    if order != list(range(len(keys))):
        quality = quality.iloc[order]
    n = quality["n"].tolist()
    out: dict[str, Any] = {k: quality[k].array for k in QUALITY_KEYS}
    for column in ("tasks", "calls"):
        out[column] = quality[column].to_numpy().astype(int)
    for column, decimals in (("first_try_valid", 3), ("valid", 3), ("repairs_per_task", 2)):
        out[column] = np.round(quality[column].to_numpy().astype(float), decimals)
    out["error_calls"] = quality["error_calls"].to_numpy().astype(int)
    for column, q, lo, hi in (("latency_p50_ms", 0.5, "p50_lo", "p50_hi"), ("latency_p95_ms", 0.95, "p95_lo", "p95_hi")):
        out[column] = np.round(np.array([_quantile(*v, q) for v in zip(n, quality[lo].tolist(), quality[hi].tolist())],
                                        dtype=float), 1)
    return pd.DataFrame(out, columns=columns)


def method_mix(frames: Frames) -> pd.DataFrame:
    """Tasks per structured-output method (the strategy of each task's last call), per task (flow/step)."""
    methods = frames.methods
    if methods.empty:
        return pd.DataFrame(columns=["task"])
    return _method_mix_table(zip(methods["task"].tolist(), methods["method"].tolist(), methods["tasks"].tolist()))


def _method_mix_table(rows: Iterable[tuple[Any, Any, Any]]) -> pd.DataFrame:
    """:func:`method_mix`'s table from ``(task, method, tasks)`` rows, summed per task and method."""
    cells: dict[tuple[str, str], int] = {}
    for task, method, tasks in rows:
        if _present(task) and _present(method):  # as groupby: a missing key is left out
            cells[task, method] = cells.get((task, method), 0) + int(tasks)
    if not cells:
        return pd.DataFrame(columns=["task"])
    tasks = sorted({task for task, _ in cells})
    names = sorted({method for _, method in cells})
    mix = {method: np.array([cells.get((task, method), 0) for task in tasks], dtype=int) for method in names}
    return pd.DataFrame({"task": tasks, **mix}, columns=["task", *names])


def error_types(frames: Frames) -> pd.DataFrame:
    """Failed model calls by outcome (parse_error, schema_error, provider_error:<kind>, …), most frequent first."""
    errors = frames.errors
    if errors.empty:
        return pd.DataFrame({"error_type": errors["error_type"].astype(object), "calls": errors["calls"].astype(int),
                             "share_of_calls": pd.Series(dtype=float)}, columns=["error_type", "calls", "share_of_calls"])
    return _error_types_table(zip(errors["error_type"].tolist(), errors["calls"].tolist()), frames.calls)


def _error_types_table(rows: Iterable[tuple[Any, Any]], all_calls: int) -> pd.DataFrame:
    """:func:`error_types`' table from ``(error type, calls)`` rows (a missing type counted as unknown), most
    frequent first, each a share of ``all_calls``."""
    counts: dict[str, int] = {}
    for error, calls in rows:
        error = error if _present(error) else UNKNOWN
        counts[error] = counts.get(error, 0) + int(calls)
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    calls = np.array([n for _, n in ordered], dtype=int)
    share = np.round(calls / all_calls, 3) if all_calls > 0 else np.zeros(len(calls))
    return pd.DataFrame({"error_type": [error for error, _ in ordered], "calls": calls, "share_of_calls": share})


def quality_over_time(frames: Frames, *, tz: str = "Asia/Tokyo") -> pd.DataFrame:
    """First-try validity per day (in ``tz``) for each ``task · provider · prompt version``: a prompt change
    shows up as a step. Index: the day; one column per series. Each key column coded once (``factorize``),
    the cells summed by ``bincount`` and divided as one array (this table changes with every model call)."""
    hourly = frames.hourly
    if hourly.empty:
        return pd.DataFrame()
    (hours, hour_of), (tasks, task_of), (providers, provider_of), (versions, version_of) = (
        pd.factorize(hourly[c].to_numpy(dtype=object)) for c in HOURLY_COLUMNS[:4])  # -1: a missing value
    keep = (hours >= 0) & (tasks >= 0) & (providers >= 0) & (versions >= 0)  # as groupby: a missing key is left out
    if not keep.any():
        return pd.DataFrame()
    zone = ZoneInfo(tz)  # each distinct hour converted once
    local = [datetime.combine(datetime.fromisoformat(f"{h}:00:00+00:00").astimezone(zone).date(), time())
             for h in hour_of]
    days = sorted(set(local))
    day_at = np.array([days.index(day) for day in local], dtype=int)[hours[keep]]
    combos, combo_of = pd.factorize((tasks[keep] * len(provider_of) + providers[keep]) * len(version_of)
                                    + versions[keep])
    width = len(version_of)
    names = [f"{task_of[c // (len(provider_of) * width)]} · {provider_of[c // width % len(provider_of)]}"
             f" · {version_of[c % width]}" for c in combo_of]
    series = sorted(set(names))
    series_at = np.array([series.index(name) for name in names], dtype=int)[combos]
    cell, size = day_at * len(series) + series_at, len(days) * len(series)
    present = np.bincount(cell, minlength=size) > 0
    first_valid = np.where(present, np.bincount(cell, hourly["first_try_valid"].to_numpy(dtype=float)[keep], size),
                           np.nan).reshape(len(days), len(series))
    tasks_sum = np.where(present, np.bincount(cell, hourly["tasks"].to_numpy(dtype=float)[keep], size),
                         np.nan).reshape(len(days), len(series))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.round(first_valid / tasks_sum, 3)
    return pd.DataFrame(share, index=pd.DatetimeIndex(days, name="day").as_unit("us"),
                        columns=pd.Index(series, name="series"))


# ---- diagnosis -------------------------------------------------------------------------------------------
def _diagnosis_progress(frames: Frames) -> pd.DataFrame:
    """Per started diagnosis conversation: urgency, final step, booked, answers and their citations."""
    started = _started(frames, "diagnosis").rename_axis("conversation_id")
    per = pd.DataFrame(index=started.index)
    per["final_step"] = started["final_step"].fillna(UNKNOWN)
    per["urgency"] = started["urgency"].fillna(UNKNOWN)
    per["booked"] = started["booked"].astype(bool)
    per["done"] = per["final_step"] == "done"
    for column in ("answers", "cited", "citing"):  # per kind of conversation (grouped frames): their sums
        per[column] = started[column].fillna(0).astype(int)
    per["n"] = started["n"].astype(int)
    return per


def diagnosis_outcomes(frames: Frames) -> pd.DataFrame:
    """By urgency (session state, else the booking): conversations, reached ``done``, booked, booking rate."""
    per = _diagnosis_progress(frames)
    weighted = per.assign(done=per["n"] * per["done"], booked=per["n"] * per["booked"])
    out = (weighted.groupby("urgency").agg(conversations=("n", "sum"), done=("done", "sum"), booked=("booked", "sum"))
           .reindex([u for u in URGENCY_LEVELS if u in set(per["urgency"])] +
                    sorted(set(per["urgency"]) - set(URGENCY_LEVELS))))
    out = out.astype(int).rename_axis("urgency").reset_index()
    out["booking_rate"] = _share(out["booked"], out["conversations"])
    return out


def diagnosis_end_steps(frames: Frames) -> pd.DataFrame:
    """The step each diagnosis conversation is at (where it ended, or stands), most frequent first (steps
    as frequent as each other: by name)."""
    per = _diagnosis_progress(frames)
    counts = _counts(per, per["final_step"]).sort_values(ascending=False, kind="stable")
    out = counts.astype(int).rename("conversations").rename_axis("step").reset_index()
    out["share"] = _share(out["conversations"], int(per["n"].sum()))
    return out


def diagnosis_summary(frames: Frames) -> pd.DataFrame:
    """Conversations, booked conversations, booking rate (booked / conversations), model answers (assistant
    turns of ``ANSWER_STEPS``), citations per answer and the share of answers citing the manual."""
    per = _diagnosis_progress(frames)
    conversations, booked = int(per["n"].sum()), int(per["n"][per["booked"]].sum())
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
    counts: dict[str, int] = {}
    if len(frames.faq):
        for outcome, exchanges in zip(frames.faq["outcome"].tolist(), frames.faq["exchanges"].tolist()):
            counts[outcome] = int(exchanges)
    return _rates(counts)


def _rates(counts: dict[str, int]) -> pd.DataFrame:
    order = list(FAQ_OUTCOMES) + sorted(set(counts) - set(FAQ_OUTCOMES))
    exchanges = np.array([counts.get(outcome, 0) for outcome in order], dtype=int)
    total = int(exchanges.sum())
    rate = np.round(exchanges / total, 3) if total > 0 else np.zeros(len(order))
    return pd.DataFrame({"outcome": order, "exchanges": exchanges, "rate": rate})


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
