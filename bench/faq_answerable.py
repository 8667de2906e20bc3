"""FAQ answerability benchmark: does the flow answer the questions an article answers, and only those?

Run from the repository root::

    python -m bench.faq_answerable        # -v lists the misses

Every question of ``bench/data/faq_paraphrases.yaml`` (questions about a fact an article states, in
other words than its title, and questions about facts no article states) goes through the whole
FAQ flow (``core.faq.flow.ask``) on the offline provider. Figures: the answerable rate (answerable
questions answered citing an expected article), the refusal rate (unanswerable questions not
answered), and the subject rate (sibling questions whose first citation is the subject's own article).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

if __package__ in (None, ""):  # python bench/faq_answerable.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import BENCH_DATA  # noqa: E402

PARAPHRASES = BENCH_DATA / "faq_paraphrases.yaml"


def load(path: Path = PARAPHRASES) -> list[dict]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))["queries"]


def measure(queries: list[dict]) -> dict:
    """{answerable, answered, unanswerable, refused, sibling, subject_first, misses}."""
    from core.faq.flow import ask, start_session
    from core.llm.offline import OfflineClient

    client = OfflineClient()
    out = {"answerable": 0, "answered": 0, "unanswerable": 0, "refused": 0, "sibling": 0, "subject_first": 0,
           "misses": []}
    for q in queries:
        result = ask(start_session("bench-answerable"), q["q"], client=client)
        if q["answerable"]:
            out["answerable"] += 1
            ok = result.outcome == "answered" and bool(set(result.citations) & set(q["expected"]))
            out["answered"] += ok
        else:
            out["unanswerable"] += 1
            ok = result.outcome != "answered"
            out["refused"] += ok
        if q.get("sibling"):
            out["sibling"] += 1
            first = result.citations[:1] == q["expected"][:1]
            out["subject_first"] += first
            ok = ok and first
        if not ok:
            out["misses"].append(f"    {q['q']}  expected {q['expected']} got {result.outcome} {result.citations}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    r = measure(load())
    print(f"answerable answered   {r['answered']}/{r['answerable']} = {r['answered'] / r['answerable']:.3f}")
    print(f"unanswerable refused  {r['refused']}/{r['unanswerable']} = {r['refused'] / r['unanswerable']:.3f}")
    print(f"sibling subject first {r['subject_first']}/{r['sibling']}")
    if args.verbose:
        print("\n".join(r["misses"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
