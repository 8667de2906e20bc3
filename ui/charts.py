"""分析's (and the FAQ trace's) bar and line charts as plain Vega-Lite specs (``st.vega_lite_chart``), the
same charts ``st.bar_chart`` / ``st.line_chart`` draw (tooltips, legend below, zoom by dragging), without
building them through Altair: Altair validates every spec it emits against the Vega-Lite JSON schema, which
cost 50–200 ms of CPU per chart, most of the page's first run after a write (issue #25). The data stays wide
(one column per series); a ``fold`` transform makes it long in the browser. The charts are made of Arrow
tables (``ui.tables``), sent as they are; a pandas DataFrame is converted once, its index first (what
``st.bar_chart`` and ``st.line_chart`` draw along).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

SERIES, VALUE = "系列", "値"  # the folded columns (not shown as titles, as in st.bar_chart)
ZOOM = {"name": "zoom", "select": {"type": "interval", "encodings": ["x", "y"]}, "bind": "scales"}
LEGEND = {"titlePadding": 5, "offset": 5, "orient": "bottom"}
SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"


def field(name: Any) -> str:
    """A column name as a Vega-Lite field (``.``, ``[`` and ``]`` would read as a path: escaped)."""
    out = str(name)
    for char in ("\\", ".", "[", "]"):
        out = out.replace(char, "\\" + char)
    return out


def _series(columns: Sequence[Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The fold transform of ``columns`` and the color encoding of the series it makes."""
    fold = [{"fold": [field(c) for c in columns], "as": [SERIES, VALUE]}]
    return fold, {"field": SERIES, "type": "nominal", "title": " ", "legend": LEGEND}


def table(data: pa.Table | pd.DataFrame) -> pa.Table:
    """``data`` as an Arrow table: a pandas DataFrame with its index as the first column."""
    return data if isinstance(data, pa.Table) else pa.Table.from_pandas(data.reset_index(), preserve_index=False)


def bar(data: pa.Table, x: str | None = None, y: str | Sequence[str] | None = None, *, horizontal: bool = False,
        stack: bool | None = None, sort: bool = False) -> dict[str, Any]:
    """The spec ``st.bar_chart(data, x=, y=, horizontal=, stack=, sort=False)`` draws: bars of ``y`` (one
    column, or several side by side / stacked) per ``x`` (a column, else the first), in the data's order."""
    x = x if x is not None else data.column_names[0]
    ys = plotted(data, x, y)[1:]
    category = {"field": field(x), "type": "ordinal", "sort": None if not sort else "ascending",
                "title": x if len(ys) == 1 and not horizontal else "", "axis": {"grid": False}}
    spec: dict[str, Any] = {"$schema": SCHEMA, "mark": {"type": "bar"}, "params": [ZOOM]}
    if len(ys) == 1:  # one series: no fold and no legend, as st.bar_chart draws it
        value = {"field": field(ys[0]), "type": "quantitative", "title": ys[0],
                 "axis": {"grid": True, "tickMinStep": 1}}
        spec["encoding"] = {"x": value, "y": category} if horizontal else {"x": category, "y": value}
        spec["encoding"]["tooltip"] = [{"field": field(x), "type": "nominal"},
                                       {"field": field(ys[0]), "type": "quantitative"}]
        return spec
    fold, color = _series(ys)
    value = {"field": VALUE, "type": "quantitative", "title": "", "axis": {"grid": True, "tickMinStep": 1}}
    if stack is False:
        value["stack"] = False
    spec["transform"] = fold
    spec["encoding"] = {"x": value, "y": category} if horizontal else {"x": category, "y": value}
    spec["encoding"].update({"color": color, "tooltip": [
        {"field": field(x), "type": "nominal"}, {"field": VALUE, "type": "quantitative", "title": "value"},
        {"field": SERIES, "type": "nominal", "title": "color"}]})
    if stack is False:
        spec["encoding"]["yOffset" if horizontal else "xOffset"] = {"field": SERIES}
    return spec


def line(data: pa.Table) -> dict[str, Any]:
    """The spec ``st.line_chart(data)`` draws for a table of dates (its first column) and one column per
    series: a line per series, the nearest day's points highlighted under the pointer (a missing value is a
    gap)."""
    x, columns = data.column_names[0], data.column_names[1:]
    fold, color = _series(columns)
    encoding = {"x": {"field": field(x), "type": "temporal", "title": "", "axis": {"grid": False}},
                "y": {"field": VALUE, "type": "quantitative", "title": "", "axis": {"grid": True}},
                "color": color,
                "tooltip": [{"field": field(x), "type": "temporal"},
                            {"field": VALUE, "type": "quantitative", "title": "value"},
                            {"field": SERIES, "type": "nominal", "title": "color"}]}
    hover = {"name": "hover", "select": {"type": "point", "clear": "mouseleave", "fields": [field(x)], "nearest": True,
                                          "on": "mousemove"}}
    return {"$schema": SCHEMA, "transform": fold, "encoding": encoding, "layer": [
        {"mark": {"type": "line"}, "params": [ZOOM]},
        {"mark": {"type": "point", "opacity": 0}, "params": [hover]},
        {"mark": {"type": "point", "filled": True, "size": 65},
         "transform": [{"filter": {"param": "hover", "empty": False}}]}]}


def plotted(data: pa.Table, x: str, y: str | Sequence[str] | None = None) -> list[str]:
    """The columns a bar chart along the column ``x`` draws: ``x`` and its ``y`` (one column, several, or
    every other column)."""
    ys = [y] if isinstance(y, str) else list(y) if y is not None else [c for c in data.column_names if c != x]
    return [x, *ys]


def spec(kind: str, data: pa.Table | pd.DataFrame, **kwargs: Any) -> tuple[pa.Table, dict[str, Any]]:
    """``(data to send, Vega-Lite spec)`` of a ``bar`` or ``line`` chart of ``data`` (:func:`table`); a bar
    chart is sent the columns it draws only (the same chart: the table's other columns, e.g. the counts beside
    a rate, are not sent with it)."""
    data = table(data)
    if kind == "line":
        return data, line(data)
    x = kwargs.get("x") if kwargs.get("x") is not None else data.column_names[0]
    return data.select(plotted(data, x, kwargs.get("y"))), bar(data, **kwargs)
