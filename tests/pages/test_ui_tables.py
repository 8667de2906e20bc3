"""ui.tables: the small tables 分析 shows, as Arrow tables safe for a spreadsheet."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from ui import tables


def test_text_cells_are_made_safe_and_typed_columns_keep_their_types_and_missing_values():
    """A text column (a list): each string made safe (a string met again is the same cell), a missing value
    null, any other value in words. A Series keeps its type, a missing number stays missing (null), as pyarrow
    reads the Series itself."""
    columns = {
        "=名前": ["=HYPERLINK(1)", "通常", "=HYPERLINK(1)", None, float("nan"), 3, "-3"],
        "件数": pd.Series([1, 2, 3, 4, 5, 6, 7]),
        "率": pd.Series([0.5, np.nan, 1.0, 0.25, np.nan, 0.0, 1.0]),
        "有効": pd.Series([True, False, True, True, False, True, False]),
        "日": pd.Series(pd.to_datetime(["2026-11-27"] * 7)).astype("datetime64[us]"),
        "種別": pd.Series(["a", None, "b", "c", "d", "e", "f"], dtype="str"),
    }
    shown = tables.shown(columns)
    assert shown.column_names == ["'=名前", "件数", "率", "有効", "日", "種別"]
    assert shown.column(0).to_pylist() == ["'=HYPERLINK(1)", "通常", "'=HYPERLINK(1)", None, None, "3", "-3"]
    for name, cells in list(columns.items())[1:]:
        assert shown.column(name).equals(pa.chunked_array([pa.array(cells, from_pandas=True)])), name
    assert shown.column("率").null_count == 2 and shown.schema.field("件数").type == pa.int64()
