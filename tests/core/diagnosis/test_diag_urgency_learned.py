"""The learned urgency layer (core.diagnosis.urgency_learned): the shipped artefact is current, plain
arrays, computed as scikit-learn computes it, keeps critical recall 1.0 on the held-out split, and
sits above the rules, which stay a floor that only raises."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from bench import BENCH_DATA
from bench import urgency as bench_urgency
from core.diagnosis import urgency_learned
from core.diagnosis.urgency_learned import ARTEFACT_DIR, LEVELS, LearnedUrgency, fit, ngrams
from core.diagnosis.urgency_rules import KeywordUrgency, default_rules
from core.diagnosis.urgency_semantic import SemanticUrgency, SemanticUrgencyModel, fuse, load_utterances
from core.diagnosis.urgency_training import current_fingerprint, training_utterances

BLIND_SETS = ("urgency_probe12.yaml", "urgency_probe13.yaml")


@pytest.fixture(scope="module")
def shipped():
    return LearnedUrgency.load()


def test_shipped_model_was_trained_on_the_current_utterances(shipped):
    # fails after editing data/urgency_utterances.yaml: run `python -m core.shipped_vectors`
    assert shipped.meta["fingerprint"] == current_fingerprint(), "stale: run `python -m core.shipped_vectors`"
    assert shipped.meta["n_train"] == len(training_utterances())


def test_artefact_is_plain_arrays_and_json():
    with np.load(ARTEFACT_DIR / urgency_learned.MODEL_FILE, allow_pickle=False) as arrays:
        assert set(arrays.files) == {"coef", "intercept", "idf", "vocabulary"}
        assert arrays["coef"].shape == (len(LEVELS), arrays["idf"].size + 384)
    model = LearnedUrgency.load()
    assert sorted(model.classes) == sorted(LEVELS)


def test_numpy_inference_matches_scikit_learn():
    from sklearn.linear_model import LogisticRegression

    texts = ["ブレーキが効かない", "ぶれーき きかねえ", "エンジン警告灯がついた", "けいこくとう ついた", "燃費が悪い",
             "ねんぴ わるい", "室内灯が切れた", "るーむらんぷ きれた", "給油口はどっち", "きゅうゆこう どっち"]
    labels = ["critical", "critical", "high", "high", "medium", "medium", "low", "low", "none", "none"]
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(len(texts), 8)).astype(np.float32)
    model = fit(texts, labels, embeddings, {"C": 4.0})
    vectorizer, matrix = urgency_learned._ngram_matrix(texts)
    reference = LogisticRegression(C=4.0, class_weight="balanced", solver="newton-cg", max_iter=1000)
    reference.fit(urgency_learned._design(embeddings, matrix, model.params), labels)
    for i, text in enumerate(["ブレーキが効かない", "るーむらんぷが きれた", "未知の文章です"]):
        design = urgency_learned._design(embeddings[i:i + 1], vectorizer.transform([text]), model.params)
        expected = dict(zip(reference.classes_, reference.predict_proba(design)[0]))
        got = model.probabilities(text, embeddings[i])
        assert got == pytest.approx(expected, abs=1e-6)


def test_ngrams_read_kana_and_casual_writing_alike():
    standard, casual = set(ngrams("ブレーキが効かない")), set(ngrams("ぶれーきが ききません"))
    assert {"ブレー", "レーキ"} <= standard & casual
    assert not any("警告灯" in g for g in ngrams("警告灯は点いていないけど燃費が悪い"))  # the denial is set aside


def test_blind_sets_and_the_held_out_split_never_train():
    training = {u.text.strip() for u in training_utterances()}
    for path in [BENCH_DATA / "urgency_heldout.yaml"] + [BENCH_DATA / "urgency_probes" / n for n in BLIND_SETS]:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        texts = {str(u["text"]).strip() for u in (data["utterances"] if isinstance(data, dict) else data)}
        assert not training & texts, path.name


def test_critical_recall_stays_one_on_the_held_out_split():
    tune = [u for u in load_utterances() if u.split == "tune"]
    scored = bench_urgency.score(SemanticUrgencyModel(tune), load_utterances(BENCH_DATA / "urgency_heldout.yaml"))
    assert scored["critical_recall"] == 1.0, scored["misses"]


def test_rules_are_a_floor_the_learned_level_never_lowers():
    critical = KeywordUrgency(level="critical", reasons=["r"], rule_ids=["x"], visit_urgency="immediate", can_drive=False)
    calm = SemanticUrgency(level="none", share=0.99, confident=True, top_sim=0.9, intent="symptom")
    assert fuse(critical, calm).level == "critical"
    high = SemanticUrgency(level="high", share=0.9, confident=True, top_sim=0.8, intent="symptom",
                           neighbours=[("x", "high", 0.8)])
    assert fuse(KeywordUrgency(), high).level == "high"  # the learned layer raises what the rules miss


def test_the_learned_layer_carries_wording_the_rules_miss():
    """On its own training utterances the fused level reaches the label the rules alone miss — the
    mechanism by which new wording is added as data, not as patterns."""
    rules = default_rules()
    model = SemanticUrgencyModel([u for u in load_utterances() if u.split == "tune"])
    missed = [u for u in training_utterances() if u.split == "train"
              and LEVELS.index(rules.check(u.text).level) < LEVELS.index(u.level)][:40]
    assert len(missed) >= 20
    fused = [fuse(rules.check(u.text), model.classify(u.text)).level for u in missed]
    assert sum(f == u.level for f, u in zip(fused, missed)) >= 0.8 * len(missed)
    assert all(f != "none" for f, u in zip(fused, missed) if u.level == "critical")


def test_the_sparse_product_equals_the_dense_one(shipped, monkeypatch):
    """Issue #25: the classes' logits over the embedding and only the text's n-gram columns are the dense
    ``coef @ features`` (to rounding), and no vocabulary-sized vector is built per vote (counted)."""
    rng = np.random.default_rng(7)
    texts = ["2日前からブレーキを踏むとキーキー音がする", "ぶれーき きかねえ", "エンジン警告灯が点滅している", "", "ああ"]
    for text in texts:
        embedding = rng.random(shipped.embedding_size)
        logits = shipped.coef @ shipped.features(text, embedding) + shipped.intercept
        dense = np.exp(logits - logits.max())
        dense /= dense.sum()
        sparse = shipped.probabilities(text, embedding)
        assert list(sparse) == list(shipped.classes)
        assert np.allclose([sparse[c] for c in shipped.classes], dense, rtol=0, atol=1e-12)
    built = []
    monkeypatch.setattr(LearnedUrgency, "ngram_vector", lambda self, text: built.append(text))
    shipped.probabilities(texts[0], rng.random(shipped.embedding_size))
    assert built == []
