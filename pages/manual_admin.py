"""マニュアル管理: the indexed manuals (with who uploaded what, when, and the file hash) for everyone;
for the admin role only, adding a vehicle's PDF (text extracted in memory), replacing or deleting an
upload, and rebuilding the index from data/manuals. Without any admin configured the page explains
how to enable it; with an admin password configured a form unlocks admin for this session."""
from __future__ import annotations

import streamlit as st

from core.rag import get_manual_retriever, manual_admin
from core.rag.store import IndexUnavailable
from core.text.jst import jst
from core.vehicles import default_catalog
from ui import safe
from ui.identity import ADMIN_UNLOCKED_KEY, admin_gate, auth_settings, current_identity
from ui.safe import plain
from ui.session import leave_pages_directory_mode
from ui.uploader_text import japanese_uploader

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

state = st.session_state
state.setdefault("manual_report", None)  # the IngestReport of the last upload
state.setdefault("manual_sync", None)  # {vehicle_id: chunks} (re)indexed by the last sync
state.setdefault("manual_notice", None)  # (kind, message) of the last delete / refused action
state.setdefault(ADMIN_UNLOCKED_KEY, False)  # set by the password form below

catalog = {v.vehicle_id: v for v in default_catalog()}
settings = auth_settings()

st.title("📚 マニュアル管理")
st.caption("車両ごとの取扱説明書を検索インデックスに登録します。車両問診はこのインデックスから根拠の記載を引用します。"
           "アップロードした PDF はメモリ上でテキストを抽出し、ファイル自体は保存しません。")


def _vehicle_label(vehicle_id: str) -> str:
    vehicle = catalog.get(vehicle_id)
    return vehicle.label if vehicle else f"{vehicle_id}（カタログにない車両）"


def _guarded(action, *args, **kwargs):
    """Run a core action as the current user; a refused one becomes a notice, not a traceback."""
    try:
        return action(*args, **kwargs)
    except PermissionError as exc:
        state.manual_notice = ("error", safe.lines(str(exc)))
    except IndexUnavailable as exc:
        state.manual_notice = ("warning", safe.lines(str(exc)))
    return None


def _sync(force: bool) -> None:
    """Button callback (runs before the page is drawn, so the table shows the new counts)."""
    state.manual_sync = _guarded(manual_admin.rebuild_index, get_manual_retriever(), current_identity(), force=force)


def _delete() -> None:
    choice = state.get("manual_delete_choice")
    if not choice:
        return
    vehicle_id, source = choice.split("|", 1)
    removed = _guarded(manual_admin.delete_manual, get_manual_retriever(), current_identity(), vehicle_id, source)
    if removed is not None:
        state.manual_notice = ("success", f"{plain(source.removeprefix('pdf:'))}（{_vehicle_label(vehicle_id)}）を削除しました"
                                          f"（{removed} チャンク）。")
        state.manual_delete_choice = None


who = current_identity(settings)
can_write = who.can(manual_admin.PERMISSION)

retriever = None
try:
    with st.spinner("検索インデックスを準備しています…（初回は数十秒かかることがあります）"):
        retriever = get_manual_retriever()
    manuals = manual_admin.list_manuals(retriever)
except IndexUnavailable as exc:
    manuals = None
    st.warning(safe.lines(str(exc)), icon="⏳")
    st.button("再読み込み", key="manual_reload")

notice = state.manual_notice
if notice is not None:
    getattr(st, notice[0])(notice[1])
    state.manual_notice = None

if not can_write:  # who may change the index, and the admin password form when one is configured
    admin_gate(who, settings, "マニュアルの追加・置き換え・削除・再構築")

uploads = [m for m in manuals or [] if m.kind == "upload"]

