"""Benchmarks run from the repository root (``python -m bench.<name>``)."""
