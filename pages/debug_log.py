"""デバッグログ / プロンプト調整ワークベンチ (issue #9): every model call of every operator (from the
shared store), filterable; each record in full with its prompt version; replay of a call with an
edited prompt (old and new output side by side with our validator's verdict and a JSON diff); batch
replay of a change over many calls of one task; a recorded conversation turned into a ``core.eval``
scenario. The logic is in ``core.workbench``; this page only draws it."""
from __future__ import annotations

import json
import streamlit as st

from core import workbench as wb
from core.debuglog import to_jsonl
from core.llm.strategies import ALL_STRATEGIES
from core.prompts import load_prompt, prompt_names, prompt_versions
from pages.common import STRATEGY_LABELS, identity, jst, provider_caption, store
from pages.common import leave_pages_directory_mode

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

OUTCOME_LABELS = {"ok": "成功", "parse_error": "JSON 解析エラー", "schema_error": "スキーマ違反",
                  "entry_schema_error": "ナレッジ項目のスキーマ違反"}
METHOD_LABELS = {**STRATEGY_LABELS, "tag_fallback": "タグ判定（seed 004 段階 2）", "ai_judge": "AI 判定（seed 004 段階 3）",
                 "plain_text": "テキスト"}
COLUMN_LABELS = {"id": "ID", "time": "時刻（日本時間）", "session_id": "会話", "flow": "フロー", "step": "ステップ",
                 "task": "タスク", "prompt_version": "プロンプト版", "provider": "プロバイダー", "model": "モデル",
                 "method": "方式", "judgment_method": "選択肢の判定", "kind": "種別", "attempt": "試行",
                 "outcome": "結果", "error_type": "エラー種別", "latency_ms": "レイテンシ (ms)",
                 "total_tokens": "トークン", "owner": "操作者"}

st.title("🪵 デバッグログ・プロンプト調整")
provider_caption()
state = st.session_state
if not state.get("debug_enabled"):
    st.info("このタブでのデバッグログの記録はオフです（サイドバーで切り替えられます）。他の操作者の記録は表示されます。")

stamp = store().debug_records_stamp()  # reruns reuse the parsed records until one is added or deleted
if state.get("wb_records_cache", (None,))[0] != stamp:
    loaded = store().list_debug_records(limit=1000)
    state.wb_records_cache = (stamp, loaded, wb.records_frame(loaded))
_, records, frame = state.wb_records_cache
if not records:
    st.caption("まだ記録がありません。会話フローを実行すると、モデル呼び出しごとに 1 件記録されます。")
    st.stop()
by_id = {r["id"]: r for r in records}


def _options(column: str) -> list[str]:
    return sorted(str(v) for v in frame[column].dropna().unique() if str(v) != "")


with st.expander("🔎 絞り込み", expanded=True):
    c1, c2, c3, c4 = st.columns(4)
    conversation = c1.text_input("会話 ID", value=st.query_params.get("conversation", ""), key="f_conversation",
                                 max_chars=80).strip()
    flows = c2.multiselect("フロー", _options("flow"), placeholder="すべて", key="f_flow")
    steps = c3.multiselect("ステップ / フェーズ", _options("step"), placeholder="すべて", key="f_step")
    tasks = c4.multiselect("タスク", _options("task"), placeholder="すべて", key="f_task")
    c1, c2, c3, c4 = st.columns(4)
    providers = c1.multiselect("プロバイダー", _options("provider"), placeholder="すべて", key="f_provider")
    models = c2.multiselect("モデル", _options("model"), placeholder="すべて", key="f_model")
    methods = c3.multiselect("方式", sorted(set(wb.METHODS) | set(_options("method"))), placeholder="すべて", key="f_strategy",
                             format_func=lambda m: METHOD_LABELS.get(m, m))
    outcomes = c4.multiselect("結果", _options("outcome"), placeholder="すべて", key="f_outcome",
                              format_func=lambda o: OUTCOME_LABELS.get(o, o))
    c1, c2, c3, c4 = st.columns(4)
    error_types = c1.multiselect("エラー種別", _options("error_type"), placeholder="すべて", key="f_error_type")
    date_from = c2.date_input("開始日（日本時間）", value=None, key="f_date_from")
    date_to = c3.date_input("終了日（日本時間）", value=None, key="f_date_to")
    failed_only = c4.toggle("失敗のみ", key="f_failed")
    text = st.text_input("出力・エラーを検索", key="f_text", max_chars=200)

