"""再実行: the replay editor for one recorded call (system prompt, payload, temperature, model, strategy
chain), old and new output with our validator's verdict and a JSON diff; saving a prompt file as a new
version (admins)."""
from __future__ import annotations

from typing import Any, Callable

import streamlit as st

from core import workbench as wb
from core.llm.strategies import ALL_STRATEGIES
from core.prompts import load_prompt, prompt_names, prompt_version
from core.store.prompt_versions import list_prompt_versions
from core.text.jst import jst
from ui import kept as kept_state
from ui.kept import keep, kept, restore
from ui.safe import lines, plain, table
from ui.session import identity, store
from ui.sidebar import STRATEGY_LABELS
from ui.workbench.labels import method_label, record_label
from ui.workbench.reviewed import PROMPT_TEXT_PREFIX, draft_replay

# Every widget of the editor, the record picker and the prompt-saving form: all start again from the record's
# values when another record is opened (the prompt file to save is the record's, the confirmation is unticked).
EDITOR_KEYS = ("wb_system", "wb_user", "wb_temperature", "wb_model", "wb_strategies", "wb_record_pick",
               "wb_prompt_name", "wb_prompt_note", "wb_prompt_sure")


def open_replay(record_id: int) -> None:
    """Callback (a record's 「再実行タブで開く」 button, or the record picker): edit this record in the replay
    tab. Runs before the script, so every editor widget is drawn afresh from this record's values."""
    state = st.session_state
    state.wb_record = record_id
    state.pop("wb_replay", None)
    for key in [*EDITOR_KEYS, *(k for k in list(state.keys()) if str(k).startswith(PROMPT_TEXT_PREFIX))]:
        state.pop(key, None)
    for key in [k for k in list(state.keys()) if str(k).startswith(kept_state.PREFIX)]:
        key = str(key)[len(kept_state.PREFIX):]
        if key in EDITOR_KEYS or key.startswith(PROMPT_TEXT_PREFIX):
            kept_state.forget(key)


def _picked() -> None:
    """The record picker changed: open the picked record."""
    picked = st.session_state.get("wb_record_pick")
    if picked is not None and picked != st.session_state.get("wb_record"):
        open_replay(picked)


OFFLINE_REPLAY = ("組み込みのオフラインプロバイダーは、プロンプトを読まずに会話の内容から規則で応答します。"
                  "そのため、システムプロンプトや温度を変えて再実行しても出力は変わりません。プロンプトの変更を試すには、"
                  "サイドバーで OpenAI 互換のモデルに切り替えてください。")


def _result(result: Any, *, offline: bool = False) -> None:
    old_col, new_col = st.columns(2)
    for col, title, raw, verdict, method in ((old_col, "旧出力（記録）", result.old_raw, result.old, result.old_method),
                                             (new_col, "新出力（再実行）", result.new_raw, result.new, result.new_method)):
        with col:
            st.markdown(f"**{title}** · {method_label(method)}")
            if verdict.ok:
                st.success("検証: 合格")
            else:
                st.error("検証: 不合格（" + plain(verdict.error_type or "") + "）\n\n" + lines("\n".join(verdict.errors[:10])))
            st.code(raw or "（なし）", language="json")
    st.caption(f"試行 {result.attempts} 回 · 修復 {result.repairs} 回 · {result.latency_ms} ms · "
               f"変更された項目: {', '.join(result.changed_fields) or 'なし'}")
    st.markdown("**差分（旧 → 新）**")
    if not result.diff and offline:
        st.code("差分はありません（オフラインプロバイダーはプロンプトを読まないため、出力は同じになります）。", language="text")
    else:
        st.code("\n".join(result.diff) or "差分はありません。", language="text")


