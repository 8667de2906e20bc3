"""The index at scale: numpy BM25 equals bm25s, fusion over top candidates equals the full ranking,
writes update the in-memory copy incrementally (one rebuild per sync, no re-tokenising, no full
re-read), reopen uses the local snapshot only while the collection is unchanged."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from rag_helpers import HashEmbedder, tiny_manual

from core.rag.bm25 import BM25Index
from core.rag.hybrid import fuse, top_k
from core.rag.manual_retriever import ManualRetriever


class CountingTokenizer:
    name = "counting-split"

    def __init__(self):
        self.texts: list[str] = []

    def __call__(self, text):
        self.texts.append(text)
        return [w for w in text.replace("。", " ").replace("\n", " ").split() if w]


def _corpus(n=300, seed=3):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(60)] + ["ブレーキ", "警告灯", "p0301", "230kpa"]
    return [[rng.choice(words) for _ in range(rng.randint(1, 30))] for _ in range(n)]


def test_numpy_bm25_scores_equal_bm25s_lucene():
    import bm25s

    docs = _corpus()
    ours = BM25Index(lambda t: t.split())
    ours.build([" ".join(d) for d in docs])
    ref = bm25s.BM25(method="lucene", k1=1.2, b=0.75)  # the parameters the index uses
    ref.index(docs, show_progress=False)
    for query in (["ブレーキ", "警告灯"], ["w1", "w1", "w7"], ["p0301", "unknown"], ["230kpa"]):
        expected = ref.get_scores(query)
        assert np.allclose(ours.scores(query), expected, rtol=1e-5, atol=1e-6)


def test_coverage_for_candidates_equals_the_full_computation():
    docs = _corpus()
    index = BM25Index(lambda t: t.split())
    index.build([" ".join(d) for d in docs])
    query = ["ブレーキ", "w3", "w3", "never-seen"]
    full = index.coverage(query)
    doc_terms = [set(d) for d in docs]
    weights = {t: index.idf(t) for t in set(query)}
    reference = [sum(w for t, w in weights.items() if t in terms) / sum(weights.values()) for terms in doc_terms]
    assert np.allclose(full, reference, atol=1e-6)
    cands = np.array([250, 3, 77, 3 + 1, 299, 0])
    assert np.array_equal(index.coverage(query, cands), full[cands])


def _reference_fuse(bm25, coverage, cosines, cosine_range, k=60, depth=50, n=5):
    """The original dict-based fusion over every document."""
    def ranks(values, valid):
        idx = np.flatnonzero(valid)
        order = idx[np.argsort(-values[idx], kind="stable")][:depth]
        return {int(i): r + 1 for r, i in enumerate(order)}
    rb, rd = ranks(bm25, bm25 > 0), ranks(cosines, ~np.isnan(cosines))
    lo, hi = cosine_range
    dense = np.clip((np.nan_to_num(cosines, nan=lo) - lo) / (hi - lo), 0, 1)
    evidence = (coverage + dense) / 2.0
    out = []
    for i in set(rb) | set(rd):
        rrf = (1 / (k + rb[i]) if i in rb else 0.0) + (1 / (k + rd[i]) if i in rd else 0.0)
        out.append((float(np.clip(rrf / (2 / (k + 1)) * float(evidence[i]), 0, 1)), rb.get(i), rd.get(i), i))
    out.sort(key=lambda f: (-f[0], f[1] or 10**9, f[2] or 10**9, f[3]))
    return out[:n]


@pytest.mark.parametrize("seed", range(5))
def test_vectorised_fusion_equals_the_reference(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    bm25 = np.where(rng.random(n) < 0.3, rng.random(n).round(2) * 10, 0.0).astype(np.float32)  # ties
    coverage = rng.random(n).astype(np.float32)
    cosines = rng.random(n).round(3).astype(np.float32)
    cosines[rng.random(n) < 0.5] = np.nan
    got = fuse(bm25_scores=bm25, coverage=lambda idx: coverage[idx], cosines=cosines, cosine_range=(0.2, 0.9),
               n_results=20)
    want = _reference_fuse(bm25, coverage, cosines, (0.2, 0.9), n=20)
    assert [(f.score, f.bm25_rank, f.dense_rank, f.index) for f in got] == want


def test_top_k_keeps_ties_in_index_order():
    values = np.array([1.0, 3.0, 3.0, 2.0, 3.0, 0.5])
    assert top_k(values, values > 0.6, 2).tolist() == [1, 2]
    assert top_k(values, values > 0.6, 4).tolist() == [1, 2, 4, 3]
    assert top_k(values, values > 9, 4).tolist() == []


def _manuals(tmp_path, names):
    folder = tmp_path / "manuals"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / f"{name}.json").write_text(json.dumps(tiny_manual(name), ensure_ascii=False), encoding="utf-8")
    return folder


def test_sync_is_one_store_write_and_one_rebuild(tmp_path, ephemeral_client, monkeypatch):
    r = ManualRetriever(store=ephemeral_client, embedder=HashEmbedder(), collection="t_one",
                        cache_dir=tmp_path / "cache")
    builds, writes = [], []
    real_build, real_replace = r._build, r.store.replace
    monkeypatch.setattr(r, "_build", lambda *a, **k: builds.append(1) or real_build(*a, **k))
    monkeypatch.setattr(r.store, "replace", lambda *a, **k: writes.append(1) or real_replace(*a, **k))
    assert r.sync_manuals(_manuals(tmp_path, ["car-a", "car-b", "car-c"])) == {"car-a": 3, "car-b": 3, "car-c": 3}
    assert len(builds) == 1 and len(writes) == 1 and r.reloads == 1  # no full re-read either
    assert r.search("P0301", "car-c", mode="bm25")[0].section_id == "car-c:s002"


def test_adding_a_manual_tokenises_and_embeds_only_its_chunks(tmp_path, ephemeral_client):
    tok, emb = CountingTokenizer(), HashEmbedder()
    r = ManualRetriever(store=ephemeral_client, embedder=emb, tokenizer=tok, collection="t_incr",
                        cache_dir=tmp_path / "cache")
    r.sync_manuals(_manuals(tmp_path, ["car-a", "car-b"]))
    tok.texts.clear()
    emb.texts.clear()
    r.index_manual(tiny_manual("car-new", extra="新しい車の説明。"))
    # only the one section whose text is new is tokenised and embedded (the others equal car-a's)
    assert len(tok.texts) == 1 and "新しい車の説明" in tok.texts[0]
    assert len(emb.texts) == 1 and "新しい車の説明" in emb.texts[0] and r.reloads == 1
    assert r.vehicles() == ["car-a", "car-b", "car-new"]
    hits = r.search("ブレーキ液の漏れ", "car-new")
    assert hits and all(h.vehicle_id == "car-new" for h in hits)
    r.remove_vehicle("car-new")
    assert r.vehicles() == ["car-a", "car-b"] and len(tok.texts) == 2  # + the query, nothing re-tokenised


def test_reopen_uses_the_snapshot_only_while_the_collection_is_unchanged(tmp_path, ephemeral_client):
    cache_dir = tmp_path / "cache"
    emb = HashEmbedder()
    first = ManualRetriever(store=ephemeral_client, embedder=emb, collection="t_snap", cache_dir=cache_dir)
    first.sync_manuals(_manuals(tmp_path, ["car-a", "car-b"]))
    first.flush()
    tok = CountingTokenizer()
    second = ManualRetriever(store=ephemeral_client, embedder=emb, tokenizer=tok, collection="t_snap",
                             cache_dir=cache_dir)
    assert second.last_reload == "snapshot" and len(second) == 6 and tok.texts == []
    assert [h.chunk_id for h in second.search("ブレーキ", "car-a")] == [h.chunk_id for h in first.search("ブレーキ", "car-a")]
    # another process writes: the snapshot no longer matches the collection, Chroma is read
    first.index_manual(tiny_manual("car-c"))
    first.flush()
    (cache_dir / f"index-{first.store.name}.npz").write_bytes(b"broken")
    third = ManualRetriever(store=ephemeral_client, embedder=emb, collection="t_snap", cache_dir=cache_dir)
    assert third.last_reload == "store" and len(third) == 9
    second.search("ブレーキ", "car-c")  # notices the write and reloads
    assert "car-c" in second.vehicles()


def test_a_querys_tokens_are_worked_out_once_and_each_caller_gets_its_own_list():
    """Issue #25: a turn searches with the same symptom several times; the index tokenises each query once
    (bounded memo), a query over the bound every time. Counted."""
    calls = []
    index = BM25Index(lambda t: calls.append(t) or t.split())
    index.build(["a b c", "b c d"])
    calls.clear()
    first = index.query_tokens("b d")
    first.append("changed by a caller")
    assert index.query_tokens("b d") == ["b", "d"] and calls == ["b d"]
    long_query = "b " * 1500
    index.query_tokens(long_query)
    index.query_tokens(long_query)
    assert calls == ["b d", long_query, long_query]
