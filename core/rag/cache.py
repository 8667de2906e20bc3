"""Caches for the retrieval layer: tokens and passage vectors keyed by a hash of the text.

* :class:`TokenCache` — Sudachi tokens per text (tokenising a manual chunk costs a few ms; a
  10,000-chunk index would take a minute to re-tokenise on every open).
* :class:`CachingEmbedder` — wraps an embedder; passage vectors come from the vectors shipped in
  the repository (``data/vectors/<embedder key>.npy`` + ``.json``, the bundled manuals and FAQ,
  see :mod:`core.shipped_vectors`), then from the local cache, and only the rest is embedded (in one
  call) and stored. Query vectors are never cached.

Both keep an in-memory dict in front of one SQLite file each under ``KAIWA_CACHE_DIR`` (default
``<ROOT>/var/cache``): ``tokens-<tokenizer>.sqlite``, ``vectors-<embedder key>.sqlite``. Keys are
``sha256(text)``; a read-only or broken cache only costs time (errors are logged, never raised).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from core.paths import DATA_DIR, ROOT

log = logging.getLogger(__name__)

CACHE_DIR_ENV = "KAIWA_CACHE_DIR"
DEFAULT_CACHE_DIR = ROOT / "var" / "cache"
SHIPPED_DIR = DATA_DIR / "vectors"
_SEP = "\x1f"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_DIR)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name)[:120]


class SqliteKV:
    """``key TEXT → value BLOB`` in one SQLite file; every method swallows (and logs) I/O errors."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=10)
        if not self._ready:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
            self._ready = True
        return conn

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        if not keys:
            return {}
        try:
            conn = self._connect()
            try:
                out: dict[str, bytes] = {}
                for start in range(0, len(keys), 900):  # SQLite's variable limit
                    part = list(keys[start:start + 900])
                    rows = conn.execute(f"SELECT key, value FROM kv WHERE key IN ({','.join('?' * len(part))})", part)
                    out.update(rows.fetchall())
                return out
            finally:
                conn.close()
        except (sqlite3.Error, OSError) as exc:
            log.warning("cache %s unreadable: %s", self.path, exc)
            return {}

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        items = list(items)
        if not items:
            return
        try:
            conn = self._connect()
            try:
                with conn:
                    conn.executemany("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", items)
            finally:
                conn.close()
        except (sqlite3.Error, OSError) as exc:
            log.warning("cache %s not written: %s", self.path, exc)


class TokenCache:
    """Tokens of texts for one tokenizer (``tokenizer.name``), memory first, then SQLite."""

    def __init__(self, tokenizer: Any, directory: Path | None = None):
        self.tokenizer = tokenizer
        name = getattr(tokenizer, "name", type(tokenizer).__name__)
        self.store = SqliteKV(Path(directory or cache_dir()) / f"tokens-{_safe_name(name)}.sqlite")
        self._memory: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self.tokenised = 0  # texts actually tokenised (cache misses)

    def tokens(self, texts: Sequence[str]) -> list[list[str]]:
        keys = [text_hash(t) for t in texts]
        with self._lock:
            found = {k: self._memory[k] for k in keys if k in self._memory}
        missing = [k for k in dict.fromkeys(keys) if k not in found]
        if missing:
            for key, raw in self.store.get_many(missing).items():
                value = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
                found[key] = value.split(_SEP) if value else []
        fresh: list[tuple[str, bytes]] = []
        for key, text in zip(keys, texts):
            if key not in found:
                found[key] = list(self.tokenizer(text))
                self.tokenised += 1
                fresh.append((key, _SEP.join(found[key]).encode("utf-8")))
        self.store.put_many(fresh)
        with self._lock:
            self._memory.update(found)
        return [found[k] for k in keys]


_shipped: dict[str, dict[str, np.ndarray]] = {}
_shipped_lock = threading.Lock()


def shipped_paths(key: str, directory: Path | None = None) -> tuple[Path, Path]:
    base = Path(directory or SHIPPED_DIR) / _safe_name(key)
    return base.with_suffix(".npy"), base.with_suffix(".json")


def shipped_vectors(key: str, directory: Path | None = None) -> dict[str, np.ndarray]:
    """``{text hash: vector}`` shipped in the repository for embedder ``key`` (empty if none)."""
    cache_key = f"{directory}:{key}"
    with _shipped_lock:
        if cache_key in _shipped:
            return _shipped[cache_key]
        npy, index = shipped_paths(key, directory)
        table: dict[str, np.ndarray] = {}
        try:
            if npy.exists() and index.exists():
                hashes = json.loads(index.read_text(encoding="utf-8"))["hashes"]
                matrix = np.load(npy, allow_pickle=False)
                if matrix.shape[0] == len(hashes):
                    table = dict(zip(hashes, matrix.astype(np.float32)))
        except (OSError, ValueError, KeyError) as exc:
            log.warning("shipped vectors %s unreadable: %s", npy, exc)
        _shipped[cache_key] = table
        return table


def forget_shipped() -> None:
    """Drop the in-process copy of the shipped vectors (after rewriting them)."""
    with _shipped_lock:
        _shipped.clear()


class CachingEmbedder:
    """An embedder whose passage vectors are looked up before they are computed (module docstring).
    Everything else (``key``, ``cosine_range``, ``query_vector`` …) is the inner embedder's."""

    def __init__(self, inner: Any, directory: Path | None = None, shipped_dir: Path | None = None):
        self.inner = inner
        self.key = getattr(inner, "key", type(inner).__name__)
        self.store = SqliteKV(Path(directory or cache_dir()) / f"vectors-{_safe_name(self.key)}.sqlite")
        self._shipped_dir = shipped_dir
        self._memory: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.embedded = 0  # passages actually embedded (cache misses)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def cosine_range(self) -> tuple[float, float]:
        return self.inner.cosine_range

    def query_vector(self, text: str) -> np.ndarray:
        return self.inner.query_vector(text)

    def passages(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.asarray(self.inner.passages([]), dtype=np.float32)
        keys = [text_hash(t) for t in texts]
        shipped = shipped_vectors(self.key, self._shipped_dir)
        with self._lock:
            found = {k: self._memory[k] for k in keys if k in self._memory}
        for k in keys:
            if k not in found and k in shipped:
                found[k] = shipped[k]
        missing = [k for k in dict.fromkeys(keys) if k not in found]
        for key, raw in self.store.get_many(missing).items():
            found[key] = np.frombuffer(raw, dtype=np.float32)
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        if todo:
            first = {k: t for k, t in zip(reversed(keys), reversed(texts))}
            vectors = np.asarray(self.inner.passages([first[k] for k in todo]), dtype=np.float32)
            self.embedded += len(todo)
            for key, vector in zip(todo, vectors):
                found[key] = vector
            self.store.put_many((k, np.ascontiguousarray(found[k], dtype=np.float32).tobytes()) for k in todo)
        dims = {found[k].shape[-1] for k in keys}
        if len(dims) != 1:  # a stale cache of another width: recompute everything
            vectors = np.asarray(self.inner.passages(texts), dtype=np.float32)
            self.embedded += len(texts)
            return vectors
        with self._lock:
            self._memory.update((k, found[k]) for k in keys)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def __call__(self, input: Any) -> list:  # chromadb EmbeddingFunction protocol
        return list(self.passages(list(input)))
