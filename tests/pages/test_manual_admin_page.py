"""マニュアル管理 page through AppTest: the indexed-vehicles table, who may change the index (no
admin configured → Japanese explanation, read-only; admin password → session unlock; a non-admin
never sees or reaches the upload), PDF upload bound to a vehicle and attributed (plain, encrypted,
image-only), replace, delete and the rebuild buttons — over a throwaway index (temp Chroma, hashing
embedder), never the app's own var/chroma. Upload, replace/delete and a reset elsewhere also run against
a real ``chroma run`` server."""
import hashlib
from pathlib import Path

import numpy as np
import pytest

from core.paths import DATA_DIR
from core.rag import manual_retriever as mr
from tests.helpers.chroma_server import CHROMA_BACKENDS, make_backend
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
def index(request, monkeypatch, tmp_path):
    """The page's index: a temp ``PersistentClient``, or (``indirect`` parameter ``server``) a database of
    the session's ``chroma run``."""
    backend = make_backend(request, getattr(request, "param", "persistent"), tmp_path / "chroma")
    retriever = mr.ManualRetriever(store=backend.client(), embedder=BigramEmbedder())
    retriever.sync_manuals(DATA_DIR / "manuals")
    monkeypatch.setattr(mr, "_instance", retriever)  # what get_manual_retriever() hands the page
    return retriever


@pytest.fixture
def viewer(app, index):
    """The page as an operator, with no admin configured (the README's quick start)."""
    app.switch_page("pages/manual_admin.py").run()
    assert not app.exception
    return app


@pytest.fixture
def admin(monkeypatch, app, index):
    """The page after unlocking admin with the password from the environment."""
    monkeypatch.setenv("KAIWA_ADMIN_PASSWORD", "kanri-pw")
    app.switch_page("pages/manual_admin.py").run()
    app.text_input(key="admin_password_input").input("kanri-pw")
    app.button[[b.label for b in app.button].index("管理者モードにする")].click().run()
    assert not app.exception and app.session_state["admin_unlocked"] is True
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


def test_without_admin_config_the_page_explains_and_is_read_only(viewer, index):
    assert viewer.title[0].value == "📚 マニュアル管理"
    help_text = viewer.info[0].value
    assert "管理者だけ" in help_text and "KAIWA_ADMINS" in help_text and "admin_password" in help_text
    assert ".streamlit/secrets.toml" in help_text and "これまでどおり使えます" in help_text
    keys = {w.key for w in viewer.button} | {w.key for w in viewer.selectbox} | {w.key for w in viewer.text_input}
    assert not keys & {"manual_index", "manual_vehicle", "manual_delete", "manual_rebuild", "manual_sync_changed",
                       "admin_password_input"}
    assert len(viewer.get("file_uploader")) == 0
    assert list(table(viewer)["車両ID"]) == ["kaiwa-mirai-hv-2022", TREK]  # the list stays visible


def test_wrong_password_does_not_unlock(monkeypatch, viewer):
    monkeypatch.setenv("KAIWA_ADMIN_PASSWORD", "kanri-pw")
    viewer.run()
    assert not viewer.info or "管理者だけ" not in viewer.info[0].value  # configured: no setup help
    viewer.text_input(key="admin_password_input").input("guess")
    viewer.button[[b.label for b in viewer.button].index("管理者モードにする")].click().run()
    assert any("パスワードが違います" in e.value for e in viewer.error)
    assert not viewer.session_state["admin_unlocked"]
    assert not [b for b in viewer.button if b.key == "manual_index"]


def test_verified_non_admin_cannot_upload_even_through_core(monkeypatch, viewer, index):
    import ui.identity

    monkeypatch.setenv("KAIWA_TRUST_PROXY_HEADERS", "1")
    monkeypatch.setenv("KAIWA_ADMINS", "boss@example.com")
    monkeypatch.setattr(ui.identity, "_headers", lambda settings: {"X-Forwarded-User": "tanaka"})
    viewer.run()
    assert any("管理者だけ" in w.value and "tanaka" in w.value for w in viewer.warning)
    assert not [b for b in viewer.button if b.key == "manual_index"]
    from core.rag import manual_admin

    with pytest.raises(PermissionError):
        manual_admin.add_manual(index, _identity("tanaka"), TREK, "x.pdf", make_pdf([["x"]]))
    # the proxy admin gets the upload form
    monkeypatch.setattr(ui.identity, "_headers", lambda settings: {"X-Forwarded-Email": "Boss@Example.com"})
    viewer.run()
    assert [b for b in viewer.button if b.key == "manual_index"] and not viewer.exception


def _identity(name):
    from core.identity import Identity

    return Identity(name=name, source="proxy")


def test_lists_each_vehicle_with_its_chunk_count(admin, index):
    assert admin.title[0].value == "📚 マニュアル管理"
    assert admin.selectbox(key="manual_vehicle").options == ["カイワ自動車 ミライバ ハイブリッド（2022年式 Z）",
                                                             "カイワ自動車 トレック 4WD（2020年式 G）"]
    assert admin.selectbox(key="manual_vehicle").value is None  # the vehicle must be chosen
    assert admin.button(key="manual_index").disabled  # nothing uploaded yet
    rows = table(admin)
    expected = counts(index)
    assert list(rows["車両ID"]) == ["kaiwa-mirai-hv-2022", TREK]
    assert list(rows["登録元"]) == ["取扱説明書データ", "取扱説明書データ"]
    assert list(rows["チャンク数"]) == [expected[("kaiwa-mirai-hv-2022", "manual")], expected[(TREK, "manual")]]
    assert any(f"合計 {sum(expected.values())} チャンク" in c.value for c in admin.caption)


