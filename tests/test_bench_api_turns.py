"""``bench.api_turns``'s in-process rounds: with ``--cached-vectors`` every round talks to the customers the warm-up
already embedded, so the rounds measure the flow and the store without e5 (issue #25)."""
from __future__ import annotations

from bench import api_turns


def test_cached_vector_rounds_compute_no_vector_and_plain_rounds_do(tmp_path):
    urls = {("new", "sqlite"): f"sqlite:///{tmp_path / 'cached.db'}"}
    cached = api_turns.measure_cpu({"new": api_turns.ROOT}, urls, 2, cached_vectors=True)["new_sqlite"]
    assert cached["query_vectors"] == 0 and cached["searches"] > 0 and cached["cpu_ms"] > 0
    urls = {("new", "sqlite"): f"sqlite:///{tmp_path / 'plain.db'}"}
    plain = api_turns.measure_cpu({"new": api_turns.ROOT}, urls, 1)["new_sqlite"]
    assert plain["query_vectors"] > 0 and plain["searches"] == cached["searches"]
