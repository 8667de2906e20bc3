"""Whole-sentence quoting's words: a text tokenised once (issue #25), the answer unchanged."""
from __future__ import annotations

from core.text import quoting

SECTION = ("エンジンがかかりにくいとき\n"
           "ブレーキペダルを踏みながらスイッチを押してください。\n"
           "・バッテリーが上がっていないか確認する\n"
           "・燃料が残っているか確認する\n"
           "それでもかからないときは、販売店にご相談ください。")


def test_a_text_is_tokenised_once_and_each_caller_gets_its_own_set(monkeypatch):
    """The diagnosis answers quote the same manual sections on every turn: each distinct short text goes
    through Sudachi once; the quote and the words are those a fresh tokenisation gives. Counted."""
    quoting._memo_tokens.cache_clear()
    fresh = quoting.quote(SECTION, "エンジンがかからない")
    real = quoting.get_tokenizer()
    seen: list[str] = []

    class Counting:
        def __call__(self, text):
            seen.append(text)
            return real(text)

    quoting._memo_tokens.cache_clear()
    monkeypatch.setattr(quoting, "get_tokenizer", lambda: Counting())
    first = quoting.quote(SECTION, "エンジンがかからない")
    calls = len(seen)
    again = quoting.quote(SECTION, "バッテリーは大丈夫？")
    assert first == fresh and again and calls == len(quoting.units(SECTION)) + 1
    assert len(seen) == calls + 1  # only the new question
    words = quoting.tokens("バッテリーが上がっていないか確認する")
    words.add("x")
    assert "x" not in quoting.tokens("バッテリーが上がっていないか確認する")
    long_text = "燃料。" * 1000  # over TOKENS_MEMO_MAX_CHARS: tokenised every time, not remembered
    quoting.tokens(long_text)
    quoting.tokens(long_text)
    assert seen.count(long_text) == 2
