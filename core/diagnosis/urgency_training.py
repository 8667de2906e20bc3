"""Training the learned urgency layer on the current labelled utterances and shipping the result.

The training data is every utterance of ``data/urgency_utterances.yaml`` — ``split: tune`` (the
similarity layer's exemplars, whose vectors ship in ``data/vectors/urgency``) and ``split: train``
(the development probe sets, embedded once and cached under ``var/urgency_vectors``); never the
held-out split or a blind probe set. :func:`ship` trains :mod:`core.diagnosis.urgency_learned` on it
and writes ``data/urgency_model/`` (run by ``python -m core.shipped_vectors``); :func:`current_fingerprint`
is what the shipped artefact must carry (the staleness test compares the two, without embedding).
"""
from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any, Callable

import numpy as np

from core.diagnosis import urgency_learned
from core.diagnosis.urgency_learned import ARTEFACT_DIR, DEFAULTS, MAX_CHARS, embedding_text, fingerprint
from core.diagnosis.urgency_semantic import SemanticUrgencyModel, Utterance, default_model, load_utterances

TRAINING_SPLITS = ("tune", "train")


def training_utterances() -> list[Utterance]:
    """The training split in file order: tune first (the exemplars), then train."""
    items = load_utterances()
    return [u for split in TRAINING_SPLITS for u in items if u.split == split]


def training_data(embed: Callable[[str], np.ndarray] | None = None) -> tuple[list[str], list[str], np.ndarray, str]:
    """Texts, labels, embeddings and embedder key of the training utterances. The tune split's
    vectors are the similarity layer's (shipped); the train split's are embedded once and cached; a
    text whose denied symptoms change what is embedded is embedded on its own (``embed``)."""
    exemplars = default_model()
    others = SemanticUrgencyModel([u for u in training_utterances() if u.split != "tune"], embedder=exemplars.embedder,
                                  shipped_dir=None, learned=None)
    utterances = list(exemplars.exemplars) + list(others.exemplars)
    parts = [np.asarray(exemplars.vectors(), dtype=np.float32)]
    if others.exemplars:
        parts.append(np.asarray(others.vectors(), dtype=np.float32))
    vectors = np.vstack(parts)
    query = embed or exemplars.query
    for i, u in enumerate(utterances):
        if embedding_text(u.text) != unicodedata.normalize("NFKC", u.text).strip()[:MAX_CHARS]:
            vectors[i] = query(embedding_text(u.text))
    return [u.text for u in utterances], [u.level for u in utterances], vectors, getattr(exemplars.embedder, "key", "e")


def current_fingerprint() -> str:
    """The fingerprint the shipped artefact must carry for the current training data."""
    items = training_utterances()
    key = getattr(default_model().embedder, "key", "e")
    return fingerprint([u.text for u in items], [u.level for u in items], DEFAULTS, key)


def ship(directory: Path = ARTEFACT_DIR) -> tuple[Path, dict[str, Any]]:
    """Train on the current data and write the artefact; the process's loaded model is reset."""
    texts, labels, vectors, key = training_data()
    model = urgency_learned.train(texts, labels, vectors, key)
    path = model.save(directory)
    urgency_learned.reset()
    return path, model.meta
