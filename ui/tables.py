"""Small tables as the browser shows them: Arrow tables, every text cell and column name safe for a
spreadsheet (``core.text.spreadsheet.safe_cell``: the browser's own "download as CSV" writes cells as they
are).

``st.dataframe`` and ``st.vega_lite_chart`` send Arrow bytes; given a pandas DataFrame they convert it first
(``pyarrow.Table.from_pandas`` and Streamlit's checks of every column), which was most of the cost of drawing
分析's small tables after a write (issue #25). A table made here is serialised as it is.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from core.text.spreadsheet import safe_cell


def text_column(cells: Iterable[Any]) -> pa.Array:
    """Cells shown as text, safe for a spreadsheet: a string as it is, a missing value empty (null), any
    other value in words. A string met again in the column is made safe once."""
    safe: dict[str, str] = {}
    out = []
    for c in cells:
        if isinstance(c, str):
            made = safe.get(c)
            out.append(made if made is not None else safe.setdefault(c, safe_cell(c)))
        else:
            out.append(None if _missing(c) else safe_cell(str(c)))
    return pa.array(out, type=pa.string())


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA or value is pd.NaT


def shown(columns: Mapping[Any, pd.Series | list[Any]]) -> pa.Table:
    """A table of ``columns`` (name → cells, in order): a list is a text column (:func:`text_column`), a
    pandas Series keeps its type (a missing number stays missing, as pandas shows it); every name as text,
    safe for a spreadsheet."""
    return pa.Table.from_arrays(
        [text_column(cells) if isinstance(cells, list) else pa.array(_values(cells), from_pandas=True)
         for cells in columns.values()],
        names=[safe_cell(str(name)) for name in columns])


def _values(cells: pd.Series) -> Any:
    """A Series' values as pyarrow reads them fastest: a NumPy column's array (pyarrow looking a Series over
    for ``__arrow_array__`` went through pandas' attribute lookup, a good part of a small table's cost), any
    other Series as it is."""
    return cells.to_numpy() if isinstance(cells.dtype, np.dtype) else cells