shown = wb.filter_records(frame, conversation=conversation, flows=flows, steps=steps, tasks=tasks, providers=providers,
                          models=models, methods=methods, outcomes=outcomes, error_types=error_types,
                          date_from=date_from, date_to=date_to, failed_only=failed_only)
if text:
    shown = shown[[text in (records[i].get("raw_output") or "") or text in " ".join(records[i].get("errors") or [])
                   for i in shown.index]]
shown_records = [records[i] for i in shown.index]


def _record_label(record_id: int) -> str:
    r = by_id[record_id]
    mark = "✅" if r.get("outcome") == "ok" else "❌"
    return (f"{mark} #{record_id} {jst(r.get('time'))} · {r.get('flow') or '—'}/{r.get('step') or '—'} · "
            f"{wb.record_task(r)} · {METHOD_LABELS.get(wb.record_method(r), wb.record_method(r))} · {r.get('outcome')}")


def _open_replay(record_id: int) -> None:
    state.wb_record = record_id
    state.pop("wb_replay", None)
    for key in ("wb_system", "wb_user", "wb_temperature", "wb_model", "wb_strategies"):
        state.pop(key, None)


tab_records, tab_replay, tab_batch, tab_promote = st.tabs(["記録", "再実行", "一括再実行", "シナリオ化"])

# ---- 記録 ------------------------------------------------------------------------------------------
with tab_records:
    st.caption(f"{len(shown)} / {len(records)} 件（全操作者の最新 1,000 件まで・時刻は日本時間）")
    table = shown.assign(time=[jst(t) for t in shown["time"]])
    table = table[[c for c in COLUMN_LABELS if c in table.columns]].rename(columns=COLUMN_LABELS)
    st.dataframe(table, width="stretch", hide_index=True)
    st.download_button("JSONL をダウンロード", to_jsonl(shown_records), file_name="debug_logs.jsonl",
                       mime="application/jsonl", key="dl_debug")
    with st.expander("📄 プロンプトファイルの現在のバージョン"):
        st.dataframe([{"プロンプト": name, "バージョン": version} for name, version in prompt_versions().items()],
                     hide_index=True, width="stretch")

    who = identity()
    if not state.get("confirm_clear_debug"):
        st.button("ログを消去", key="clear_debug", disabled=not who.can("debug.clear"),
                  help=None if who.can("debug.clear") else "ログの消去は管理者のみ行えます。",
                  on_click=lambda: state.update(confirm_clear_debug=True))
    else:
        scope = f"会話 {conversation} の" if conversation else "全操作者の"
        st.warning(f"{scope}デバッグログをすべて消去します。元に戻せません。よろしいですか？")
        yes, no = st.columns(2)
        if yes.button("はい、消去する", key="clear_debug_yes", type="primary"):
            try:
                deleted = store().clear_debug_records(identity(), conversation_id=conversation or None)
                state.debug_logs.clear()
                st.toast(f"{deleted} 件を消去しました。", icon="🧹")
            except PermissionError as exc:
                st.error(str(exc))
            state.confirm_clear_debug = False
            st.rerun()
        no.button("キャンセル", key="clear_debug_no", on_click=lambda: state.update(confirm_clear_debug=False))

    for r in reversed(shown_records[-50:]):
        with st.expander(_record_label(r["id"]) + f" · 試行 {r.get('attempt')} · {r.get('latency_ms')} ms"):
            usage = r.get("usage") or {}
            tokens = (f"入力 {usage.get('prompt_tokens', '—')} / 出力 {usage.get('completion_tokens', '—')} / "
                      f"合計 {usage.get('total_tokens', '—')}") if usage else "—（プロバイダーが報告していません）"
            st.text(f"プロバイダー: {r.get('provider')} / {r.get('model')} · 方式: "
                    f"{METHOD_LABELS.get(wb.record_method(r), wb.record_method(r))} · 種別: {r.get('kind')} · "
                    f"試行: {r.get('attempt')} · レイテンシ: {r.get('latency_ms')} ms · パース段階: "
                    f"{r.get('parse_stage') or '—'}\nトークン: {tokens}\n"
                    f"プロンプト: {r.get('prompt') or '—'}（版 {r.get('prompt_version') or '記録なし'}） · "
                    f"出力のスキーマ版: {wb.output_schema_version(r) or '—'} · 選択肢の判定: "
                    f"{METHOD_LABELS.get(r.get('judgment_method') or '', r.get('judgment_method') or '—')}\n"
                    f"会話: {r.get('session_id') or '—'} · 操作者: {r.get('owner') or '—'}")
            if r.get("errors"):
                st.error("\n".join(r["errors"]))
            st.button("✏️ この呼び出しを再実行タブで開く", key=f"open_replay_{r['id']}", on_click=_open_replay,
                      args=(r["id"],))
            st.markdown("**送信したメッセージ**")
            for m in r.get("messages") or []:
                st.text(f"[{m.get('role')}]\n{m.get('content')}")
            if r.get("response_format"):
                with st.expander("response_format（送信したスキーマ）"):
                    st.code(json.dumps(r["response_format"], ensure_ascii=False, indent=2), language="json")
            if r.get("tools"):
                with st.expander("tools（送信したツール）"):
                    st.code(json.dumps(r["tools"], ensure_ascii=False, indent=2), language="json")
            st.markdown("**生出力**")
            st.code(r.get("raw_output") or "（なし）", language="json")
            if r.get("prompt_versions"):
                with st.expander("この呼び出し時のプロンプトファイルのバージョン"):
                    st.json(r["prompt_versions"])

