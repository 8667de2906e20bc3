"""Japanese tokens for BM25: Sudachi morphemes with fault codes and measured values kept whole.

Text is NFKC-normalised first (full-width ``Ｐ０３０１`` becomes ``P0301``). Before Sudachi sees
it, a regex pulls out tokens that a morphological analyser would break apart:

* diagnostic trouble codes (``P0301``, ``U0100``, ``C1201``, ``B1000``; also ``P0301-00``),
* numbers with a unit (``230kPa``, ``2.5 L``, ``100km/h``, ``12V``, ``90℃``),

and emits them as single lower-cased tokens (``p0301``, ``230kpa``). The rest is analysed by
Sudachi (``sudachidict-core``); particles, auxiliary verbs, symbols and whitespace are dropped by
part of speech, plus a few content-free words (する, ある, いる, なる, こと, もの …).

Modes: ``"A"``, ``"B"``, ``"C"`` are Sudachi split modes; ``"C+A"`` emits each C-unit and,
when it is a compound, also its A-unit parts (``ブレーキペダル`` → ``ブレーキペダル``,
``ブレーキ``, ``ペダル``), so that a colloquial ``ブレーキ`` still meets ``ブレーキペダル``.
``form`` is ``"normalized"`` (Sudachi normalized_form: 踏ん→踏む, ｷｰ→キー) or ``"surface"``.
Long input: Sudachi refuses more than 49,149 bytes in one call, so text is analysed in pieces of
at most ``PIECE_BYTES`` UTF-8 bytes, cut at a sentence or line end when there is one in the piece
(else at a character boundary), and only the first ``MAX_INPUT_CHARS`` characters are read at all:
the time spent on one text is bounded (about 1.5 s for the cap on this machine), and no input
makes Sudachi fail. The regex for codes and measured values uses bounded quantifiers only.

Defaults (C, normalized) were measured best with ``python -m bench.rag_recall --tokenizers``:
hybrid MRR 0.904 on the manual queries and 0.952 on the FAQ queries, versus 0.894–0.903 and
0.928–0.946 for the other modes/forms (recall@5 differs by at most one query); surface forms
help BM25-only a little on the FAQ but lose in hybrid.
"""
from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache

DEFAULT_MODE = "C"
DEFAULT_FORM = "normalized"
PIECE_BYTES = 12_000  # well below Sudachi's 49,149-byte limit per call
MAX_INPUT_CHARS = 100_000  # what one call of the tokenizer reads at most
_PIECE_END = ("。", "！", "？", "!", "?", "\n")

# OBD-II style trouble codes: P/C/B/U + 4 hex-ish characters, optional "-NN" sub code.
_FAULT_CODE = r"(?<![A-Za-z0-9])[PCBU][0-9][0-9A-F]{3}(?:-[0-9A-F]{2})?(?![A-Za-z0-9])"
_UNITS = (
    r"km/h|km/L|km|kPa|MPa|kgf/cm2|kgf|kg|N·m|N・m|Nm|mm|cm|m|mL|ml|cc|L|rpm|Ah|kWh|kW|W|V|A|Hz"
    r"|°C|℃|%|psi|bar|秒|分|時間|日|か月|ヶ月|カ月|年|km先|キロ|リットル|ミリ|度|回|本|個|枚|人"
)
_NUMBER_UNIT = (
    r"(?<![A-Za-z0-9.])\d{1,12}(?:[.,]\d{1,6})?(?:\s{0,3}[~〜-]\s{0,3}\d{1,12}(?:[.,]\d{1,6})?)?\s{0,3}(?:"
    + _UNITS + r")(?![A-Za-z])"
)
_SPECIAL = re.compile(f"{_FAULT_CODE}|{_NUMBER_UNIT}")

_DROP_POS = {"助詞", "助動詞", "補助記号", "記号", "空白"}
_STOPWORDS = {
    "為る", "する", "有る", "ある", "居る", "いる", "成る", "なる", "事", "こと", "物", "もの",
    "様", "よう", "為", "ため", "此の", "この", "其の", "その", "彼の", "あの", "此れ", "これ",
    "其れ", "それ", "所", "ところ", "又", "また", "及び", "等", "など", "出来る", "できる",
    "頂く", "いただく", "下さる", "くださる", "御", "お", "ご", "て", "で", "ます", "です",
    "遣る", "やる", "どう", "どの", "どれ", "どこ", "何", "なに", "なん", "知る", "教える", "思う",
    "言う", "いう", "良い", "よい", "いい", "さん", "御勧め", "すすめ", "おすすめ", "ください",
}
_MODES = {"A", "B", "C", "C+A", "C+B"}


def _split_mode(name: str):
    from sudachipy import SplitMode

    return {"A": SplitMode.A, "B": SplitMode.B, "C": SplitMode.C}[name]


@lru_cache(maxsize=1)
def _dictionary():
    from sudachipy import Dictionary

    return Dictionary(dict="core")


def pieces(text: str, max_bytes: int = PIECE_BYTES) -> list[str]:
    """``text`` cut into pieces of at most ``max_bytes`` UTF-8 bytes, each ending at the last
    sentence or line end inside it when there is one (so words are rarely split)."""
    out: list[str] = []
    start, n = 0, len(text)
    while start < n:
        end, size = start, 0
        while end < n:  # take blocks of characters while they fit, then single characters
            block = text[end:end + 256]
            block_size = len(block.encode("utf-8"))
            if size + block_size <= max_bytes:
                end, size = end + len(block), size + block_size
                continue
            for ch in block:
                ch_size = len(ch.encode("utf-8"))
                if size + ch_size > max_bytes:
                    break
                end, size = end + 1, size + ch_size
            break
        end = max(end, start + 1)
        if end < n:
            cut = max(text.rfind(mark, start, end) for mark in _PIECE_END)
            if cut > start:
                end = cut + 1
        out.append(text[start:end])
        start = end
    return out


