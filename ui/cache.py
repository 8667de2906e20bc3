"""What the store-backed pages read, cached once for the whole server (``st.cache_data``), not per session.

Every cached read is keyed by the store's URL, the change stamps of the tables it reads
(``Store.change_stamp``: they move with every write, from any process) and its own arguments, so a rerun
with nothing new reads nothing from the database, and the first rerun after a write reads afresh. Each
cache holds a bounded number of entries (``max_entries``) for a bounded time (``ttl``), so the server's
memory stays flat however many sessions come and go (a session keeps only its widget values), and a stamp
that cannot be read (another database engine) is covered by the TTL alone.

分析's intermediate values that nothing changes once made (the pieces read, the computed and labelled tables,
the filter's providers) are kept as they are in one bounded store (:class:`Kept`, itself one
``st.cache_resource``) instead of pickled in and out of Streamlit's caches or looked up one Streamlit call each:
after every write they are looked up, and copying and keying them was a good part of the page's first run
(issue #25).
"""
from __future__ import annotations

import hashlib
import pickle
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

import cachetools
import streamlit as st

from core import analytics
from core.store import get_store, rollups
from core.store.debug_records import DebugQuery
from core.store.tables import DEBUG_FILTER_COLUMNS
from ui import charts
from ui.session import store

TTL_SECONDS = 300
SETTLED_TTL_SECONDS = 3600  # 分析's settled days: keyed by their own version, kept longer (a few MB at most)


def stamp(*tables: str) -> tuple[Any, ...] | None:
    """The change stamps of ``tables`` (all stamped tables when none is named), read now: one small query."""
    stamps = store().change_stamp()
    if stamps is None:
        return None
    return tuple((name, value) for name, value in stamps if not tables or name in tables)


def _url() -> str:
    return store().url


# ---- 分析 ----------------------------------------------------------------------------------------------
KEPT = {  # 分析's intermediate values: kind → (entries, seconds)
    "rows": (16, TTL_SECONDS),                 # the days still being written, as read (per version of their rollups)
    "settled": (16, SETTLED_TTL_SECONDS),      # the settled days and yesterday's conversations, as read
    "earlier": (16, TTL_SECONDS),              # today's conversations before the last slot and model calls before
                                               # the last hour, as read (a new cut every 10 minutes / hour: kept
                                               # apart, it never pushes a settled piece out)
    "figure": (128, TTL_SECONDS),              # a computed table and its content's digest, per its inputs
    "part": (32, TTL_SECONDS),                 # a part's tables and digests, per its versions
    "providers": (16, TTL_SECONDS),            # the filter's providers, per versions
    "labelled": (64, TTL_SECONDS),             # a table labelled as shown (pages/analytics.py), per content
    "charted": (64, TTL_SECONDS),              # a digest of what a chart draws (pages/analytics.py), per content
}
_MISSING = object()


class Kept:
    """分析's intermediate values for the whole server, bounded per kind (``KEPT``: entries and time,
    ``cachetools.TTLCache``) and kept as they are (nothing pickled: the callers never change them). One
    Streamlit cache holds it (:func:`analytics_kept`, cleared with ``st.cache_resource``), so a run of the page
    costs one Streamlit lookup for them all, not one per piece, table and label (each of those hashes its
    arguments: after a write they were ≈ 35 lookups, issue #25)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._caches = {kind: cachetools.TTLCache(maxsize=entries, ttl=seconds)
                        for kind, (entries, seconds) in KEPT.items()}

    def get(self, kind: str, key: Any, make: Callable[[], Any]) -> Any:
        """The value kept for ``key``, or ``make()``'s, kept (two sessions may both make it: same value)."""
        cache = self._caches[kind]
        with self._lock:
            value = cache.get(key, _MISSING)
        if value is _MISSING:
            value = make()
            with self._lock:
                cache[key] = value
        return value

    def __len__(self) -> int:
        with self._lock:
            return sum(len(cache) for cache in self._caches.values())


@st.cache_resource(ttl=SETTLED_TTL_SECONDS, max_entries=1, show_spinner=False)
def analytics_kept() -> Kept:
    """The one :class:`Kept` of the server."""
    return Kept()


