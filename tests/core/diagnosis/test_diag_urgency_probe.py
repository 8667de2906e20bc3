"""Shape of bench/data/urgency_probes/urgency_probe.yaml, the untuned urgency probe (utterances written without looking at
the rules, the utterance set or the classifier). Its accuracy is reported by ``python -m bench.urgency``
(``urgency_probe_*``), deliberately not asserted here: asserting it would invite tuning against it."""
from __future__ import annotations

from collections import Counter

import pytest
import yaml

from bench import BENCH_DATA
from core.paths import DATA_DIR

PROBE = BENCH_DATA / "urgency_probes" / "urgency_probe.yaml"
UTTERANCES = (DATA_DIR / "urgency_utterances.yaml", BENCH_DATA / "urgency_heldout.yaml")
# after the relabel to the spec (lamps lit and abnormal noises are high): 18 items medium → high
LEVEL_COUNTS = {"critical": 20, "high": 43, "medium": 7, "low": 20, "none": 30}
STYLES = {"plain", "polite", "colloquial", "typo", "kana", "child", "elderly"}


@pytest.fixture(scope="module")
def probe():
    return yaml.safe_load(PROBE.read_text(encoding="utf-8"))["utterances"]


def test_probe_has_enough_well_formed_items(probe):
    assert len(probe) >= 120
    for item in probe:
        assert set(item) == {"text", "level", "style"}, item
        assert isinstance(item["text"], str) and item["text"].strip(), item
        assert item["style"] in STYLES, item


def test_probe_level_spread(probe):
    counts = Counter(item["level"] for item in probe)
    assert set(counts) == set(LEVEL_COUNTS), counts
    for level, wanted in LEVEL_COUNTS.items():
        assert abs(counts[level] - wanted) <= 5, (level, counts[level])


def test_probe_texts_are_unique(probe):
    texts = [item["text"].strip() for item in probe]
    assert len(texts) == len(set(texts)), [t for t, n in Counter(texts).items() if n > 1]


def test_probe_texts_are_not_exemplars_nor_held_out(probe):
    # since issue #16 the development probes are training data of the learned layer (split: train);
    # they never become kNN exemplars (split: tune) nor enter the held-out split
    tuned = {str(u["text"]).strip() for path in UTTERANCES
             for u in yaml.safe_load(path.read_text(encoding="utf-8"))["utterances"] if u.get("split") != "train"}
    assert not tuned & {item["text"].strip() for item in probe}
