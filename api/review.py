"""The reviewers' loop over HTTP (issue #22), on the console's store and with ``api/main.py``'s identity rules.

* ``POST /api/feedback`` ``{"session_id", "turn", "rating": "up"|"down", "comment"?}`` → 201 ``{"feedback_id"}``.
  ``turn`` is the index of an answer in the conversation's stored transcript (``GET /api/sessions/{id}``'s
  ``transcript`` for a diagnosis session; the same index into the knowledge and FAQ conversations' stored
  chats, where every FAQ entry is an answer). Unknown session 404; a turn that is not an answer, or a bad
  rating, 422. A 👎 puts the answer in the review queue. With ``KAIWA_TRUST_PROXY_HEADERS=1`` another caller's
  diagnosis session is unknown (404), as for ``/api/sessions``.
* ``GET /api/review/queue?flow=&status=&limit=&offset=`` → ``{"items": [{"item_id", "session_id", "turn",
  "flow", "reason"}], "total"}``.
* ``POST /api/review/items/{item_id}`` ``{"verdict", "labels", "comment"?, "corrected_answer"?}`` → 200;
  an unknown verdict or a label the score configuration does not hold 422, an unknown item 404, an item
  another reviewer holds or that is already reviewed 409.
* ``GET /api/review/export?format=jsonl|csv`` → one line per reviewed answer (``core.review.export``: masked,
  the CSV spreadsheet-safe).

The review routes are for reviewers and admins only (403 otherwise): the role comes from the trusted proxy's
verified e-mail (``KAIWA_REVIEWERS``, ``KAIWA_ADMINS``); without proxy identity nobody holds it. Every
change is audited with the caller. Bad input gets a Japanese 422 naming the fields at fault.
"""
from __future__ import annotations

import logging
from typing import Annotated, Any, Literal, Mapping

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

from api.errors import invalid, japanese_errors
from core.identity import AuthSettings, Identity, load_auth_settings, resolve_identity
from core.review.answers import NotAnAnswer
from core.review.export import export_csv, export_jsonl
from core.review.intake import certainly_not_queued, consider, give_feedback
from core.store import get_store as shared_store
from core.store.review import MAX_COMMENT_CHARS, MAX_LABELS, REVIEW_FLOWS, ReviewConflict, ReviewInputError, ReviewQuery
from core.store.store import Store

logger = logging.getLogger(__name__)
API_CALLER = Identity(name="api", source="anonymous")
NOT_FOUND = "セッションが見つからないか、有効期限が切れています。"
ITEM_NOT_FOUND = "レビュー項目が見つかりません。"
FORBIDDEN = "レビューはレビュアー（KAIWA_REVIEWERS）と管理者だけが行えます。"
MAX_EXPORT = 100_000
FIELD_LABELS = {"session_id": "session_id", "turn": "turn（回答の位置）", "rating": "rating（up / down）",
                "comment": "comment（コメント）", "verdict": "verdict（correct / partial / incorrect）",
                "labels": "labels（ラベル）", "corrected_answer": "corrected_answer（修正後の回答）",
                "item_id": "item_id", "flow": "flow", "status": "status", "limit": "limit", "offset": "offset", "format": "format",
                "body": "リクエスト本文"}


def _invalid(fields: list[dict[str, str]]) -> JSONResponse:
    return invalid(fields, FIELD_LABELS)


router = APIRouter(route_class=japanese_errors(FIELD_LABELS), tags=["review"])


# ---- dependencies ------------------------------------------------------------------------------
def get_store() -> Store:
    return shared_store()


def get_auth_settings() -> AuthSettings:
    return load_auth_settings()


def get_caller(request: Request, auth: Annotated[AuthSettings, Depends(get_auth_settings)]) -> Identity:
    """The trusted proxy identity when ``KAIWA_TRUST_PROXY_HEADERS`` is on, else ``api`` (as ``api/main.py``)."""
    identity = resolve_identity(auth, headers=request.headers)
    return API_CALLER if identity.source == "anonymous" else identity


