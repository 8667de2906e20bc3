"""A knowledge interview kept in the shared store: the one path the page (and load tests) use.

``KnowledgeConversations`` runs a turn (``session.submit_turn`` / ``resend``), then writes the chat
through to the store before anything is shown, records drafted knowledge in the library (a confirmed
entry is never reopened: a later draft is a new entry), and keeps the conversation's title current.
Attachment text goes to the model but is never stored (only name, size, pages and SHA-256).

A turn runs under the conversation's turn lease (``Store.turn``) on the stored chat (``refresh_chat``: a
second tab on the same conversation appends after the first instead of superseding its turns); after
``wait`` seconds of another turn running it raises ``TurnBusy`` and changes nothing.
"""
from __future__ import annotations

from typing import Any, MutableSequence, Sequence

from core.engine import client_deadline
from core.knowledge.session import TurnOutcome, resend, submit_turn
from core.schema_versions import upgrade_chat
from core.store.chat_sync import refresh_chat, sync_chat
from core.store.store import Store

LEASE_MARGIN_SECONDS = 60.0  # the lease outlives the turn's own deadline by this much


class KnowledgeConversations:
    def __init__(self, store: Store, owner: Any = None, *, wait: float | None = None):
        self.store = store
        self.owner = owner
        self.wait = wait

    def new(self) -> str:
        return self.store.create_conversation("knowledge", self.owner)

    def load(self, conversation_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(chat, knowledge outputs) as stored; turns of an older schema version are upgraded for display."""
        return upgrade_chat(self.store.chat_entries(conversation_id)), self.store.conversation_outputs(conversation_id)

    def submit(self, conversation_id: str, chat: MutableSequence[dict[str, Any]], outputs: list[dict[str, Any]],
               text: str, documents: Sequence[Any], client: Any, *, log: Any = None, **kwargs: Any) -> TurnOutcome:
        hold = client_deadline(client) + LEASE_MARGIN_SECONDS
        with self.store.turn(conversation_id, hold=hold, wait=self.wait) as token:
            self._refresh(conversation_id, chat, outputs, token)
            outcome = submit_turn(chat, outputs, text, documents, client, log=log, session_id=conversation_id,
                                  **kwargs)
            self._renew(conversation_id, token, hold)
            self.save(conversation_id, chat, outputs, outcome, client, lease=token)
        return outcome

    def _refresh(self, conversation_id: str, chat: MutableSequence[dict[str, Any]], outputs: list[dict[str, Any]],
                 token: str | None) -> None:
        """The stored chat and drafts, whatever this tab's copy still shows (under the lease)."""
        if token is not None and refresh_chat(self.store, conversation_id, chat):
            chat[:] = upgrade_chat(list(chat))
            outputs[:] = self.store.conversation_outputs(conversation_id)

    def _renew(self, conversation_id: str, token: str | None, hold: float) -> None:
        if token is not None:
            self.store.renew_turn(conversation_id, token, hold=hold)

    def resend(self, conversation_id: str, chat: MutableSequence[dict[str, Any]], outputs: list[dict[str, Any]],
               user_id: str, client: Any, *, log: Any = None) -> TurnOutcome | None:
        hold = client_deadline(client) + LEASE_MARGIN_SECONDS
        with self.store.turn(conversation_id, hold=hold, wait=self.wait) as token:
            self._refresh(conversation_id, chat, outputs, token)
            outcome = resend(chat, outputs, user_id, client, log=log, session_id=conversation_id)
            self._renew(conversation_id, token, hold)
            self.save(conversation_id, chat, outputs, outcome, client, lease=token)
        return outcome

    def save(self, conversation_id: str, chat: MutableSequence[dict[str, Any]], outputs: list[dict[str, Any]],
             outcome: TurnOutcome | None, client: Any, *, lease: str | None = None) -> None:
        sync_chat(self.store, conversation_id, chat, flow="knowledge", author=self.owner,
                  provider=getattr(client, "name", None), model=getattr(client, "model", None))
        if outcome is not None and outcome.result.ok and outcome.result.knowledge:
            self.store.record_knowledge(conversation_id, outcome.result.knowledge, self.owner)
            outputs[:] = self.store.conversation_outputs(conversation_id)
        first = next((e.get("user_text") or e.get("content") for e in chat if e.get("role") == "user"), "")
        title = next((e.get("knowledge_title") for e in outputs if e.get("knowledge_title")), "") or first
        self.store.update_conversation(conversation_id, title=(title or "（添付のみ）").replace("\n", " ")[:60],
                                       fence=lease, release=lease is not None)

    def confirm(self, conversation_id: str, entry_id: int, actor: Any) -> list[dict[str, Any]]:
        """Confirm one entry in the library; returns the conversation's outputs as they now are."""
        self.store.set_entry_status(entry_id, "confirm", actor)
        return self.store.conversation_outputs(conversation_id)
