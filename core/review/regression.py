"""A reviewed answer as a regression case: a ``core.eval`` scenario that replays the conversation up to that
answer and expects the **checkable facts** of the right answer.

The right answer is the reviewer's corrected answer (verdict 一部誤り / 誤り), or the answer itself when it
was judged 正しい. Its checkable facts become the scenario's ``expect``:

* diagnosis — ``urgency`` (the level the answer should have), ``can_drive``, the manual section the answer
  should cite first (``first_citation``, and ``citations_min`` 1: it cites at all);
* FAQ — ``outcome`` (answered / not_found / handoff / refused …), ``first_citation`` and ``citations_min`` 1
  (the article that states the answer);
* knowledge — ``knowledge_fields`` (the corrected fields must not be empty), ``knowledge_contains`` for the
  short fields (contract type, clause: the corrected value);
* ナレッジに質問 (flow ``ask``) — ``outcome`` (``answered`` or ``not_found``: whether it should answer from the
  library at all), ``first_citation`` (the entry it should cite first, ``No.<id>`` or its title) and
  ``citations_include`` (every entry the reviewer's correction names must be cited, in any order);
* every flow — ``message_contains`` (knowledge: ``knowledge_contains`` ``*``) for the phrases the reviewer
  marked as required (「必ず含める語句」).

A free-text correction is kept for people (the export, the レビュー page) but is not an expectation: no
wording is required of the next answer beyond the required phrases. The user's messages are PII-masked (a
regression case is shared). ナレッジに質問 is not a stored conversation: its case replays the question kept in
the item's snapshot (masked) against the current library (``core.knowledge.ask_scenario``).
"""
from __future__ import annotations

import re
import unicodedata
from typing import Any, Mapping

from core.eval.expectations import CHECKS
from core.text.pii import mask_pii
from core.validation import ENTRY_FIELDS

SHORT_FIELDS = ("contract_type", "target_clause")
MESSAGE_CHARS = 4000
FAQ_OUTCOMES = ("answered", "not_found", "fallback", "refused", "handoff", "smalltalk")
URGENCIES = ("critical", "high", "medium", "low")
ASK_OUTCOMES = ("answered", "not_found")
_ENTRY_NO = re.compile(r"(?:no\.?|#)?\s{0,2}([0-9]{1,9})", re.IGNORECASE)  # on NFKC-folded text of ≤ 80 chars


class NotReplayable(ValueError):
    """The item cannot become a regression case (Japanese message)."""


def _message(text: Any) -> str:
    return mask_pii(str(text or "")[:MESSAGE_CHARS]).strip()


def _turns(store: Any, conversation: Mapping[str, Any], turn: int) -> list[dict[str, Any]]:
    """The user's messages up to the answer, as the scenario's turns (the diagnosis vehicle and photo steps
    are played by the adapter itself)."""
    flow = conversation["flow"]
    rows = store.list_turns(conversation["id"])[:turn + 1]
    turns: list[dict[str, Any]] = []
    previous_step = None
    for row in rows:
        entry = row.get("entry") or {}
        if flow == "faq":
            if str(entry.get("user") or row.get("user_input") or "").strip():
                turns.append({"message": _message(entry.get("user") or row.get("user_input"))})
            continue
        if row["role"] == "assistant":
            previous_step = row.get("step")
            continue
        text = row.get("user_input") or entry.get("text") or entry.get("user_text") or ""
        if str(text).strip() and not (flow == "diagnosis" and previous_step in ("vehicle_id", "photo_confirm")):
            turns.append({"message": _message(text)})
    return turns


def right_answer(item: Mapping[str, Any]) -> dict[str, Any]:
    """The facts the next answer should have: the correction, else (正しい) the answer as it was."""
    snapshot = item.get("snapshot") or {}
    corrected = dict(item.get("corrected_answer") or {})
    if item.get("verdict") == "correct" or not corrected:
        citations = [s.get("id") for s in snapshot.get("sources") or [] if s.get("id")]
        if item.get("flow") == "ask":  # as it was: the first entry it cited (later ones may vary with the model)
            citations = citations[:1]
        base = {"urgency": snapshot.get("urgency"), "can_drive": snapshot.get("can_drive"),
                "outcome": snapshot.get("outcome"), "citations": citations, "fields": snapshot.get("fields") or {}}
        return {**base, **{k: v for k, v in corrected.items() if v not in (None, "", [], {})}}
    return corrected


def entry_citation(value: Any) -> str:
    """A cited knowledge entry as a ナレッジに質問 case names it: 「12」「No.12」「#12」 → ``No.12``; anything
    else is a title, kept as typed."""
    text = str(value or "").strip()
    number = _ENTRY_NO.fullmatch(unicodedata.normalize("NFKC", text)[:80])
    return f"No.{int(number.group(1))}" if number else text


