"""The seed's HTTP API (seed 000 §1, §8): ``POST /api/chat``, ``GET /api/sessions/{id}``, ``GET /healthz``;
the knowledge base's routes (``GET /api/knowledge``, ``POST /api/knowledge/ask``) are in ``api/knowledge.py``,
the reviewers' (``POST /api/feedback``, ``/api/review/…``) in ``api/review.py``.

Run: ``uvicorn api.main:app --port 8000``. Every request goes through the same path as the console's
車両問診 page: ``core.diagnosis.conversation.DiagnosisConversations.handle`` over the shared store
(``KAIWA_DB_URL``), so an operator sees an API customer's session live in the console and a session
started on one replica continues on another.

Process-wide and built once, lazily under a lock: the settings, the model client (as the console
builds it: ``ProviderRegistry(load_settings()).get_active()``, offline without a key) and the store
(``core.store.get_store()``); the manual retriever is the default process-wide one. The
``DiagnosisConversations`` wrapper itself is made per request: it is a few plain objects, and the
``ChatService`` inside it keeps the caller (owner) and the debug sink of the call it is serving, so
one shared instance would mix up concurrent callers.

Errors never show a traceback, and every 4xx has a Japanese ``detail``: an invalid body is a 422 naming
the fields at fault (types are strict: ``rewind_to_turn`` ``true``, ``"0"`` or ``1.0`` is not an integer;
a NUL character in any text is refused, since PostgreSQL cannot store it), malformed JSON a 422, a body
that is not UTF-8 a 400, an unknown route a 404, a body over :data:`MAX_BODY_BYTES` a 413, a turn while
another turn of the same session runs for longer than the wait a 409 (a 200 always means stored), an
unknown or expired session id a new session with the expired notice (the flow's own rule), a model
failure the flow's fallback message (200, with ``fallback: true``), and anything else a 503 with the
seed's fallback message (logged server side).

With ``KAIWA_TRUST_PROXY_HEADERS=1`` a session belongs to the caller who started it: another caller gets
the same 404 for it as for an unknown id, for reading and for continuing (operators in the console see
every session).

Every dependency (``get_store``, ``get_client``, ``get_retriever``, ``get_settings``, ``get_owner``,
``get_auth_settings``, ``get_turn_wait``)
can be replaced with ``app.dependency_overrides`` (tests inject a fast retriever that way). ``POST /api/chat``
takes them through one dependency, :func:`get_chat_turn`, so that FastAPI solves each once per turn; it
resolves the turn's caller itself, from ``get_auth_settings`` and the headers as ``get_owner`` does (to give
a turn another caller, replace ``get_chat_turn``).

**One thread hand-over per turn.** FastAPI runs every plain ``def`` dependency, and the response check of a
plain ``def`` route, in its thread pool, one hand-over each: ``POST /api/chat`` took eleven per request
(queue, wake a worker thread, wake the event loop back, each waiting for the GIL while other turns compute).
The dependencies are ``async`` now and run in the event loop: they hand back what is built already (the
first build of the store, the client or the settings — a migration, a model check over the network — still
runs in the pool), and the route runs the turn itself in the pool once (:func:`_chat_turn`).
"""
from __future__ import annotations

import logging
import threading
from typing import Annotated, Any, Callable, Generic, NamedTuple, TypeVar

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.knowledge import router as knowledge_router
from api.review import queue_latest_answer
from api.review import router as review_router
from api.turn_gate import TurnGate
from core.diagnosis.context import UNSET
from core.diagnosis.conversation import DiagnosisConversations
from core.diagnosis.models import ChatRequest, ChatResponse, PromptInfo, UrgencyInfo
from core.diagnosis.steps.common import FAILURE_MESSAGE, NOT_TAKEN_MESSAGE, urgency_info
from core.identity import AuthSettings, Identity, load_auth_settings, resolve_identity
from core.llm.registry import ProviderRegistry, model_notice
from core.llm.settings import Settings, load_settings
from core.store import get_store as shared_store
from core.store.conversations import TurnBusy, turn_wait
from core.store.db import default_url
from core.store.debug_sink import StoredDebugLog
from core.store.store import Store

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 8000
MAX_VALUE_CHARS = 2000
MAX_FORM_FIELDS = 20
MAX_BODY_BYTES = 64 * 1024
API_IDENTITY = Identity(name="api", source="anonymous")  # callers without a trusted proxy identity
NOT_FOUND = "セッションが見つからないか、有効期限が切れています。"
TOO_LARGE = f"リクエストが大きすぎます（{MAX_BODY_BYTES // 1024} KB まで）。"

