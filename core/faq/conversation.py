"""An FAQ conversation kept in the shared store: the one path the page (and load tests) use.

``FAQConversations.ask`` runs one UC-01 turn, appends it to the chat, and writes the chat and the
FAQ state through to the store before anything is shown; ``load`` brings both back.
"""
from __future__ import annotations

from typing import Any, MutableSequence

from core.faq.flow import TurnResult, ask, start_session
from core.faq.state import FAQState
from core.store.chat_sync import sync_chat
from core.store.store import Store


class FAQConversations:
    def __init__(self, store: Store, owner: Any = None):
        self.store = store
        self.owner = owner

    def new(self) -> tuple[str, FAQState]:
        conversation_id = self.store.create_conversation("faq", self.owner, title="FAQ")
        return conversation_id, start_session(conversation_id)

    def load(self, conversation: dict[str, Any]) -> tuple[FAQState, list[dict[str, Any]]]:
        saved = (conversation.get("state") or {}).get("faq_state")
        state = FAQState(saved) if saved else start_session(conversation["id"])
        return state, self.store.chat_entries(conversation["id"])

    def ask(self, conversation_id: str, state: FAQState, chat: MutableSequence[dict[str, Any]], text: str, *,
            client: Any, kb: Any = None, log: Any = None) -> TurnResult:
        result = ask(state, text, client=client, kb=kb, log=log)
        chat.append({"user": result.user_text, "message": result.message, "citations": result.citations,
                     "outcome": result.outcome, "trace": result.trace})
        sync_chat(self.store, conversation_id, chat, flow="faq", author=self.owner,
                  provider=getattr(client, "name", None), model=getattr(client, "model", None))
        self.store.update_conversation(conversation_id, merge_state={"faq_state": result.state.to_dict()},
                                       title=chat[0]["user"][:60] if chat else None)
        return result
