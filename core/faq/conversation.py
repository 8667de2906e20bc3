"""An FAQ conversation kept in the shared store: the one path the page (and load tests) use.

``FAQConversations.ask`` runs one UC-01 turn, appends it to the chat, and writes the chat and the
FAQ state through to the store before anything is shown; ``load`` brings both back. A turn runs under
the conversation's turn lease on the stored chat and state (a second tab appends after the first instead
of overwriting it); after ``wait`` seconds of another turn running it raises ``TurnBusy``.
"""
from __future__ import annotations

from typing import Any, MutableSequence

from core.engine import client_deadline
from core.faq.flow import TurnResult, ask, start_session
from core.faq.state import FAQState
from core.store.chat_sync import refresh_chat, sync_chat
from core.store.store import Store

LEASE_MARGIN_SECONDS = 60.0  # the lease outlives the turn's own deadline by this much


class FAQConversations:
    def __init__(self, store: Store, owner: Any = None, *, wait: float | None = None):
        self.store = store
        self.owner = owner
        self.wait = wait

    def new(self) -> tuple[str, FAQState]:
        conversation_id = self.store.create_conversation("faq", self.owner, title="FAQ")
        return conversation_id, start_session(conversation_id)

    def load(self, conversation: dict[str, Any]) -> tuple[FAQState, list[dict[str, Any]]]:
        saved = (conversation.get("state") or {}).get("faq_state")
        state = FAQState(saved) if saved else start_session(conversation["id"])
        return state, self.store.chat_entries(conversation["id"])

    def ask(self, conversation_id: str, state: FAQState, chat: MutableSequence[dict[str, Any]], text: str, *,
            client: Any, kb: Any = None, log: Any = None) -> TurnResult:
        """One turn; ``state`` is this tab's copy, replaced by the stored one when another tab moved the
        conversation on (use ``result.state`` afterwards)."""
        hold = client_deadline(client) + LEASE_MARGIN_SECONDS
        with self.store.turn(conversation_id, hold=hold, wait=self.wait) as token:
            if token is not None and refresh_chat(self.store, conversation_id, chat):
                saved = ((self.store.get_conversation(conversation_id) or {}).get("state") or {}).get("faq_state")
                state = FAQState(saved) if saved else state
            result = ask(state, text, client=client, kb=kb, log=log)
            chat.append({"user": result.user_text, "message": result.message, "citations": result.citations,
                         "outcome": result.outcome, "trace": result.trace})
            if token is not None:
                self.store.renew_turn(conversation_id, token, hold=hold)
            sync_chat(self.store, conversation_id, chat, flow="faq", author=self.owner,
                      provider=getattr(client, "name", None), model=getattr(client, "model", None))
            self.store.update_conversation(conversation_id, merge_state={"faq_state": result.state.to_dict()},
                                           title=chat[0]["user"][:60] if chat else None, fence=token,
                                           release=token is not None)
        return result