def _piece(kept: Kept, url: str, version: int, part: str, since: datetime, until: datetime,
           providers: tuple[str, ...], *, kind: str) -> tuple[dict[str, Any], dict[str, str]]:
    """What one part reads for ``[since, until)`` for this version of its rollups, summed by the database
    (``analytics.read_part``; unfiltered, it names the providers it holds), and a digest per source of
    figures (``analytics.piece_sources``), made once when the piece is read. The settled days and yesterday's
    conversations (``kind`` "settled"), and today's before the cut ("earlier": ``rollups.earlier_before``),
    are kept apart from the rest of today ("rows"): a write now does not push them out. Today's pieces, read
    again and again, are planned once per connection (``Store.planned_read_connection``)."""
    def read() -> tuple[dict[str, Any], dict[str, str]]:
        raw = analytics.read_part(get_store(url), part, since, until, providers, planned=kind != "settled")
        return raw, {source: digest_of(values) for source, values in analytics.piece_sources(part, raw).items()}

    return kept.get(kind, (url, version, part, since, until, providers), read)


def _pieces(kept: Kept, url: str, versions: dict[str, int], part: str, since: datetime, until: datetime,
            providers: tuple[str, ...]) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """The pieces of one part's period (``analytics.settled_split``), each for its own version."""
    return [_piece(kept, url, versions.get(name, 0), part, lo, hi, providers,
                   kind="rows" if name == part else "earlier" if name in rollups.EARLIER.values() else "settled")
            for lo, hi, name in analytics.settled_split(since, until, part)]


def _figure(kept: Kept, name: str, inputs: str, frames: analytics.PartFrames) -> tuple[Any, str]:
    """The table ``name`` computed from ``frames`` (``inputs`` names its inputs) and a digest of the table
    itself: a table whose inputs changed but whose content did not (a share that rounds the same) is not
    labelled or drawn again."""
    def compute() -> tuple[Any, str]:
        table = analytics.figure(frames, name)
        return table, digest(table)

    return kept.get("figure", (name, inputs), compute)


def _part(kept: Kept, url: str, versions: tuple, part: str, since: datetime, until: datetime,
          providers: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, str]]:
    """The tables of one part of 分析 (``analytics.FIGURES``) and their contents' digests, for these rollup
    versions. The settled days, yesterday's conversations and today's before the cut
    (``analytics.settled_split``) are read again only when their own version moves, the rest of today whenever
    the part's does; each table is computed again only when its own inputs changed (``_figure``), named by
    the digests of its source in each piece (the settled piece's made when it was read) and, for a flow's
    conversations, the frame's column types."""
    def compute() -> tuple[dict[str, Any], dict[str, str]]:
        pieces = _pieces(kept, url, dict(versions), part, since, until, providers)
        frames = analytics.PartFrames(part, [raw for raw, _ in pieces])  # each frame made when first read
        sources = {source: digest_of([piece[source] for _, piece in pieces] +  # one frame holds every flow:
                                     ([piece["types"] for _, piece in pieces] if source in ("knowledge", "diagnosis")
                                      else []))  # their column types are shared
                   for source in pieces[0][1]} if pieces else {}
        tables: dict[str, Any] = {}
        digests: dict[str, str] = {}
        for name in analytics.FIGURES[part] + (("faq_top_not_found",) if part == "conversations" else ()):
            tables[name], digests[name] = _figure(kept, name, sources.get(analytics.FIGURE_SOURCES[name], ""), frames)
        return tables, digests

    return kept.get("part", (url, versions, part, since, until, providers), compute)


def analytics_versions() -> tuple:
    """What was written since the last look, counted (the store's rollups, ``analytics.refresh``), and the
    rollups' versions: one refresh per run of the page, shared by :func:`provider_options` and
    :func:`analytics_figures`."""
    return tuple(sorted(analytics.refresh(store()).items()))


