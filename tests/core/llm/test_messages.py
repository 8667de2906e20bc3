"""Message stacks every chat template accepts, token estimates and fitting a prompt to a context."""
from __future__ import annotations

from core.llm.messages import (
    MIN_BLOCK_CHARS,
    OPENING_USER,
    TRIM_NOTE,
    alternate,
    alternates,
    estimate_tokens,
    fit_messages,
    text_tokens,
)
from core.text.untrusted import CLOSE, OPEN, data_block


def roles(messages):
    return [m["role"] for m in messages]


def test_alternate_fixes_every_stack_a_strict_template_refuses():
    seed = [{"role": "system", "content": "S"}, {"role": "assistant", "content": "few-shot"},
            {"role": "user", "content": "u1"}, {"role": "user", "content": "u2"},
            {"role": "assistant", "content": "a1"}, {"role": "assistant", "content": "a2"},
            {"role": "system", "content": "S2"}, {"role": "tool", "content": "t"}, {"role": "user", "content": None}]
    out = alternate(seed)
    assert roles(out) == ["system", "user", "assistant", "user", "assistant", "user"] and alternates(out)
    assert out[0]["content"] == "S\n\nS2" and out[1]["content"] == OPENING_USER  # before the leading assistant turn
    assert out[3]["content"] == "u1\n\nu2" and out[4]["content"] == "a1\n\na2" and out[5]["content"] == "t"
    assert not alternates(seed)


def test_alternate_leaves_a_good_stack_as_it_is():
    good = [{"role": "system", "content": "S"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"},
            {"role": "user", "content": "v"}]
    assert alternate(good) == good and alternate([]) == []


def test_token_estimate_is_linear_and_counts_japanese_heavier():
    assert text_tokens("") == 0 and text_tokens("abcd") < text_tokens("日本語です")
    assert abs(text_tokens("あ" * 10_000) - 10 * text_tokens("あ" * 1_000)) < 1
    assert estimate_tokens([{"role": "user", "content": "abc"}], ratio=2.0) > estimate_tokens(
        [{"role": "user", "content": "abc"}])


def _stack(history_pairs: int, block_chars: int):
    payload = "ユーザー指示:\n読んでください\n\n添付テキスト:\n" + data_block("あ" * block_chars) + "\n\n" + data_block("い" * 400)
    history = []
    for i in range(history_pairs):
        history += [{"role": "user", "content": f"質問{i}" * 40}, {"role": "assistant", "content": f"回答{i}" * 40}]
    return ([{"role": "system", "content": "システム"}, {"role": "user", "content": "例の依頼"},
             {"role": "assistant", "content": "例の回答"}] + history + [{"role": "user", "content": payload}])


def test_fitting_cuts_history_first_in_pairs_and_keeps_the_pinned_examples():
    stack = _stack(4, 300)
    fitted = fit_messages(stack, estimate_tokens(stack) - 300, keep_head=3)
    assert fitted.dropped_messages in (2, 4) and fitted.tokens <= estimate_tokens(stack) - 300
    assert fitted.messages[1:3] == stack[1:3] and alternates(fitted.messages)  # the examples stay, pairs go whole
    assert "省略" in fitted.messages[0]["content"] and fitted.messages[-1] == stack[-1]  # a note; payload untouched


def test_fitting_then_trims_data_blocks_largest_first_and_keeps_their_markers():
    stack = _stack(0, 3000)
    budget = estimate_tokens(stack) - 2000
    fitted = fit_messages(stack, budget, keep_head=3)
    payload = fitted.messages[-1]["content"]
    assert fitted.tokens <= budget and fitted.trimmed_chars > 1500
    assert payload.count(OPEN) == 2 and payload.count(CLOSE) == 2 and TRIM_NOTE in payload
    assert "い" * 400 in payload  # the smaller block is only cut when the larger is down to its size
    assert payload.startswith("ユーザー指示:\n読んでください")


def test_blocks_at_their_minimum_are_left_out_last_first_and_the_first_is_always_kept():
    stack = _stack(0, 2000)
    fitted = fit_messages(stack, 50, keep_head=3)
    payload = fitted.messages[-1]["content"]
    assert payload.count(OPEN) == 1 and "あ" * MIN_BLOCK_CHARS in payload and "い" * 10 not in payload
    refit = fit_messages(fitted.messages, 50, keep_head=3)  # fitting again never piles up notes
    assert refit.messages[-1]["content"].count(TRIM_NOTE.strip()) == 1


def test_a_repair_requests_copy_of_the_bad_output_is_shortened_last():
    stack = [{"role": "system", "content": "S"}, {"role": "user", "content": "依頼"},
             {"role": "assistant", "content": "x" * 5000}, {"role": "user", "content": "直してください"}]
    fitted = fit_messages(stack, 600, tail=3)
    assert len(fitted.messages[2]["content"]) < 2500 and fitted.messages[-1]["content"] == "直してください"
    assert fit_messages(stack, None).messages == stack  # no budget: nothing is cut
