"""ナレッジライブラリ: every drafted knowledge entry — search, filter, open the source conversation,
edit with history, confirm / archive, export (CSV with BOM, JSON, JSONL of the turns).

The list is read from the store a page at a time (filters and full-text search in the database, cached by
``ui.cache`` until an entry changes); the selected entry is read alone; exports are built when their
button is clicked. The selection follows the entry, so a save that re-sorts the list keeps it open.

The edit form carries the version it was opened at (``lib_form_<No.>``) and sends only the fields the
person changed: a save or 確定する over a version someone else saved since is refused
(``core.store.library.StaleEntry``) with a notice showing what changed, and the typed text stays in the form
(``ui.stale_entry``)."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.knowledge.export import STATUS_LABELS, entries_csv, entries_json, turns_jsonl
from core.store.library import StaleEntry
from core.text.jst import jst
from core.validation import ENTRY_FIELDS
from ui import cache, outage, pager, safe, stale_entry
from ui.display_name import recorded_as
from ui.knowledge_base import linked_entry
from ui.knowledge_chat import incomplete_ack
from ui.session import identity, leave_pages_directory_mode, provider_caption, store

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

LABELS = {"knowledge_title": "タイトル", "contract_type": "契約類型", "target_clause": "対象条項",
          "review_points": "審査ポイント", "action_plan": "対応方針", "clause_sample": "条文例"}
ICONS = {"draft": "🟡", "confirmed": "🟢", "archived": "⚪"}
STATUS = {k: f"{ICONS[k]} {v}" for k, v in STATUS_LABELS.items()}
ACTIONS = {"edit": "編集", "drafted": "草案作成", "model_update": "草案更新", "confirm": "確定", "archive": "アーカイブ",
           "restore": "復元"}
EXPORT_LIMIT = 5000  # entries in one export

st.title("📚 ナレッジライブラリ")
provider_caption()
st.caption("契約ナレッジ作成で作られたすべてのナレッジです。確定済みのナレッジは、その後の会話で変更されません。")
who = identity()
state = st.session_state

# ---- filters ---------------------------------------------------------------------------------------
search_col, status_col, type_col = st.columns([3, 2, 2])
query = search_col.text_input("検索（タイトル・契約類型・条項・本文）", key="lib_query", max_chars=200)
statuses = status_col.multiselect("状態", list(STATUS), default=["draft", "confirmed"], format_func=STATUS.get,
                                  placeholder="すべて", key="lib_status", select_all=False)
types = type_col.multiselect("契約類型", cache.contract_types(), placeholder="すべて", key="lib_types", select_all=False)
filters = {"status": statuses or None, "contract_type": types or None, "query": query}
offset = pager.current_offset("lib", (query, tuple(statuses), tuple(types)))
entries, total = cache.entries_page(statuses, types, query, offset, pager.PAGE_SIZE)
if (last := pager.clamp("lib", total)) is not None:
    entries, total = cache.entries_page(statuses, types, query, last, pager.PAGE_SIZE)
linked = linked_entry(store())  # ?entry=<No.> from a citation or a similar-entry link

if not total:
    st.info("条件に合うナレッジはありません。")
    if not state.get("lib_selected") and linked is None:  # a saved entry the filters now leave out stays open
        st.stop()

selected = pager.selection("lib", "lib_table", [e["id"] for e in entries])
table = pd.DataFrame([{"No.": e["id"], "状態": STATUS.get(e["status"], e["status"]), "タイトル": e["knowledge_title"],
                       "契約類型": e["contract_type"], "対象条項": e["target_clause"], "版": e["version"],
                       "更新者": e["updated_by_label"], "更新日時": jst(e["updated_at"])} for e in entries])
if total:
    safe.table(table, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
               key="lib_table")
    pager.pager("lib", total, len(entries))


# ---- export (built when a button is clicked) ----------------------------------------------------------
def _export(build, keep: bool):
    """A download's content, made on click (in Streamlit's download thread) from every entry the filters
    find, up to ``EXPORT_LIMIT``: nothing is built on a rerun."""
    shared = store()
    return lambda: build(shared, shared.list_entries(**filters, limit=EXPORT_LIMIT), keep)


def _turns(shared, found, keep):
    conversations = sorted({e["conversation_id"] for e in found if e.get("conversation_id")})
    return turns_jsonl({cid: shared.list_turns(cid) for cid in conversations}, keep_contract_text=keep)


if total:
    with st.expander("⬇️ エクスポート（表示中の全件）"):
        keep = st.checkbox("契約本文の個人情報をマスクしない（API キーなどの秘密情報は常に除去されます）", key="lib_keep")
        if total > EXPORT_LIMIT:
            st.caption(f"新しい順に {EXPORT_LIMIT:,} 件までを書き出します。")
        c1, c2, c3 = st.columns(3)
        c1.download_button("CSV（Excel 用）", _export(lambda _, f, k: entries_csv(f, keep_contract_text=k), keep),
                           file_name="knowledge.csv", mime="text/csv", key="lib_csv")
        c2.download_button("JSON", _export(lambda _, f, k: entries_json(f, keep_contract_text=k), keep),
                           file_name="knowledge.json", mime="application/json", key="lib_json")
        c3.download_button("会話 JSONL", _export(_turns, keep), file_name="knowledge_turns.jsonl",
                           mime="application/jsonl", key="lib_jsonl")

entry = store().get_entry(selected) if selected else linked  # the selected entry, read alone and fresh
if entry is None:
    st.stop()
eid = entry["id"]


def _position() -> int | None:
    return store().entry_position(eid, **filters)


@outage.protect
def _status(action: str, shown_version: int) -> None:
    try:
        store().set_entry_status(eid, action, identity(), expected_version=shown_version)
        stale_entry.forget(eid)
        st.toast("更新しました。", icon="✅")
        pager.follow("lib", eid, _position)
    except StaleEntry as exc:
        stale_entry.refused(eid, exc)
    except (PermissionError, ValueError) as exc:
        st.toast(safe.lines(str(exc)), icon="⚠️")


# ---- detail ----------------------------------------------------------------------------------------
st.divider()
st.subheader(f"No.{eid} {safe.plain(entry['knowledge_title']) or '（タイトル未設定）'}")
st.caption(f"{STATUS.get(entry['status'], entry['status'])} · 版 {entry['version']} · "
           f"作成 {safe.plain(entry['created_by_label'])}（{jst(entry['created_at'])}）· "
           f"更新 {safe.plain(entry['updated_by_label'])}（{jst(entry['updated_at'])}）"
           + (f" · 確定 {safe.plain(entry.get('confirmed_by_label') or '—')}（{jst(entry['confirmed_at'])}）"
              if entry.get("confirmed_at") else ""))
if entry.get("conversation_id"):
    st.page_link("pages/knowledge.py", label="元の会話を開く", icon="💬", query_params={"session": entry["conversation_id"]})

recorded_as(who)
shown = stale_entry.form_snapshot(eid, entry)  # the version the form (and 確定する) stands for
stale_entry.notice(eid, LABELS)
buttons = st.columns(3)
if entry["status"] == "draft":
    allowed = incomplete_ack(entry, key=f"lib_confirm_incomplete_{eid}")
    buttons[0].button("✅ 確定する", key="lib_confirm", on_click=_status, args=("confirm", shown["version"]),
                      type="primary", disabled=not who.can("entry.confirm") or not allowed)
if entry["status"] != "archived":
    buttons[1].button("🗄️ アーカイブする", key="lib_archive", on_click=_status, args=("archive", entry["version"]),
                      disabled=not who.can("entry.archive"),
                      help=None if who.can("entry.archive") else "アーカイブは管理者のみ行えます。")
else:
    buttons[1].button("↩️ 下書きに戻す", key="lib_restore", on_click=_status, args=("restore", entry["version"]),
                      disabled=not who.can("entry.archive"))

if entry["status"] == "archived":
    for field in ENTRY_FIELDS:
        st.markdown(f"**{LABELS[field]}**")
        st.text(entry[field] or "—")
else:
    kept = (outage.held(f"library_{eid}") or {}).get("payload") or shown["fields"]  # edits an outage kept
    with st.form(f"lib_edit_{eid}"):
        values = {f: (st.text_area if f in ("review_points", "action_plan", "clause_sample") else st.text_input)(
            LABELS[f], value=kept[f], key=f"lib_field_{eid}_{f}") for f in ENTRY_FIELDS}
        keep_edit = st.checkbox("個人情報をマスクしない", key=f"lib_keep_edit_{eid}")
        saved = st.form_submit_button("変更を保存", disabled=not who.can("entry.edit"))
    if saved:
        try:
            store().edit_entry(eid, stale_entry.typed_changes(shown, values), identity(),
                               keep_contract_text=keep_edit, expected_version=shown["version"])
            outage.release(f"library_{eid}")
            stale_entry.forget(eid, clear_form=True)
            st.toast("保存しました（履歴に記録されました）。", icon="💾")
            pager.follow("lib", eid, _position)  # the list re-sorts: keep this entry open, on its page
            st.rerun()
        except StaleEntry as exc:  # a colleague saved since the form was opened: nothing written, text kept
            stale_entry.refused(eid, exc)
            st.rerun()
        except (PermissionError, ValueError) as exc:
            st.error(safe.lines(str(exc)))
        except outage.OUTAGE_ERRORS as exc:  # the edits stay in the form until they can be saved
            outage.note(exc, "library")
            outage.hold(f"library_{eid}", values, values["knowledge_title"])
            st.warning("データベースに保存できませんでした。入力した内容は保持しています。復旧後にもう一度「変更を保存」を押してください。")

with st.expander("🕘 変更履歴"):
    for h in reversed(store().entry_history(eid)):
        st.markdown(f"**版 {h['version']}** · {ACTIONS.get(h['action'], '変更')} · "
                    f"{safe.plain(h['changed_by_label'])} · {jst(h['changed_at'])}")
        st.caption(" / ".join(f"{LABELS[f]}: {safe.plain(str(h['data'].get(f, ''))[:80])}"
                              for f in ("knowledge_title", "action_plan")))
