"""Pure text checks that tell a non-answer from an answer, whatever model wrote it (issue #26).

Used by every flow through ``core.answer_guard`` (the engine-level regenerate-once-then-fall-back step):

* :func:`echoes` — the text is (nearly) the other text again: an FAQ "answer" that is the customer's
  question, an ``assistant_message`` that is the user's message, an interview turn that repeats the
  few-shot example's greeting. Character bigrams of the normalised texts (NFKC, no spaces or
  punctuation): the answer echoes when nearly all its bigrams are in the other text and it adds
  little to it. Linear in the (capped) lengths.
* :func:`figures` / :func:`unsupported_figures` — numbers with units, prices and periods (「10万km」,
  「5年」, 「3,300円」, 「¥5,000」, 「30%」, 「6か月」) read as (value, unit) so 「10万km」 and 「100,000km」 are
  the same figure; a figure of the answer is supported when a source (a cited article or section, or
  what the user said) states the same value in the same unit. 「5年6万km」 against a text that says
  「10万km」 gives ``["5年", "6万km"]``.
* :func:`not_japanese` — text in another language's script: Hangul, or a Chinese character a Japanese
  text does not use (a simplified form outside the JIS character sets, e.g. 「货款」 for 「貨款」), or a
  long run of Chinese characters without a single kana.

Every function caps its input (``MAX_CHARS``) and uses re2: model output is hostile text.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

import re2

MAX_CHARS = 8000  # longer text is checked on its head
ECHO_CONTAINMENT = 0.8  # share of the answer's bigrams found in the other text
ECHO_ADDS_AT_MOST = 0.35  # ... and the answer is at most this much longer than the other text
MIN_ECHO_CHARS = 4  # a shorter answer (after normalising) is never called an echo

_UNIT_ALIASES = {
    "km": "km", "キロ": "km", "キロメートル": "km", "㎞": "km", "m": "m", "メートル": "m", "cm": "cm", "mm": "mm",
    "kg": "kg", "キログラム": "kg", "g": "g", "グラム": "g", "t": "t", "トン": "t",
    "l": "L", "リットル": "L", "ml": "mL", "ミリリットル": "mL", "cc": "mL",
    "%": "%", "パーセント": "%",
    "円": "円", "ドル": "USD", "$": "USD", "¥": "円", "￥": "円",
    "年": "年", "年間": "年", "か月": "か月", "ヶ月": "か月", "ケ月": "か月", "カ月": "か月", "ヵ月": "か月", "箇月": "か月",
    "ケ月間": "か月", "か月間": "か月", "ヶ月間": "か月", "カ月間": "か月",
    "週間": "週", "週": "週", "日": "日", "日間": "日", "営業日": "営業日", "時間": "時間", "分": "分", "分間": "分", "秒": "秒",
    "回": "回", "度": "度", "℃": "度", "°c": "度", "kpa": "kPa", "psi": "psi", "v": "V", "w": "W", "a": "A",
    "人": "人", "台": "台", "件": "件", "個": "個", "本": "本", "枚": "枚", "歳": "歳", "条": "条", "項": "項",
}
# longest first, so 「キロメートル」 wins over 「キロ」 and 「か月間」 over 「か月」
_UNITS = sorted(_UNIT_ALIASES, key=len, reverse=True)
_MULTIPLIERS = {"万": 10_000, "千": 1_000, "億": 100_000_000, "百": 100}
_NUMBER = r"\d{1,12}(?:,\d{3}){0,4}(?:\.\d{1,6})?"
_UNIT_RE = "|".join(re2.escape(u) for u in _UNITS if u not in ("$", "¥", "￥"))
# an optional currency sign, the number, an optional 万 / 千 / 億, an optional 〜 range, the unit
_FIGURE = re2.compile(rf"(?i)([$¥￥])?({_NUMBER})\s?([万千億百]?)\s?({_UNIT_RE})?([A-Za-z]?)")
_PUNCT_CATEGORIES = ("P", "S", "Z", "C")


def _clip(text: str | None) -> str:
    return unicodedata.normalize("NFKC", str(text or "")[:MAX_CHARS])


def _flat(text: str | None) -> str:
    """NFKC, lower case, without spaces, punctuation and symbols."""
    return "".join(ch for ch in _clip(text).lower() if unicodedata.category(ch)[0] not in _PUNCT_CATEGORIES)


def _bigrams(text: str) -> set[str]:
    return {text[i:i + 2] for i in range(len(text) - 1)} if len(text) > 1 else {text} if text else set()


def echoes(answer: str | None, other: str | None, *, containment: float = ECHO_CONTAINMENT,
           adds_at_most: float = ECHO_ADDS_AT_MOST) -> bool:
    """True when ``answer`` is (nearly) ``other`` again: it adds almost nothing to it (module docstring)."""
    a, b = _flat(answer), _flat(other)
    if len(a) < MIN_ECHO_CHARS or not b:
        return False
    if a == b or a in b:
        return True
    if len(a) > len(b) * (1 + adds_at_most):
        return False
    grams = _bigrams(a)
    return len(grams & _bigrams(b)) >= containment * len(grams)


@dataclass(frozen=True)
class Figure:
    """One figure: its text as written, its value and its canonical unit (``""``: none stated)."""

    text: str
    value: float
    unit: str

    @property
    def key(self) -> tuple[float, str]:
        return (round(self.value, 6), self.unit)


def figures(text: str | None) -> list[Figure]:
    """The figures of ``text`` that carry a unit, a currency sign or a 万 / 千 multiplier."""
    out: list[Figure] = []
    for match in _FIGURE.finditer(_clip(text)):
        sign, number, mult, unit = match.group(1), match.group(2), match.group(3), match.group(4)
        if unit and unit.isascii() and unit.isalpha() and match.group(5):
            unit = None  # 「5 months」: a word, not the unit 「m」
        if not (sign or unit or mult):
            continue  # a bare number (a step, a clause number without 条): not a figure
        try:
            value = float(number.replace(",", ""))
        except ValueError:
            continue
        value *= _MULTIPLIERS.get(mult or "", 1)
        canonical = _UNIT_ALIASES.get((unit or "").lower(), _UNIT_ALIASES.get(unit or "", unit or ""))
        if sign and not unit:
            canonical = _UNIT_ALIASES[sign]
        written = match.group(0)[:len(match.group(0)) - len(match.group(5) or "")].strip()
        if not unit and not mult and not sign:
            continue
        out.append(Figure(written, value, canonical))
    return out


STATED_MEMO = 1024  # sources whose figures are remembered (a turn checks against the same manual sections again)


@lru_cache(maxsize=STATED_MEMO)
def _stated(source: str | None) -> frozenset[tuple[float, str]]:
    return frozenset(f.key for f in figures(source))


def unsupported_figures(answer: str | None, sources: Iterable[str | None]) -> list[str]:
    """The figures of ``answer`` (as written) that none of ``sources`` states, in order, each once. The
    figures of each source text are remembered (bounded: :data:`STATED_MEMO`)."""
    stated = {key for source in sources
              for key in (_stated(source) if source is None or isinstance(source, str) else _stated.__wrapped__(source))}
    # a bare number in a source supports the same number with a unit only for counts (「3」 and 「3回」 are not
    # a warranty figure): units matter, so only exact (value, unit) pairs count
    missing: list[str] = []
    for figure in figures(answer):
        if figure.key not in stated and figure.text not in missing:
            missing.append(figure.text)
    return missing


def _is_han(ch: str) -> bool:
    code = ord(ch)
    return 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0x20000 <= code <= 0x3134F or 0xF900 <= code <= 0xFAFF


def _in_japanese_set(ch: str) -> bool:
    """In a JIS character set (code page 932, or JIS X 0213), or a rare variant outside the BMP (a name's
    𠮷): the simplified Chinese forms (货, 这, 们) are in the BMP and in neither set."""
    if ord(ch) > 0xFFFF:
        return True
    for codec in ("cp932", "euc_jis_2004"):
        try:
            ch.encode(codec)
            return True
        except UnicodeEncodeError:
            continue
    return False


def not_japanese(text: str | None) -> bool:
    """True when ``text`` is written in another language's script (module docstring); short or empty text
    and Latin text (clause numbers, English terms) are left alone."""
    clipped = _clip(text)
    kana = han = foreign = hangul = 0
    for ch in clipped:
        code = ord(ch)
        if 0x3041 <= code <= 0x30FF:
            kana += 1
        elif 0xAC00 <= code <= 0xD7AF or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
            hangul += 1
        elif _is_han(ch):
            han += 1
            if not _in_japanese_set(ch):
                foreign += 1
    if hangul >= 2:
        return True
    if foreign:
        return True
    return han >= 20 and kana == 0
