"""A local copy of the manual index (chunks, vectors, tokens) so reopening skips Chroma and Sudachi.

Reading 10,000 chunks with their vectors back from Chroma and re-tokenising them takes many
seconds; the retriever instead keeps one ``.npz`` per collection under the cache directory
(:func:`core.rag.cache.cache_dir`), written atomically after each change, holding the chunk
records, the vector matrix, the token-id arrays and their vocabulary, and the collection's
(id, revision) it was taken from. It is used only when that pair equals the collection's current
one and the chunk count matches; anything else (another process wrote, the file is missing or
broken) falls back to reading Chroma. Loaded with ``allow_pickle=False``.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.rag.records import Chunk

log = logging.getLogger(__name__)
FORMAT = 1


@dataclass
class Snapshot:
    revision: tuple[str, str]
    chunks: list[Chunk]
    vectors: np.ndarray
    tokens_vocab: list[str]
    tokens_flat: np.ndarray  # int32 ids into tokens_vocab, documents back to back
    tokens_offsets: np.ndarray  # int64, len(chunks) + 1


def snapshot_path(directory: Path, collection_name: str) -> Path:
    return Path(directory) / f"index-{collection_name}.npz"


def save(path: Path, snap: Snapshot) -> None:
    """Write ``snap`` atomically (temp file + rename); errors are logged, not raised."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"format": FORMAT, "revision": list(snap.revision),
                "chunks": [[c.chunk_id, c.text, c.metadata] for c in snap.chunks]}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp.npz")
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, meta=np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8),
                     vocab=np.frombuffer(json.dumps(snap.tokens_vocab, ensure_ascii=False).encode("utf-8"),
                                         dtype=np.uint8),
                     vectors=np.asarray(snap.vectors, dtype=np.float32),
                     flat=np.asarray(snap.tokens_flat, dtype=np.int32),
                     offsets=np.asarray(snap.tokens_offsets, dtype=np.int64))
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("index snapshot %s not written: %s", path, exc)


def load(path: Path, revision: tuple[str, str | None], count: int) -> Snapshot | None:
    """The snapshot at ``path`` when it was taken at ``revision`` and holds ``count`` chunks."""
    if revision[1] is None or not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(data["meta"].tobytes().decode("utf-8"))
            if meta.get("format") != FORMAT or tuple(meta.get("revision") or ()) != tuple(revision):
                return None
            if len(meta["chunks"]) != count:
                return None
            chunks = [Chunk.from_store(i, t, m) for i, t, m in meta["chunks"]]
            snap = Snapshot(revision=(str(revision[0]), str(revision[1])), chunks=chunks,
                            vectors=np.asarray(data["vectors"], dtype=np.float32),
                            tokens_vocab=json.loads(data["vocab"].tobytes().decode("utf-8")),
                            tokens_flat=np.asarray(data["flat"]), tokens_offsets=np.asarray(data["offsets"]))
        if snap.vectors.shape[0] != count or len(snap.tokens_offsets) != count + 1:
            return None
        return snap
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("index snapshot %s unusable: %s", path, exc)
        return None