def analytics_figures(since: datetime, until: datetime, providers: list[str], versions: tuple | None = None
                      ) -> tuple[tuple, dict[str, Any], dict[str, str]]:
    """``(key, tables, digests)``: every table of 分析 for the period (``core.analytics`` function name →
    table), a key that names exactly these tables, and per table a digest of its content (for
    :func:`replay` and the labelled tables: a table that did not change is not labelled or drawn again).
    ``versions``: :func:`analytics_versions` (counted now when not given). Each part of the page
    (``analytics.FIGURES``) is read again only when its own rollups changed (only its days still being
    written, unless a settled day changed too), and each table is computed again only when its own inputs
    changed (``analytics.piece_sources``: an FAQ turn leaves the interview and diagnosis tables as they were);
    a rerun with nothing new is one lookup per part."""
    url, versions = _url(), versions if versions is not None else analytics_versions()
    chosen = tuple(sorted(providers))
    kept = analytics_kept()
    tables: dict[str, Any] = {}
    digests: dict[str, str] = {}
    for part in analytics.FIGURES:
        names = (part, rollups.SETTLED[part], rollups.RECENT.get(part), rollups.EARLIER.get(part))
        part_versions = tuple((name, value) for name, value in versions if name in names)
        part_tables, part_digests = _part(kept, url, part_versions, part, since, until, chosen)
        tables.update(part_tables)
        digests.update(part_digests)
    return (url, versions, since, until, chosen), tables, digests


def provider_options(since: datetime, until: datetime, versions: tuple | None = None) -> list[str]:
    """The filter's providers: those the period's pieces name (``analytics.read_part`` unfiltered), so after a
    write they come with today's pieces, read once for the figures too (no query of their own), and the
    settled days' with the settled pieces."""
    url, versions = _url(), versions if versions is not None else analytics_versions()
    kept = analytics_kept()

    def seen() -> list[str]:
        version = dict(versions)
        return analytics.provider_order(
            provider for part in analytics.FIGURES
            for raw, _ in _pieces(kept, url, version, part, since, until, ()) for provider in raw["providers"])

    return kept.get("providers", (url, versions, since, until), seen)


def digest_of(values: list[Any]) -> str:
    """One digest of several tables (and plain values): of their pickle, in one go (a piece's rows are many
    small values: one pickle of them all costs a fraction of one per value)."""
    return digest(values)


