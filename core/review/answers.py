"""One answer of a stored conversation, as the reviewers' loop sees it: who asked what, what was answered,
with which sources, facts (urgency, outcome, knowledge fields), model, prompt version, and the debug records
of the model calls that made it.

An answer is addressed by ``(conversation id, turn)``: ``turn`` is the index of its entry among the
conversation's live chat entries (``Store.chat_entries``, which is the ``transcript`` of ``GET
/api/sessions/{id}`` for a diagnosis session). Diagnosis and knowledge entries carry ``role``; an entry is an
answer when its role is ``assistant``. An FAQ conversation stores one entry per exchange (the question and its
answer): every FAQ entry is an answer. ナレッジに質問 is not a stored conversation: its page hands the answer over
as it is (:func:`ask_answer`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from core.prompts import prompt_version
from core.text.pii import clean_text
from core.validation import ENTRY_FIELDS

# The prompt that names an answer's prompt version when no debug record names one (debug mode off).
FLOW_PROMPTS = {"diagnosis": "diagnosis_system", "faq": "faq_answer_system", "knowledge": "knowledge_system",
                "ask": "knowledge_answer_system"}
FLOW_JA = {"diagnosis": "車両問診", "faq": "FAQ", "knowledge": "契約ナレッジ作成", "ask": "ナレッジに質問"}
MAX_TEXT = 4000


class NotAnAnswer(ValueError):
    """The turn is not an assistant answer of the conversation (the API's 422)."""


@dataclass
class Answer:
    conversation_id: str
    turn: int
    flow: str
    question: str = ""                 # the user's message this answers (as stored)
    text: str = ""                     # the answer as the user read it
    sources: list[dict[str, Any]] = field(default_factory=list)  # [{id, title}] manual sections / articles / entries
    urgency: str | None = None         # diagnosis
    can_drive: bool | None = None
    step: str | None = None
    outcome: str | None = None         # FAQ: answered / not_found / fallback / …
    fields: dict[str, str] = field(default_factory=dict)  # knowledge: the drafted entry's fields
    failed: bool = False               # the model call failed (the flow's fallback was shown)
    repaired: bool = False             # a repair or retry was needed
    model: str = ""
    prompt_version: str = ""
    debug_ids: list[int] = field(default_factory=list)
    created_at: str = ""

    def snapshot(self) -> dict[str, Any]:
        """What the review item keeps of the answer (personal data masked, secrets removed)."""
        return {"question": clean_text(self.question)[:MAX_TEXT], "answer": clean_text(self.text)[:MAX_TEXT],
                "sources": self.sources[:20], "urgency": self.urgency, "can_drive": self.can_drive,
                "step": self.step, "outcome": self.outcome,
                "fields": {k: clean_text(v)[:MAX_TEXT] for k, v in self.fields.items()},
                "failed": self.failed, "repaired": self.repaired, "debug_ids": self.debug_ids[:50],
                "answered_at": self.created_at}


def is_answer(flow: str, entry: Mapping[str, Any]) -> bool:
    return flow == "faq" or entry.get("role") == "assistant"


def _knowledge_fields(turn: Any) -> dict[str, str]:
    if not isinstance(turn, Mapping):
        return {}
    drafted = turn.get("knowledge_json")
    first = drafted[0] if isinstance(drafted, list) and drafted else drafted
    if not isinstance(first, Mapping):
        return {}
    return {f: str(first.get(f) or "") for f in ENTRY_FIELDS if first.get(f)}


def _facts(answer: Answer, entry: Mapping[str, Any], row: Mapping[str, Any]) -> None:
    flow = answer.flow
    if flow == "diagnosis":
        response = entry.get("response") or row.get("turn_json") or {}
        urgency = (response.get("urgency") or {}) if isinstance(response, Mapping) else {}
        answer.text = str(entry.get("message") or "")
        answer.sources = [{"id": str(s.get("section_id") or ""), "title": f"{s.get('section') or ''}（p.{s.get('page')}）"}
                          for s in entry.get("sources") or [] if isinstance(s, Mapping)]
        answer.urgency, answer.can_drive = urgency.get("level"), urgency.get("can_drive")
        answer.step = entry.get("step")
        answer.failed = bool(entry.get("fallback"))
    elif flow == "faq":
        answer.question = str(entry.get("user") or "")
        answer.text = str(entry.get("message") or "")
        answer.sources = [{"id": str(c), "title": str(c)} for c in entry.get("citations") or []]
        answer.outcome = entry.get("outcome")
        answer.failed = answer.outcome == "fallback"
    elif flow == "knowledge":
        turn = entry.get("turn") or row.get("turn_json")
        answer.text = str(entry.get("content") or "")
        answer.fields = _knowledge_fields(turn)
        answer.step = ((turn or {}).get("state") or {}).get("phase") if isinstance(turn, Mapping) else None
        answer.failed = bool(entry.get("failed"))


def _question(flow: str, rows: list[dict[str, Any]], index: int) -> str:
    for row in reversed(rows[:index]):
        entry = row.get("entry") or {}
        if entry.get("role") == "user" or row.get("role") == "user":
            return str(entry.get("text") or entry.get("user_text") or entry.get("content") or row.get("user_input") or "")
    return ""


def _debug_window(store: Any, conversation_id: str, since: str, until: str) -> list[dict[str, Any]]:
    """The records of the calls made between the previous turn and the answer (``since`` < time ≤ ``until``),
    read from the index (only those: every record of the conversation was read and parsed before)."""
    return [r for r in store.list_debug_records(conversation_id=conversation_id, after=since or None, until=until,
                                                limit=200)
            if since < str(r.get("time") or "") <= until]


def _previous_stamp(rows: list[dict[str, Any]], turn: int) -> str:
    """When the turn before the answer's was written: the newest earlier row stamped before the answer. A chat
    turn writes its question and its answer in one transaction with one stamp, so the row just before the
    answer (its question) is no bound: its calls were made after the previous write."""
    stamp = str(rows[turn].get("created_at") or "")
    for row in reversed(rows[:turn]):
        earlier = str(row.get("created_at") or "")
        if not stamp or earlier < stamp:
            return earlier
    return ""


def answer_at(store: Any, conversation_id: str, turn: int) -> Answer:
    """The answer ``turn`` of a stored conversation. LookupError for an unknown conversation; NotAnAnswer
    when ``turn`` is not the index of an answer."""
    conversation = store.get_conversation(conversation_id)
    if conversation is None:
        raise LookupError(conversation_id)
    flow = conversation["flow"]
    rows = store.list_turns(conversation_id)
    if not isinstance(turn, int) or isinstance(turn, bool) or not 0 <= turn < len(rows):
        raise NotAnAnswer(f"turn {turn} はこの会話の回答ではありません（0〜{len(rows) - 1}）。")
    row = rows[turn]
    entry = row.get("entry") or {}
    if not is_answer(flow, entry):
        raise NotAnAnswer(f"turn {turn} は回答（assistant）ではありません。")
    answer = Answer(conversation_id, turn, flow, model=str(row.get("model") or ""),
                    created_at=str(row.get("created_at") or ""))
    if flow != "faq":
        answer.question = _question(flow, rows, turn)
    _facts(answer, entry, row)
    records = _debug_window(store, conversation_id, _previous_stamp(rows, turn), answer.created_at or "9999")
    answer.debug_ids = [int(r["id"]) for r in records]
    answer.repaired = any(r.get("kind") in ("repair", "retry") or (r.get("outcome") or "ok") != "ok" for r in records)
    answer.failed = answer.failed or (bool(records) and (records[-1].get("outcome") or "ok") != "ok")
    named = [r for r in records if r.get("prompt_version")]
    if named:
        last = named[-1]
        answer.prompt_version = f"{last.get('prompt') or FLOW_PROMPTS.get(flow, '')}@{last['prompt_version']}"
    else:
        answer.prompt_version = current_prompt_version(flow)
    answer.model = answer.model or str((records[-1] if records else {}).get("model") or "")
    return answer


def current_prompt_version(flow: str) -> str:
    """``<prompt>@<version>`` of the flow's main prompt in use now."""
    name = FLOW_PROMPTS.get(flow, "")
    return f"{name}@{prompt_version(name)}" if name else ""


def ask_answer(session_id: str, turn: int, *, question: str, text: str, sources: list[Mapping[str, Any]],
               ok: bool, model: str = "") -> Answer:
    """An answer of ナレッジに質問 (not a stored conversation), as its page holds it."""
    return Answer(session_id, turn, "ask", question=question, text=text,
                  sources=[{"id": str(s.get("entry_id") or ""), "title": str(s.get("title") or "")} for s in sources],
                  outcome=None if ok and sources else ("fallback" if not ok else "not_found"), failed=not ok,
                  model=model, prompt_version=current_prompt_version("ask"))


def transcript_until(store: Any, conversation_id: str, turn: int) -> list[dict[str, Any]]:
    """The conversation up to and including ``turn``: ``[{role, text, turn}]`` as the reviewer reads it
    (an FAQ exchange becomes its question and its answer)."""
    conversation = store.get_conversation(conversation_id)
    if conversation is None:
        return []
    flow = conversation["flow"]
    out: list[dict[str, Any]] = []
    for i, row in enumerate(store.list_turns(conversation_id)[:turn + 1]):
        entry = row.get("entry") or {}
        if flow == "faq":
            out += [{"role": "user", "text": str(entry.get("user") or ""), "turn": i},
                    {"role": "assistant", "text": str(entry.get("message") or ""), "turn": i}]
        elif entry.get("role") == "user":
            out.append({"role": "user", "text": str(entry.get("text") or entry.get("content") or row.get("user_input")
                                                     or ""), "turn": i})
        else:
            out.append({"role": "assistant", "text": str(entry.get("message") or entry.get("content") or ""), "turn": i})
    return out
