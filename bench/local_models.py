"""Local llama.cpp on this machine (issue #26): ``python -m bench.local_models [--rounds N]``.

For each PyPI-shipped model (Gemma 3 270M, SmolLM2-135M) and thread count (1, 2): llama.cpp's own server
(:mod:`core.llm.llamacpp`) with a 2,048-token context, one request shaped like a diagnosis call (the
diagnosis system prompt, a user turn, 128 output tokens), ``rounds`` times; the server's own timings
(prompt and generation tokens per second, llama.cpp ``timings``), median over the rounds, and the load
average at the time (the machine is shared). The figures are what ``docs/guards.md`` reads its per-model-size
settings from: a 1.5B-class model is ~6–11× these parameter counts, and its speed on the same cores scales
about inversely with them.
"""
from __future__ import annotations

import argparse
import os
import statistics

import httpx

from core.llm.llamacpp import GEMMA, SMOLLM, LlamaServer, ServerConfig
from core.prompts import load_prompt

USER = "ハイブリッド車で、信号待ちのときにエンジンが止まったり、勝手にかかったりします。故障でしょうか？"


def measure(model: str, threads: int, rounds: int) -> dict[str, float]:
    with LlamaServer(ServerConfig(model=model, n_ctx=2048, threads=threads)) as server:
        prompt_tps, gen_tps, prompt_n = [], [], []
        for i in range(rounds):
            body = {"model": server.model, "max_tokens": 128, "temperature": 0.0, "cache_prompt": False,
                    "messages": [{"role": "system", "content": load_prompt("diagnosis_system")},
                                 {"role": "user", "content": f"{USER}（{i}）"}]}
            timings = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=600).json()["timings"]
            prompt_tps.append(timings["prompt_per_second"])
            gen_tps.append(timings["predicted_per_second"])
            prompt_n.append(timings["prompt_n"])
    return {"prompt_tokens": statistics.median(prompt_n), "prompt_tok_s": round(statistics.median(prompt_tps), 1),
            "gen_tok_s": round(statistics.median(gen_tps), 1), "load1": round(os.getloadavg()[0], 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    for model in (GEMMA, SMOLLM):
        for threads in (1, 2):
            row = measure(model, threads, args.rounds)
            print(f"{model:14} threads={threads} prompt {row['prompt_tokens']:.0f} tok at {row['prompt_tok_s']} tok/s, "
                  f"generation {row['gen_tok_s']} tok/s (load average {row['load1']})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
