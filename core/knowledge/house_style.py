"""House style as few-shot: the one or two most similar confirmed entries, carried by the interviewer's
request so that a model (and the offline interviewer) writes review points and action plans the way
the house already does.

The examples go at the end of the system prompt (``prompts/knowledge_house_style.md``), each entry as
JSON in its own ``core.text.untrusted`` data block: an entry is stored text that users wrote, so it is
data, never an instruction. They are fitted to ``HOUSE_STYLE_BUDGET_CHARS`` (long fields are cut at a
line end; a second example that does not fit is left out), so they never crowd out the conversation.
:func:`parse_examples` reads them back from a system prompt (the offline interviewer sees exactly
what a model sees).
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from core.prompts import load_prompt, render
from core.text.untrusted import CLOSE, OPEN, data_block

MAX_EXAMPLES = 2
HOUSE_STYLE_BUDGET_CHARS = 2400  # both examples together, JSON included
FIELD_CHARS = 500  # one field of an example at most
EXAMPLE_FIELDS = ("knowledge_title", "contract_type", "target_clause", "review_points", "action_plan")
_HEADING = load_prompt("knowledge_house_style").split("\n", 1)[0]


def _cut(text: Any, limit: int) -> str:
    text = str(text or "").strip()
    if len(text) <= limit:
        return text
    head = text[:limit]
    return (head[: head.rfind("\n")] if "\n" in head else head).rstrip() + "…"


def example_json(entry: Mapping[str, Any], field_chars: int = FIELD_CHARS) -> str:
    data = {"entry_id": entry.get("id") or entry.get("entry_id")}
    data.update({f: _cut(entry.get(f), field_chars) for f in EXAMPLE_FIELDS})
    return json.dumps(data, ensure_ascii=False)


def fit_examples(entries: Sequence[Mapping[str, Any]], budget: int = HOUSE_STYLE_BUDGET_CHARS) -> list[str]:
    """JSON of at most ``MAX_EXAMPLES`` entries (best first) within ``budget`` characters in all; the
    first one is shortened to fit when it alone is too long, a later one is dropped."""
    out: list[str] = []
    used = 0
    for entry in list(entries)[:MAX_EXAMPLES]:
        text = example_json(entry)
        if used + len(text) > budget:
            if out:
                break
            text = example_json(entry, field_chars=max(60, budget // (len(EXAMPLE_FIELDS) + 1)))
        out.append(text)
        used += len(text)
    return out


def house_style_block(entries: Sequence[Mapping[str, Any]], budget: int = HOUSE_STYLE_BUDGET_CHARS) -> str:
    """The prompt section for ``entries`` ("" when there are none)."""
    examples = fit_examples(entries, budget)
    if not examples:
        return ""
    return render("knowledge_house_style", examples="\n\n".join(data_block(e) for e in examples))


def with_house_style(system_prompt: str, entries: Sequence[Mapping[str, Any]]) -> str:
    block = house_style_block(entries)
    return f"{system_prompt}\n\n{block}" if block else system_prompt


def parse_examples(system_prompt: str) -> list[dict[str, Any]]:
    """The examples a system prompt carries (``[]`` when it has no house-style section)."""
    text = str(system_prompt or "")
    start = text.find(_HEADING)
    if start < 0:
        return []
    examples: list[dict[str, Any]] = []
    block: list[str] | None = None
    for line in text[start:].split("\n"):
        if block is None:
            if line.startswith(OPEN) and line.endswith(">>>"):
                block = []
        elif line == CLOSE:
            try:
                data = json.loads("\n".join(block))
            except ValueError:
                data = None
            if isinstance(data, dict):
                examples.append({k: data.get(k) for k in ("entry_id", *EXAMPLE_FIELDS)})
            block = None
        else:
            block.append(line)
    return examples[:MAX_EXAMPLES]