def _ask_expectations(right: Mapping[str, Any], phrases: list[str]) -> dict[str, Any]:
    cited = list(dict.fromkeys(entry_citation(c) for c in right.get("citations") or [] if str(c).strip()))
    outcome = right.get("outcome")
    if outcome not in ASK_OUTCOMES:  # a snapshot's answered answer has no outcome; a failed one is no fact
        outcome = "answered" if cited and outcome is None else None
    expect: dict[str, Any] = {}
    if outcome:
        expect["outcome"] = outcome
    if cited and outcome != "not_found":
        expect["first_citation"] = cited[0]
        if len(cited) > 1:
            expect["citations_include"] = cited
    if phrases:
        expect["message_contains"] = phrases
    return expect


def expectations(flow: str, right: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario's ``expect`` from the right answer's checkable facts (only keys ``core.eval`` knows)."""
    expect: dict[str, Any] = {}
    phrases = [str(p).strip() for p in right.get("must_include") or [] if str(p).strip()]
    citations = [str(c) for c in right.get("citations") or [] if str(c).strip()]
    if flow == "diagnosis":
        if right.get("urgency") in URGENCIES:
            expect["urgency"] = right["urgency"]
        if isinstance(right.get("can_drive"), bool):
            expect["can_drive"] = right["can_drive"]
    if flow == "faq" and right.get("outcome") in FAQ_OUTCOMES:
        expect["outcome"] = right["outcome"]
    if flow in ("diagnosis", "faq") and citations:
        expect["first_citation"] = citations[0]
        expect["citations_min"] = 1  # the answer cites; which one first is the fact (ranks below it may vary)
    if flow in ("diagnosis", "faq") and phrases:
        expect["message_contains"] = phrases
    if flow == "ask":
        expect = _ask_expectations(right, phrases)
    if flow == "knowledge":
        fields = {k: str(v).strip() for k, v in (right.get("fields") or {}).items() if k in ENTRY_FIELDS and str(v).strip()}
        if fields:
            expect["knowledge_fields"] = sorted(fields)
        contains = {k: fields[k] for k in SHORT_FIELDS if k in fields and len(fields[k]) <= 40}
        if phrases:
            contains["*"] = phrases
        if contains:
            expect["knowledge_contains"] = contains
    return {k: v for k, v in expect.items() if k in CHECKS}


def scenario_for_item(store: Any, item: Mapping[str, Any]) -> dict[str, Any]:
    """The ``core.eval`` scenario of a reviewed item (NotReplayable when it cannot be one)."""
    if not item.get("verdict"):
        raise NotReplayable("判定を記録してから回帰ケースにしてください。")
    if item.get("flow") == "ask":
        return _ask_scenario(item)
    conversation = store.get_conversation(item["conversation_id"])
    if conversation is None:
        raise NotReplayable("元の会話が見つかりません。")
    flow = conversation["flow"]
    expect = expectations(flow, right_answer(item))
    if not expect:
        raise NotReplayable("確かめられる事実（緊急度・根拠・結果・項目・必ず含める語句）がありません。"
                            "修正後の回答にいずれかを入力してください。")
    turns = _turns(store, conversation, int(item["turn"]))
    if not turns:
        raise NotReplayable("この回答までにユーザーの発話がないため、再生できません。")
    scenario: dict[str, Any] = {"name": f"レビュー #{item['id']}（{flow} {item['conversation_id']} turn {item['turn']}）",
                                "flow": flow}
    if flow == "diagnosis":
        vehicle = ((conversation.get("state") or {}).get("session") or {}).get("vehicle_id")
        if vehicle:
            scenario["vehicle"] = vehicle
    scenario["turns"] = turns
    scenario["expect"] = expect
    scenario["review"] = {"item_id": item["id"], "verdict": item.get("verdict")}  # ignored by the runner
    return scenario


def _ask_scenario(item: Mapping[str, Any]) -> dict[str, Any]:
    """ナレッジに質問: the question kept in the item's snapshot, asked again of the current library."""
    expect = expectations("ask", right_answer(item))
    if not expect:
        raise NotReplayable("確かめられる事実（回答する／該当なし・根拠にすべきナレッジ・必ず含める語句）がありません。"
                            "修正後の回答にいずれかを入力してください。")
    question = _message((item.get("snapshot") or {}).get("question"))
    if not question:
        raise NotReplayable("この回答の質問が残っていないため、再生できません。")
    return {"name": f"レビュー #{item['id']}（ask {item['conversation_id']} turn {item['turn']}）", "flow": "ask",
            "turns": [{"message": question}], "expect": expect,
            "review": {"item_id": item["id"], "verdict": item.get("verdict")}}  # ignored by the runner


def make_regression_case(store: Any, item_id: int, actor: Any) -> tuple[int, dict[str, Any]]:
    """One click: the reviewed item as a stored regression case; ``(scenario id, scenario)``."""
    item = store.get_review_item(item_id)
    if item is None:
        raise LookupError("レビュー項目が見つかりません。")
    scenario = scenario_for_item(store, item)
    return store.add_review_scenario(item_id, scenario, actor), scenario
