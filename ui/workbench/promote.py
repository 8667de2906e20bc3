"""シナリオ化: a stored conversation turned into a ``core.eval`` scenario with the expectations its end
state satisfies: shown as YAML, checked offline, downloaded (anyone) or saved to the scenario directory
(admins only, audited)."""
from __future__ import annotations

import json
from typing import Any

import streamlit as st

from core import workbench as wb
from ui import cache
from ui.kept import forget, keep, kept
from ui.safe import lines, plain
from ui.session import identity, store


def _expectations(cid: str, flow: str, source: tuple) -> dict[str, Any]:
    suggested = wb.suggest_expectations(store(), cid, source=source)
    st.markdown("**期待値（チェックしたものをシナリオに入れます）**")
    expect = {}
    for key, value in suggested.items():
        if st.checkbox(plain(f"{key}: {json.dumps(value, ensure_ascii=False)}"), value=True, key=f"wb_expect_{key}"):
            expect[key] = value
    known = wb.known_expectations()
    if "message_contains" in known:
        contains = keep("wb_expect_contains", st.text_input(  # typed text survives another tab (ui.kept)
            "応答に含まれるべき文字列（任意・「／」区切り）", value=kept("wb_expect_contains", ""), key="wb_expect_contains",
            max_chars=500))
        if contains.strip():
            expect["message_contains"] = [p.strip() for p in contains.split("／") if p.strip()]
    if flow == "knowledge" and "knowledge_contains" in known:
        words = keep("wb_expect_knowledge_contains", st.text_input(
            "ナレッジのいずれかの項目に含まれるべき文字列（任意・「／」区切り）", value=kept("wb_expect_knowledge_contains", ""),
            key="wb_expect_knowledge_contains", max_chars=500))
        if words.strip():
            expect["knowledge_contains"] = {"*": [w.strip() for w in words.split("／") if w.strip()]}
    return expect


def _scenario_actions(scenario: dict[str, Any], cid: str, file_name: str) -> None:
    text = wb.scenario_yaml(scenario, comment=f"会話 {cid} から作成")
    c1, c2, c3 = st.columns(3)
    c1.download_button("⬇️ YAML をダウンロード", text, file_name=file_name, mime="application/x-yaml",
                       key="wb_promote_download")
    if c2.button("🧪 シナリオを実行して確認", key="wb_promote_check"):
        with st.spinner("オフラインで実行しています…"):
            passed, failures = wb.run_scenario_check(scenario)
        if passed:
            st.success("シナリオは合格しました。")
        else:
            st.error("シナリオは不合格です:\n\n" + lines("\n".join(failures)))
    who = identity()
    allowed = who.can("scenario.write")
    if c3.button("💾 tests/scenarios に保存", key="wb_promote_save", disabled=not allowed,
                 help=None if allowed else "シナリオの保存は管理者のみ行えます（ダウンロードはどなたでもできます）。"):
        try:
            path = wb.save_scenario(scenario, wb.scenario_dir() / file_name, actor=who, store=store(),
                                    comment=f"会話 {cid} から作成")
        except PermissionError as exc:
            st.error(lines(str(exc)))
        else:
            st.success(f"{path.name} に保存しました。`python -m core.eval {path}` で実行できます。")


def promote_tab(conversation: str, picked: dict[str, Any]) -> None:
    """``conversation``: the conversation the filters select (it wins); else the opened record's."""
    state = st.session_state
    source = conversation or picked.get("session_id") or ""
    if state.get("wb_promote_source") != source:  # the filter (or the opened record) changed: follow it
        state.wb_promote_source = source
        state.wb_promote_id = source
        for key in [k for k in list(state.keys()) if str(k).startswith("wb_expect_")] + ["wb_promote_name"]:
            state.pop(key, None)
        for key in ("wb_expect_contains", "wb_expect_knowledge_contains"):
            forget(key)
    cid = st.text_input("会話 ID", key="wb_promote_id", max_chars=80).strip()
    if not cid:
        st.info("シナリオにする会話の ID を入力してください（記録の「会話」列）。")
        return
    try:  # read and masked once per change of the conversation, not on every rerun (ui.cache)
        source = cache.conversation_source(cid)
    except (LookupError, ValueError) as exc:
        st.warning(lines(str(exc)))
        return
    convo, turns, final = source
    st.caption(f"フロー: {convo['flow']} · {plain(convo.get('title')) or '（無題）'} · ユーザーの発話 {len(turns)} 件"
               + (f" · 最後のターン: {final['schema_version']}" if final.get("schema_version") else ""))
    st.code(wb.scenario_yaml({"turns": turns}).strip(), language="yaml")
    expect = _expectations(cid, convo["flow"], source)
    name = st.text_input("シナリオ名", value=f"{convo['flow']} {cid}", key="wb_promote_name", max_chars=200)
    file_name = wb.scenario_filename(st.text_input("ファイル名", value=f"promoted_{convo['flow']}",
                                                   key="wb_promote_file", max_chars=60))
    try:
        scenario = wb.promote(store(), cid, expect, name=name, source=source)
    except ValueError as exc:
        st.warning(lines(str(exc)))
        return
    _scenario_actions(scenario, cid, file_name)
