"""A knowledge interview kept in the shared store: the one path the page (and load tests) use.

``KnowledgeConversations`` runs a turn (``session.submit_turn`` / ``resend``) with the most similar
confirmed entries as house style (``similar``: ``core.knowledge.similar``), then writes the chat
through to the store before anything is shown, records drafted knowledge in the library (a confirmed
entry is never reopened: a later draft is a new entry), and keeps the conversation's title current.
A confirmation typed into the chat confirms the drafts through the button's path (:meth:`confirm`), and
the reply says what really happened (:mod:`core.knowledge.confirmation`).
Attachment text goes to the model but is never stored (only name, size, pages and SHA-256).

A turn runs under the conversation's turn lease (``Store.turn``) on the stored chat (``refresh_chat``: a
second tab on the same conversation appends after the first instead of superseding its turns); after
``wait`` seconds of another turn running it raises ``TurnBusy`` and changes nothing.
"""
from __future__ import annotations

import logging
from typing import Any, MutableSequence, Sequence

from core.engine import client_deadline
from core.knowledge.confirmation import (
    CONFIRMED_NOTE,
    INCOMPLETE_NOTE,
    NOT_CONFIRMED_NOTE,
    NOTHING_TO_CONFIRM,
    REQUIRED_FOR_CONFIRMATION,
    accepts_incomplete,
    claims_confirmation,
    is_typed_confirmation,
    missing_for_confirmation,
)
from core.knowledge.retrieval import KnowledgeHit, KnowledgeIndex, knowledge_index
from core.knowledge.session import TurnOutcome, resend, submit_turn
from core.knowledge.similar import EXAMPLES_SENT, SIMILAR_SHOWN, case_key, similar_entries
from core.schema_versions import upgrade_chat
from core.store.chat_sync import refresh_chat, sync_chat
from core.store.store import Store

logger = logging.getLogger(__name__)
LEASE_MARGIN_SECONDS = 60.0  # the lease outlives the turn's own deadline by this much