# ---- 再実行 ----------------------------------------------------------------------------------------
with tab_replay:
    ids = [r["id"] for r in reversed(shown_records)]
    selected = state.get("wb_record")
    if selected in by_id and selected not in ids:
        ids.insert(0, selected)
    if not ids:
        st.info("絞り込みに一致する記録がありません。")
    else:
        record_id = st.selectbox("再実行する記録", ids, index=ids.index(selected) if selected in ids else 0,
                                 format_func=_record_label, key="wb_record_pick")
        if record_id != state.get("wb_record"):
            _open_replay(record_id)
        record = by_id[record_id]
        base = wb.base_messages(record)
        st.caption(f"判定に使うスキーマ: {wb.judge_for(record).source} · プロンプト: {record.get('prompt') or '—'}"
                   f"（版 {record.get('prompt_version') or '記録なし'}）")
        system = st.text_area("システムプロンプト", value=wb.system_prompt_of(base), height=220, key="wb_system")
        user = st.text_area("ユーザー入力（最後のユーザーメッセージ）", value=wb.user_payload_of(base), height=160,
                            key="wb_user")
        c1, c2, c3 = st.columns(3)
        temperature = c1.number_input("温度", 0.0, 2.0, float(record.get("temperature") or 0.2), 0.1,
                                      key="wb_temperature")
        client = state.llm_client
        model = c2.text_input("モデル", value=getattr(client, "model", ""), key="wb_model", max_chars=200)
        chain = c3.multiselect("方式（この順にフォールバック）", list(ALL_STRATEGIES),
                               default=[s for s in getattr(client, "strategies", ALL_STRATEGIES) if s in ALL_STRATEGIES],
                               format_func=lambda s: STRATEGY_LABELS[s], placeholder="選択してください", key="wb_strategies")
        st.caption(f"実行するプロバイダー: {getattr(client, 'name', '?')}（サイドバーで切り替えられます）")
        if st.button("▶️ 再実行", key="wb_run", type="primary"):
            with st.spinner("再実行しています…"):
                state.wb_replay = wb.replay(record, system_prompt=system, user_payload=user, temperature=temperature,
                                            model=model or None, strategies=chain, client=client)
        result = state.get("wb_replay")
        if result is not None and result.record_id == record_id:
            old_col, new_col = st.columns(2)
            for col, title, raw, verdict, method in ((old_col, "旧出力（記録）", result.old_raw, result.old, result.old_method),
                                                     (new_col, "新出力（再実行）", result.new_raw, result.new,
                                                      result.new_method)):
                with col:
                    st.markdown(f"**{title}** · {METHOD_LABELS.get(method, method)}")
                    if verdict.ok:
                        st.success("検証: 合格")
                    else:
                        st.error("検証: 不合格（" + (verdict.error_type or "") + "）\n" + "\n".join(verdict.errors[:10]))
                    st.code(raw or "（なし）", language="json")
            st.caption(f"試行 {result.attempts} 回 · 修復 {result.repairs} 回 · {result.latency_ms} ms · "
                       f"変更された項目: {', '.join(result.changed_fields) or 'なし'}")
            st.markdown("**差分（旧 → 新）**")
            st.code("\n".join(result.diff) or "差分はありません。", language="text")

        st.divider()
        st.markdown("**プロンプトファイルを新しいバージョンとして保存**")
        who = identity()
        names = prompt_names()
        default_name = record.get("prompt") if record.get("prompt") in names else names[0]
        name = st.selectbox("プロンプトファイル", names, index=names.index(default_name), key="wb_prompt_name")
        content = st.text_area(f"prompts/{name} の内容（テンプレート: {{{{…}}}} はそのまま残してください）",
                               value=load_prompt(name), height=260, key=f"wb_prompt_text_{name}")
        note = st.text_input("変更メモ", key="wb_prompt_note", max_chars=300)
        sure = st.checkbox(f"prompts/{name} を書き換えることを確認しました", key="wb_prompt_sure",
                           disabled=not who.can("prompt.write"))
        if st.button("💾 新しいバージョンとして保存", key="wb_prompt_save", disabled=not (who.can("prompt.write") and sure),
                     help=None if who.can("prompt.write") else "プロンプトの保存は管理者のみ行えます。"):
            try:
                saved = wb.save_prompt_version(name, content, who, store(), note=note)
                st.success(f"prompts/{name} を版 {saved['version']} として保存しました（{saved['created_by_label']}・"
                           f"{jst(saved['created_at'])}）。")
            except (PermissionError, ValueError, OSError) as exc:
                st.error(str(exc))
        from core.store.prompt_versions import list_prompt_versions

        history = list_prompt_versions(store(), name, limit=20)
        if history:
            with st.expander(f"保存履歴（{len(history)} 件）"):
                st.dataframe([{"版": h["version"], "前の版": h["previous_version"] or "—", "保存者": h["created_by_label"],
                               "日時": jst(h["created_at"]), "メモ": h["note"]} for h in history],
                             hide_index=True, width="stretch")

