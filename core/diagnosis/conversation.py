"""A diagnosis conversation kept in the shared store: the one path the page and the HTTP API share.

``DiagnosisConversations`` wraps the ``ChatService`` over a :class:`StoredSessionStore`. Each call
runs the request through ``view.send`` on the transcript, then writes the transcript and the last
response through to the store, so a reload, another browser, another replica or an operator watching
an API customer sees exactly the same conversation.

A turn runs under the conversation's turn lease (``Store.turn``): a second turn of the same conversation
(a double-click, a retry, the console and the API at once) waits for the first, then runs on the stored
state, with the transcript reloaded from the store first (``refresh_chat``); after ``wait`` seconds it
raises ``TurnBusy`` (the API's 409). The session's writes are fenced by the lease, so a turn is either
stored whole or answered with ``TurnBusy``; nothing is returned as done that the store does not hold.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, MutableSequence

from core.diagnosis import view
from core.diagnosis.models import ChatRequest, ChatResponse, PromptInfo
from core.diagnosis.service import ChatService
from core.diagnosis.stored_sessions import StoredSessionStore
from core.engine import client_deadline
from core.store.chat_sync import refresh_chat, sync_chat
from core.store.debug_sink import StoredDebugLog
from core.store.store import Store

LEASE_MARGIN_SECONDS = 60.0  # the lease outlives the turn's own deadline by this much


def _holding(log: Any) -> Any:
    """The turn's debug records wait for its chat write (``StoredDebugLog.holding``: one transaction with
    the turn; a turn that fails before it stores them in one of their own)."""
    return log.holding() if isinstance(log, StoredDebugLog) else nullcontext()


@dataclass
class Resumed:
    transcript: list[dict[str, Any]]
    response: ChatResponse


class DiagnosisConversations:
    def __init__(self, store: Store, *, client: Any = None, owner: Any = None, ttl_seconds: float | None = None,
                 wait: float | None = None, **service_options: Any):
        options = {"ttl_seconds": ttl_seconds} if ttl_seconds is not None else {}
        self.store = store
        self.owner = owner
        self.wait = wait
        self.sessions = StoredSessionStore(store, owner=owner, **options)
        self.transcript: list[dict[str, Any]] | None = None  # the live chat as the last handle() stored it
        self.service = ChatService(client, store=self.sessions, **service_options)

    def _save(self, transcript: MutableSequence[dict[str, Any]], response: ChatResponse, client: Any,
              lease: str | None = None, stored: dict[str, str] | None = None, log: Any = None) -> None:
        """The transcript and the last response, written through. The newest assistant entry carries the
        whole response (the turn JSON the store keeps); the client names the provider and model. The last
        write checks and gives up the turn lease ``lease`` (if any), and stores the turn's debug records
        waiting in ``log`` (a ``StoredDebugLog`` held by :func:`_holding`)."""
        dump = response.model_dump(mode="json")
        if transcript and transcript[-1].get("role") == "assistant" and "response" not in transcript[-1]:
            transcript[-1]["response"] = dump
        client = client or self.service.ctx.client
        session = self.sessions.pending.pop(response.session_id, None) or {}  # the session's own held write
        sync_chat(self.store, response.session_id, transcript, flow="diagnosis", author=self.owner,
                  provider=getattr(client, "name", None), model=getattr(client, "model", None),
                  merge_state={**session.get("merge_state", {}), "last_response": dump},
                  title=session.get("title"), status=session.get("status"), fence=lease,
                  release=lease is not None, stored=stored,
                  debug=log if isinstance(log, StoredDebugLog) else None)  # one transaction

    def start(self, transcript: MutableSequence[dict[str, Any]], *, client: Any = None, log: Any = None
              ) -> ChatResponse:
        with _holding(log), self.sessions.holding_new():  # the new session's own write rides in its first chat write
            response = view.start(self.service, transcript, client=client, log=log)
            self._save(transcript, response, client, stored={}, log=log)  # a new conversation holds no turns yet
        return response

    def send(self, transcript: MutableSequence[dict[str, Any]], request: ChatRequest, *, prompt: Any = None,
             client: Any = None, log: Any = None) -> ChatResponse:
        """One request, under the conversation's turn lease (see the module docstring); an unknown or expired
        ``session_id`` starts a new stored session with the notice. Raises ``TurnBusy`` when another turn of
        the conversation runs for longer than ``wait`` or took the lease over."""
        sid = request.session_id or ""
        hold = client_deadline(client or self.service.ctx.client) + LEASE_MARGIN_SECONDS
        stored: dict[str, str] | None = None  # the stored entries' digests, read under the lease
        with _holding(log), self.store.turn(sid, hold=hold, wait=self.wait, read=True) as token:
            if token is not None:  # the conversation row came with the lease; its turns: one read
                last = self._last(sid, expiry=False, keep=True,  # the service applies the expiry below
                                  conversation=self.store.leased_conversation(token))
                if last is not None:  # the stored conversation, whatever this caller's copy still shows
                    stored = {}
                    refresh_chat(self.store, sid, transcript, hashes=stored)
                    prompt = PromptInfo.model_validate(last["prompt"]) if last.get("prompt") else prompt
                self.sessions.fences[sid] = (token, hold)
                self.sessions.held.add(sid)
            try:  # the session's own write waits for the transcript's: both in one fenced transaction
                with self.sessions.holding_new():  # (a new session for an unknown id or a restart: likewise)
                    response = view.send(self.service, transcript, request, prompt=prompt, client=client, log=log)
                    self._flush(sid, response.session_id)
                    same = response.session_id == sid
                    self._save(transcript, response, client, token if same else None, stored if same else None,
                               log=log)
            finally:
                self.sessions.fences.pop(sid, None)
                self.sessions.held.discard(sid)
                self.sessions.pending.pop(sid, None)
                self.sessions.loaded.pop(sid, None)
        return response

    def _flush(self, sid: str, answered: str) -> None:
        """The held session write of ``sid`` on its own (fenced) when the turn answered for another session."""
        write = self.sessions.pending.pop(sid, None) if answered != sid else None
        if write is not None:
            token, hold = self.sessions.fences.get(sid, (None, None))
            self.store.update_conversation(sid, **write, fence=token, hold=hold)

    def _last(self, session_id: str, *, expiry: bool = True, keep: bool = False,
              conversation: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """The last stored response of a live session, as stored (None when unknown or expired; ``expiry=False``
        leaves the time-to-live to the service's own load; ``keep``: the conversation read is handed to
        the session store's next ``get``, under the turn's lease; ``conversation``: its row, already read)."""
        if expiry and self.sessions.get(session_id) is None:
            return None
        if conversation is None:
            conversation = self.store.get_conversation(session_id) or {}
        if keep and conversation:
            self.sessions.loaded[session_id] = conversation  # read-only on both sides
        if conversation.get("flow") != "diagnosis" or conversation.get("status") == "expired":
            return None
        return (conversation.get("state") or {}).get("last_response") or None

    def _current(self, session_id: str) -> ChatResponse | None:
        """The last stored response of a live session (None when unknown or expired)."""
        last = self._last(session_id)
        return ChatResponse.model_validate(last) if last else None

    def resume(self, session_id: str | None) -> Resumed | None:
        """The stored transcript and last response of a live session (None when unknown or expired)."""
        last = self._current(session_id or "")
        if last is None:
            return None
        return Resumed(self.store.chat_entries(session_id or ""), last)

    def handle(self, request: ChatRequest, *, client: Any = None, log: Any = None) -> ChatResponse:
        """The HTTP API's call: the transcript and the prompt on screen come from the store (read under the
        turn lease by :meth:`send`)."""
        transcript: list[dict[str, Any]] = []
        if not request.session_id and not (request.message or request.action):
            response = self.start(transcript, client=client, log=log)
        else:
            response = self.send(transcript, request, client=client, log=log)
        self.transcript = transcript
        return response
