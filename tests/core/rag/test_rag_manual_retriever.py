"""ManualRetriever over the real manuals (session index) and over small synthetic ones."""
from __future__ import annotations

import json

import pytest
from rag_helpers import HashEmbedder, make_pdf, tiny_manual

from core.rag import RetrievedChunk, TextRetriever
from core.rag import manual_retriever as mr
from core.rag.manual_retriever import ManualRetriever

TREK = "kaiwa-trek-4wd-2020"
MIRAI = "kaiwa-mirai-hv-2022"


def test_index_holds_both_vehicles(manual_retriever):
    assert manual_retriever.vehicles() == [MIRAI, TREK]
    assert len(manual_retriever) >= 90


def test_bm25_finds_the_brake_section(manual_retriever):
    hits = manual_retriever.search("ブレーキペダルが床まで沈んで効きが悪い", TREK, mode="bm25")
    assert hits and hits[0].section_id == f"{TREK}:s051"
    assert hits[0].bm25_rank == 1 and hits[0].dense_rank is None


def test_fault_code_query_hits_the_engine_warning_light(manual_retriever):
    for vehicle, section in ((TREK, "s040"), (MIRAI, "s040")):
        hits = manual_retriever.search("P0420", vehicle, mode="bm25")
        assert hits[0].section_id == f"{vehicle}:{section}"


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "dense"])
def test_vehicle_filter_never_leaks(manual_retriever, query_set, mode):
    for q in query_set["queries"][::4] + query_set["unrelated"][::4]:
        for vehicle in (TREK, MIRAI):
            hits = manual_retriever.search(q["q"], vehicle, n_results=8, mode=mode)
            assert hits or (mode == "bm25" and "expected" not in q), q["q"]
            assert all(h.vehicle_id == vehicle and h.section_id.startswith(vehicle) for h in hits)


def test_hybrid_results_are_scored_0_to_1_and_sorted(hybrid_top5):
    for hits in hybrid_top5.values():
        assert 0 < len(hits) <= 5
        scores = [h.score for h in hits]
        assert all(0.0 <= s <= 1.0 for s in scores)
        assert scores == sorted(scores, reverse=True)
        assert all(isinstance(h, RetrievedChunk) and (h.bm25_rank or h.dense_rank) for h in hits)


def test_search_without_vehicle_and_edge_cases(manual_retriever):
    hits = manual_retriever.search("タイヤの空気圧の規定値", n_results=6)
    assert {h.vehicle_id for h in hits} <= {TREK, MIRAI} and len(hits) == 6
    assert manual_retriever.search("", TREK) == []
    assert manual_retriever.search("ブレーキ", "no-such-car") == []
    with pytest.raises(ValueError):
        manual_retriever.search("ブレーキ", TREK, mode="sparse")


def _recall(results: dict[str, list], queries: list[dict]) -> float:
    hits = sum(any(h.section_id in q["expected"] for h in results[q["q"]][:5]) for q in queries)
    return hits / len(queries)


def test_recall_at_5_does_not_regress(manual_retriever, query_set, hybrid_top5):
    # measured with bench/rag_recall.py: hybrid 0.98, dense 0.96, bm25 0.89 (103 queries)
    queries = query_set["queries"]
    assert len(queries) >= 60
    assert _recall(hybrid_top5, queries) >= 0.90
    bm25 = {q["q"]: manual_retriever.search(q["q"], q["vehicle_id"], 5, "bm25") for q in queries}
    assert _recall(bm25, queries) >= 0.80


def test_scores_separate_answers_from_unrelated_questions(query_set, hybrid_top5):
    # the thresholds other modules use: > 0.3 worth showing, >= 0.5 strong hit
    relevant_top = [hybrid_top5[q["q"]][0].score for q in query_set["queries"]
                    if hybrid_top5[q["q"]][0].section_id in q["expected"]]
    unrelated_top = [hybrid_top5[q["q"]][0].score for q in query_set["unrelated"]]
    assert sum(s >= 0.5 for s in relevant_top) / len(relevant_top) >= 0.8
    assert sum(s < 0.3 for s in unrelated_top) / len(unrelated_top) >= 0.75
    assert sum(s >= 0.5 for s in unrelated_top) / len(unrelated_top) <= 0.1


def test_index_manual_replaces_that_vehicles_chunks(ephemeral_client, hash_embedder):
    r = ManualRetriever(store=ephemeral_client, embedder=hash_embedder, collection="t_replace")
    assert r.index_manual(tiny_manual("car-a")) == 3
    assert r.index_manual(tiny_manual("car-b")) == 3
    changed = tiny_manual("car-a")
    changed["sections"] = changed["sections"][:1]
    changed["sections"][0]["text"] = "ワイパーゴムの交換方法を説明します。"
    assert r.index_manual(changed) == 1
    assert len(r) == 4 and r.vehicles() == ["car-a", "car-b"]
    assert r.search("ワイパーゴム", "car-a", mode="bm25")[0].section_id == "car-a:s001"
    assert r.search("P0301", "car-a", mode="bm25") == []  # the old section is gone
    assert r.search("P0301", "car-b", mode="bm25")[0].section_id == "car-b:s002"


