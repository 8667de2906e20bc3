"""マニュアル管理: add a vehicle's PDF manual to the search index (text extracted in memory), see what
each vehicle has indexed, and rebuild the index from data/manuals."""
from __future__ import annotations

from collections import Counter

import streamlit as st

from core.diagnosis.catalog import default_catalog
from core.rag import get_manual_retriever

state = st.session_state
state.setdefault("manual_report", None)  # the IngestReport of the last upload
state.setdefault("manual_sync", None)  # {vehicle_id: chunks} (re)indexed by the last sync

catalog = {v.vehicle_id: v for v in default_catalog()}

st.title("📚 マニュアル管理")
st.caption("車両ごとの取扱説明書を検索インデックスに登録します。車両問診はこのインデックスから根拠の記載を引用します。"
           "アップロードした PDF はメモリ上でテキストを抽出し、ファイル自体は保存しません。")

with st.spinner("検索インデックスを準備しています…（初回は数十秒かかることがあります）"):
    retriever = get_manual_retriever()


def _vehicle_label(vehicle_id: str) -> str:
    vehicle = catalog.get(vehicle_id)
    return vehicle.label if vehicle else vehicle_id


def _sync(force: bool) -> None:
    """Button callback (runs before the page is drawn, so the table shows the new counts)."""
    state.manual_sync = get_manual_retriever().sync_manuals(force=force)


# ---- upload ---------------------------------------------------------------------------------------
st.subheader("PDF マニュアルの追加")
vehicle_id = st.selectbox("車両", list(catalog), format_func=_vehicle_label, key="manual_vehicle")
upload = st.file_uploader("取扱説明書（PDF）", type=["pdf"], key="manual_file",
                          help="同じファイル名で再登録すると、その PDF の内容を置き換えます。")
password = st.text_input("PDF のパスワード（保護されている場合のみ）", type="password", key="manual_password")
if st.button("インデックスに追加", key="manual_index", type="primary", disabled=upload is None) and upload is not None:
    with st.spinner(f"{upload.name} のテキストを抽出して登録しています…"):
        state.manual_report = retriever.index_pdf(vehicle_id, upload.name, upload.getvalue(), password or None)

report = state.manual_report
if report is not None:
    with st.container(border=True):
        if report.ok:
            st.success(f"{report.name} を {_vehicle_label(report.vehicle_id)} のマニュアルとして登録しました。", icon="✅")
        else:
            st.error(f"{report.name}: {report.error or '登録できませんでした。'}", icon="❌")
            if report.error and "パスワード" in report.error:
                st.info("パスワードを入力して、もう一度「インデックスに追加」を押してください。")
        pages_col, chunks_col, warn_col = st.columns(3)
        pages_col.metric("ページ数", report.pages if report.pages is not None else "—")
        chunks_col.metric("登録したチャンク", report.chunks)
        warn_col.metric("警告", len(report.warnings))
        for warning in report.warnings:
            st.warning(warning)

# ---- what is indexed ------------------------------------------------------------------------------
st.subheader("登録済みのマニュアル")
counts = Counter((c.vehicle_id, c.source) for c in retriever.store.all_chunks())
rows = [{"車両": _vehicle_label(v), "車両ID": v, "登録元": "取扱説明書データ" if src == "manual" else src.replace("pdf:", "PDF: ", 1),
         "チャンク数": n} for (v, src), n in sorted(counts.items())]
rows += [{"車両": _vehicle_label(v), "車両ID": v, "登録元": "（未登録）", "チャンク数": 0}
         for v in catalog if v not in {key[0] for key in counts}]
st.dataframe(rows, hide_index=True, key="manual_table")
st.caption(f"合計 {sum(counts.values())} チャンク · 車両 {len({key[0] for key in counts})} 台 · "
           f"コレクション {getattr(retriever.store, 'name', '-')}")

# ---- rebuild --------------------------------------------------------------------------------------
st.subheader("data/manuals からの再構築")
st.caption("取扱説明書データ（data/manuals/*.json）を索引し直します。アップロードした PDF の登録はそのまま残ります。")
sync_col, force_col = st.columns(2)
sync_col.button("変更されたマニュアルを同期", key="manual_sync_changed", on_click=_sync, args=(False,))
force_col.button("すべて再構築", key="manual_rebuild", on_click=_sync, args=(True,),
                 help="埋め込みを計算し直すため、数十秒かかることがあります。")

if state.manual_sync is not None:
    done = state.manual_sync
    if done:
        st.success("再構築しました: " + "、".join(f"{_vehicle_label(v)} {n} チャンク" for v, n in sorted(done.items())))
    else:
        st.info("変更されたマニュアルはありませんでした（インデックスは最新です）。")
