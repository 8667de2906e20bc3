"""The knowledge base over HTTP, for other internal tools: ``GET /api/knowledge`` and ``POST /api/knowledge/ask``.

* ``GET /api/knowledge?q=&contract_type=&status=&limit=`` — confirmed entries unless ``status`` names
  another (``draft``, ``archived``). With ``q`` over confirmed entries: the same hybrid search as the
  console (``core.knowledge.retrieval``), most relevant first, each with its ``score``, then the entries
  the library's text search also finds (``score`` null: a word only in the clause sample); with ``q`` and
  another status: a plain text match (``score`` null). Without ``q``: newest first.
* ``POST /api/knowledge/ask`` ``{"question": "..."}`` → ``{"answer": str, "sources": [{"entry_id",
  "title", "contract_type", "score"}]}`` (``core.knowledge.ask``), most relevant first, ``"sources": []``
  and 「該当するナレッジはありません。」 when nothing fits; a failed model call is still a 200 with the
  Japanese failure text and ``"fallback": true``, as ``/api/chat`` does. Questions run side by side, at most
  ``core.knowledge.ask_slots.ASK_SLOTS`` (8) per process; past that a 429 with a Japanese ``detail`` and
  ``Retry-After``.

Bad input gets a Japanese 422 in ``/api/chat``'s shape (``detail`` naming the fields at fault, ``errors``),
never echoing the input; a body over 64 KB is refused by the app's size limit (413). Entries leave through
``core.knowledge.export.clean_entry``: personal data masked, secrets removed. Every dependency
(``get_store``, ``get_client``, ``get_index``, ``get_debug_log``) can be replaced with
``app.dependency_overrides``.
"""
from __future__ import annotations

import threading
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, StringConstraints

from api.errors import TEXTS, japanese_errors
from core.identity import Identity
from core.knowledge.ask import MAX_QUESTION_CHARS, ask
from core.knowledge.ask_slots import AskBusy, ask_slot
from core.knowledge.export import clean_entry
from core.knowledge.retrieval import KnowledgeIndex, knowledge_index
from core.llm.registry import ProviderRegistry
from core.llm.settings import load_settings
from core.rag.embeddings import REQUESTS
from core.store import get_store as shared_store
from core.store.debug_sink import StoredDebugLog
from core.store.store import Store

API_CALLER = Identity(name="api", source="anonymous")
MAX_QUERY_CHARS = 200
MAX_LIST = 100
FIELD_LABELS = {"question": "question（質問）", "q": "q（検索語）", "contract_type": "contract_type（契約類型）",
                "status": "status（状態）", "limit": "limit（件数）", "body": "リクエスト本文"}
_TEXT = {**TEXTS, "literal_error": "draft / confirmed / archived のいずれかを指定してください"}


router = APIRouter(route_class=japanese_errors(FIELD_LABELS, _TEXT), tags=["knowledge"])

_client_lock = threading.Lock()
_client: list[Any] = []


# ---- dependencies ------------------------------------------------------------------------------
def get_store() -> Store:
    return shared_store()


def get_client() -> Any:
    """The model client as the console builds it (offline without a key), built once per process."""
    with _client_lock:
        if not _client:
            _client.append(ProviderRegistry(load_settings()).get_active())
        return _client[0]


def get_index(store: Annotated[Store, Depends(get_store)]) -> KnowledgeIndex:
    return knowledge_index(store)


def get_debug_log(store: Annotated[Store, Depends(get_store)]) -> StoredDebugLog | None:
    """With ``KAIWA_DEBUG`` on, the ask call lands in the console's shared debug log."""
    return StoredDebugLog(store, API_CALLER) if load_settings().debug else None


# ---- models --------------------------------------------------------------------------------------
class AskBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_QUESTION_CHARS)]


class Source(BaseModel):
    entry_id: int
    title: str
    contract_type: str
    score: float


class AskResponse(BaseModel):
    answer: str
    sources: list[Source]
    fallback: bool = False


class Entry(BaseModel):
    entry_id: int
    status: str
    version: int
    knowledge_title: str
    contract_type: str
    target_clause: str
    review_points: str
    action_plan: str
    clause_sample: str
    updated_at: str
    confirmed_at: str | None = None
    score: float | None = None


class EntryList(BaseModel):
    entries: list[Entry]
    count: int


def _entry(row: dict[str, Any], score: float | None = None) -> Entry:
    clean = clean_entry(row)
    return Entry(entry_id=int(row["id"]), status=str(row["status"]), version=int(row["version"]),
                 updated_at=str(row.get("updated_at") or ""), confirmed_at=row.get("confirmed_at"),
                 score=None if score is None else round(score, 4),
                 **{f: str(clean.get(f) or "") for f in ("knowledge_title", "contract_type", "target_clause",
                                                          "review_points", "action_plan", "clause_sample")})


# ---- routes --------------------------------------------------------------------------------------
@router.get("/api/knowledge", response_model=EntryList, summary="ナレッジの一覧・検索（既定は確定済み）",
            responses={422: {"description": "パラメータの誤り"}})
def list_knowledge(store: Annotated[Store, Depends(get_store)], index: Annotated[KnowledgeIndex, Depends(get_index)],
                   q: Annotated[str, Query(max_length=MAX_QUERY_CHARS)] = "",
                   contract_type: Annotated[str, Query(max_length=100)] = "",
                   status: Annotated[Literal["draft", "confirmed", "archived"] | None, Query()] = None,
                   limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 20) -> EntryList:
    query = q.strip()
    wanted = status or "confirmed"
    if query and wanted == "confirmed":  # ranked search first, then what the library's text search finds too
        with REQUESTS.serving():  # counted like a chat turn: its query vector does not take both cores beside one
            hits = index.search(query, n=limit, contract_type=contract_type.strip() or None)
        entries = [_entry(h.entry, h.score) for h in hits]
        ranked = {h.entry_id for h in hits}
        rows = store.list_entries(status=wanted, contract_type=contract_type.strip() or None, query=query, limit=limit)
        entries += [_entry(row) for row in rows if int(row["id"]) not in ranked][:max(0, limit - len(entries))]
    else:
        rows = store.list_entries(status=wanted, contract_type=contract_type.strip() or None, query=query, limit=limit)
        entries = [_entry(row) for row in rows]
    return EntryList(entries=entries, count=len(entries))


@router.post("/api/knowledge/ask", response_model=AskResponse, summary="確定済みナレッジに質問する",
             responses={413: {"description": "リクエストが大きすぎる"}, 422: {"description": "リクエストの形式の誤り"},
                        429: {"description": "同時に受け付けられる質問の数を超えた（何も処理していない）"}})
def ask_knowledge(body: AskBody, index: Annotated[KnowledgeIndex, Depends(get_index)],
                  client: Annotated[Any, Depends(get_client)],
                  log: Annotated[StoredDebugLog | None, Depends(get_debug_log)]) -> Any:
    try:
        with ask_slot(), REQUESTS.serving():  # counted like a chat turn (core.rag.embeddings.REQUESTS)
            answer = ask(body.question, index, client, log=log)
    except AskBusy as busy:
        return JSONResponse({"detail": busy.message}, status_code=429, headers={"Retry-After": "2"})
    return AskResponse(answer=answer.answer, sources=[Source(**h.source()) for h in answer.sources],
                       fallback=not answer.ok)
