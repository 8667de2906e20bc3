"""Text normalisation shared by masking and matching: NFKC, invisible characters, hyphens, kana.

Two views of a text are offered:

* :func:`normalize` — NFKC, invisible characters (zero-width spaces and joiners, bidi controls,
  soft hyphen, variation selectors …) removed, hyphen look-alikes (U+2010–2015, U+2212, …) as
  ``-`` and every Unicode decimal digit as an ASCII digit. ``ー`` is a letter in Japanese, so it is
  kept; callers that read numbers treat it as a separator between digits themselves.
* :func:`match_key` — :func:`normalize`, then no whitespace at all, katakana folded to hiragana
  and lower case: 「返 金\\nし て」, 「ヘンキン」 and 「ＲＥＦＵＮＤ」 all read like their plain forms.

:func:`normalize_with_offsets` gives the :func:`normalize` view with an :class:`OffsetMap`, so a span
found in the normalised text can be mapped back to the original (masking keeps the operator's
original text and replaces only the spans it found). Everything here is linear in the input.
"""
from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import re2

# Characters that render as nothing (or nearly) and can be slipped between letters or digits.
INVISIBLE_RANGES = ((0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
                    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
                    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF9, 0xFFFB), (0x1BCA0, 0x1BCA3),
                    (0x1D173, 0x1D17A), (0xE0000, 0xE007F), (0xE0100, 0xE01EF))
# Hyphen and minus look-alikes (NFKC leaves these alone). ー (U+30FC) is not here: it is a letter.
HYPHENS = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\u02d7\u2e3a\u2e3b\ufe58\ufe63\uff0d\u1806"

_FOLD: dict[int, str | None] = {cp: None for lo, hi in INVISIBLE_RANGES for cp in range(lo, hi + 1)}
_INVISIBLE = dict(_FOLD)
_FOLD.update({ord(c): "-" for c in HYPHENS})
_KANA = {cp: cp - 0x60 for cp in range(0x30A1, 0x30F7)} | {0x30FD: 0x309D, 0x30FE: 0x309E}
_WHITESPACE = re.compile(r"\s+")
_DASH_AFTER_KANA = re.compile(r"(?<=[ぁ-ゖァ-ヺー])-")
_CHUNK = 2048


@lru_cache(maxsize=1)
def _digit_fold() -> dict[int, str]:
    """Non-ASCII decimal digits (Arabic-Indic, Devanagari, mathematical bold …) → ASCII."""
    table = {}
    for cp in _scanned_code_points():
        ch = chr(cp)
        if unicodedata.category(ch) == "Nd" and not ch.isascii():
            table[cp] = str(unicodedata.decimal(ch))
    return table


def _scanned_code_points() -> list[int]:
    return [*range(0x80, 0xD800), *range(0xE000, 0x20000), *range(0x2F800, 0x2FA20), *range(0xE0000, 0xE01F0)]


@lru_cache(maxsize=1)
def _changed_patterns() -> tuple[Any, re.Pattern[str]]:
    """Runs of characters that :func:`normalize` may change, as a re2 search (fast "is there any")
    and a re pattern (fast match objects). Computed once, in about 0.1 s.

    Every character outside the BMP is in the class (a few are changed, most are not): ``re`` keeps a
    BMP-only class as a bitmap, while listing the exact supplementary ranges would make it try them
    one by one for every character.
    """
    digits = _digit_fold()
    ranges: list[list[int]] = []
    for cp in _scanned_code_points():
        if cp > 0xFFFF:
            break
        ch = chr(cp)
        if cp in _FOLD or cp in digits or unicodedata.normalize("NFKC", ch) != ch:
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
    ranges.append([0x10000, 0x10FFFF])
    body = "".join(re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}"
                   for lo, hi in ranges)
    return re2.compile(f"[{body}]"), re.compile(f"[{body}]+")


def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def _fold(text: str) -> str:
    text = text.translate(_FOLD)
    return text if text.isascii() else text.translate(_digit_fold())


