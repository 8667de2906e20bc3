"""Scenario-runner adapter for the knowledge interview (``core.eval`` contract).

``run_scenario(scenario, client, log, source=path)`` plays ``turns`` on the page's own stored path,
:class:`core.knowledge.conversation.KnowledgeConversations` (the turn, write-through of the chat, the
drafted knowledge recorded in the library), against a temporary SQLite
:class:`~core.store.store.Store`, so ``confirmed`` means the library's state. Turns:

- ``{message: "...", attachments: [path, ...]}`` — one user turn; attachment paths are relative to
  the scenario file (and must stay inside its directory), read through
  :func:`core.documents.extract_document`; unreadable files are left out, as the page does;
- ``{action: confirm}`` — the scenario operator (``Identity(name="eval")``) confirms the
  conversation's current draft entries in the library.

Returns the final observable state: ``phase`` / ``mode`` of the last accepted turn, ``message``
(the last assistant message), ``knowledge`` (the entry under test: the conversation's confirmed
entry as the library holds it now when it has one, else its newest draft), ``confirmed``,
``failed`` (the last turn failed), ``user_turns``, and ``snapshots`` (the same state after every
turn, for ``turns_max``).
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from core.documents import extract_document
from core.identity import Identity
from core.knowledge.conversation import KnowledgeConversations
from core.knowledge.session import current_state
from core.store.store import Store
from core.validation import ENTRY_FIELDS

OPERATOR = Identity(name="eval")
MAX_ATTACHMENTS_PER_TURN = 5


def _attachment_path(base: Path, name: Any) -> Path:
    path = (base / str(name)).resolve()
    if not path.is_relative_to(base.resolve()):
        raise ValueError(f"attachment {name!r} is outside the scenario directory")
    if not path.is_file():
        raise ValueError(f"attachment {name!r} not found (relative to {base})")
    return path


def _documents(base: Path, names: Any) -> list:
    names = [names] if isinstance(names, str) else list(names or [])
    if len(names) > MAX_ATTACHMENTS_PER_TURN:
        raise ValueError(f"at most {MAX_ATTACHMENTS_PER_TURN} attachments per turn")
    docs = []
    for name in names:
        path = _attachment_path(base, name)
        docs.append(extract_document(path.name, path.read_bytes()))
    return [d for d in docs if d.ok and d.paragraphs]


def _entry_under_test(store: Store, conversation_id: str) -> tuple[dict[str, str] | None, bool]:
    entries = store.list_entries(conversation_id=conversation_id)
    confirmed = [e for e in entries if e["status"] == "confirmed"]
    pick = confirmed[-1] if confirmed else next(iter(store.conversation_outputs(conversation_id)), None)
    knowledge = {f: str(pick.get(f) or "") for f in ENTRY_FIELDS} if pick else None
    return knowledge, bool(confirmed)


def _observe(store: Store, conversation_id: str, chat: list[dict[str, Any]], user_turns: int) -> dict[str, Any]:
    turn = current_state(chat) or {}
    last = next((e for e in reversed(chat) if e["role"] == "assistant"), {})
    knowledge, confirmed = _entry_under_test(store, conversation_id)
    return {"phase": (turn.get("state") or {}).get("phase"), "mode": (turn.get("control") or {}).get("mode"),
            "message": last.get("content") or "",
            "knowledge": knowledge, "confirmed": confirmed, "failed": bool(last.get("failed")),
            "user_turns": user_turns}


def _confirm_drafts(conversations: KnowledgeConversations, conversation_id: str) -> int:
    drafts = [e for e in conversations.store.conversation_outputs(conversation_id) if e["status"] == "draft"]
    for entry in drafts:
        conversations.confirm(conversation_id, entry["id"], OPERATOR)
    return len(drafts)


def run_scenario(scenario: dict[str, Any], client: Any, log: list, *, source: str = "") -> dict[str, Any]:
    base = Path(source).resolve().parent if source else Path.cwd()
    chat: list[dict[str, Any]] = []
    outputs: list[dict[str, str]] = []
    snapshots: list[dict[str, Any]] = []
    user_turns = 0
    with tempfile.TemporaryDirectory(prefix="kaiwa-eval-") as tmp:
        store = Store(f"sqlite:///{tmp}/eval.db")
        try:
            conversations = KnowledgeConversations(store, OPERATOR)
            conversation_id = conversations.new()
            for turn in scenario.get("turns") or []:
                if not isinstance(turn, dict):
                    raise ValueError(f"unknown knowledge turn {turn!r}")
                if "message" in turn or "attachments" in turn:
                    docs = _documents(base, turn.get("attachments"))
                    conversations.submit(conversation_id, chat, outputs, str(turn.get("message") or ""), docs, client,
                                         log=log)
                    user_turns += 1
                elif turn.get("action") == "confirm":
                    if not _confirm_drafts(conversations, conversation_id):
                        raise ValueError("confirm: the conversation has no draft entry to confirm")
                else:
                    raise ValueError(f"unknown knowledge turn {turn!r} (expected message / attachments or "
                                     "action: confirm)")
                snapshots.append(_observe(store, conversation_id, chat, user_turns))
        finally:
            store.engine.dispose()
    final = dict(snapshots[-1]) if snapshots else {"phase": None, "mode": None, "message": "", "knowledge": None,
                                                    "confirmed": False, "failed": False, "user_turns": 0}
    final.update(urgency=None, can_drive=None, outcome=None, citations=[], trace=[], snapshots=snapshots,
                 transcript=[{"role": e["role"], "content": e.get("content")} for e in chat])
    return final
