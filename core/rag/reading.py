"""Query expansion by reading: kana, casual and mistyped words meet the corpus's own spelling.

A customer writes 「しんごうまちで えんじんが とまった」, 「けいこくとうがついた」 or an IME slip
「エンジン警告灯が店頭した」; the manual says 信号待ち, 警告灯, 点灯. BM25 never matches those spellings
and the embedding only partly does. :class:`ReadingIndex` maps the katakana reading of every
kanji / katakana word of the corpus (Sudachi ``reading_form``, read in context) to the word, and
:meth:`ReadingIndex.expand` scans the query's readings — Sudachi's reading of the query *and* its
plain hiragana → katakana fold, with and without spaces (Sudachi splits 「ぶれーき」 oddly) — for the
longest known readings (at least :data:`MIN_READING` kana, or a two-kana word standing alone), and
reads each kanji word the corpus does not use for a corpus word with the same reading (an IME
slip), appending the corpus spellings the query does not already contain. A standard query therefore gains nothing (its words are already there),
and one written in kana or with a homophone slip gains the words it meant.

The index grows with the corpus: only texts not read yet are read (words are never removed, which
costs nothing but an unused expansion). Time is bounded: each text read is capped, the
query is capped (:data:`MAX_QUERY_CHARS`) and the scan tries at most ``max_len`` lengths per position.
"""
from __future__ import annotations

import re
import threading
import unicodedata
from typing import Iterable

from core.text.ja_tokens import reading, readings

MIN_READING = 3  # kana; a shorter reading (ユゲ, フユ) only as a whole word (:data:`_BOUNDARY`)
SHORT_READING = 2
# what may stand before / after a short reading for it to count as a word of its own: a space, the
# text's ends, or a particle (「ゆげが」「ふゆの」)
_BOUNDARY_AFTER = frozenset(" ガヲニハデノトモヤ")
_BOUNDARY_BEFORE = frozenset(" ")
MAX_QUERY_CHARS = 400
EXPAND_MEMO = 512  # expansions remembered (per state of the index)
MAX_SURFACES = 3  # homophones kept per reading
MAX_TEXT_CHARS = 20_000  # read of one corpus text
_CONTENT = re.compile(r"[\u4e00-\u9fff\u30a1-\u30fa]")
_KATAKANA = re.compile(r"^[\u30a1-\u30fa\u30fc]+$")
_HIRAGANA_FOLD = {c: c + 0x60 for c in range(0x3041, 0x3097)}
_SPACES = re.compile(r"\s+")
_KANA_RUN = re.compile(r"[\u3041-\u3096\u30a1-\u30fa\u30fc]+(?:\s+[\u3041-\u3096\u30a1-\u30fa\u30fc]+)*")
_KANJI = re.compile(r"[\u4e00-\u9fff]")


class ReadingIndex:
    """Katakana reading → the corpus terms read that way."""

    def __init__(self) -> None:
        self.by_reading: dict[str, list[str]] = {}
        self.max_len = 0
        self._texts_seen: set[str] = set()
        self.known: set[str] = set()  # every term read (a kanji word outside it may be a slip)
        self._lock = threading.Lock()
        self._version = 0  # moved by every term recorded: the expansions remembered are of one version
        self._expanded: dict[tuple[int, str], str] = {}

    def __len__(self) -> int:
        return len(self.by_reading)

    def add(self, term: str, key: str | None = None) -> None:
        """Record ``term`` (a kanji, or kanji / katakana of two characters or more) under its reading ``key``
        (Sudachi's reading of the term alone when not given)."""
        term = (term or "").strip()
        if not _CONTENT.search(term) or (len(term) < 2 and not _KANJI.match(term)):
            return  # a single kanji (音, 煙, 水) is a word; a single kana is not
        if key is None:
            key = term if _KATAKANA.match(term) else reading(term, max_chars=40)
        key = key.replace(" ", "")
        with self._lock:
            self._version += 1
            self.known.add(term)
            if len(key) < SHORT_READING or not _KATAKANA.match(key):
                return
            surfaces = self.by_reading.setdefault(key, [])
            if term not in surfaces and len(surfaces) < MAX_SURFACES:
                surfaces.append(term)
            self.max_len = max(self.max_len, len(key))

    def update(self, terms: Iterable[str]) -> None:
        """Read terms on their own (a vocabulary)."""
        for term in terms:
            self.add(term)

    def sync_texts(self, items: Iterable[tuple[str, str]]) -> None:
        """Read the words of texts not read yet (``(key, text)`` pairs): each morpheme with its
        reading *in context* (「音がする」 reads 音 as オト, alone Sudachi says オン)."""
        for key, text in items:
            if key in self._texts_seen:
                continue
            self._texts_seen.add(key)
            for surface, key_reading in readings(text, max_chars=MAX_TEXT_CHARS):
                self.add(surface, key_reading)

    def _scan(self, text: str) -> list[str]:
        """Greedy longest readings in a kana run (a short one only as a whole word)."""
        found: list[str] = []
        i, n, longest = 0, len(text), min(self.max_len, 16)
        while i < n:
            for size in range(min(longest, n - i), SHORT_READING - 1, -1):
                surfaces = self.by_reading.get(text[i:i + size])
                if surfaces and size < MIN_READING and not (
                        (i == 0 or text[i - 1] in _BOUNDARY_BEFORE)
                        and (i + size == n or text[i + size] in _BOUNDARY_AFTER)):
                    continue  # a short reading inside a longer word (「ユゲ」 in 「ユゲタ」)
                if surfaces:
                    found += surfaces
                    i += size
                    break
            else:
                i += 1
        return found

    def expand(self, query: str) -> str:
        """``query`` plus the corpus spellings of the words it writes in kana (each run of kana, with
        and without its spaces, scanned for the longest known readings) or as a homophone of a
        corpus word (a kanji word the corpus does not use whose reading is a corpus word's:
        「店頭」→「点灯」), when it lacks them. Remembered per query and state of the index
        (:data:`EXPAND_MEMO` queries of at most :data:`MAX_QUERY_CHARS` characters): a turn expands the
        same symptom for each of its searches."""
        if not isinstance(query, str) or len(query) > MAX_QUERY_CHARS:
            return self._expand(query)
        key = (self._version, query)
        found = self._expanded.get(key)
        if found is None:
            found = self._expand(query)
            if len(self._expanded) >= EXPAND_MEMO:
                self._expanded.clear()
            self._expanded[key] = found
        return found

    def _expand(self, query: str) -> str:
        text = unicodedata.normalize("NFKC", query or "")[:MAX_QUERY_CHARS]
        if not self.by_reading or not text.strip():
            return query
        found: list[str] = []
        for run in _KANA_RUN.findall(text):
            folded = run.translate(_HIRAGANA_FOLD).strip()
            for form in dict.fromkeys((folded, _SPACES.sub("", folded))):
                found += self._scan(form)
        for surface, key in readings(text, MAX_QUERY_CHARS):
            if _KANJI.search(surface) and surface not in self.known and key in self.by_reading:
                found += self.by_reading[key]
        extra = [t for t in dict.fromkeys(found) if t not in text]
        return f"{query} {' '.join(extra)}" if extra else query

