"""マニュアル管理 page through AppTest: the indexed-vehicles table, PDF upload (plain, encrypted,
image-only) and the rebuild buttons — over a throwaway index (temp Chroma, hashing embedder), never
the app's own var/chroma."""
import hashlib
from pathlib import Path

import numpy as np
import pytest

from core.paths import DATA_DIR
from core.rag import manual_retriever as mr
from tests.helpers.documents import make_pdf

TREK = "kaiwa-trek-4wd-2020"
SAMPLES = Path(__file__).resolve().parents[3] / "shared/testdata/pdf-samples"


class BigramEmbedder:
    """Deterministic, instant embedder: character bigrams hashed into 128 dims."""

    cosine_range = (0.0, 0.6)
    key = "test-bigram128"

    @staticmethod
    def _vec(text: str) -> np.ndarray:
        v = np.zeros(128, dtype=np.float32)
        for a, b in zip(text, text[1:]):
            v[int(hashlib.md5((a + b).encode()).hexdigest()[:4], 16) % 128] += 1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    def passages(self, texts):
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, 128), np.float32)

    def query_vector(self, text):
        return self._vec(text)


@pytest.fixture
def index(monkeypatch, tmp_path):
    import chromadb

    from core.rag.store import chroma_settings

    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=chroma_settings())
    retriever = mr.ManualRetriever(store=client, embedder=BigramEmbedder())
    retriever.sync_manuals(DATA_DIR / "manuals")
    monkeypatch.setattr(mr, "_instance", retriever)  # what get_manual_retriever() hands the page
    return retriever


@pytest.fixture
def admin(app, index):
    app.switch_page("pages/manual_admin.py").run()
    assert not app.exception
    return app


def table(at):
    return at.dataframe[0].value


def counts(retriever):
    out = {}
    for chunk in retriever.store.all_chunks():
        out[(chunk.vehicle_id, chunk.source)] = out.get((chunk.vehicle_id, chunk.source), 0) + 1
    return out


def upload(at, name, data, password=None, vehicle=TREK):
    at.selectbox(key="manual_vehicle").set_value(vehicle)
    at.file_uploader(key="manual_file").upload(name, data, "application/pdf")
    if password is not None:
        at.text_input(key="manual_password").input(password)
    at.run()
    at.button(key="manual_index").click().run()
    assert not at.exception, at.exception
    return at


def test_lists_each_vehicle_with_its_chunk_count(admin, index):
    assert admin.title[0].value == "📚 マニュアル管理"
    assert admin.selectbox(key="manual_vehicle").options == ["カイワ自動車 ミライバ ハイブリッド（2022年式 Z）",
                                                             "カイワ自動車 トレック 4WD（2020年式 G）"]
    assert admin.button(key="manual_index").disabled  # nothing uploaded yet
    rows = table(admin)
    expected = counts(index)
    assert list(rows["車両ID"]) == ["kaiwa-mirai-hv-2022", TREK]
    assert list(rows["登録元"]) == ["取扱説明書データ", "取扱説明書データ"]
    assert list(rows["チャンク数"]) == [expected[("kaiwa-mirai-hv-2022", "manual")], expected[(TREK, "manual")]]
    assert any(f"合計 {sum(expected.values())} チャンク" in c.value for c in admin.caption)


def test_upload_indexes_the_pdf_for_the_chosen_vehicle(admin, index):
    pdf = make_pdf([["Trailer hitch: maximum towing load 750 kg."], ["Roof rack: maximum load 50 kg."]])
    at = upload(admin, "towing-guide.pdf", pdf)
    assert [(s.value, s.icon) for s in at.success] == [
        ("towing-guide.pdf を カイワ自動車 トレック 4WD（2020年式 G） のマニュアルとして登録しました。", "✅")]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["ページ数"] == "2" and int(metrics["登録したチャンク"]) >= 1 and metrics["警告"] == "0"
    assert index.vehicles() == ["kaiwa-mirai-hv-2022", TREK]
    added = counts(index)[(TREK, "pdf:towing-guide.pdf")]
    assert int(metrics["登録したチャンク"]) == added
    rows = table(at)
    row = rows[rows["登録元"] == "PDF: towing-guide.pdf"]
    assert list(row["車両ID"]) == [TREK] and list(row["チャンク数"]) == [added]
    hits = index.search("towing load 750 kg", vehicle_id=TREK, mode="bm25")
    assert hits and "750 kg" in hits[0].text and hits[0].vehicle_id == TREK


def test_encrypted_pdf_needs_the_password(admin, index):
    locked = (SAMPLES / "libreoffice-writer-password.pdf").read_bytes()
    at = upload(admin, "locked.pdf", locked)
    assert any("パスワードで保護された PDF" in e.value for e in at.error)
    assert any("パスワードを入力して" in i.value for i in at.info)
    assert (TREK, "pdf:locked.pdf") not in counts(index)
    at.text_input(key="manual_password").input("openpassword")
    at.button(key="manual_index").click().run()
    assert not at.exception and not at.error
    assert any("locked.pdf" in s.value for s in at.success)
    assert counts(index)[(TREK, "pdf:locked.pdf")] >= 1


def test_image_only_pdf_reports_the_problem_in_japanese(admin, index):
    scan = (SAMPLES / "imagemagick-CCITTFaxDecode.pdf").read_bytes()
    at = upload(admin, "scan.pdf", scan, vehicle="kaiwa-mirai-hv-2022")
    assert any("scan.pdf" in e.value for e in at.error)
    assert any("画像" in w.value for w in at.warning)
    assert not any(source.startswith("pdf:") for _, source in counts(index))


def test_rebuild_buttons(admin, index):
    admin.button(key="manual_sync_changed").click().run()
    assert any("変更されたマニュアルはありませんでした" in i.value for i in admin.info)
    admin.button(key="manual_rebuild").click().run()
    assert not admin.exception
    expected = counts(index)
    message = admin.success[0].value
    assert message.startswith("再構築しました:")
    assert f"トレック 4WD（2020年式 G） {expected[(TREK, 'manual')]} チャンク" in message
    assert list(table(admin)["チャンク数"]) == [expected[("kaiwa-mirai-hv-2022", "manual")], expected[(TREK, "manual")]]