def get_reviewer(caller: Annotated[Identity, Depends(get_caller)]) -> Identity:
    if not caller.can("review.work"):
        raise HTTPException(status_code=403, detail=FORBIDDEN)
    return caller


# ---- models --------------------------------------------------------------------------------------
def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise PydanticCustomError("nul_character", "NUL character")
    return value


NoNul = AfterValidator(_no_nul)
Comment = Annotated[str, StringConstraints(max_length=MAX_COMMENT_CHARS), NoNul]


class FeedbackBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    session_id: Annotated[str, StringConstraints(max_length=80), NoNul]
    turn: Annotated[int, Field(ge=0, le=100_000)]
    rating: Literal["up", "down"]
    comment: Comment | None = None


class FeedbackCreated(BaseModel):
    feedback_id: int


class QueueItem(BaseModel):
    item_id: int
    session_id: str
    turn: int
    flow: str
    reason: str


class Queue(BaseModel):
    items: list[QueueItem]
    total: int


class Correction(BaseModel):
    """A corrected answer: its text and the checkable facts a regression case expects (all optional)."""

    model_config = ConfigDict(extra="forbid")
    text: Comment | None = None
    urgency: Literal["critical", "high", "medium", "low"] | None = None
    can_drive: bool | None = None
    outcome: Annotated[str, StringConstraints(max_length=40), NoNul] | None = None
    citations: Annotated[list[Annotated[str, StringConstraints(max_length=80), NoNul]], Field(max_length=20)] | None = None
    fields: dict[Annotated[str, StringConstraints(max_length=40)], Comment] | None = None
    must_include: Annotated[list[Annotated[str, StringConstraints(max_length=200), NoNul]], Field(max_length=20)] | None = None


class VerdictBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    verdict: Literal["correct", "partial", "incorrect"]
    labels: Annotated[list[Annotated[str, StringConstraints(max_length=60), NoNul]], Field(max_length=MAX_LABELS)] = []
    comment: Comment | None = None
    corrected_answer: Comment | Correction | None = None


class VerdictResult(BaseModel):
    item_id: int
    status: str
    verdict: str | None
    labels: list[str]


def _owned(store: Store, session_id: str, caller: Identity, auth: AuthSettings) -> dict[str, Any]:
    conversation = store.get_conversation(session_id) if "\x00" not in session_id else None
    if conversation is None:
        raise HTTPException(status_code=404, detail=NOT_FOUND)
    if auth.trust_proxy and conversation["flow"] == "diagnosis" and conversation["owner"] != caller.user_id:
        raise HTTPException(status_code=404, detail=NOT_FOUND)
    return conversation


def queue_latest_answer(store: Store, session_id: str, transcript: list[dict[str, Any]] | None = None,
                        calls: list[Mapping[str, Any]] | None = None) -> None:
    """After an ``/api/chat`` turn: the newest answer of the session enters the review queue when a reason
    holds (``core.review.intake.consider``). ``transcript``: the session's live chat as the turn stored it
    (else read from the store); with ``calls`` (the turn's debug records, [] when the log is off) an answer
    that certainly needs no review is known without reading it back (``certainly_not_queued``). Never fails
    the turn (logged)."""
    try:
        entries = transcript if transcript is not None else store.chat_entries(session_id)
        turn = max((i for i, e in enumerate(entries) if e.get("role") == "assistant"), default=None)
        if turn is None:
            return
        if transcript is not None and calls is not None and certainly_not_queued(
                session_id, turn, "diagnosis", entries[turn], calls):
            return
        consider(store, session_id, turn)
    except Exception:  # noqa: BLE001 - the turn is stored; review intake is best effort
        logger.warning("review intake failed for a session", exc_info=True)


# ---- routes --------------------------------------------------------------------------------------
@router.post("/api/feedback", status_code=201, response_model=FeedbackCreated, summary="回答への 👍 / 👎",
             responses={404: {"description": NOT_FOUND}, 422: {"description": "回答でない turn、評価の誤り"}})