class KnowledgeConversations:
    def __init__(self, store: Store, owner: Any = None, *, index: KnowledgeIndex | None = None,
                 wait: float | None = None):
        self.store = store
        self.owner = owner
        self._index = index
        self.wait = wait

    @property
    def index(self) -> KnowledgeIndex:
        """The confirmed entries' search index (``core.knowledge.retrieval``), shared per store."""
        if self._index is None:
            self._index = knowledge_index(self.store)
        return self._index

    def similar(self, conversation_id: str, chat: Sequence[dict[str, Any]], outputs: Sequence[dict[str, Any]],
                *, pending_text: str = "", n: int = SIMILAR_SHOWN) -> list[KnowledgeHit]:
        """The confirmed entries most like this case, once its contract type and clause are known ([]
        before that, and when the search fails: it never stops the interview)."""
        key = case_key(chat, outputs, pending_text)
        if key is None:
            return []
        try:
            return similar_entries(self.index, key, conversation_id=conversation_id, n=n)
        except Exception:  # noqa: BLE001 - retrieval is an aid; the interview goes on without it
            logger.warning("similar knowledge search failed", exc_info=True)
            return []

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
            examples = [h.entry for h in self.similar(conversation_id, chat, outputs, pending_text=text,
                                                      n=EXAMPLES_SENT)]
            outcome = submit_turn(chat, outputs, text, documents, client, log=log, session_id=conversation_id,
                                  examples=examples, **kwargs)
            self._renew(conversation_id, token, hold)
            self.save(conversation_id, chat, outputs, outcome, client, lease=token, release=False)
            self._typed_confirmation(conversation_id, chat, outputs, outcome, client)  # lease released on exit
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
            failed = next((e for e in chat if e.get("id") == user_id), {})
            before = chat[:chat.index(failed)] if failed else chat
            examples = [h.entry for h in self.similar(conversation_id, before, outputs,
                                                      pending_text=failed.get("user_text") or "", n=EXAMPLES_SENT)]
            outcome = resend(chat, outputs, user_id, client, log=log, session_id=conversation_id, examples=examples)
            self._renew(conversation_id, token, hold)
            self.save(conversation_id, chat, outputs, outcome, client, lease=token, release=False)
            self._typed_confirmation(conversation_id, chat, outputs, outcome, client)  # lease released on exit
        return outcome

    def save(self, conversation_id: str, chat: MutableSequence[dict[str, Any]], outputs: list[dict[str, Any]],
             outcome: TurnOutcome | None, client: Any, *, lease: str | None = None, release: bool = True) -> None:
        sync_chat(self.store, conversation_id, chat, flow="knowledge", author=self.owner,
                  provider=getattr(client, "name", None), model=getattr(client, "model", None))
        if outcome is not None and outcome.result.ok and outcome.result.knowledge:
            self.store.record_knowledge(conversation_id, outcome.result.knowledge, self.owner)
            outputs[:] = self.store.conversation_outputs(conversation_id)
        first = next((e.get("user_text") or e.get("content") for e in chat if e.get("role") == "user"), "")
        title = next((e.get("knowledge_title") for e in outputs if e.get("knowledge_title")), "") or first
        self.store.update_conversation(conversation_id, title=(title or "（添付のみ）").replace("\n", " ")[:60],
                                       fence=lease, release=release and lease is not None)

    def _typed_confirmation(self, conversation_id: str, chat: MutableSequence[dict[str, Any]],
                            outputs: list[dict[str, Any]], outcome: TurnOutcome | None, client: Any) -> None:
        """A typed 「確定」 on a presented draft confirms it as the button does (as ``self.owner``); a reply
        that claims a confirmation that did not happen is corrected. The note is part of the stored reply."""
        if outcome is None or not outcome.result.ok:
            return
        reply = outcome.assistant_entry
        turn = reply.get("turn") or {}
        note = None
        if is_typed_confirmation(outcome.user_entry.get("user_text")) and \
                (turn.get("control") or {}).get("mode") == "finalize":
            drafts = [e for e in outputs if e.get("status") == "draft"]
            lacking = sorted({label for e in drafts for label in missing_for_confirmation(e)},
                             key=list(REQUIRED_FOR_CONFIRMATION.values()).index)
            if not drafts:
                note = NOTHING_TO_CONFIRM
            elif lacking and not accepts_incomplete(outcome.user_entry.get("user_text")):
                note = INCOMPLETE_NOTE.format(missing="・".join(lacking))  # say what is missing, confirm nothing
            else:
                try:
                    for entry in drafts:
                        outputs[:] = self.confirm(conversation_id, entry["id"], self.owner)
                    who = getattr(self.owner, "label", None) or "システム"
                    note = CONFIRMED_NOTE.format(ids="・No.".join(str(e["id"]) for e in drafts), who=who)
                except (PermissionError, ValueError, KeyError) as exc:
                    note = NOT_CONFIRMED_NOTE.format(reason=str(exc) or "確定できませんでした")
        elif claims_confirmation(reply.get("content")) and not self.store.list_entries(
                conversation_id=conversation_id, status="confirmed", limit=1):
            note = NOT_CONFIRMED_NOTE.format(reason="この会話の操作では確定されていません")
        if note:
            reply["content"] = f"{reply.get('content') or ''}\n\n{note}".strip()
            reply["confirmation_note"] = note
            sync_chat(self.store, conversation_id, chat, flow="knowledge", author=self.owner,
                      provider=getattr(client, "name", None), model=getattr(client, "model", None))

    def confirm(self, conversation_id: str, entry_id: int, actor: Any) -> list[dict[str, Any]]:
        """Confirm one entry in the library; returns the conversation's outputs as they now are."""
        self.store.set_entry_status(entry_id, "confirm", actor)
        return self.store.conversation_outputs(conversation_id)
