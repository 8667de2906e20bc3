"""Write-through of a page's chat list (the ``st.session_state`` working copy) to the store.

Every flow keeps its chat as a list of dict entries; :func:`sync_chat` makes the stored turns match
it: new entries are appended in order (before the page shows them), entries changed in place (a
user turn marked failed) are updated, entries the list no longer holds (cut by a rewind, replaced by
a resend) are marked superseded, so analytics still see them while a resume shows the chat as it
was. ``columns`` maps one entry to the analytic columns of its flow.

:func:`refresh_chat` brings a working copy up to date with the store first (under the conversation's turn
lease, before a turn runs), so a turn sent from a stale copy (the same conversation open in two tabs, or
in the console and through the HTTP API) is appended after the other's turns instead of superseding them.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, MutableSequence

from core.ids import new_id
from core.store.debug_sink import StoredDebugLog
from core.store.store import Store, entry_digest

Columns = Callable[[Mapping[str, Any]], dict[str, Any]]


def knowledge_columns(entry: Mapping[str, Any]) -> dict[str, Any]:
    if entry.get("role") == "user":
        return {"role": "user", "user_input": entry.get("user_text", entry.get("content")),
                "attachments": entry.get("attachments") or [], "ok": not entry.get("failed")}
    turn = entry.get("turn") or None
    return {"role": "assistant", "turn_json": turn, "step": ((turn or {}).get("state") or {}).get("phase"),
            "method": entry.get("method"), "attempts": entry.get("attempts"), "latency_ms": entry.get("latency_ms"),
            "provider": entry.get("provider"), "model": entry.get("model"),
            "ok": not (entry.get("failed") or entry.get("gated")),
            "error_type": entry.get("error_type"), "raw_output": entry.get("raw") if entry.get("failed") else None}


def diagnosis_columns(entry: Mapping[str, Any]) -> dict[str, Any]:
    if entry.get("role") == "user":
        return {"role": "user", "user_input": entry.get("text")}
    return {"role": "assistant", "step": entry.get("step"), "turn_json": entry.get("response"),
            "provider": entry.get("provider"), "model": entry.get("model"), "ok": not entry.get("fallback"),
            "error_type": "fallback" if entry.get("fallback") else None, "latency_ms": entry.get("latency_ms")}


def faq_columns(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {"role": "exchange", "user_input": entry.get("user"), "step": entry.get("outcome"),
            "turn_json": {"message": entry.get("message"), "citations": entry.get("citations"),
                          "outcome": entry.get("outcome")},
            "provider": entry.get("provider"), "model": entry.get("model"), "latency_ms": entry.get("latency_ms"),
            "ok": entry.get("outcome") != "fallback", "error_type": "fallback" if entry.get("outcome") == "fallback" else None}


COLUMNS: dict[str, Columns] = {"knowledge": knowledge_columns, "diagnosis": diagnosis_columns, "faq": faq_columns}


def refresh_chat(store: Store, conversation_id: str, chat: MutableSequence[dict[str, Any]], *,
                 hashes: dict[str, str] | None = None) -> bool:
    """Make ``chat`` the stored live turns of ``conversation_id``, in their stored order; an entry this copy
    also holds (same id) is kept as this copy has it (it may carry what is never stored, such as attachment
    text for a resend). Returns whether anything changed. ``hashes`` (optional) is filled with the stored
    entries' digests from the same read, for :func:`sync_chat`'s ``stored`` under the same turn lease."""
    local = {str(e["id"]): e for e in chat if e.get("id")}
    merged = [local.get(str(e.get("id")), e) for e in store.chat_entries(conversation_id, hashes=hashes)]
    if [id(e) for e in merged] == [id(e) for e in chat]:
        return False
    chat[:] = merged
    return True


def sync_chat(store: Store, conversation_id: str, chat: MutableSequence[dict[str, Any]], *, flow: str,
              author: Any = None, provider: str | None = None, model: str | None = None,
              merge_state: Mapping[str, Any] | None = None, title: str | None = None, status: str | None = None,
              fence: str | None = None, release: bool = False, stored: Mapping[str, str] | None = None,
              debug: StoredDebugLog | None = None) -> int:
    """Make the stored turns of ``conversation_id`` match ``chat``; returns how many rows were written.
    ``provider`` / ``model`` fill those columns of new turns whose entry does not name them. Everything is
    written in one transaction (``Store.write_chat``), with ``merge_state`` merged into the conversation's
    state, its ``title`` / ``status`` set, and the turn lease ``fence`` checked (and given up with
    ``release``) when given. ``stored``: the entries' digests as :func:`refresh_chat` read them under the
    same lease (else read here). ``debug``: a debug log whose records wait for this write
    (``StoredDebugLog.holding``): they are stored in the same transaction."""
    columns = COLUMNS[flow]
    stored = dict(stored) if stored is not None else store.entry_hashes(conversation_id)
    present: set[str] = set()
    appends: list[tuple[Mapping[str, Any], str, Any, dict[str, Any]]] = []
    updates: list[tuple[Mapping[str, Any], dict[str, Any]]] = []
    for entry in chat:
        if not entry.get("id"):
            entry["id"] = new_id(12)
        entry_id = str(entry["id"])
        present.add(entry_id)
        cols = columns(entry)
        role = cols.pop("role")
        if role != "user":
            cols["provider"] = cols.get("provider") or provider
            cols["model"] = cols.get("model") or model
        if entry_id not in stored:
            appends.append((entry, role, author, cols))
        elif stored[entry_id] != entry_digest(entry):
            updates.append((entry, cols))
    gone = [entry_id for entry_id in stored if entry_id not in present]
    records = debug.held_records() if debug is not None else []
    if appends or updates or gone or merge_state is not None or fence is not None or title or status or records:
        ids = store.write_chat(conversation_id, appends=appends, updates=updates, supersede=gone,
                               merge_state=merge_state, title=title, status=status, fence=fence, release=release,
                               debug_records=records, debug_owner=debug.owner if debug is not None else None)
        if debug is not None:
            debug.stored(records, ids)
    return len(appends) + len(updates) + len(gone)