def test_upload_needs_a_vehicle(admin, index):
    admin.file_uploader(key="manual_file").upload("towing.pdf", make_pdf([["towing 750 kg"]]), "application/pdf")
    admin.run()
    assert admin.selectbox(key="manual_vehicle").value is None and admin.button(key="manual_index").disabled
    assert any("車両を選んでください" in c.value for c in admin.caption)
    admin.selectbox(key="manual_vehicle").set_value(TREK).run()
    assert not admin.button(key="manual_index").disabled


@pytest.mark.parametrize("index", CHROMA_BACKENDS, indirect=True)
def test_upload_indexes_the_pdf_for_the_chosen_vehicle(admin, index):
    pdf = make_pdf([["Trailer hitch: maximum towing load 750 kg."], ["Roof rack: maximum load 50 kg."]])
    at = upload(admin, "towing-guide.pdf", pdf)
    assert [(s.value, s.icon) for s in at.success] == [
        ("towing-guide.pdf を カイワ自動車 トレック 4WD（2020年式 G） のマニュアルとして登録しました。", "✅")]
    digest = hashlib.sha256(pdf).hexdigest()
    attribution = next(c.value for c in at.caption if c.value.startswith("登録者:"))
    assert "匿名" in attribution and f"SHA-256: {digest}" in attribution
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["ページ数"] == "2" and int(metrics["登録したチャンク"]) >= 1 and metrics["警告"] == "0"
    assert index.vehicles() == ["kaiwa-mirai-hv-2022", TREK]
    added = counts(index)[(TREK, "pdf:towing-guide.pdf")]
    assert int(metrics["登録したチャンク"]) == added
    rows = table(at)
    row = rows[rows["登録元"] == "PDF: towing-guide.pdf"]
    assert list(row["車両ID"]) == [TREK] and list(row["チャンク数"]) == [added]
    assert list(row["登録者"]) == ["匿名"] and list(row["登録者ID"]) == ["anonymous:匿名"]
    assert list(row["SHA-256"]) == [digest[:16]] and list(row["登録日時"])[0].startswith("20")
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


def test_upload_by_named_admin_is_attributed_to_them(admin, index):
    admin.session_state["local_user_name"] = "山田"
    at = upload(admin, "towing.pdf", make_pdf([["towing 750 kg"]]))
    row = table(at)[table(at)["登録元"] == "PDF: towing.pdf"]
    assert list(row["登録者"]) == ["山田（未確認）"] and list(row["登録者ID"]) == ["local:山田"]
    meta = [m for m in index.store.metadatas() if m["source"] == "pdf:towing.pdf"]
    assert meta and all(m["uploaded_by"] == "local:山田" for m in meta)


@pytest.mark.parametrize("index", CHROMA_BACKENDS, indirect=True)
def test_replace_and_delete(admin, index):
    at = upload(admin, "old-guide.pdf", make_pdf([["towing 750 kg"]]))
    at.selectbox(key="manual_vehicle").set_value(TREK).run()
    at.selectbox(key="manual_replaces").set_value("pdf:old-guide.pdf")
    at = upload(at, "new-guide.pdf", make_pdf([["towing 900 kg"]]))
    assert (TREK, "pdf:old-guide.pdf") not in counts(index) and counts(index)[(TREK, "pdf:new-guide.pdf")] >= 1
    at.selectbox(key="manual_delete_choice").set_value(f"{TREK}|pdf:new-guide.pdf").run()
    at.button(key="manual_delete").click().run()
    assert not at.exception
    assert any("new-guide.pdf" in s.value and "削除しました" in s.value for s in at.success)
    assert not any(source.startswith("pdf:") for _, source in counts(index))
    assert "PDF: new-guide.pdf" not in list(table(at)["登録元"])
    assert not index.search("towing 900 kg", vehicle_id=TREK, mode="bm25") or \
        all(h.chapter != "new-guide.pdf" for h in index.search("towing 900 kg", vehicle_id=TREK, mode="bm25"))


@pytest.mark.parametrize("index", CHROMA_BACKENDS, indirect=True)
def test_index_reset_elsewhere_shows_a_notice_then_recovers(admin, index):
    index.store.client.delete_collection(index.store.name)  # another process: ingest --reset
    admin.run()
    assert not admin.exception
    assert any("再構築" in w.value and "しばらくしてから" in w.value for w in admin.warning)
    index.store.reopen(create=True)
    index.sync_manuals(DATA_DIR / "manuals")
    admin.run()
    assert not admin.exception and list(table(admin)["車両ID"]) == ["kaiwa-mirai-hv-2022", TREK]


def test_the_uploader_texts_are_japanese(admin):
    """Streamlit cannot localise the uploader's own texts (「Upload」「200MB per file」): the page shows
    Japanese ones in their place (ui.uploader_text) and no English of ours."""
    from ui.uploader_text import BUTTON_TEXT, limit_text

    styles = [h.proto.body for h in admin.get("html")]
    assert any(BUTTON_TEXT in s and "MB まで・PDF" in s for s in styles)
    assert limit_text(25, "PDF") == "1 ファイル 25MB まで・PDF"
