"""Admin-only manual management (permission in core, vehicle binding, attribution, replace,
delete, rebuild) and retrievers surviving another process resetting the index."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest
from rag_helpers import HashEmbedder, ingest_setup, make_pdf, tiny_manual

from core.identity import Identity
from core.rag import manual_admin as ma
from core.rag.manual_retriever import ManualRetriever
from core.rag.store import INDEX_UNAVAILABLE_MESSAGE, IndexUnavailable

CATALOG = ("car-a", "car-b")
ADMIN = Identity(name="管理 太郎", email="admin@example.com", source="oidc", roles=frozenset({"operator", "admin"}))
OPERATOR = Identity(name="山田", source="local")
T0 = datetime(2025, 4, 1, 9, 30, tzinfo=timezone(timedelta(hours=9)))
TOWING = make_pdf([["牽引について", "トレーラーの最大牽引質量は750kgです。"]])
ROOF = make_pdf([["ルーフキャリア", "ルーフキャリアの最大積載量は50kgです。"]])


@pytest.fixture
def retriever(ephemeral_client, hash_embedder):
    r = ManualRetriever(store=ephemeral_client, embedder=hash_embedder, collection="t_admin")
    r.index_manual(tiny_manual("car-a"))
    return r


def add(r, name="towing.pdf", data=TOWING, vehicle="car-a", who=ADMIN, **kw):
    return ma.add_manual(r, who, vehicle, name, data, catalog=CATALOG, clock=lambda: T0, **kw)


def sources(r):
    return {(m.vehicle_id, m.source): m for m in ma.list_manuals(r)}


def test_operator_cannot_change_the_index(retriever):
    before = retriever.store.metadatas()
    with pytest.raises(PermissionError, match="管理者"):
        add(retriever, who=OPERATOR)
    with pytest.raises(PermissionError):
        add(retriever, who=Identity(name="x", source="proxy"))  # verified, but not admin
    add(retriever)
    with pytest.raises(PermissionError):
        ma.delete_manual(retriever, OPERATOR, "car-a", "pdf:towing.pdf")
    with pytest.raises(PermissionError):
        ma.rebuild_index(retriever, OPERATOR, force=True)
    with pytest.raises(PermissionError):
        ma.add_manual(retriever, None, "car-a", "x.pdf", TOWING, catalog=CATALOG)
    assert len(retriever.store.metadatas()) == len(before) + 1  # only the admin's upload
    assert ("car-a", "pdf:towing.pdf") in sources(retriever)


@pytest.mark.parametrize("vehicle", [None, "", "no-such-car"])
def test_upload_must_be_bound_to_a_catalogue_vehicle(retriever, vehicle):
    report = add(retriever, vehicle=vehicle)
    assert not report.ok and report.error == ma.NO_VEHICLE
    assert set(sources(retriever)) == {("car-a", "manual")}


def test_upload_is_attributed_on_every_chunk_and_listed(retriever, ephemeral_client, hash_embedder):
    report = add(retriever)
    assert report.ok and report.chunks == 1
    info = sources(retriever)[("car-a", "pdf:towing.pdf")]
    assert info.kind == "upload" and info.name == "towing.pdf" and info.chunks == 1
    assert info.uploaded_by == "admin@example.com" and info.uploaded_by_label == "管理 太郎"
    assert info.uploaded_at == "2025-04-01T00:30:00+00:00"  # stored in UTC
    assert info.sha256 == hashlib.sha256(TOWING).hexdigest() == report.attribution["sha256"]
    data = sources(retriever)[("car-a", "manual")]
    assert data.kind == "manual" and data.uploaded_by is None and data.chunks == 3
    # the attribution is in the shared store: a new retriever (another replica) sees it
    other = ManualRetriever(store=ephemeral_client, embedder=hash_embedder, collection="t_admin")
    chunk = next(c for c in other._chunks if c.source == "pdf:towing.pdf")
    assert chunk.attribution["uploaded_by"] == "admin@example.com"
    assert other.search("最大牽引質量", "car-a", mode="bm25")[0].chapter == "towing.pdf"


def test_local_uploader_is_marked_unverified(retriever):
    unlocked = Identity(name="山田", source="local", roles=frozenset({"operator", "admin"}))
    add(retriever, who=unlocked)
    info = sources(retriever)[("car-a", "pdf:towing.pdf")]
    assert info.uploaded_by == "local:山田" and info.uploaded_by_label == "山田（未確認）"


def test_replace_and_reupload(retriever):
    add(retriever)
    report = add(retriever, name="roof.pdf", data=ROOF, replaces="pdf:towing.pdf")
    assert report.ok
    assert set(sources(retriever)) == {("car-a", "manual"), ("car-a", "pdf:roof.pdf")}
    assert retriever.search("最大牽引質量", "car-a", mode="bm25") == [] or \
        all(h.chapter != "towing.pdf" for h in retriever.search("最大牽引質量", "car-a", mode="bm25"))
    # same name again: replaced in place, attribution updated
    add(retriever, name="roof.pdf", data=TOWING)
    info = sources(retriever)[("car-a", "pdf:roof.pdf")]
    assert info.sha256 == hashlib.sha256(TOWING).hexdigest() and info.chunks == 1
    # a failed upload does not delete what it was to replace
    bad = add(retriever, name="broken.pdf", data=b"%PDF-1.4 not really", replaces="pdf:roof.pdf")
    assert not bad.ok and ("car-a", "pdf:roof.pdf") in sources(retriever)


def test_delete_removes_the_chunks(retriever):
    add(retriever)
    add(retriever, name="roof.pdf", data=ROOF, vehicle="car-b")
    assert ma.delete_manual(retriever, ADMIN, "car-a", "pdf:towing.pdf") == 1
    assert set(sources(retriever)) == {("car-a", "manual"), ("car-b", "pdf:roof.pdf")}
    assert all(h.chapter != "towing.pdf" for h in retriever.search("最大牽引質量 750kg", mode="bm25"))
    assert ma.delete_manual(retriever, ADMIN, "car-a", "pdf:towing.pdf") == 0
    with pytest.raises(ValueError):
        ma.delete_manual(retriever, ADMIN, "car-a", "manual")


def test_rebuild_needs_admin_and_keeps_uploads(tmp_path, retriever):
    manuals = tmp_path / "manuals"
    manuals.mkdir()
    (manuals / "car-a.json").write_text(json.dumps(tiny_manual("car-a"), ensure_ascii=False), encoding="utf-8")
    add(retriever)
    assert ma.rebuild_index(retriever, ADMIN, force=True, manuals_dir=manuals) == {"car-a": 3}
    assert ("car-a", "pdf:towing.pdf") in sources(retriever)


def test_file_names_and_sizes_are_bounded(retriever, monkeypatch):
    assert ma.clean_file_name("../../etc/pass\x00wd.pdf") == "passwd.pdf"
    assert ma.clean_file_name("C:\\Users\\x\\取扱説明書.pdf") == "取扱説明書.pdf"
    long = ma.clean_file_name("a" * 5000 + ".pdf")
    assert len(long) == ma.MAX_NAME_CHARS and long.endswith(".pdf")
    assert add(retriever, name="\x00\x01").error == ma.BAD_NAME
    monkeypatch.setattr(ma, "MAX_UPLOAD_BYTES", 100)
    assert add(retriever).error == ma.TOO_LARGE


# --- another process resetting the index (on both Chroma backends: PersistentClient and chroma run) ---

def test_retriever_follows_a_rebuild_by_another_retriever(chroma_backend):
    emb = HashEmbedder()
    running = ManualRetriever(store=chroma_backend.client(), embedder=emb, collection="t_reset")
    running.index_manual(tiny_manual("car-a"))
    assert running.search("ブレーキが床まで沈む", "car-a")[0].section_id == "car-a:s001"
    other = ManualRetriever(store=chroma_backend.client(), embedder=emb, collection="t_reset")
    other.store.client.delete_collection(other.store.name)  # what `ingest --reset` does
    # gone, rebuild in progress: a clear notice, for searches and for the listing
    for mode in ("hybrid", "dense", "bm25"):
        with pytest.raises(IndexUnavailable) as caught:
            running.search("ブレーキ", "car-a", mode=mode)
        assert str(caught.value) == INDEX_UNAVAILABLE_MESSAGE
    with pytest.raises(IndexUnavailable):
        ma.list_manuals(running)
    rebuilt = ManualRetriever(store=chroma_backend.client(), embedder=emb, collection="t_reset")
    rebuilt.index_manual(tiny_manual("car-b"))
    # the running retriever re-opens the new collection and answers from it
    for mode in ("hybrid", "dense", "bm25"):
        hits = running.search("ブレーキが床まで沈む", mode=mode)
        assert hits and {h.vehicle_id for h in hits} == {"car-b"}, mode
    assert running.vehicles() == ["car-b"]
    assert set(sources(running)) == {("car-b", "manual")}


def test_retriever_sees_uploads_made_by_another_replica(chroma_backend):
    emb = HashEmbedder()
    replica1 = ManualRetriever(store=chroma_backend.client(), embedder=emb, collection="t_replica")
    replica1.index_manual(tiny_manual("car-a"))
    replica2 = ManualRetriever(store=chroma_backend.client(), embedder=emb, collection="t_replica")
    add(replica2)
    hits = replica1.search("最大牽引質量", "car-a", mode="bm25")
    assert hits and hits[0].chapter == "towing.pdf"
    ma.delete_manual(replica2, ADMIN, "car-a", "pdf:towing.pdf")
    assert all(h.chapter != "towing.pdf" for h in replica1.search("最大牽引質量", "car-a", mode="bm25"))


RESET_SCRIPT = """
import sys, numpy as np
client.delete_collection(sys.argv[1])
c = client.get_or_create_collection(sys.argv[1], embedding_function=None, configuration={"hnsw": {"space": "cosine"}})
v = np.zeros(256, dtype=np.float32); v[0] = 1.0
c.upsert(ids=["car-z:s001#0"], documents=["別プロセスで作り直した索引のブレーキの記載"], embeddings=[v],
         metadatas=[{"vehicle_id": "car-z", "section_id": "car-z:s001", "section": "ブレーキ", "chapter": "x",
                     "page": 1, "content_type": "general", "has_warning": False, "keywords": "", "source": "manual",
                     "part": 0}])
