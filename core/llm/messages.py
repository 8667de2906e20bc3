"""Message stacks every chat template accepts, and prompts that fit a context budget.

**Alternation.** Many open models' chat templates (Gemma, Mistral, Llama 2 and others served by vLLM
or llama.cpp) refuse a conversation whose turns after the system message do not go user, assistant,
user, … (llama.cpp answers 400 "Conversation roles must alternate"). :func:`alternate` makes any stack
acceptable: one system message first, a short user turn before a leading assistant turn, and two
messages of the same role in a row merged into one. The engine applies it to every request it sends,
so every model call (flows, repairs, replays) goes out alternating, whatever its builder did.

**Budget.** :func:`estimate_tokens` is a tokenizer-free estimate (about 0.3 tokens per ASCII
character, 1.2 per other character, which is on the high side for the tokenizers we measured:
SmolLM2 1.1–1.2 and Gemma 3 0.45–0.5 per Japanese character), scaled by a ratio the client learns from
the server's own ``usage.prompt_tokens``. :func:`fit_messages` brings a stack under a token budget in
this order: older history is cut (oldest first, whole user/assistant pairs, with a note in the system
message), then retrieved and attached text inside ``core.text.untrusted`` data blocks is trimmed
(largest block first, markers kept; when every block is down to ``MIN_BLOCK_CHARS``, the last blocks
are left out, the first always kept), then a repair request's copy of the bad output is shortened.
The system prompt, pinned examples and the current user message outside data blocks are never cut.
Linear in the text: marker search with ``str.find``, no regular expressions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from core.text.untrusted import CLOSE, OPEN

ROLES = ("system", "user", "assistant")
# The user turn put before an assistant turn that would otherwise follow the system message.
OPENING_USER = "（会話を始めます）"
MESSAGE_OVERHEAD_TOKENS = 4  # role markers and separators of one message in a chat template
ASCII_TOKENS_PER_CHAR = 0.3
OTHER_TOKENS_PER_CHAR = 1.2
MIN_BLOCK_CHARS = 200  # a data block is never trimmed below this many characters
MIN_REPAIR_RAW_CHARS = 300
TRIM_NOTE = "\n…（長さの上限のため以下を省略）"


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # typed content parts: keep the text parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def alternate(messages: Sequence[dict[str, Any]], *, opening: str = OPENING_USER) -> list[dict[str, Any]]:
    """``messages`` as one system message followed by strictly alternating user / assistant turns.

    System (and ``developer``) messages are merged, in order, into one first message; any other role
    (``tool``, ``function``) is sent as user text; a leading assistant turn gets ``opening`` as the
    user turn before it; consecutive messages of one role are merged with a blank line between."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        text = _text(message.get("content"))
        if role in ("system", "developer"):
            if text:
                system.append(text)
            continue
        role = role if role in ("user", "assistant") else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] = f"{turns[-1]['content']}\n\n{text}" if text else turns[-1]["content"]
            continue
        turns.append({"role": role, "content": text})
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": opening})
    head = [{"role": "system", "content": "\n\n".join(system)}] if system else []
    return head + turns


def alternates(messages: Sequence[dict[str, Any]]) -> bool:
    """True when ``messages`` is (optionally) one system message, then user, assistant, user, … ."""
    roles = [m.get("role") for m in messages]
    if roles and roles[0] == "system":
        roles = roles[1:]
    return all(role == ("user" if i % 2 == 0 else "assistant") for i, role in enumerate(roles))


# ---- token estimates ---------------------------------------------------------------------------