T = TypeVar("T")


class _Lazy(Generic[T]):
    """One value per process, built on first use (double-checked under a lock)."""

    def __init__(self, build: Callable[[], T]):
        self._build = build
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._build()
        return self._value

    @property
    def built(self) -> bool:
        return self._value is not None

    def reset(self) -> None:
        with self._lock:
            self._value = None


_settings: _Lazy[Settings] = _Lazy(load_settings)
_client: _Lazy[Any] = _Lazy(lambda: ProviderRegistry(_settings.get()).get_active())


# ---- dependencies ------------------------------------------------------------------------------
# ``async``: run in the event loop, no thread hand-over (see the module docstring); nothing here blocks once
# the process-wide values are built, and their first build runs in the thread pool.
_stores_built: set[str] = set()  # KAIWA_DB_URLs whose process-wide store is open (migrated)


async def get_auth_settings() -> AuthSettings:
    return load_auth_settings()


async def get_settings() -> Settings:
    return _settings.get() if _settings.built else await run_in_threadpool(_settings.get)


async def get_client() -> Any:
    return _client.get() if _client.built else await run_in_threadpool(_client.get)


async def get_store() -> Store:
    """The process-wide store of ``KAIWA_DB_URL`` (migrated on first use)."""
    url = default_url()
    if url in _stores_built:
        return shared_store()
    store = await run_in_threadpool(shared_store)
    _stores_built.add(url)
    return store


async def get_retriever() -> Any:
    """``UNSET``: the diagnosis flow uses the process-wide manual retriever, built on first need."""
    return UNSET


def _caller(request: Request, auth: AuthSettings) -> Identity:
    identity = resolve_identity(auth, headers=request.headers)
    return API_IDENTITY if identity.source == "anonymous" else identity


async def get_owner(request: Request, auth: Annotated[AuthSettings, Depends(get_auth_settings)]) -> Identity:
    """The caller: the trusted proxy identity when ``KAIWA_TRUST_PROXY_HEADERS`` is on, else ``api``."""
    return _caller(request, auth)


def _check_owner(store: Store, session_id: str | None, owner: Identity, auth: AuthSettings) -> None:
    """With proxy identity on, a stored diagnosis session of another caller is answered as unknown (404)."""
    if not auth.trust_proxy or not session_id:
        return
    conversation = store.get_conversation(session_id)
    if conversation is not None and conversation["flow"] == "diagnosis" and conversation["owner"] != owner.user_id:
        raise HTTPException(status_code=404, detail=NOT_FOUND)


async def get_turn_wait() -> float:
    """Seconds a turn waits for a running turn of the same session before the 409 (``KAIWA_TURN_WAIT``)."""
    return turn_wait()


async def get_conversations(store: Annotated[Store, Depends(get_store)], client: Annotated[Any, Depends(get_client)],
                            retriever: Annotated[Any, Depends(get_retriever)],
                            owner: Annotated[Identity, Depends(get_owner)],
                            wait: Annotated[float, Depends(get_turn_wait)]) -> DiagnosisConversations:
    return DiagnosisConversations(store, client=client, owner=owner, retriever=retriever, wait=wait)


class ChatTurn(NamedTuple):
    """What ``POST /api/chat`` needs besides its body: the conversations, the debug log, the caller."""

    conversations: DiagnosisConversations
    log: StoredDebugLog | None
    owner: Identity
    auth: AuthSettings


