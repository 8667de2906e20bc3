"""core.text.memo: a short text's result is worked out once, a long one or a non-text every time."""
from __future__ import annotations

from core.text.memo import short_text_memo


def test_a_short_text_is_worked_out_once_and_a_long_one_or_a_non_text_every_time():
    calls: list[object] = []

    @short_text_memo(4, 10)
    def shout(text):
        calls.append(text)
        return str(text).upper()

    assert shout("abc") == shout("abc") == "ABC" and calls == ["abc"]
    assert shout("x" * 11) == shout("x" * 11) == "X" * 11 and calls == ["abc", "x" * 11, "x" * 11]
    assert shout(None) == shout(None) == "NONE" and calls[-2:] == [None, None]
    assert shout.memo.cache_info().currsize == 1 and shout.__wrapped__("q") == "Q"