def text_tokens(text: str) -> float:
    """Heuristic token count of ``text`` (ratio 1.0): linear, from its UTF-8 length."""
    if not text:
        return 0.0
    chars = len(text)
    extra = len(text.encode("utf-8", "replace")) - chars  # 1 per 2-byte char, 2 per 3-byte char
    other = min(chars, extra // 2 + (extra % 2))
    return (chars - other) * ASCII_TOKENS_PER_CHAR + other * OTHER_TOKENS_PER_CHAR


def estimate_tokens(messages: Sequence[dict[str, Any]], ratio: float = 1.0, *, extra_text: str = "") -> int:
    """Estimated prompt tokens of ``messages`` (plus ``extra_text``, e.g. a schema or tool definition)."""
    raw = sum(text_tokens(_text(m.get("content"))) + MESSAGE_OVERHEAD_TOKENS for m in messages)
    return int((raw + text_tokens(extra_text)) * max(0.1, ratio)) + 1


# ---- fitting -----------------------------------------------------------------------------------

@dataclass
class Fitted:
    """What :func:`fit_messages` did: the stack, its estimate, and what was cut."""

    messages: list[dict[str, Any]]
    tokens: int
    dropped_messages: int = 0
    dropped_blocks: int = 0
    trimmed_chars: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.dropped_messages or self.trimmed_chars)


def _blocks(text: str) -> list[tuple[int, int]]:
    """(start, end) of each data block's body in ``text`` (between the header line and the close marker)."""
    spans, pos = [], 0
    while True:
        start = text.find(OPEN, pos)
        if start < 0:
            return spans
        header_end = text.find(">>>\n", start)
        if header_end < 0:
            return spans
        body = header_end + 4
        close = text.find("\n" + CLOSE, body)
        if close < 0:
            return spans
        spans.append((body, close))
        pos = close + len(CLOSE) + 1


def _trim_blocks(text: str, chars_to_cut: int) -> tuple[str, int]:
    """``text`` with its largest data-block bodies shortened by about ``chars_to_cut`` in all (a trimmed
    body ends with ``TRIM_NOTE`` once, however often it is trimmed)."""
    spans = _blocks(text)
    if not spans:
        return text, 0
    bodies = []
    for start, end in spans:
        noted = text[start:end].endswith(TRIM_NOTE)
        bodies.append((start, end - len(TRIM_NOTE) if noted else end, end, noted))
    lengths = [body_end - start for start, body_end, _, _ in bodies]
    noted = [b[3] for b in bodies]

    def cut_at(level: int) -> int:  # characters saved at ``level``, net of the notes it adds
        return sum(max(0, n - level) - (len(TRIM_NOTE) if n > level and not was else 0)
                   for n, was in zip(lengths, noted))

    # water-filling: the highest level L (>= MIN_BLOCK_CHARS) whose cut reaches chars_to_cut
    low, high = MIN_BLOCK_CHARS, max(lengths)
    if cut_at(low) <= chars_to_cut:
        level = low
    else:
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if cut_at(mid) >= chars_to_cut else (low, mid - 1)
        level = low
    keep = [min(n, level) for n in lengths]
    if keep == lengths:
        return text, 0
    out, last = [], 0
    for (start, body_end, end, noted), length, kept in zip(bodies, lengths, keep):
        out.append(text[last:start])
        out.append(text[start:end] if kept >= length else text[start:start + kept] + TRIM_NOTE)
        last = end
    out.append(text[last:])
    return "".join(out), sum(lengths) - sum(keep)


def _drop_last_block(text: str) -> tuple[str, int]:
    """``text`` without its last data block (markers included) when it has two or more."""
    spans = _blocks(text)
    if len(spans) < 2:
        return text, 0
    body_start, body_end = spans[-1]
    start = text.rfind(OPEN, 0, body_start)
    end = body_end + 1 + len(CLOSE)
    cut_from = start
    while cut_from > 0 and text[cut_from - 1] == "\n":  # the blank line before it goes too
        cut_from -= 1
    return text[:cut_from] + text[end:], end - cut_from


