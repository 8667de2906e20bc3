"""Masking benchmark: masking time grows linearly with the input.

Run: ``python -m bench.mask`` (``--quick`` for fewer repetitions). Masks 100 KB and 1 MB of the same
kinds of text in one run and prints time(1 MB) / time(100 KB), which stays near 10 when masking is
linear (the old patterns were quadratic: ``'x' * 80000`` alone took 12 s), plus the seconds per MB
of each kind. Each figure is the best of a few repetitions, so other load on the machine inflates
it less. :func:`run` returns the figures for a combined ``python -m bench``.
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import time
from typing import Any, Callable

from core.text.pii import mask_text

SIZES = (100_000, 1_000_000)

_PROSE = ("お世話になっております。先日ご相談した車検の件で、電話は090-1234-5678、メールは taro.yamada@example.com です。"
          "住所は東京都千代田区丸の内1-2-3です。走行距離は 45000km、価格は 1,980,000円でした。"
          "エンジンをかけると異音がして、警告灯が点灯することがあります。点検の予約をお願いします。\n")


def _prose(n: int) -> str:
    return (_PROSE * (n // len(_PROSE) + 1))[:n]


def _model_output(n: int) -> str:
    """A non-JSON model reply / debug dump: JSON-ish lines with numbers, ids, keys and prose."""
    rng = random.Random(7)
    lines = []
    size = 0
    while size < n:
        line = json.dumps({"score": rng.random(), "id": rng.randrange(10 ** 12), "latency_ms": rng.randrange(5000),
                           "text": _PROSE[rng.randrange(60):][:50], "auth": "Bearer " + "ab12" * 6},
                          ensure_ascii=False)
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:n]


def _adversarial(n: int) -> str:
    """What made the old patterns quadratic: long runs of e-mail, number and address characters, and the
    shapes the newer rules look for."""
    parts = ["x" * 1000, "1-" * 500, "a@" * 500, "東京都千代田区" * 150, "0 " * 500, "ｓｋ－" * 300,
             # and what the rules added for issue #15 read: key markers without an end, (at)/(dot), kanji
             # numerals, digit runs with / and の, connection-string keys, Slack app tokens
             "-----BEGIN PRIVATE KEY-----" * 20, "a(at)b(dot)" * 50, "〇一" * 250, "1/2の" * 125,
             "AccountKey=" * 50, "xapp-1-" * 80]
    text = "".join(parts)
    return (text * (n // len(text) + 1))[:n]


KINDS: dict[str, Callable[[int], str]] = {"prose": _prose, "model_output": _model_output, "adversarial": _adversarial}


def _best_time(text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        mask_text(text)
        best = min(best, time.perf_counter() - start)
    return best


def run(quick: bool = False) -> dict[str, Any]:
    """Figures of one run: ``mask_time_ratio_1mb_vs_100kb`` (all kinds together), per-kind ratios and
    seconds per MB."""
    repeat = 2 if quick else 5
    mask_text("warm-up ０９０ー１２３４ー５６７８")  # builds the normalisation tables once
    result: dict[str, Any] = {}
    totals = dict.fromkeys(SIZES, 0.0)
    for name, make in KINDS.items():
        times = {size: _best_time(make(size), repeat) for size in SIZES}
        for size in SIZES:
            totals[size] += times[size]
        result[f"mask_time_ratio_{name}"] = round(times[SIZES[1]] / times[SIZES[0]], 2)
        result[f"mask_seconds_per_mb_{name}"] = round(times[SIZES[1]] / (SIZES[1] / 1_000_000), 3)
    result["mask_time_ratio_1mb_vs_100kb"] = round(totals[SIZES[1]] / totals[SIZES[0]], 2)
    result["mask_seconds_per_mb"] = round(totals[SIZES[1]] / len(KINDS), 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    figures = run(quick=args.quick)
    print(f"time(1 MB) / time(100 KB): {figures['mask_time_ratio_1mb_vs_100kb']:.2f}  (linear ≈ 10)")
    for name in KINDS:
        print(f"  {name:13} ratio {figures[f'mask_time_ratio_{name}']:6.2f}   "
              f"{figures[f'mask_seconds_per_mb_{name}']:.3f} s per MB")
    print(f"mean: {figures['mask_seconds_per_mb']:.3f} s per MB")


if __name__ == "__main__":
    main()
