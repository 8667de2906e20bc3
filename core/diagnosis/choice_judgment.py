"""Which on-screen choice did the user mean by their typed text? (seed 004's 3-stage judgment)

0. ``exact``: the normalised text equals one choice's label or value (no model call);
1. ``structured_output``: a call with ``schemas/choice_judgment.schema.json`` → ``{step, reason}``,
   ``step`` 1-based, 0 = none of them;
2. ``tag_fallback``: a plain-text call (no schema) asked for one ``[CHOICE:N]`` line, parsed with a regex;
3. ``ai_judge``: a call with ``schemas/choice_evaluation.schema.json`` that evaluates each choice as
   a condition → ``{matched_index, reason}``.

A stage that fails (provider error, invalid output, out-of-range number) hands over to the next.
The method is returned on :class:`ChoiceJudgmentInfo` (and so on the response) and written as
``judgment_method`` on every debug record made by the judgment. ``failed`` = no stage answered.
"""
from __future__ import annotations

import re
from typing import Sequence

from core.diagnosis import llm_calls
from core.diagnosis.context import DiagnosisContext
from core.diagnosis.guards import normalise
from core.diagnosis.models import Choice, ChoiceJudgmentInfo, SessionState
from core.prompts import render
from core.text.pii import mask_pii

TAG = re.compile(r"\[CHOICE:\s*(\d+)\s*\]", re.IGNORECASE)
METHODS = ("exact", "structured_output", "tag_fallback", "ai_judge", "failed")


def exact_match(text: str, choices: Sequence[Choice]) -> int | None:
    """1-based index of the one choice whose label or value equals ``text`` after normalisation."""
    key = normalise(text)
    if not key:
        return None
    hits = [i for i, c in enumerate(choices, 1) if key in (normalise(c.label), normalise(c.value))]
    return hits[0] if len(hits) == 1 else None


def parse_tag(raw: str | None, n_choices: int) -> int | None:
    """The number of the first ``[CHOICE:N]`` tag with 0 ≤ N ≤ n_choices, else None."""
    for match in TAG.finditer(raw or ""):
        number = int(match.group(1))
        if 0 <= number <= n_choices:
            return number
    return None


def _result(text: str, choices: Sequence[Choice], index: int, method: str, reason: str) -> ChoiceJudgmentInfo:
    if 1 <= index <= len(choices):
        return ChoiceJudgmentInfo(text=text, index=index, value=choices[index - 1].value, method=method, reason=reason)
    return ChoiceJudgmentInfo(text=text, index=None, value=None, method=method, reason=reason)


def judge_choice(ctx: DiagnosisContext, session: SessionState, text: str, choices: Sequence[Choice], *,
                 question: str = "", step: str = "") -> ChoiceJudgmentInfo:
    """Map ``text`` to one of ``choices`` (see the module docstring). Never raises."""
    choices = list(choices)
    index = exact_match(text, choices)
    if index is not None:
        return _result(text, choices, index, "exact", "選択肢のラベルと一致")
    start = len(ctx.log) if ctx.log is not None else 0
    outcome = _judge_with_model(ctx, session, text, choices, question=question, step=step or session.current_step.value)
    if ctx.log is not None:
        made = list(ctx.log[start:])
        annotate = getattr(ctx.log, "annotate", None)  # a stored log updates its stored copies too
        if callable(annotate):
            annotate(made, judgment_method=outcome.method)
        else:
            for record in made:
                record["judgment_method"] = outcome.method
    return outcome


def _judge_with_model(ctx: DiagnosisContext, session: SessionState, text: str, choices: list[Choice], *,
                      question: str, step: str) -> ChoiceJudgmentInfo:
    n = len(choices)
    masked = mask_pii(text)
    listing = "\n".join(f"{i}: {c.label}" for i, c in enumerate(choices, 1))
    context = {"text": masked, "question": question,
               "choices": [{"index": i, "value": c.value, "label": c.label} for i, c in enumerate(choices, 1)]}

    # Stage 1: structured {step, reason}
    stage1 = llm_calls.call_structured(
        ctx, session, task=llm_calls.CHOICE_JUDGMENT_TASK, step=step, prompt="choice_judgment", context=context,
        messages=[{"role": "user", "content": render("choice_judgment", question=question or "-", choices=listing,
                                                     text=masked)}],
        temperature=0.0, max_repairs=0)
    if stage1.ok and 0 <= int(stage1.data["step"]) <= n:
        return _result(text, choices, int(stage1.data["step"]), "structured_output", stage1.data.get("reason", ""))

    # Stage 2: plain text, [CHOICE:N] tag
    tags = "\n".join(f"[CHOICE:{i}] … {c.label}" for i, c in enumerate(choices, 1))
    raw = llm_calls.call_text(
        ctx, session, task=llm_calls.CHOICE_TAG_TASK, step=step, prompt="choice_tag", context=context,
        messages=[{"role": "user", "content": render("choice_tag", question=question or "-", choices=listing,
                                                     text=masked, tags=tags)}])
    number = parse_tag(raw, n)
    if number is not None:
        return _result(text, choices, number, "tag_fallback", "タグ [CHOICE:N] から判定")

    # Stage 3: ai_judge, each choice as a condition
    conditions = "\n".join(f"{i}. お客様の入力は「{c.label}」を意味している" for i, c in enumerate(choices, 1))
    stage3 = llm_calls.call_structured(
        ctx, session, task=llm_calls.CHOICE_EVALUATION_TASK, step=step, prompt="choice_evaluation", context=context,
        messages=[{"role": "user", "content": render("choice_evaluation", text=masked, conditions=conditions)}],
        temperature=0.0, max_repairs=0)
    if stage3.ok and 0 <= int(stage3.data["matched_index"]) <= n:
        return _result(text, choices, int(stage3.data["matched_index"]), "ai_judge", stage3.data.get("reason", ""))
    return ChoiceJudgmentInfo(text=text, index=None, value=None, method="failed", reason="どの段階でも判定できませんでした")
