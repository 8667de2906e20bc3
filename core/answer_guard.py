"""Guards on what a model answered, shared by every flow (issue #26): non-answers are not answers.

A schema-valid answer can still be no answer: the customer's question handed back as the FAQ answer, the
user's message echoed as ``assistant_message``, the few-shot example's greeting repeated on every
interview turn, a warranty figure no cited source states, a review text in another language's script.
:func:`check_answer` finds these with the pure text checks of :mod:`core.text.answer_checks`;
:func:`guarded` runs the one policy every flow follows:

1. the first answer passes: it is used as it is;
2. otherwise the model is asked **once** more (:func:`regeneration_messages`: the conversation, the
   rejected output as the assistant turn, then ``prompts/answer_regenerate.md`` with the reason);
3. a second answer that still fails is not shown: the flow's offline answer (the built-in provider's
   policy for the same task and facts, ``fallback``) is used when it passes, else ``None`` — the flow
   then says honestly that it could not answer (:data:`NOT_ANSWERED`), never shows the rejected text
   as a grounded answer.

Every finding goes to the server log (codes and counts, never the text) and, when the flow keeps a debug
log, onto the debug record of the call it judged (``record["guards"]``: code, reason, what was done), so
a prompt tuner sees why an answer was changed. :func:`note` does that for the flows' own guards too (the
diagnosis urgency cap).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, MutableSequence, Sequence, TypeVar

from core.llm.offline import OfflineClient
from core.prompts import render
from core.results import StructuredResult
from core.text.answer_checks import echoes, not_japanese, unsupported_figures
from core.text.pii import mask_pii

logger = logging.getLogger("kaiwa.guards")

NOT_ANSWERED = "確かな回答を作成できませんでした。申し訳ありませんが、表現を変えてもう一度お試しいただくか、担当者にお問い合わせください。"
RAW_CHARS = 2000  # how much of a rejected output the regeneration request carries

ECHO_USER = "echo_user"
ECHO_EXAMPLE = "echo_example"
UNSUPPORTED_FIGURE = "unsupported_figure"
FOREIGN_SCRIPT = "foreign_script"
REASONS = {
    ECHO_USER: "回答がユーザーの入力をそのまま繰り返しているだけで、答えになっていません。",
    ECHO_EXAMPLE: "回答が例として示した応答（挨拶・定型文）の繰り返しで、今回の入力に答えていません。",
    UNSUPPORTED_FIGURE: "回答に、根拠の資料にない数値があります（{figures}）。資料に書かれている数値だけを使ってください。",
    FOREIGN_SCRIPT: "{field} が日本語ではありません（他の言語の文字が含まれています）。日本語で書き直してください。",
}

R = TypeVar("R", bound=StructuredResult)


@dataclass
class Finding:
    """Why an answer is not an answer: ``code`` (one of the constants above), the Japanese ``reason``
    the regeneration request carries, and details for the log (figures, field names)."""

    code: str
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)


def check_answer(text: str | None, *, user_text: str | None = None, examples: Iterable[str] = (),
                 sources: Sequence[str | None] | None = None, field_name: str = "回答",
                 japanese: bool = False) -> Finding | None:
    """The first fault of ``text``: an echo of ``user_text`` or of one of ``examples``; with ``sources``
    (the cited texts; pass the user's text among them), a figure none of them states; with ``japanese``,
    another language's script. None when it is an answer."""
    if user_text and echoes(text, user_text):
        return Finding(ECHO_USER, REASONS[ECHO_USER])
    for example in examples:
        if example and echoes(text, example):
            return Finding(ECHO_EXAMPLE, REASONS[ECHO_EXAMPLE])
    if japanese and not_japanese(text):
        return Finding(FOREIGN_SCRIPT, REASONS[FOREIGN_SCRIPT].format(field=field_name), {"field": field_name})
    if sources is not None:
        missing = unsupported_figures(text, [s for s in sources if s])
        if missing:
            return Finding(UNSUPPORTED_FIGURE, REASONS[UNSUPPORTED_FIGURE].format(figures="、".join(missing[:5])),
                           {"figures": missing[:10]})
    return None


REGENERATION_TAIL = 3  # the question (with its sources), the rejected output, the reason: never dropped by fitting


def regeneration_messages(messages: Sequence[dict[str, Any]], raw: str | None, finding: Finding,
                          fields: str = "") -> list[dict[str, Any]]:
    """``messages`` followed by the rejected output (assistant turn, trimmed) and the request to answer
    again with the reason (``prompts/answer_regenerate.md``). Send it with ``keep_tail=REGENERATION_TAIL``:
    on a small context, fitting would otherwise drop the question and its sources as older history and
    keep only the reason."""
    head = str(raw or "")[:RAW_CHARS]
    return [*[dict(m) for m in messages], {"role": "assistant", "content": head or "（空の応答）"},
            {"role": "user", "content": render("answer_regenerate", reason=finding.reason,
                                               fields=fields or "前回と同じフィールド")}]


def note(log: MutableSequence[dict[str, Any]] | None, finding: Finding, action: str, *, task: str = "",
         flow: str = "") -> None:
    """Record ``finding`` and what was done about it (``regenerated`` / ``offline`` / ``not_answered`` /
    ``kept`` / ``capped``…): always in the server log (code only), and on the latest debug record of
    ``task`` when there is a debug log."""
    logger.warning("answer guard: flow=%s task=%s finding=%s action=%s", flow, task, finding.code, action)
    if log is None:
        return
    entry = {**{k: v for k, v in finding.detail.items() if k != "text"}, "guard": finding.code,
             "reason": mask_pii(finding.reason)[:300], "action": action}
    for record in reversed(log):
        if isinstance(record, dict) and (not task or record.get("task") == task):
            guards = [*(record.get("guards") or []), entry]
            annotate = getattr(log, "annotate", None)  # a log written through to the store (core.store.debug_sink)
            if callable(annotate):
                annotate([record], guards=guards)
            else:
                record["guards"] = guards
            return


def offline_client() -> OfflineClient:
    """The built-in provider, whose policy for a task is the flows' offline answer (the fallback)."""
    return OfflineClient()


@dataclass
class Guarded:
    """What :func:`guarded` decided: the result to use (None: nothing passed), and how it came about
    (``as_is`` / ``regenerated`` / ``offline`` / ``not_answered``) with the findings on the way."""

    result: StructuredResult | None
    outcome: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.outcome != "as_is"


def guarded(first: R, check: Callable[[R], Finding | None], regenerate: Callable[[Finding], R],
            fallback: Callable[[], R | None] | None = None, *, log: MutableSequence[dict[str, Any]] | None = None,
            task: str = "", flow: str = "") -> Guarded:
    """The module's policy for one answer (module docstring). ``first`` must be ``ok``; ``check`` judges a
    result, ``regenerate(finding)`` asks the model once more, ``fallback()`` gives the offline answer."""
    finding = check(first)
    if finding is None:
        return Guarded(first, "as_is")
    findings = [finding]
    second = regenerate(finding)
    again = check(second) if second.ok else None
    if second.ok and again is None:
        note(log, finding, "regenerated", task=task, flow=flow)
        return Guarded(second, "regenerated", findings)
    if again is not None:
        findings.append(again)
    offline = fallback() if fallback is not None else None
    if offline is not None and offline.ok and check(offline) is None:
        note(log, findings[-1], "offline", task=task, flow=flow)
        return Guarded(offline, "offline", findings)
    note(log, findings[-1], "not_answered", task=task, flow=flow)
    return Guarded(None, "not_answered", findings)