def _compact(token: str) -> str:
    return re.sub(r"\s+", "", token).lower().replace("〜", "~").replace("・", "·")


class JapaneseTokenizer:
    """Callable: ``JapaneseTokenizer()(text) -> list[str]``. Thread-safe (one lock per instance)."""

    def __init__(self, mode: str = DEFAULT_MODE, form: str = DEFAULT_FORM):
        if mode not in _MODES:
            raise ValueError(f"unknown split mode {mode!r} (expected one of {sorted(_MODES)})")
        if form not in ("normalized", "surface"):
            raise ValueError(f"unknown form {form!r} (expected 'normalized' or 'surface')")
        self.mode = mode
        self.form = form
        primary = mode.split("+")[0]
        self._primary = _split_mode(primary)
        self._secondary = _split_mode(mode.split("+")[1]) if "+" in mode else None
        self._tokenizer = _dictionary().tokenizer(mode=self._primary)
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"sudachi-{self.mode}-{self.form}"

    def _word(self, morpheme) -> str | None:
        pos = morpheme.part_of_speech()
        if pos[0] in _DROP_POS:
            return None
        word = morpheme.normalized_form() if self.form == "normalized" else morpheme.surface()
        word = word.strip().lower()
        if not word or word in _STOPWORDS or morpheme.dictionary_form() in _STOPWORDS:
            return None
        # lone hiragana (conjugation debris, fillers) carries no meaning for retrieval
        if len(word) == 1 and "\u3041" <= word <= "\u309f":
            return None
        return word

    def _analyse(self, text: str, out: list[str]) -> None:
        if not text.strip():
            return
        for piece in pieces(text):
            self._analyse_piece(piece, out)

    def _analyse_piece(self, text: str, out: list[str]) -> None:
        if not text.strip():
            return
        with self._lock:
            morphemes = list(self._tokenizer.tokenize(text))
            for m in morphemes:
                word = self._word(m)
                if word is None:
                    continue
                out.append(word)
                if self._secondary is not None:
                    parts = m.split(self._secondary)
                    if len(parts) > 1:
                        for part in parts:
                            sub = self._word(part)
                            if sub is not None and sub != word:
                                out.append(sub)

    def tokens(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFKC", (text or "")[:MAX_INPUT_CHARS])[:MAX_INPUT_CHARS]
        out: list[str] = []
        pos = 0
        for match in _SPECIAL.finditer(text):
            self._analyse(text[pos:match.start()], out)
            out.append(_compact(match.group(0)))
            pos = match.end()
        self._analyse(text[pos:], out)
        return out

    __call__ = tokens


@lru_cache(maxsize=8)
def get_tokenizer(mode: str = DEFAULT_MODE, form: str = DEFAULT_FORM) -> JapaneseTokenizer:
    """Shared tokenizer instance per (mode, form)."""
    return JapaneseTokenizer(mode, form)


_mode_c_lock = threading.Lock()


@lru_cache(maxsize=1)
def _mode_c_tokenizer():
    """A mode-C Sudachi tokenizer of its own, for :func:`morphemes` and :func:`readings` (used under
    ``_mode_c_lock``: a Sudachi tokenizer is not thread-safe)."""
    return _dictionary().tokenizer(mode=_split_mode("C"))


def morphemes(text: str) -> list:
    """Sudachi morphemes (split mode C) of ``text`` cut to ``MAX_INPUT_CHARS`` and to one piece, for
    readers that need the parts of speech and dictionary forms (not tokens for retrieval)."""
    text = (text or "")[:MAX_INPUT_CHARS]
    if not text.strip():
        return []
    with _mode_c_lock:
        return list(_mode_c_tokenizer().tokenize(pieces(text)[0]))


_HIRAGANA_FOLD = {c: c + 0x60 for c in range(0x3041, 0x3097)}


def readings(text: str, max_chars: int = 1000) -> list[tuple[str, str]]:
    """``(surface, katakana reading)`` of each morpheme of ``text`` (NFKC, at most ``max_chars``
    characters; Sudachi mode C), spaces and punctuation left out; a morpheme without a reading reads
    as its surface with hiragana folded to katakana. 「店頭した」→ [(店頭, テントウ), (し, シ), (た, タ)]."""
    text = unicodedata.normalize("NFKC", text or "")[:max_chars]
    if not text.strip():
        return []
    out: list[tuple[str, str]] = []
    with _mode_c_lock:
        tokenizer = _mode_c_tokenizer()
        for piece in pieces(text):
            for m in tokenizer.tokenize(piece):
                if m.part_of_speech()[0] in ("空白", "補助記号"):
                    continue
                out.append((m.surface(), (m.reading_form() or m.surface()).translate(_HIRAGANA_FOLD)))
    return out


def reading(text: str, max_chars: int = 1000) -> str:
    """The katakana reading of ``text``: :func:`readings` joined. 「点灯した」→「テントウシタ」."""
    return "".join(r for _, r in readings(text, max_chars))
