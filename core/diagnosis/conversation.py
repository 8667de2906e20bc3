"""A diagnosis conversation kept in the shared store: the one path the page and the HTTP API share.

``DiagnosisConversations`` wraps the ``ChatService`` over a :class:`StoredSessionStore`. Each call
runs the request through ``view.send`` on the transcript, then writes the transcript and the last
response through to the store, so a reload, another browser, another replica or an operator watching
an API customer sees exactly the same conversation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, MutableSequence

from core.diagnosis import view
from core.diagnosis.models import ChatRequest, ChatResponse
from core.diagnosis.service import ChatService
from core.diagnosis.stored_sessions import StoredSessionStore
from core.store.chat_sync import sync_chat
from core.store.store import Store


@dataclass
class Resumed:
    transcript: list[dict[str, Any]]
    response: ChatResponse


class DiagnosisConversations:
    def __init__(self, store: Store, *, client: Any = None, owner: Any = None, ttl_seconds: float | None = None,
                 **service_options: Any):
        options = {"ttl_seconds": ttl_seconds} if ttl_seconds is not None else {}
        self.store = store
        self.owner = owner
        self.sessions = StoredSessionStore(store, owner=owner, **options)
        self.service = ChatService(client, store=self.sessions, **service_options)

    def _save(self, transcript: MutableSequence[dict[str, Any]], response: ChatResponse, client: Any) -> None:
        """The transcript and the last response, written through. The newest assistant entry carries the
        whole response (the turn JSON the store keeps); the client names the provider and model."""
        if transcript and transcript[-1].get("role") == "assistant" and "response" not in transcript[-1]:
            transcript[-1]["response"] = response.model_dump(mode="json")
        client = client or self.service.ctx.client
        sync_chat(self.store, response.session_id, transcript, flow="diagnosis", author=self.owner,
                  provider=getattr(client, "name", None), model=getattr(client, "model", None))
        self.store.update_conversation(response.session_id,
                                       merge_state={"last_response": response.model_dump(mode="json")})

    def start(self, transcript: MutableSequence[dict[str, Any]], *, client: Any = None, log: Any = None
              ) -> ChatResponse:
        response = view.start(self.service, transcript, client=client, log=log)
        self._save(transcript, response, client)
        return response

    def send(self, transcript: MutableSequence[dict[str, Any]], request: ChatRequest, *, prompt: Any = None,
             client: Any = None, log: Any = None) -> ChatResponse:
        """One request; an unknown or expired ``session_id`` starts a new stored session with the notice."""
        response = view.send(self.service, transcript, request, prompt=prompt, client=client, log=log)
        self._save(transcript, response, client)
        return response

    def resume(self, session_id: str | None) -> Resumed | None:
        """The stored transcript and last response of a live session (None when unknown or expired)."""
        if self.sessions.get(session_id) is None:
            return None
        conversation = self.store.get_conversation(session_id) or {}
        last = (conversation.get("state") or {}).get("last_response")
        if not last:
            return None
        return Resumed(self.store.chat_entries(session_id or ""), ChatResponse.model_validate(last))

    def handle(self, request: ChatRequest, *, client: Any = None, log: Any = None) -> ChatResponse:
        """The HTTP API's call: the transcript and the prompt on screen come from the store."""
        resumed = self.resume(request.session_id) if request.session_id else None
        transcript = resumed.transcript if resumed else []
        if resumed is None and not request.session_id and not (request.message or request.action):
            return self.start(transcript, client=client, log=log)
        prompt = resumed.response.prompt if resumed else None
        return self.send(transcript, request, prompt=prompt, client=client, log=log)