async def get_chat_turn(request: Request, store: Annotated[Store, Depends(get_store)],
                        client: Annotated[Any, Depends(get_client)],
                        retriever: Annotated[Any, Depends(get_retriever)],
                        settings: Annotated[Settings, Depends(get_settings)],
                        auth: Annotated[AuthSettings, Depends(get_auth_settings)],
                        wait: Annotated[float, Depends(get_turn_wait)]) -> ChatTurn:
    """``get_conversations`` and ``get_owner`` of one turn in one dependency, and its debug log (with
    ``KAIWA_DEBUG`` on, the API's model calls land in the console's shared debug log): each
    replaceable dependency once and nothing twice (FastAPI solves a dependency's whole graph again for every
    route parameter that names it, even when the value comes from its per-request cache: 16 solves per turn
    are 8, the route's, this one's and its six)."""
    owner = _caller(request, auth)
    return ChatTurn(DiagnosisConversations(store, client=client, owner=owner, retriever=retriever, wait=wait),
                    StoredDebugLog(store, owner) if settings.debug else None, owner, auth)


# ---- request / response models -----------------------------------------------------------------
def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise PydanticCustomError("nul_character", "NUL character")
    return value


NoNul = AfterValidator(_no_nul)
Text = Annotated[str, StringConstraints(max_length=MAX_VALUE_CHARS), NoNul]
FieldName = Annotated[str, StringConstraints(max_length=64), NoNul]


class ChatRequestBody(ChatRequest):
    """The seed's ``ChatRequest`` with bounds: ``message`` at most 8,000 characters, ``action_value`` a
    button value or the booking form's fields (``{name: value}``). Types are strict (no ``true`` or
    ``"0"`` for an integer, no number for a string) and no text may hold a NUL character."""

    model_config = ConfigDict(strict=True)

    session_id: Annotated[str, StringConstraints(max_length=80), NoNul] | None = None
    message: Annotated[str, StringConstraints(max_length=MAX_MESSAGE_CHARS), NoNul] | None = None
    action: Annotated[str, StringConstraints(max_length=64), NoNul] | None = None
    action_value: Text | Annotated[dict[FieldName, Text], Field(max_length=MAX_FORM_FIELDS)] | None = None
    rewind_to_turn: Annotated[int, Field(ge=0, le=100_000)] | None = None


class Vehicle(BaseModel):
    vehicle_id: str | None = None
    make: str | None = None
    model: str | None = None
    year: int | None = None


class SessionSummary(BaseModel):
    """A stored diagnosis session as the console shows it."""

    session_id: str
    status: str
    owner: str
    current_step: str
    vehicle: Vehicle | None = None
    symptom_text: str = ""
    urgency: UrgencyInfo | None = None
    manual_coverage: str | None = None
    diagnostic_turn: int = 0
    booking_number: str | None = None
    prompt: PromptInfo | None = None
    turns: int = 0
    transcript: list[dict[str, Any]] = Field(default_factory=list)
    created_at: str
    updated_at: str


