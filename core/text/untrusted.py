"""Untrusted text in prompts: document, attachment and manual text goes to the model as data.

Every such text is wrapped in one data block::

    <<<DOCUMENT name="契約書.docx">>>
    …text…
    <<<END DOCUMENT>>>

and the system prompts say that whatever stands between the markers is material to analyse, never
an instruction. A document cannot close its block early or open a fake one: any run of three or
more angle brackets in the text (ASCII ``<``/``>``, full-width ``＜``/``＞`` and the small forms
``﹤``/``﹥``) becomes ``‹``/``›`` of the same length, so the markers occur only where
:func:`data_block` puts them. The name is cut to one short line without quotes or markers.
Linear: one pass over the text, no regular expressions.
"""
from __future__ import annotations

from itertools import groupby

from core.text.memo import short_text_memo

OPEN = "<<<DOCUMENT"
CLOSE = "<<<END DOCUMENT>>>"
MAX_NAME_CHARS = 120

_OPENERS = frozenset("<＜﹤")
_CLOSERS = frozenset(">＞﹥")


def _kind(char: str) -> int:
    return 1 if char in _OPENERS else 2 if char in _CLOSERS else 0


MEMO = 1024  # texts remembered (a manual section is put in a prompt on every call of a turn)
MEMO_MAX_CHARS = 4000  # a longer text is scanned every time (the memo stays small)


def neutralise_delimiters(text: str) -> str:
    """``text`` with every run of 3+ opening / closing angle brackets replaced by ``‹`` / ``›``; remembered
    per text (:data:`MEMO` texts of at most :data:`MEMO_MAX_CHARS` characters)."""
    return _neutralise("" if text is None else str(text))


@short_text_memo(MEMO, MEMO_MAX_CHARS)
def _neutralise(text: str) -> str:
    if _OPENERS.isdisjoint(text) and _CLOSERS.isdisjoint(text):
        return text
    out = []
    for kind, group in groupby(text, key=_kind):
        run = "".join(group)
        if kind and len(run) >= 3:
            run = ("‹" if kind == 1 else "›") * len(run)
        out.append(run)
    return "".join(out)


def _clean_name(name: str) -> str:
    flat = " ".join(neutralise_delimiters(str(name)).split())  # one line, no control whitespace
    return flat.replace('"', "'")[:MAX_NAME_CHARS]


def data_block(text: str, name: str = "") -> str:
    """``text`` inside the document markers (see the module docstring)."""
    header = f'{OPEN} name="{_clean_name(name)}">>>' if name else f"{OPEN}>>>"
    return f"{header}\n{neutralise_delimiters(text).strip(chr(10))}\n{CLOSE}"


def strip_markers(text: str) -> str:
    """``text`` without the marker lines :func:`data_block` added (for readers of a payload)."""
    return "\n".join(line for line in text.split("\n")
                     if line != CLOSE and not (line.startswith(OPEN) and line.endswith(">>>")))


__all__ = ["CLOSE", "OPEN", "data_block", "neutralise_delimiters", "strip_markers"]