def normalize(text: str) -> str:
    """NFKC, no invisible characters, hyphen look-alikes as ``-``, ASCII digits (``ー`` is kept)."""
    if not text or text.isascii():
        return text or ""
    return _fold(nfkc(text))


def strip_invisible(text: str) -> str:
    return text.translate(_INVISIBLE)


def kata_to_hira(text: str) -> str:
    return text.translate(_KANA)


def match_key(text: str) -> str:
    """The text as rules see it: :func:`normalize`, no whitespace, katakana as hiragana, lower case.

    A hyphen right after kana reads as the long-vowel mark (「メ－タ－」 → 「めーたー」).
    """
    folded = _WHITESPACE.sub("", normalize(text or ""))
    return kata_to_hira(_DASH_AFTER_KANA.sub("ー", folded)).lower()


def fold_pattern(pattern: str) -> str:
    """A regular expression written for plain text, folded like :func:`match_key` folds the text."""
    return kata_to_hira(normalize(pattern))


@dataclass(frozen=True)
class OffsetMap:
    """Maps positions of a normalised text back to the original.

    ``regions`` holds ``(norm_start, norm_end, orig_start, orig_end)`` for each changed run (sorted);
    everything between two runs was copied unchanged.
    """

    regions: tuple[tuple[int, int, int, int], ...] = ()
    _starts: tuple[int, ...] = field(default=(), repr=False)

    def _region(self, i: int) -> tuple[tuple[int, int, int, int] | None, int]:
        """The last region starting at or before ``i`` and the shift after it."""
        k = bisect_right(self._starts, i) - 1
        if k < 0:
            return None, 0
        region = self.regions[k]
        return region, region[3] - region[1]

    def start(self, i: int) -> int:
        region, shift = self._region(i)
        if region is not None and region[0] <= i < region[1]:
            return region[2]
        return i + shift

    def end(self, j: int) -> int:
        """Original end (exclusive) of a span ending at ``j`` (exclusive) in the normalised text."""
        if j <= 0:
            return 0
        region, shift = self._region(j - 1)
        if region is not None and region[0] <= j - 1 < region[1]:
            return region[3]
        return j + shift

    def span(self, start: int, end: int) -> tuple[int, int]:
        return self.start(start), max(self.start(start), self.end(end))


IDENTITY = OffsetMap()


def normalize_with_offsets(text: str) -> tuple[str, OffsetMap]:
    """:func:`normalize` of ``text`` and the map from its positions back to ``text``.

    Changed characters are normalised run by run (a run is a maximal stretch of characters that
    normalisation changes), so the result can differ from whole-text NFKC only where a combining
    mark follows an unchanged letter, which matters for no pattern that reads digits or Latin.
    """
    if not text or text.isascii():
        return text or "", IDENTITY
    quick, runs = _changed_patterns()
    if not quick.search(text):
        return text, IDENTITY
    pieces: list[str] = []
    regions: list[tuple[int, int, int, int]] = []
    last = npos = 0
    for chunk in range(0, len(text), _CHUNK):  # re2 skips clean chunks fast; re walks the others
        if chunk + _CHUNK < len(text) and not quick.search(text[chunk:chunk + _CHUNK]):
            continue
        for m in runs.finditer(text, max(chunk, last), chunk + _CHUNK):
            s, e = m.span()
            if regions and s == last:  # a run cut at a chunk border continues the previous one
                n0, _, s, _ = regions.pop()
                npos = n0
                pieces.pop()
            else:
                pieces.append(text[last:s])
                npos += s - last
            replacement = _fold(nfkc(text[s:e]))
            pieces.append(replacement)
            regions.append((npos, npos + len(replacement), s, e))
            npos += len(replacement)
            last = e
    pieces.append(text[last:])
    return "".join(pieces), OffsetMap(tuple(regions), tuple(r[0] for r in regions))