def digest(data: Any) -> str:
    """A short name for a table's (or value's) content, from its pickle: equal digests, equal tables; a table
    built the same way from the same values gets the same digest (a table built otherwise may not: it is then
    only computed or drawn once more). Several times cheaper than hashing the values column by column."""
    return hashlib.sha256(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()[:24]


def analytics_chart(kind: str, name: str, content: str, data: Any, **kwargs: Any) -> None:
    """A chart of 分析 (:func:`replay`) named by what it draws: a bar chart along a column ``x`` of an Arrow
    table (``ui.tables``) by a digest of the values it draws (``charts.plotted``; kept per table ``content``:
    a count that moves beside an unchanged rate does not draw it again, and ``ui.charts`` sends it those
    columns only), any other by its table's ``content``."""
    options = repr(sorted(kwargs.items()))
    drawn = content if kwargs.get("x") is None else analytics_kept().get("charted", (name, content, options), lambda: digest(
        [data.column_names, [data.column(c).to_pylist() for c in charts.plotted(data, kwargs["x"], kwargs.get("y"))]]))
    replay(kind=kind, key=(name, drawn, options), _data=data, **kwargs)


@st.cache_data(ttl=TTL_SECONDS, max_entries=256, show_spinner=False)
def replay(kind: str, key: Any, _data: Any, **kwargs: Any) -> None:
    """A ``bar`` or ``line`` chart (``ui.charts``: the charts of ``st.bar_chart`` / ``st.line_chart``, as
    plain Vega-Lite) or a ``dataframe`` of ``_data``, drawn once per ``key`` (which must name the data, e.g.
    with :func:`digest`: it is not hashed) and then replayed (Streamlit replays the elements a cached
    function drew): building a chart's spec and a table's Arrow bytes is most of a rerun's time."""
    if kind == "dataframe":
        st.dataframe(_data, **kwargs)
        return
    data, spec = charts.spec(kind, _data, **kwargs)
    st.vega_lite_chart(data, spec, width="stretch")


# ---- ナレッジライブラリ ------------------------------------------------------------------------------------
LIBRARY_TABLES = ("knowledge_entries",)


@st.cache_data(ttl=TTL_SECONDS, max_entries=64, show_spinner=False)
def _entries(url: str, stamps: Any, filters: tuple, offset: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    status, types, query = filters
    s = get_store(url)
    kwargs = {"status": list(status) or None, "contract_type": list(types) or None, "query": query}
    return s.list_entries(**kwargs, limit=limit, offset=offset), s.count_entries(**kwargs)


@st.cache_data(ttl=TTL_SECONDS, max_entries=8, show_spinner=False)
def _contract_types(url: str, stamps: Any) -> list[str]:
    return get_store(url).contract_types()


def entries_page(status: list[str], types: list[str], query: str, offset: int, limit: int
                 ) -> tuple[list[dict[str, Any]], int]:
    """One page of the library (newest change first) and how many entries the filters find."""
    return _entries(_url(), stamp(*LIBRARY_TABLES), (tuple(status), tuple(types), query), offset, limit)


def contract_types() -> list[str]:
    return _contract_types(_url(), stamp(*LIBRARY_TABLES))


# ---- 予約管理 -------------------------------------------------------------------------------------------
@st.cache_data(ttl=TTL_SECONDS, max_entries=64, show_spinner=False)
def _bookings(url: str, stamps: Any, filters: tuple, offset: int, limit: int, order: str = "newest"
              ) -> tuple[list[dict[str, Any]], int]:
    status, urgency, date_from, date_to = filters
    s = get_store(url)
    kwargs = {"status": list(status) or None, "urgency": list(urgency) or None, "date_from": date_from,
              "date_to": date_to}
    return s.list_bookings(**kwargs, limit=limit, offset=offset, order=order), s.count_bookings(**kwargs)


def bookings_page(status: list[str], urgency: list[str], date_from: str | None, date_to: str | None, offset: int,
                  limit: int, order: str = "newest") -> tuple[list[dict[str, Any]], int]:
    """One page of bookings (newest first, or the most urgent first with ``order="urgency"``) and how many
    the filters find."""
    return _bookings(_url(), stamp("bookings"), (tuple(status), tuple(urgency), date_from, date_to), offset, limit,
                     order)


# ---- デバッグログ ---------------------------------------------------------------------------------------
@st.cache_data(ttl=TTL_SECONDS, max_entries=16, show_spinner=False)  # whole records: a few MB at most each
def _debug_page(url: str, stamps: Any, query: DebugQuery, offset: int, limit: int
                ) -> tuple[list[dict[str, Any]], int, int]:
    s = get_store(url)
    matched = s.count_debug_records(query=query)
    return s.debug_page(query, limit=limit, offset=offset), matched, (
        matched if query == DebugQuery() else s.count_debug_records())


@st.cache_data(ttl=TTL_SECONDS, max_entries=64, show_spinner=False)
def _debug_count(url: str, stamps: Any, query: DebugQuery) -> int:
    return get_store(url).count_debug_records(query=query)


@st.cache_data(ttl=TTL_SECONDS, max_entries=8, show_spinner=False)
def _debug_options(url: str, stamps: Any) -> dict[str, list[str]]:
    s = get_store(url)
    return {column: s.debug_values(column) for column in DEBUG_FILTER_COLUMNS}


def debug_values(column: str) -> list[str]:
    """A debug-log filter's options (every value stored)."""
    return debug_options()[column]


def debug_options() -> dict[str, list[str]]:
    """Every debug-log filter's options (``{column: values}``): one stamp read and one cache hit per rerun."""
    return _debug_options(_url(), stamp("debug_records"))


def debug_page(query: DebugQuery, offset: int, limit: int) -> tuple[list[dict[str, Any]], int, int]:
    """One page of the records ``query`` matches (oldest first within it), how many match, how many exist."""
    return _debug_page(_url(), stamp("debug_records"), query, offset, limit)


def debug_count(query: DebugQuery) -> int:
    return _debug_count(_url(), stamp("debug_records"), query)


# ---- シナリオ化 (the debug log's workbench) ---------------------------------------------------------------
@st.cache_data(ttl=TTL_SECONDS, max_entries=8, show_spinner=False)
def _conversation_source(url: str, stamps: Any, conversation_id: str) -> tuple:
    from core import workbench as wb  # lazy: the workbench only where this tab is opened

    return wb.conversation_turns(get_store(url), conversation_id)


def conversation_source(conversation_id: str) -> tuple:
    """``core.workbench.conversation_turns`` of a conversation (its turns read and masked) until the
    conversation, its turns or its entries change: a rerun of the シナリオ化 tab reads and masks nothing."""
    return _conversation_source(_url(), stamp("conversations", "turns", "knowledge_entries"), conversation_id)