"""


def test_retriever_survives_a_reset_in_another_process(chroma_backend):
    emb = HashEmbedder()
    running = ManualRetriever(store=chroma_backend.client(), embedder=emb, collection="t_proc")
    running.index_manual(tiny_manual("car-a"))
    subprocess.run([sys.executable, "-c", chroma_backend.client_source() + RESET_SCRIPT, running.store.name],
                   check=True, timeout=120)
    hits = running.search("ブレーキ", mode="hybrid")
    assert [h.vehicle_id for h in hits] == ["car-z"]
    assert "別プロセス" in hits[0].text


def test_ingest_cli_attributes_pdfs_and_binds_them_to_a_known_vehicle(tmp_path, monkeypatch, capsys, chroma_backend):
    from core.rag import ingest

    emb = ingest_setup(tmp_path, monkeypatch, chroma_backend)
    pdf = tmp_path / "extra.pdf"
    pdf.write_bytes(TOWING)
    assert ingest.main(["--pdf", str(pdf), "--vehicle", "no-such-car"]) == 1
    assert ma.NO_VEHICLE in capsys.readouterr().err
    assert ingest.main(["--pdf", str(pdf), "--vehicle", "car-a", "--user", "整備 次郎"]) == 0
    info = sources(ManualRetriever(embedder=emb))[("car-a", "pdf:extra.pdf")]
    assert info.uploaded_by == "local:整備 次郎" and info.sha256 == hashlib.sha256(TOWING).hexdigest()


def test_a_turns_searches_check_the_collection_once_and_the_next_turn_sees_a_replicas_upload(chroma_backend):
    """Issue #25: inside one user turn (``core.engine.turn_deadline``) the searches and query expansions look
    the collection up in Chroma once, not once each; outside a turn every read looks; the next turn sees
    what another replica wrote meanwhile. Counted, never timed."""
    from core.engine import turn_deadline

    emb = HashEmbedder()
    replica1 = ManualRetriever(store=chroma_backend.client(), embedder=emb, collection="t_fresh")
    replica1.index_manual(tiny_manual("car-a"))
    replica2 = ManualRetriever(store=chroma_backend.client(), embedder=emb, collection="t_fresh")
    before = replica1.freshness_checks
    with turn_deadline(60):
        for query in ("最大牽引質量", "ブレーキ", "タイヤ"):
            replica1.expand_query(query)
            replica1.search(query, "car-a", mode="bm25")
    assert replica1.freshness_checks - before == 1
    replica1.search("最大牽引質量", "car-a", mode="bm25")
    replica1.search("最大牽引質量", "car-a", mode="bm25")
    assert replica1.freshness_checks - before == 3  # outside a turn: every read
    add(replica2)
    with turn_deadline(60):
        hits = replica1.search("最大牽引質量", "car-a", mode="bm25")
    assert hits and hits[0].chapter == "towing.pdf"


def test_query_expansion_reads_the_manual_texts_once_per_state_of_the_index(retriever, monkeypatch):
    """``expand_query`` walked every chunk of the index on every call; now only when the index changed."""
    walked = []
    real = retriever._readings.sync_texts
    monkeypatch.setattr(retriever._readings, "sync_texts", lambda items: walked.append(1) or real(items))
    retriever.expand_query("ぶれーき")
    retriever.expand_query("たいや")
    assert len(walked) == 1
    add(retriever)  # a new state of the index: its texts are read again (only the new ones are new)
    retriever.expand_query("けんいん")
    retriever.expand_query("ぶれーき")
    assert len(walked) == 2


def test_a_local_index_nobody_wrote_to_is_not_looked_up_again_and_a_replicas_write_is(tmp_path, monkeypatch):
    """Issue #25: with a ``PersistentClient`` a turn's freshness check looks the collection up in Chroma (a
    lookup that holds the GIL) only when the database file changed since the last look; a write by another
    replica changes it, and the next turn sees the upload. Counted, never timed."""
    import chromadb

    from core.engine import turn_deadline
    from core.rag import store as store_module
    from core.rag.store import chroma_settings

    monkeypatch.setattr(store_module, "SETTLED_NS", 0)  # the file's last change counts as settled at once
    path = str(tmp_path / "chroma")
    emb = HashEmbedder()
    replica1 = ManualRetriever(store=chromadb.PersistentClient(path=path, settings=chroma_settings()), embedder=emb,
                               collection="t_quiet")
    replica1.index_manual(tiny_manual("car-a"))
    replica2 = ManualRetriever(store=chromadb.PersistentClient(path=path, settings=chroma_settings()), embedder=emb,
                               collection="t_quiet")
    with turn_deadline(60):
        replica1.search("ブレーキ", "car-a", mode="bm25")  # the first look after its own write
    looked = replica1.store.lookups
    for _ in range(5):
        with turn_deadline(60):
            replica1.search("タイヤ", "car-a", mode="bm25")
    assert replica1.store.lookups == looked and replica1.freshness_checks >= 6
    add(replica2)
    with turn_deadline(60):
        hits = replica1.search("最大牽引質量", "car-a", mode="bm25")
    assert replica1.store.lookups == looked + 1 and hits and hits[0].chapter == "towing.pdf"