def post_feedback(body: FeedbackBody, store: Annotated[Store, Depends(get_store)],
                  caller: Annotated[Identity, Depends(get_caller)],
                  auth: Annotated[AuthSettings, Depends(get_auth_settings)]) -> FeedbackCreated:
    _owned(store, body.session_id, caller, auth)
    try:
        feedback_id, _ = give_feedback(store, body.session_id, body.turn, body.rating, caller,
                                       comment=body.comment or "")
    except NotAnAnswer:
        return _invalid([{"field": "turn", "message": "回答（assistant）の位置ではありません", "type": "not_an_answer"}])
    except ReviewInputError as exc:
        return _invalid([{"field": "body", "message": str(exc), "type": "review_input"}])
    return FeedbackCreated(feedback_id=feedback_id)


@router.get("/api/review/queue", response_model=Queue, summary="レビュー待ちの一覧（レビュアー・管理者）",
            responses={403: {"description": FORBIDDEN}})
def review_queue(store: Annotated[Store, Depends(get_store)], _: Annotated[Identity, Depends(get_reviewer)],
                 flow: Annotated[Literal[REVIEW_FLOWS] | None, Query()] = None,  # type: ignore[valid-type]
                 status: Annotated[Literal["pending", "claimed", "done", "skipped"] | None, Query()] = None,
                 limit: Annotated[int, Query(ge=1, le=100)] = 50,
                 offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0) -> Queue:
    query = ReviewQuery(flows=(flow,) if flow else (), statuses=(status,) if status else ())
    rows = store.review_page(query, limit=limit, offset=offset)
    return Queue(items=[QueueItem(item_id=r["id"], session_id=r["conversation_id"], turn=r["turn"], flow=r["flow"],
                                  reason=r["reason"]) for r in rows], total=store.count_review_items(query))


@router.post("/api/review/items/{item_id}", response_model=VerdictResult, summary="レビュー結果を記録する",
             responses={403: {"description": FORBIDDEN}, 404: {"description": ITEM_NOT_FOUND},
                        409: {"description": "ほかのレビュアーが作業中、またはレビュー済み"},
                        422: {"description": "不明な判定・ラベル"}})
def review_item(item_id: Annotated[int, Path(ge=1, le=2**62)], body: VerdictBody,
                store: Annotated[Store, Depends(get_store)],
                reviewer: Annotated[Identity, Depends(get_reviewer)]) -> Any:
    corrected = body.corrected_answer
    if isinstance(corrected, str):
        corrected = {"text": corrected} if corrected.strip() else None
    elif corrected is not None:
        corrected = corrected.model_dump(exclude_none=True) or None
    try:
        item = store.record_review(item_id, reviewer, verdict=body.verdict, labels=body.labels,
                                   comment=body.comment or "", corrected_answer=corrected)
    except LookupError:
        raise HTTPException(status_code=404, detail=ITEM_NOT_FOUND) from None
    except ReviewInputError as exc:
        return _invalid([{"field": "labels", "message": str(exc), "type": "review_input"}])
    except ReviewConflict as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    return VerdictResult(item_id=item["id"], status=item["status"], verdict=item["verdict"], labels=item["labels"])


@router.get("/api/review/export", summary="レビュー済みの回答のエクスポート（JSONL / CSV）",
            responses={403: {"description": FORBIDDEN}})
def review_export(store: Annotated[Store, Depends(get_store)], _: Annotated[Identity, Depends(get_reviewer)],
                  format: Annotated[Literal["jsonl", "csv"], Query()] = "jsonl") -> Response:
    items = store.reviewed_items(limit=MAX_EXPORT)
    if format == "csv":
        return Response(export_csv(items), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": 'attachment; filename="review.csv"'})
    return Response(export_jsonl(items), media_type="application/x-ndjson; charset=utf-8",
                    headers={"Content-Disposition": 'attachment; filename="review.jsonl"'})
