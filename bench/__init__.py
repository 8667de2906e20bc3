"""Benchmarks run from the repository root (``python -m bench.<name>``)."""

from pathlib import Path

# Evaluation data, beside the benchmarks (and the tests) that read it: retrieval and FAQ queries, the
# held-out urgency utterances and the blind urgency probe sets. What the console runs on is in data/.
BENCH_DATA = Path(__file__).resolve().parent / "data"