# ---- the app -----------------------------------------------------------------------------------
class BodySizeLimit:
    """ASGI middleware: a body over ``max_bytes`` (declared or streamed) is answered 413 unread."""

    def __init__(self, app: Any, max_bytes: int = MAX_BODY_BYTES):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared and (not declared.isdigit() or int(declared) > self.max_bytes):
            await JSONResponse({"detail": TOO_LARGE}, status_code=413)(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await JSONResponse({"detail": TOO_LARGE}, status_code=413)(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


app = FastAPI(title="Kaiwa Console API",
              description="車両問診チャット（seed 000 §1, §8）の HTTP API。コンソールと同じストア・同じ問診フローを使います。",
              version="1.0")
app.add_middleware(BodySizeLimit)
app.include_router(knowledge_router)  # GET /api/knowledge, POST /api/knowledge/ask (api/knowledge.py)
app.include_router(review_router)  # POST /api/feedback, /api/review/… (api/review.py)

_TYPE_TEXT = {
    "missing": "必須です",
    "string_too_long": "{max_length} 文字以内にしてください",
    "too_long": "{max_length} 項目以内にしてください",
    "string_type": "文字列で指定してください",
    "int_type": "整数で指定してください",
    "int_parsing": "整数で指定してください",
    "int_from_float": "整数で指定してください",
    "dict_type": "オブジェクトで指定してください",
    "model_attributes_type": "JSON オブジェクトで送ってください",
    "greater_than_equal": "{ge} 以上にしてください",
    "less_than_equal": "{le} 以下にしてください",
    "json_invalid": "JSON として読めません",
    "nul_character": "NUL 文字（U+0000）は使えません",
    "bool_type": "真偽値で指定してください",
}
# 4xx that the framework raises with an English text; our own carry Japanese already
_STATUS_TEXT = {
    400: "リクエスト本文を読み取れません。UTF-8 の JSON で送ってください。",
    401: "認証が必要です。",
    403: "この操作は許可されていません。",
    404: "指定された URL は見つかりません。",
    405: "この URL ではそのメソッドは使えません。",
    406: "その形式の応答は返せません。",
    409: "ほかの処理と競合しました。少し待ってからもう一度送信してください。",
    413: TOO_LARGE,
    415: "Content-Type は application/json にしてください。",
    429: "リクエストが多すぎます。少し待ってからもう一度送信してください。",
}
_FIELD_LABELS = {"body": "リクエスト本文"}


def _field_of(loc: tuple) -> str:
    """The top-level body field at fault (``("body", "message")`` → ``message``); a nested location
    (a form field name, a union branch) is not echoed back."""
    if len(loc) > 1 and loc[0] in ("path", "query"):
        return str(loc[1])[:40]
    return str(loc[1]) if len(loc) > 1 and isinstance(loc[1], str) and loc[1] in ChatRequestBody.model_fields else "body"


def _describe(error: dict) -> str:
    template = _TYPE_TEXT.get(error.get("type", ""))
    ctx = error.get("ctx") or {}
    if template:
        try:
            return template.format(**ctx)
        except (KeyError, IndexError, ValueError):
            pass
    return str(error.get("msg", "不正な値です"))[:200]


@app.exception_handler(RequestValidationError)
async def _invalid_body(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422: which fields are wrong and why, in Japanese; the input itself is never echoed."""
    by_field: dict[str, dict] = {}
    for error in exc.errors():
        field = _field_of(tuple(error.get("loc") or ()))
        current = by_field.get(field)
        # for a union (button value or form fields) prefer the bound that failed over "wrong type"
        if current is None or (current.get("type", "").endswith("_type") and not error.get("type", "").endswith("_type")):
            by_field[field] = error
    fields = [{"field": field, "message": _describe(error), "type": str(error.get("type", ""))}
              for field, error in by_field.items()]
    listed = "、".join(f"{_FIELD_LABELS.get(f['field'], f['field'])}（{f['message']}）" for f in fields)
    return JSONResponse({"detail": f"リクエストの内容に誤りがあります: {listed}", "errors": fields}, status_code=422)


@app.exception_handler(StarletteHTTPException)
async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """Every HTTP error with a Japanese ``detail``: ours as raised, the framework's (unknown route, wrong
    method, an unreadable body…) by status."""
    detail = exc.detail if isinstance(exc.detail, str) and not exc.detail.isascii() else None
    if detail is None:
        detail = _STATUS_TEXT.get(exc.status_code) or (
            "リクエストを処理できませんでした。" if exc.status_code < 500 else NOT_TAKEN_MESSAGE)
    return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None))


@app.exception_handler(TurnBusy)
async def _turn_busy(request: Request, exc: TurnBusy) -> JSONResponse:
    """409: another turn of this session is still running (nothing of this request was stored)."""
    return JSONResponse({"detail": exc.message, "session_id": exc.conversation_id}, status_code=409)


@app.exception_handler(Exception)
async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    """Anything unforeseen (the database is down…): logged here, the caller gets the fallback message."""
    logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"status": "error", "detail": NOT_TAKEN_MESSAGE, "fallback": True}, status_code=503)


TURN_GATE = TurnGate()  # at most KAIWA_API_TURNS_IN_FLIGHT turns in the pool, a session's one at a time (api/turn_gate.py)


@app.post("/api/chat", response_model=ChatResponse, summary="問診チャットの 1 ターン",
          responses={404: {"description": "ほかの利用者のセッション（プロキシ認証が有効なとき）"},
                     409: {"description": "同じセッションの前のターンがまだ処理中（何も保存していない）"},
                     413: {"description": "リクエストが大きすぎる"}, 422: {"description": "リクエストの形式の誤り"},
                     503: {"description": "一時的な障害（フォールバックメッセージ）"}})
async def chat(body: ChatRequestBody, turn: Annotated[ChatTurn, Depends(get_chat_turn)]) -> ChatResponse:
    """Seed 000 §1: ``session_id`` null (and nothing else) starts a session; an unknown or expired id
    starts a new one with ``notice``; ``action`` + ``action_value`` press a button; ``rewind_to_turn``
    goes back; ``action: restart`` starts a new session (a new id; the finished one stays as it was)."""
    async with TURN_GATE.enter(body.session_id, turn.conversations.wait):
        return await run_in_threadpool(_chat_turn, body, *turn)


def _chat_turn(body: ChatRequestBody, conversations: DiagnosisConversations, log: StoredDebugLog | None,
               owner: Identity, auth: AuthSettings) -> ChatResponse:
    """The turn itself (blocking: the store, the model, e5), in the thread pool. ``body`` is a
    ``ChatRequest`` already validated (strictly) by FastAPI: it is not dumped and validated again."""
    _check_owner(conversations.store, body.session_id, owner, auth)
    response = conversations.handle(body, log=log)
    queue_latest_answer(conversations.store, response.session_id,  # a failed or critical answer is reviewed
                        conversations.transcript, list(log or []))
    return response


@app.get("/api/sessions/{session_id}", response_model=SessionSummary, summary="保存された問診セッション",
         responses={404: {"description": NOT_FOUND}})
def session_summary(session_id: str, conversations: Annotated[DiagnosisConversations, Depends(get_conversations)],
                    owner: Annotated[Identity, Depends(get_owner)],
                    auth: Annotated[AuthSettings, Depends(get_auth_settings)]) -> SessionSummary:
    if len(session_id) > 80 or "\x00" in session_id:
        raise HTTPException(status_code=404, detail=NOT_FOUND)
    _check_owner(conversations.store, session_id, owner, auth)
    session = conversations.sessions.get(session_id)
    conversation = conversations.store.get_conversation(session_id) if session else None
    if session is None or conversation is None:
        raise HTTPException(status_code=404, detail=NOT_FOUND)
    last = (conversation.get("state") or {}).get("last_response") or {}
    transcript = conversations.store.chat_entries(session.session_id)
    vehicle = (Vehicle(vehicle_id=session.vehicle_id, make=session.make, model=session.model, year=session.year)
               if session.vehicle_id else None)
    return SessionSummary(
        session_id=session.session_id, status=str(conversation["status"]), owner=str(conversation["owner_label"] or ""),
        current_step=session.current_step.value, vehicle=vehicle, symptom_text=session.symptom_text,
        urgency=urgency_info(session), manual_coverage=session.manual_coverage,
        diagnostic_turn=session.diagnostic_turn, booking_number=conversations.sessions.booking_number(session.session_id),
        prompt=PromptInfo.model_validate(last["prompt"]) if last.get("prompt") else session.last_prompt,
        turns=len(transcript), transcript=transcript, created_at=str(conversation["created_at"]),
        updated_at=str(conversation["updated_at"]))


@app.get("/healthz", summary="死活確認（DB の読み書きを確かめる）")
def healthz(store: Annotated[Store, Depends(get_store)], client: Annotated[Any, Depends(get_client)]) -> JSONResponse:
    """200 when the database answers a read and takes a write (``Store.check_health``), else 503 with
    ``db_readable`` / ``db_writable`` saying which failed (the error itself only in the server log). The
    model check made when the client was built is reported too (``served_model``, ``model_notice``)."""
    body: dict[str, Any] = {"status": "ok", "db": store.dialect, "provider": str(getattr(client, "name", "?")),
                            "model": str(getattr(client, "model", "") or "")}
    info = getattr(client, "server_info", None)  # the model check made when the client was built
    if info is not None and info.reachable:
        body.update(served_model=info.served_model, context_tokens=getattr(client, "context_tokens", None))
    if model_notice(client):
        body["model_notice"] = model_notice(client)
    health = store.check_health()
    body.update(db_readable=health.readable, db_writable=health.writable)
    if not (health.readable and health.writable):
        logger.error("health check: database %s", "unreachable" if not health.readable else "not writable",
                     exc_info=health.error)
        return JSONResponse({**body, "status": "error"}, status_code=503)
    return JSONResponse(body)
