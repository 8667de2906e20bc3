"""Turn a stored conversation into a ``core.eval`` scenario: its turns (user text PII-masked), the
expectations its end state satisfies, the YAML, and saving it to the scenario directory (admins only,
audited: the saved files are the regression suite)."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from core.eval.expectations import CHECKS
from core.eval.runner import make_client, run_scenario
from core.paths import ROOT
from core.schema_versions import describe
from core.text.pii import mask_pii
from core.validation import ENTRY_FIELDS
from core.workbench.prompt_files import atomic_write

SCENARIO_MESSAGE_CHARS = 4000


# A booking form replayed in a promoted scenario: valid, obviously made-up values (the customer's own
# name, phone and address are never written to a scenario file).
SCENARIO_BOOKING = {"name": "テスト 太郎", "phone": "090-1234-5678", "address": "東京都テスト区1-2-3",
                    "preferred_datetime": "2099年6月10日 10:00"}


def _message(text: Any) -> str:
    return mask_pii(str(text or "")[:SCENARIO_MESSAGE_CHARS]).strip()


def _last(turns: Sequence[Mapping[str, Any]], role: str) -> Mapping[str, Any] | None:
    return next((t for t in reversed(turns) if t.get("role") == role), None)


def conversation_turns(store: Any, conversation_id: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """``(conversation, scenario turns, final state)`` of a stored conversation. User text is
    PII-masked (a scenario file is shared and may be committed)."""
    conversation = store.get_conversation(conversation_id)
    if conversation is None:
        raise LookupError(f"会話 {conversation_id} は見つかりません。")
    flow = conversation["flow"]
    rows = store.list_turns(conversation_id)
    turns: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    if flow == "knowledge":
        confirmed = [e for e in store.list_entries(conversation_id=conversation_id) if e.get("status") == "confirmed"]
        confirmed_at = sorted(str(e.get("confirmed_at") or "") for e in confirmed)
        for row in rows:
            if confirmed_at and str(row.get("created_at") or "") > confirmed_at[0]:
                turns.append({"action": "confirm"})  # the operator confirmed the draft here
                confirmed_at = []
            if row["role"] == "user" and (row.get("user_input") or "").strip():
                turns.append({"message": _message(row["user_input"])})
        if confirmed_at:
            turns.append({"action": "confirm"})
        last = next((r for r in reversed(rows) if r["role"] == "assistant" and r.get("ok")), None)
        turn = (last or {}).get("turn_json") or {}
        # The entry under test, as core.knowledge.scenario picks it: the confirmed one, else the newest draft.
        entry = confirmed[-1] if confirmed else next(iter(store.conversation_outputs(conversation_id)), None)
        final = {"phase": (turn.get("state") or {}).get("phase"), "mode": (turn.get("control") or {}).get("mode"),
                 "knowledge": {f: str(entry.get(f) or "") for f in ENTRY_FIELDS} if entry else {},
                 "confirmed": bool(confirmed), "schema_version": _schema_version(turn)}
    elif flow == "faq":
        for row in rows:
            if (row.get("user_input") or "").strip():
                turns.append({"message": _message(row["user_input"])})
        last = (rows[-1].get("turn_json") if rows else None) or {}
        final = {"outcome": last.get("outcome"), "citations": list(last.get("citations") or []),
                 "message": last.get("message") or ""}
    elif flow == "diagnosis":
        previous_step = None
        for row in rows:
            if row["role"] == "assistant":
                previous_step = row.get("step")
                continue
            if previous_step in ("vehicle_id", "photo_confirm"):
                continue  # the scenario runner selects the vehicle and confirms the photo itself
            action = (row.get("entry") or {}).get("action")
            if action == "submit_booking":  # the form: placeholder values, never the customer's own
                turns.append({"action": action, "value": dict(SCENARIO_BOOKING)})
            elif action:
                turns.append({"action": action, "value": (row.get("entry") or {}).get("action_value")})
            elif (row.get("user_input") or "").strip():
                turns.append({"message": _message(row["user_input"])})
        state = conversation.get("state") or {}
        session = state.get("session") or {}
        response = state.get("last_response") or {}
        urgency = response.get("urgency") or {}
        final = {"vehicle": session.get("vehicle_id"), "step": response.get("current_step") or session.get("current_step"),
                 "urgency": urgency.get("level"), "can_drive": urgency.get("can_drive"),
                 "message": (response.get("prompt") or {}).get("message") or ""}
    else:
        raise ValueError(f"unknown flow: {flow}")
    return conversation, turns, final


def _schema_version(turn: Mapping[str, Any]) -> str | None:
    return describe(turn) if turn else None


def suggest_expectations(store: Any, conversation_id: str, *, source: tuple | None = None) -> dict[str, Any]:
    """Expectations the conversation's end state satisfies, for the operator to tick (``source``: what
    :func:`conversation_turns` returned for it, so it is not read again)."""
    conversation, _, final = source or conversation_turns(store, conversation_id)
    flow = conversation["flow"]
    if flow == "knowledge":
        fields = [k for k, v in (final.get("knowledge") or {}).items() if str(v or "").strip()]
        out = {"phase": final.get("phase"), "mode": final.get("mode")}
        if fields:
            out["knowledge_fields"] = fields
        if final.get("confirmed"):
            out["confirmed"] = True
    elif flow == "faq":
        out = {"outcome": final.get("outcome")}
        if final.get("citations"):
            out["citations_min"] = len(final["citations"])
    else:
        out = {"step": final.get("step"), "urgency": final.get("urgency"), "can_drive": final.get("can_drive")}
    known = known_expectations()  # only what the scenario runner can check
    return {k: v for k, v in out.items() if k in known and (v is not None or k in ("urgency", "can_drive"))}


def known_expectations() -> set[str]:
    return set(CHECKS)


def promote(store: Any, conversation_id: str, expectations: Mapping[str, Any], *, name: str | None = None,
            turns: Sequence[Mapping[str, Any]] | None = None, source: tuple | None = None) -> dict[str, Any]:
    """A ``core.eval`` scenario replaying the stored conversation, expecting ``expectations``
    (keys the runner knows; ValueError otherwise). ``turns`` overrides the conversation's turns;
    ``source`` is what :func:`conversation_turns` returned for it (not read again)."""
    conversation, found, final = source or conversation_turns(store, conversation_id)
    flow = conversation["flow"]
    expect = {k: v for k, v in dict(expectations).items() if v != "" and v != []}
    if not expect:
        raise ValueError("期待値を 1 つ以上選んでください。")
    unknown = sorted(set(expect) - known_expectations())
    if unknown:
        raise ValueError(f"シナリオ実行器が知らない期待値です: {', '.join(unknown)}")
    scenario: dict[str, Any] = {"name": name or f"{flow} {conversation_id}（{(conversation.get('title') or '').strip()[:40]}）",
                                "flow": flow}
    if flow == "diagnosis" and final.get("vehicle"):
        scenario["vehicle"] = final["vehicle"]
    chosen = [dict(t) for t in (turns if turns is not None else found)]
    if not any("message" in t for t in chosen):
        raise ValueError("この会話には再生できるユーザーの発話がありません。")
    scenario["turns"] = chosen
    scenario["expect"] = expect
    return scenario


def scenario_yaml(scenario: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, comment: str = "") -> str:
    """The YAML text of a scenario file (a list of scenarios), Japanese kept as is."""
    scenarios = [dict(scenario)] if isinstance(scenario, Mapping) else [dict(s) for s in scenario]
    head = "".join(f"# {line}\n" for line in comment.splitlines() if line.strip())
    return head + yaml.safe_dump(scenarios, allow_unicode=True, sort_keys=False, width=1000)


def save_scenario(scenario: Mapping[str, Any], path: str | Path, *, actor: Any, store: Any, comment: str = "") -> Path:
    """Write ``scenario`` to ``path``; an existing scenario file gets it appended (a scenario of the
    same name is replaced). The file is replaced atomically. Only an actor with ``scenario.write``
    (admins) may (PermissionError otherwise, nothing written); each save is in the audit log
    (``scenario.save``: who, when, file, scenario name)."""
    path = Path(path)
    detail = {"file": path.name, "name": str(scenario.get("name") or ""), "flow": scenario.get("flow")}
    with store.audited(actor, "scenario.write", "scenario.save", "scenario", path.name[:80], detail):
        return _write_scenario(scenario, path, comment)


def _write_scenario(scenario: Mapping[str, Any], path: Path, comment: str) -> Path:
    scenarios: list[dict[str, Any]] = []
    if path.exists():
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(loaded, dict) and isinstance(loaded.get("scenarios"), list):
            loaded = loaded["scenarios"]
        if loaded is not None and not isinstance(loaded, list):
            raise ValueError(f"{path.name} はシナリオのリストではありません。")
        scenarios = [s for s in loaded or [] if not (isinstance(s, dict) and s.get("name") == scenario.get("name"))]
    scenarios.append(dict(scenario))
    atomic_write(path, scenario_yaml(scenarios, comment=comment))
    return path


def scenario_dir() -> Path:
    """Where promoted scenarios are saved: ``KAIWA_SCENARIO_DIR``, else ``tests/scenarios/``."""
    return Path(os.environ.get("KAIWA_SCENARIO_DIR") or ROOT / "tests" / "scenarios")


def run_scenario_check(scenario: Mapping[str, Any], provider: str = "offline") -> tuple[bool, list[str]]:
    """Play ``scenario`` with ``core.eval`` (offline by default): (passed, failures)."""
    result = run_scenario(dict(scenario), lambda: make_client(provider))
    return result.passed, list(result.failures)


def scenario_filename(text: str) -> str:
    """A safe file name ``<slug>.yaml`` (ASCII letters, digits, ``_`` and ``-`` only)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", (text or "").strip())[:60].strip("_-")
    return f"{slug or 'promoted'}.yaml"