def fit_messages(messages: Sequence[dict[str, Any]], budget: int | None, *, ratio: float = 1.0, keep_head: int = 1,
                 tail: int = 1, extra_text: str = "") -> Fitted:
    """``messages`` brought under ``budget`` estimated tokens (see the module docstring).

    ``keep_head`` leading messages (system prompt, pinned examples) and the last ``tail`` messages (the
    current user message, plus a repair request's two) are never dropped; data blocks anywhere are
    trimmed; in the tail, an assistant message (a bad output being repaired) is shortened last.
    ``budget`` None: nothing is cut. The result may still be over budget when nothing more can go."""
    stack = [dict(m) for m in messages]
    fitted = Fitted(stack, estimate_tokens(stack, ratio, extra_text=extra_text))
    if budget is None or fitted.tokens <= budget:
        return fitted
    tail = max(1, min(tail, len(stack)))
    head = max(0, min(keep_head, len(stack) - tail))

    # 1. older history, oldest first, in whole pairs (keeps the alternation)
    middle = stack[head:len(stack) - tail]
    dropped = 0
    while middle and estimate_tokens(stack[:head] + middle + stack[len(stack) - tail:], ratio,
                                     extra_text=extra_text) > budget:
        cut = 2 if len(middle) >= 2 and middle[0].get("role") != middle[1].get("role") else 1
        del middle[:cut]
        dropped += cut
    if dropped:
        stack = stack[:head] + middle + stack[len(stack) - tail:]
        fitted.dropped_messages = dropped
        fitted.notes.append(f"以前の会話 {dropped} 件を省略しました")
        if stack and stack[0].get("role") == "system":
            stack[0]["content"] = (f"{_text(stack[0].get('content'))}\n\n（注: 長さの上限のため、これより前の会話 "
                                   f"{dropped} 件は省略しています）")

    # 2. data blocks (retrieved manual text, FAQ articles, attachments), largest first
    def over() -> int:
        return estimate_tokens(stack, ratio, extra_text=extra_text) - budget

    excess = over()
    for _ in range(24):  # each pass converts the excess tokens to characters of the texts it cuts
        if excess <= 0:
            break
        cut_any = 0
        for message in stack[1:] if stack and stack[0].get("role") == "system" else stack:
            text = _text(message.get("content"))
            spans = _blocks(text)
            if not spans:
                continue
            body_chars = sum(end - start for start, end in spans)
            per_char = max(0.2, text_tokens("".join(text[s:e] for s, e in spans)) / max(1, body_chars)) * ratio
            new, cut = _trim_blocks(text, int(excess / per_char) + 1)
            if cut:
                message["content"] = new
                cut_any += cut
                excess = over()
                if excess <= 0:
                    break
        if not cut_any:  # every block is at its minimum: leave out the last blocks (the lowest ranked)
            for message in reversed(stack):
                new, cut = _drop_last_block(_text(message.get("content")))
                if cut:
                    message["content"] = new
                    cut_any = cut
                    fitted.dropped_blocks += 1
                    excess = over()
                    break
        if not cut_any:
            break
        fitted.trimmed_chars += cut_any
    if fitted.dropped_blocks:
        fitted.notes.append(f"参照テキストのブロック {fitted.dropped_blocks} 件を省略しました")
    if fitted.trimmed_chars:
        fitted.notes.append(f"参照テキストを {fitted.trimmed_chars} 文字省略しました")

    # 3. a repair request's copy of the bad output
    for message in stack[len(stack) - tail:]:
        if excess <= 0:
            break
        text = _text(message.get("content"))
        if message.get("role") == "assistant" and len(text) > MIN_REPAIR_RAW_CHARS:
            per_char = max(0.1, text_tokens(text) / len(text)) * ratio
            keep = max(MIN_REPAIR_RAW_CHARS, len(text) - int(excess / per_char) - len(TRIM_NOTE) - 1)
            message["content"] = text[:keep] + TRIM_NOTE
            fitted.trimmed_chars += len(text) - keep
            fitted.notes.append("修復依頼に含める出力を短くしました")
            excess = over()
    fitted.messages = stack
    fitted.tokens = estimate_tokens(stack, ratio, extra_text=extra_text)
    return fitted