# ---- 一括再実行 --------------------------------------------------------------------------------------
with tab_batch:
    task_options = _options("task")
    if not task_options:
        st.info("絞り込みに一致する記録がありません。")
    else:
        task = st.selectbox("タスク", task_options, key="wb_batch_task")
        same = [r for r in reversed(shown_records) if wb.record_task(r) == task]
        n = st.number_input("件数（新しい順）", 1, min(wb.MAX_BATCH, max(1, len(same))), min(10, max(1, len(same))),
                            key="wb_batch_n")
        st.caption(f"絞り込み中の {task} の記録: {len(same)} 件")
        first = wb.base_messages(same[0]) if same else []
        batch_system = st.text_area("システムプロンプト（空欄なら各記録のまま）", value="", height=160,
                                    key="wb_batch_system", placeholder=wb.system_prompt_of(first)[:300])
        c1, c2 = st.columns(2)
        old_text = c1.text_input("置換前の文字列（全メッセージ）", key="wb_batch_old", max_chars=2000)
        new_text = c2.text_input("置換後の文字列", key="wb_batch_new", max_chars=2000)
        c1, c2, c3 = st.columns(3)
        b_temperature = c1.number_input("温度（空欄なら記録のまま）", 0.0, 2.0, value=None, step=0.1,
                                        key="wb_batch_temperature")
        b_model = c2.text_input("モデル（空欄ならプロバイダーの既定）", key="wb_batch_model", max_chars=200)
        b_chain = c3.multiselect("方式", list(ALL_STRATEGIES), format_func=lambda s: STRATEGY_LABELS[s],
                                 placeholder="選択してください", key="wb_batch_strategies")
        if st.button("▶️ 一括再実行", key="wb_batch_run", type="primary", disabled=not same):
            change = {"system_prompt": batch_system or None, "temperature": b_temperature, "model": b_model or None,
                      "strategies": b_chain, "replace_text": [(old_text, new_text)] if old_text else []}
            bar = st.progress(0.0, text="再実行しています…")
            state.wb_batch = wb.batch_replay(same[: int(n)], change, state.llm_client,
                                             progress=lambda i, total: bar.progress(i / total, text=f"{i} / {total}"))
            bar.empty()
        batch = state.get("wb_batch")
        if batch is not None:
            summary = wb.batch_summary(batch)
            c1, c2, c3, c4 = st.columns(4)
            c1.metric("合格（変更前）", f"{summary['valid_before']} / {summary['total']}")
            c2.metric("合格（変更後）", f"{summary['valid_after']} / {summary['total']}",
                      delta=summary["valid_after"] - summary["valid_before"])
            c3.metric("修復の合計", summary["repairs"])
            c4.metric("改善 / 悪化", f"{summary['fixed']} / {summary['broken']}")
            st.caption("方式の内訳（変更後）: " + " · ".join(f"{METHOD_LABELS.get(k, k)} {v}"
                                                     for k, v in summary["methods"].items()))
            st.dataframe(batch.rename(columns={"record_id": "記録", "task": "タスク", "valid_before": "合格（前）",
                                               "valid_after": "合格（後）", "method_before": "方式（前）",
                                               "method_after": "方式（後）", "attempts": "試行", "repairs": "修復",
                                               "changed_fields": "変わった項目", "errors_after": "エラー（後）"}),
                         hide_index=True, width="stretch")

