"""Engine benchmark: the cost of each validation path, as ratios measured in one run.

Run: ``python -m bench.engine``. Prints per-turn microseconds and ratios for
strict parse+validate, lenient recovery of wrapped output, a fresh vs cached validator,
and a whole offline knowledge turn (message stack + strategy + validation + debug record).
"""
from __future__ import annotations

import json
import time

from jsonschema import Draft202012Validator

from core.knowledge.turn import call_llm, entry_schema, system_prompt, turn_schema
from core.llm.offline import OfflineClient
from core.parsing import parse_structured_output
from core.validation import parse_and_validate_turn

TURN = json.dumps({"control": {"schema_version": "1.0", "mode": "finalize"},
                   "state": {"phase": "draft_knowledge", "missing_info": []},
                   "assistant_message": "草案です。" * 20,
                   "knowledge_json": {"contract_type": "業務委託契約", "knowledge_title": "損害賠償の上限",
                                      "target_clause": "第8条(損害賠償)", "review_points": "上限なし" * 10,
                                      "action_plan": "上限を設ける" * 10, "clause_sample": "甲及び乙は" * 20}},
                  ensure_ascii=False)
WRAPPED = f"以下が出力です。\n```json\n{TURN}\n```\nよろしくお願いします。"


def per_call_us(fn, n: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    ts, es = turn_schema(), entry_schema()
    parsed = json.loads(TURN)
    strict = per_call_us(lambda: parse_and_validate_turn(TURN, ts, es), 2000)
    lenient = per_call_us(lambda: parse_and_validate_turn(json.dumps(parse_structured_output(WRAPPED), ensure_ascii=False), ts, es), 2000)
    fresh = per_call_us(lambda: Draft202012Validator(ts).is_valid(parsed), 2000)
    keyed = {json.dumps(ts, sort_keys=True): Draft202012Validator(ts)}
    cached = per_call_us(lambda: keyed[json.dumps(ts, sort_keys=True)].is_valid(parsed), 2000)
    client = OfflineClient()
    turn = per_call_us(lambda: call_llm("業務委託契約の第8条（損害賠償）で上限がない点が問題です。", [], system_prompt(), [], client, ts, es, log=[]), 200)
    print(f"strict parse+validate of one turn     {strict:9.1f} µs")
    print(f"lenient (fenced + prose) recovery     {lenient:9.1f} µs   ratio lenient/strict = {lenient / strict:.2f}")
    print(f"fresh Draft202012Validator per call   {fresh:9.1f} µs")
    print(f"validator cached by schema JSON key   {cached:9.1f} µs   ratio fresh/cached = {fresh / cached:.2f} (<1: caching does not pay)")
    print(f"whole offline knowledge turn          {turn:9.1f} µs   ratio turn/strict-validate = {turn / strict:.2f}")


if __name__ == "__main__":
    main()