def save_prompt_section(record: dict[str, Any]) -> None:
    """Save a prompt as a new version in the store (used by every replica): admins only, explicit, with a
    note; the prompt's history and the text in use as a file to download."""
    st.markdown("**プロンプトを新しいバージョンとして保存**（同じデータベースを使うすべてのコンソールと API に反映されます）")
    who = identity()
    names = prompt_names()
    default_name = record.get("prompt") if record.get("prompt") in names else names[0]
    if kept("wb_prompt_name") in names:
        restore("wb_prompt_name")
    name = keep("wb_prompt_name", st.selectbox("プロンプトファイル", names, index=names.index(default_name),
                                               key="wb_prompt_name"))
    text_key = f"{PROMPT_TEXT_PREFIX}{name}"
    content = keep(text_key, st.text_area(f"{name} の内容（テンプレート: {{{{…}}}} はそのまま残してください）",
                                          value=kept(text_key, load_prompt(name)), height=260, key=text_key))
    draft_replay(name, content)  # anyone may try the draft: nothing is saved
    note = keep("wb_prompt_note", st.text_input("変更メモ", value=kept("wb_prompt_note", ""), key="wb_prompt_note",
                                                max_chars=300))
    sure = st.checkbox(f"{name} をすべてのレプリカで差し替えることを確認しました", key="wb_prompt_sure",
                       disabled=not who.can("prompt.write"))
    if st.button("💾 新しいバージョンとして保存", key="wb_prompt_save", disabled=not (who.can("prompt.write") and sure),
                 help=None if who.can("prompt.write") else "プロンプトの保存は管理者のみ行えます。"):
        try:
            saved = wb.save_prompt_version(name, content, who, store(), note=note)
            st.success(f"{name} を版 {saved['version']} として保存しました（{plain(saved['created_by_label'])}・"
                       f"{jst(saved['created_at'])}）。")
        except (PermissionError, ValueError, OSError) as exc:
            st.error(lines(str(exc)))
    st.caption(f"使用中の版: {prompt_version(name)}")
    st.download_button("⬇️ 使用中の内容をファイルとしてダウンロード（prompts/ に反映する場合）", load_prompt(name) + "\n",
                       file_name=wb.prompt_path(name).name, mime="text/markdown", key="wb_prompt_download")
    history = list_prompt_versions(store(), name, limit=20)
    if history:
        with st.expander(f"保存履歴（{len(history)} 件）"):
            table([{"版": h["version"], "前の版": h["previous_version"] or "—", "保存者": h["created_by_label"],
                    "日時": jst(h["created_at"]), "メモ": h["note"]} for h in history],
                  hide_index=True, width="stretch")


def replay_tab(shown_records: list[dict[str, Any]], selected_record: dict[str, Any] | None = None,
               on_open: Callable[[int], None] = open_replay) -> None:
    """``shown_records``: the page of the list (oldest first); ``selected_record``: the record opened for
    replay (``wb_record``), read by id wherever it is."""
    state = st.session_state
    by_id = {r["id"]: r for r in shown_records}
    ids = [r["id"] for r in reversed(shown_records)]
    selected = state.get("wb_record")
    if selected_record is not None and selected_record.get("id") == selected:
        by_id[selected] = selected_record
        if selected not in ids:
            ids.insert(0, selected)
    if not ids:
        st.info("絞り込みに一致する記録がありません。")
        return
    if selected not in ids:  # nothing opened yet (or it was deleted): the newest shown record
        on_open(ids[0])
    record_id = st.selectbox("再実行する記録", ids, index=ids.index(state.get("wb_record")),
                             format_func=lambda i: record_label(by_id[i]), key="wb_record_pick", on_change=_picked)
    record = by_id[record_id]
    base = wb.base_messages(record)
    st.caption(f"判定に使うスキーマ: {wb.judge_for(record).source} · プロンプト: {record.get('prompt') or '—'}"
               f"（版 {record.get('prompt_version') or '記録なし'}）")
    system = keep("wb_system", st.text_area("システムプロンプト", value=kept("wb_system", wb.system_prompt_of(base)),
                                            height=220, key="wb_system"))
    user = keep("wb_user", st.text_area("ユーザー入力（最後のユーザーメッセージ）",
                                        value=kept("wb_user", wb.user_payload_of(base)), height=160, key="wb_user"))
    c1, c2, c3 = st.columns(3)
    restore("wb_temperature")
    temperature = keep("wb_temperature", c1.number_input(
        "温度", 0.0, 2.0, float(record.get("temperature") or 0.2), 0.1, key="wb_temperature"))
    client = state.llm_client
    model = keep("wb_model", c2.text_input("モデル", value=kept("wb_model", getattr(client, "model", "")), key="wb_model",
                                           max_chars=200))
    restore("wb_strategies")
    chain = keep("wb_strategies", c3.multiselect(
        "方式（この順にフォールバック）", list(ALL_STRATEGIES),
        default=[s for s in getattr(client, "strategies", ALL_STRATEGIES) if s in ALL_STRATEGIES],
        format_func=lambda s: STRATEGY_LABELS[s], placeholder="選択してください", key="wb_strategies", select_all=False))
    st.caption(f"実行するプロバイダー: {getattr(client, 'name', '?')}（サイドバーで切り替えられます）")
    offline = getattr(client, "name", "") == "offline"
    if offline:
        st.info(OFFLINE_REPLAY)
    if st.button("▶️ 再実行", key="wb_run", type="primary"):
        with st.spinner("再実行しています…"):
            state.wb_replay = wb.replay(record, system_prompt=system, user_payload=user, temperature=temperature,
                                        model=model or None, strategies=chain, client=client)
    result = state.get("wb_replay")
    if result is not None and result.record_id == record_id:
        _result(result, offline=offline)
    st.divider()
    save_prompt_section(record)