# ---- upload -------------------------------------------------------------------------------------------
if can_write and retriever is not None:
    st.subheader("PDF マニュアルの追加・置き換え")
    vehicle_id = st.selectbox("車両（必須）", list(catalog), format_func=_vehicle_label, key="manual_vehicle",
                              index=None, placeholder="登録先の車両を選んでください")
    replace_options = [m.source for m in uploads if m.vehicle_id == vehicle_id]
    replaces = st.selectbox("置き換える登録済みファイル（任意）", replace_options, index=None, key="manual_replaces",
                            format_func=lambda s: s.removeprefix("pdf:"), placeholder="置き換えない（新規に追加）",
                            disabled=not replace_options,
                            help="新しいファイルの登録に成功すると、選んだファイルの登録を削除します。"
                                 "同じファイル名で登録した場合も置き換えになります。")
    japanese_uploader("PDF")
    upload = st.file_uploader("取扱説明書（PDF）", type=["pdf"], key="manual_file",
                              help="同じファイル名で再登録すると、その PDF の内容を置き換えます。")
    password = st.text_input("PDF のパスワード（保護されている場合のみ）", type="password", key="manual_password")
    if vehicle_id is None and upload is not None:
        st.caption("⚠️ 登録先の車両を選んでください。")
    if st.button("インデックスに追加", key="manual_index", type="primary",
                 disabled=upload is None or vehicle_id is None) and upload is not None:
        with st.spinner(f"{plain(upload.name)} のテキストを抽出して登録しています…"):
            state.manual_report = _guarded(manual_admin.add_manual, retriever, current_identity(), vehicle_id,
                                           upload.name, upload.getvalue(), password or None, replaces=replaces)
        if state.manual_notice is not None:
            st.rerun()
        manuals = _guarded(manual_admin.list_manuals, retriever) or manuals
        uploads = [m for m in manuals or [] if m.kind == "upload"]

    report = state.manual_report
    if report is not None:
        with st.container(border=True):
            if report.ok:
                st.success(f"{plain(report.name)} を {_vehicle_label(report.vehicle_id)} のマニュアルとして登録しました。",
                           icon="✅")
                attribution = report.attribution
                st.caption(f"登録者: {plain(attribution.get('uploaded_by_label', '—'))}"
                           f"（{plain(attribution.get('uploaded_by', '—'))}）"
                           f" · 登録日時: {jst(attribution.get('uploaded_at'))}"
                           f" · SHA-256: {attribution.get('sha256', '—')}")
            else:
                st.error(f"{plain(report.name)}: {report.error or '登録できませんでした。'}", icon="❌")
                if report.error and "パスワード" in report.error:
                    st.info("パスワードを入力して、もう一度「インデックスに追加」を押してください。")
            pages_col, chunks_col, warn_col = st.columns(3)
            pages_col.metric("ページ数", report.pages if report.pages is not None else "—")
            chunks_col.metric("登録したチャンク", report.chunks)
            warn_col.metric("警告", len(report.warnings))
            for warning in report.warnings:
                st.warning(warning)

# ---- what is indexed ----------------------------------------------------------------------------------
st.subheader("登録済みのマニュアル")
if manuals is not None:
    rows = [{"車両": _vehicle_label(m.vehicle_id), "車両ID": m.vehicle_id,
             "登録元": "取扱説明書データ" if m.kind == "manual" else f"PDF: {m.name}", "チャンク数": m.chunks,
             "登録者": m.uploaded_by_label or ("—" if m.kind == "manual" else "（記録なし）"),
             "登録者ID": m.uploaded_by or "—", "登録日時": jst(m.uploaded_at),
             "SHA-256": (m.sha256 or "—")[:16]} for m in manuals]
    indexed = {m.vehicle_id for m in manuals}
    rows += [{"車両": _vehicle_label(v), "車両ID": v, "登録元": "（未登録）", "チャンク数": 0, "登録者": "—",
              "登録者ID": "—", "登録日時": "—", "SHA-256": "—"} for v in catalog if v not in indexed]
    safe.table(rows, hide_index=True, key="manual_table")
    st.caption(f"合計 {sum(m.chunks for m in manuals)} チャンク · 車両 {len(indexed)} 台")  # the collection name is internal

# ---- delete ---------------------------------------------------------------------------------------------
if can_write and uploads:
    st.subheader("アップロードしたマニュアルの削除")
    choices = {f"{m.vehicle_id}|{m.source}": m for m in uploads}
    st.selectbox("削除するファイル", list(choices), index=None, key="manual_delete_choice",
                 placeholder="削除するファイルを選んでください",
                 format_func=lambda k: f"{choices[k].name}（{_vehicle_label(choices[k].vehicle_id)}）")
    st.button("削除", key="manual_delete", on_click=_delete, disabled=not state.get("manual_delete_choice"),
              help="このファイルのチャンクをインデックスから取り除きます。問診では引用されなくなります。")

# ---- rebuild --------------------------------------------------------------------------------------------
if can_write and retriever is not None:
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