def test_index_pdf_makes_a_generated_pdf_searchable(ephemeral_client, e5):
    r = ManualRetriever(store=ephemeral_client, embedder=e5, collection="t_pdf")
    r.index_manual(tiny_manual("car-a"))
    pdf = make_pdf([
        ["ドライブレコーダーの取り付け手順", "1. 電源ケーブルをシガーソケットに差し込みます。",
         "2. 本体をフロントガラス上部に貼り付けます。"],
        ["⚠警告", "運転中に本体を操作しないでください。", "録画データはmicroSDカードに保存されます。"],
    ])
    report = r.index_pdf("car-a", "dashcam.pdf", pdf)
    assert report.ok and report.error is None
    assert report.pages == 2 and report.chunks == 2
    hits = r.search("ドラレコの映像はどこに保存される？", "car-a", n_results=3)
    assert hits[0].chapter == "dashcam.pdf" and hits[0].page == 2
    assert hits[0].has_warning and hits[0].content_type == "warning"
    proc = r.search("ドライブレコーダー 取り付け", "car-a", mode="bm25")[0]
    assert proc.page == 1 and proc.content_type == "procedure"
    assert r.search("ドライブレコーダー", "car-b") == []
    # re-uploading the same file replaces its chunks; the manual stays
    assert r.index_pdf("car-a", "dashcam.pdf", pdf).chunks == 2
    assert len(r) == 3 + 2
    # a broken file is reported, not raised
    bad = r.index_pdf("car-a", "broken.pdf", b"%PDF-1.4 not really")
    assert not bad.ok and bad.error


def test_sync_manuals_uses_content_hashes(tmp_path, ephemeral_client):
    manuals = tmp_path / "manuals"
    manuals.mkdir()
    (manuals / "car-a.json").write_text(json.dumps(tiny_manual("car-a"), ensure_ascii=False), encoding="utf-8")
    (manuals / "car-b.json").write_text(json.dumps(tiny_manual("car-b"), ensure_ascii=False), encoding="utf-8")
    emb = HashEmbedder()
    r = ManualRetriever(store=ephemeral_client, embedder=emb, collection="t_sync")
    assert r.sync_manuals(manuals) == {"car-a": 3, "car-b": 3}
    assert r.sync_manuals(manuals) == {}  # unchanged: nothing re-embedded
    again = ManualRetriever(store=ephemeral_client, embedder=emb, collection="t_sync")
    assert len(again) == 6 and again.sync_manuals(manuals) == {}
    (manuals / "car-b.json").write_text(json.dumps(tiny_manual("car-b", extra="追記。"), ensure_ascii=False),
                                        encoding="utf-8")
    (manuals / "car-a.json").unlink()
    assert again.sync_manuals(manuals) == {"car-b": 3}
    assert again.vehicles() == ["car-b"]


def test_get_manual_retriever_builds_once_then_reuses_the_persistent_index(tmp_path, monkeypatch, chroma_backend):
    manuals = tmp_path / "manuals"
    manuals.mkdir()
    (manuals / "car-a.json").write_text(json.dumps(tiny_manual("car-a"), ensure_ascii=False), encoding="utf-8")
    emb = HashEmbedder()
    chroma_backend.use(monkeypatch)  # KAIWA_CHROMA_PATH, or CHROMA_HOST/CHROMA_PORT/CHROMA_DATABASE
    monkeypatch.setenv("KAIWA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(mr, "MANUALS_DIR", manuals)
    monkeypatch.setattr("core.rag.embeddings.get_default_embedder", lambda: emb)
    mr.reset_manual_retriever()
    try:
        first = mr.get_manual_retriever()
        assert mr.get_manual_retriever() is first
        assert first.vehicles() == ["car-a"] and emb.passage_calls == 1
        assert first.search("ブレーキが床まで沈む", "car-a")[0].section_id == "car-a:s001"
        first.flush()
        mr.reset_manual_retriever()  # as in a new process: the persisted collection is reused
        second = mr.get_manual_retriever()
        assert second is not first and len(second) == 3 and emb.passage_calls == 1
        assert second.last_reload == "snapshot"  # neither Chroma nor Sudachi re-read everything
        assert second.search("ブレーキが床まで沈む", "car-a")[0].section_id == "car-a:s001"
    finally:
        mr.reset_manual_retriever()


def test_text_retriever_on_a_small_corpus(e5):
    docs = [
        ("kb:1", "オイル交換の目安は1万km または1年です。", {"category": "メンテナンス"}),
        ("kb:2", "車検は満了日の1か月前から受けられます。", {"category": "車検"}),
        ("kb:3", "ロードサービスは24時間受け付けています。レッカーの手配もします。", {"category": "ロードサービス"}),
    ]
    r = TextRetriever(docs, embedder=e5)
    for mode in ("hybrid", "bm25", "dense"):
        hits = r.search("オイルっていつ替えればいい？", n_results=3, mode=mode)
        assert hits[0][0] == "kb:1" and hits[0][2] == {"category": "メンテナンス"}
        assert all(0.0 <= s <= 1.0 for _, s, _ in hits)
        assert [s for _, s, _ in hits] == sorted((s for _, s, _ in hits), reverse=True)
    assert r.search("", 3) == [] and TextRetriever([], embedder=e5).search("オイル") == []
    assert r.search("故障したからレッカーを呼びたい", 1)[0][0] == "kb:3"


def test_index_pdf_with_a_password(ephemeral_client, hash_embedder):
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf([["整備記録", "ブレーキ液を交換しました。"]]))))
    writer.encrypt("pw123", algorithm="AES-128")
    buf = io.BytesIO()
    writer.write(buf)
    r = ManualRetriever(store=ephemeral_client, embedder=hash_embedder, collection="t_pw")
    locked = r.index_pdf("car-a", "record.pdf", buf.getvalue())
    assert not locked.ok and "パスワード" in locked.error and len(r) == 0
    opened = r.index_pdf("car-a", "record.pdf", buf.getvalue(), password="pw123")
    assert opened.ok and r.search("ブレーキ液", "car-a", mode="bm25")[0].chapter == "record.pdf"