# ---- シナリオ化 -------------------------------------------------------------------------------------
with tab_promote:
    picked = by_id.get(state.get("wb_record")) or {}
    cid = st.text_input("会話 ID", value=conversation or picked.get("session_id") or "", key="wb_promote_id",
                        max_chars=80).strip()
    if not cid:
        st.info("シナリオにする会話の ID を入力してください（記録の「会話」列）。")
    else:
        try:
            convo, turns, final = wb.conversation_turns(store(), cid)
        except (LookupError, ValueError) as exc:
            st.warning(str(exc))
            convo = None
        if convo is not None:
            st.caption(f"フロー: {convo['flow']} · {convo.get('title') or '（無題）'} · ユーザーの発話 {len(turns)} 件"
                       + (f" · 最後のターン: {final['schema_version']}" if final.get("schema_version") else ""))
            st.code(wb.scenario_yaml({"turns": turns}).strip(), language="yaml")
            suggested = wb.suggest_expectations(store(), cid)
            st.markdown("**期待値（チェックしたものをシナリオに入れます）**")
            expect = {}
            for key, value in suggested.items():
                if st.checkbox(f"{key}: {json.dumps(value, ensure_ascii=False)}", value=True, key=f"wb_expect_{key}"):
                    expect[key] = value
            known = wb.known_expectations()
            if "message_contains" in known:
                contains = st.text_input("応答に含まれるべき文字列（任意・「／」区切り）", key="wb_expect_contains",
                                         max_chars=500)
                if contains.strip():
                    expect["message_contains"] = [p.strip() for p in contains.split("／") if p.strip()]
            if convo["flow"] == "knowledge" and "knowledge_contains" in known:
                words = st.text_input("ナレッジのいずれかの項目に含まれるべき文字列（任意・「／」区切り）",
                                      key="wb_expect_knowledge_contains", max_chars=500)
                if words.strip():
                    expect["knowledge_contains"] = {"*": [w.strip() for w in words.split("／") if w.strip()]}
            name = st.text_input("シナリオ名", value=f"{convo['flow']} {cid}", key="wb_promote_name", max_chars=200)
            file_name = wb.scenario_filename(st.text_input("ファイル名", value=f"promoted_{convo['flow']}",
                                                           key="wb_promote_file", max_chars=60))
            try:
                scenario = wb.promote(store(), cid, expect, name=name)
            except ValueError as exc:
                st.warning(str(exc))
                scenario = None
            if scenario is not None:
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
                        st.error("シナリオは不合格です:\n" + "\n".join(failures))
                if c3.button("💾 tests/scenarios に保存", key="wb_promote_save"):
                    path = wb.save_scenario(scenario, wb.scenario_dir() / file_name, comment=f"会話 {cid} から作成")
                    st.success(f"{path.name} に保存しました。`python -m core.eval {path}` で実行できます。")
