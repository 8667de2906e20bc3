"""CSV cells stay data in a spreadsheet (issue #15): formula starters are neutralised the OWASP way,
numbers stay numbers, a bare CR never splits a row."""
from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from core.text import spreadsheet as sp
from core.text.spreadsheet import csv_bytes, safe_cell, safe_frame

HOSTILE = ['=HYPERLINK("http://127.0.0.1:9/?"&A1,"x")', "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(1+1)*cmd",
           "\t=1+1", "\r=1+1", "  =1+1", "\u3000=1+1", "＝１＋１", "＋1", "－1", "＠x", "-", "+81 90-1234-5678"]


def parse(data: bytes) -> list[list[str]]:
    assert data.startswith(b"\xef\xbb\xbf")  # Excel reads the BOM as UTF-8
    return list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))


@pytest.mark.parametrize("value", HOSTILE)
def test_a_cell_that_a_spreadsheet_would_run_starts_with_a_quote(value):
    cell = safe_cell(value)
    assert cell.startswith("'") and cell[1:] == value.replace("\r", "\n")


@pytest.mark.parametrize("value", ["-3", "+81", "1,980,000", "-0.5", "12", "0.25", "2024-06-01", "普通の文", "a=b",
                                   "090-1234-5678", "", "第8条"])
def test_numbers_and_ordinary_text_are_unchanged(value):
    assert safe_cell(value) == value


@pytest.mark.parametrize("value", [None, 3, -3, 2.5, True])
def test_values_that_are_not_text_are_unchanged(value):
    assert safe_cell(value) is value


def test_a_bare_cr_never_splits_a_row_and_every_hostile_cell_reads_back_as_text():
    frame = pd.DataFrame({"=見出し": HOSTILE + ["a\rb", "c\r\nd", 'say "hi"'], "n": list(range(len(HOSTILE) + 3))})
    rows = parse(csv_bytes(frame))
    assert len(rows) == len(HOSTILE) + 4  # header + one row per record, whatever the cells hold
    assert rows[0] == ["'=見出し", "n"]
    assert [r[0] for r in rows[1:len(HOSTILE) + 1]] == [safe_cell(v) for v in HOSTILE]
    assert [r[0] for r in rows[-3:]] == ["a\nb", "c\nd", 'say "hi"']
    assert [r[1] for r in rows[1:4]] == ["0", "1", "2"]
    assert b"\r\n" in csv_bytes(frame) and all(not cell.startswith(tuple("=+-@\t\r")) or cell in ("-3",)
                                                 for row in rows for cell in row)


def test_safe_frame_covers_headers_index_and_string_columns():
    frame = pd.DataFrame({"a": ["=1", "-3"]}, index=["@i", "ok"])
    frame["b"] = pd.Series(["+x", "y"], index=frame.index, dtype="string")
    safe = safe_frame(frame)
    assert safe["a"].tolist() == ["'=1", "-3"] and safe["b"].tolist() == ["'+x", "y"]
    assert list(safe.index) == ["'@i", "ok"]
    assert frame["a"].tolist() == ["=1", "-3"]  # the original is left alone


def test_linear_on_a_long_hostile_cell():
    cell = "=" + "-" * 1_000_000
    assert safe_cell(cell) == "'" + cell


def _safe_cell_as_first_written(value):
    """The rule as first written (every text looked over for a plain number first), to compare with."""
    if not isinstance(value, str):
        return value
    text = value.replace("\r\n", "\n").replace("\r", "\n") if "\r" in value else value
    if not text or sp._is_plain_number(text):
        return text
    stripped = text.lstrip(sp._LEADING_BLANKS)
    if value[0] in "\t\r" or (stripped and stripped[0] in sp.FORMULA_STARTS):
        return "'" + text
    return text


def test_a_plain_number_looked_for_only_where_a_cell_would_be_quoted_gives_the_same_cells():
    """``safe_cell`` checks for a plain number only when the cell would otherwise get its quote (most text
    starts with neither a sign nor a formula character): the same cell as the rule written the other way round,
    for cells built from every character that matters."""
    import random

    rng = random.Random(25)
    alphabet = list("0123456789,.+-=@ \t\r\n\u3000＝＋－＠aあ")
    cells = ["", "-3", "+81", "1,980", "-0.5", "\t-3", " -3", "=1+1", "\u3000=A1", "-", "+", "1,,0", "1."]
    cells += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))) for _ in range(5000)]
    assert [sp.safe_cell(c) for c in cells] == [_safe_cell_as_first_written(c) for c in cells]
