"""Character-bigram tokens for the database's own full-text search (SQLite FTS5, PostgreSQL tsvector).

Why bigrams: Japanese has no spaces, and the words people search a contract library for are mostly two
characters long (賠償, 上限, 契約, 解除). Trigram indexes (SQLite's ``trigram`` tokenizer, PostgreSQL's
``pg_trgm``) cannot answer a two-character query from the index; Sudachi tokens can, but only when the
query is cut the way the document was (「損害賠償」 is one token, so 「賠償」 would not find it). Overlapping
bigrams find every substring of two characters or more, the way the library's old ``LIKE '%…%'`` search
did, and the same Python code makes the tokens for both engines, so SQLite and PostgreSQL answer alike.

* :func:`document_tokens` — a text (several fields) as a space-separated token string. The text is
  normalised (:func:`core.text.normalize.normalize`: NFKC, invisible characters dropped) and lower-cased,
  then cut into *runs* of letters and digits (Unicode categories L, N and Co: what FTS5's ``unicode61``
  tokenizer keeps with ``categories 'L* N* Co'``); each run of ``n`` characters gives its ``n - 1``
  overlapping bigrams and then its last character alone. The single character closing every run means a
  phrase of bigrams can never match across two runs or two fields.
* :func:`query_terms` — a search box's words as terms: per word, one phrase (its runs' bigrams in order)
  or, for a one-character run, a prefix (every token starting with that character). A word with no letter
  or digit at all (「%」, 「（」) has no term; the caller matches it as plain text.
* :func:`fts5_query` / :func:`tsquery` — those terms as an SQLite FTS5 query and a PostgreSQL ``tsquery``
  literal (every word must match: AND); :func:`tsvector` — the tokens as a ``tsvector`` literal with
  positions. Both literals are built here, so PostgreSQL's text-search parser (which depends on the
  server's locale) never sees the text.

Everything is linear in the input; a document is cut to ``MAX_TOKENS`` tokens (PostgreSQL keeps
positions up to 16,383), a query to ``MAX_WORDS`` words of ``MAX_WORD_CHARS`` characters.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Iterable

from core.text.normalize import normalize

MAX_TOKENS = 16_000
MAX_WORDS = 8
MAX_WORD_CHARS = 100


def _is_token_char(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category[0] in "LN" or category == "Co"


def _runs(text: str) -> list[str]:
    runs: list[str] = []
    current: list[str] = []
    for ch in normalize(text).lower():
        if _is_token_char(ch):
            current.append(ch)
        elif current:
            runs.append("".join(current))
            current = []
    if current:
        runs.append("".join(current))
    return runs


def _run_tokens(run: str) -> list[str]:
    return [run[i:i + 2] for i in range(len(run) - 1)] + [run[-1]]


def document_tokens(*texts: str | None) -> str:
    """The tokens of ``texts`` (e.g. an entry's fields), space separated, at most ``MAX_TOKENS``."""
    tokens: list[str] = []
    for text in texts:
        for run in _runs(str(text or "")):
            tokens.extend(_run_tokens(run))
            if len(tokens) >= MAX_TOKENS:
                return " ".join(tokens[:MAX_TOKENS])
    return " ".join(tokens)


@dataclass(frozen=True)
class Term:
    """One run of a search word: a phrase of bigrams in order, or one character matched as a prefix."""

    tokens: tuple[str, ...]
    prefix: bool = False


def split_words(query: str) -> list[str]:
    """The search box's words as the library reads them: whitespace separated, at most ``MAX_WORDS``,
    each cut to ``MAX_WORD_CHARS`` characters."""
    return [word[:MAX_WORD_CHARS] for word in str(query or "").split()[:MAX_WORDS]]


def word_terms(word: str) -> list[Term]:
    """The terms one search word must match (all of them); ``[]`` when it has no letter or digit."""
    terms = []
    for run in _runs(word):
        if len(run) == 1:
            terms.append(Term((run,), prefix=True))
        else:
            terms.append(Term(tuple(run[i:i + 2] for i in range(len(run) - 1))))
    return terms


def query_terms(words: Iterable[str]) -> list[Term]:
    """Every term of every word (AND), in order, without repeats."""
    seen: dict[Term, None] = {}
    for word in words:
        for term in word_terms(word):
            seen.setdefault(term, None)
    return list(seen)


def fts5_query(terms: Iterable[Term]) -> str:
    """An FTS5 MATCH expression: ``"ab bc" AND "d"*`` (tokens hold only letters and digits, so quoting them
    is safe)."""
    parts = [f'"{" ".join(term.tokens)}"' + ("*" if term.prefix else "") for term in terms]
    return " AND ".join(parts)


def tsquery(terms: Iterable[Term]) -> str:
    """A PostgreSQL ``tsquery`` literal: ``('ab' <-> 'bc') & 'd':*``."""
    parts = []
    for term in terms:
        if term.prefix:
            parts.append(f"'{term.tokens[0]}':*")
        else:
            parts.append("(" + " <-> ".join(f"'{token}'" for token in term.tokens) + ")")
    return " & ".join(parts)


def tsvector(tokens: str) -> str:
    """A PostgreSQL ``tsvector`` literal of :func:`document_tokens` output, with positions (1-based)."""
    positions: dict[str, list[int]] = {}
    for position, token in enumerate(tokens.split(), start=1):
        positions.setdefault(token, []).append(min(position, 16_383))
    return " ".join(f"'{token}':{','.join(map(str, spots[:256]))}" for token, spots in positions.items())
