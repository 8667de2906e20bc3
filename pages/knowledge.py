"""契約ナレッジ作成: the contract-knowledge interview (chat, attachments, draft card, downloads)."""
from __future__ import annotations

import json

import streamlit as st

from core.attachments import MAX_UPLOAD_BYTES, content_sha256, extract_cached, too_large_message, upload_limit_text
from core.knowledge.export import clean_entry, entries_csv, entries_json
from core.knowledge.session import current_state, turns_jsonl
from core.markup import safe_markdown, safe_text
from core.schema_versions import describe as schema_caption
from core.knowledge.conversation import KnowledgeConversations
from pages.common import bind_conversation, debug_sink, identity, provider_caption, recent_conversations, store
from pages.common import leave_pages_directory_mode

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

PHASES = {"collect_case": "① 事例ヒアリング", "organize_risks": "② リスク整理",
          "draft_knowledge": "③ ナレッジ草案", "review_knowledge": "④ レビュー・確定"}
MODES = {"interview": "ヒアリング", "clarify": "確認", "finalize": "草案提示"}
FIELD_LABELS = {"knowledge_title": "タイトル", "contract_type": "契約類型", "target_clause": "対象条項",
                "review_points": "審査ポイント", "action_plan": "対応方針", "clause_sample": "条文例"}

state = st.session_state
state.setdefault("pending_submission", None)  # {"text", "files": [(name, bytes)], "docs": [...]}

st.title("📝 契約ナレッジ作成")
provider_caption()
ENTRY_STATUS = {"draft": "🟡 下書き", "confirmed": "🟢 確定済み", "archived": "⚪ アーカイブ"}


def _conversations() -> KnowledgeConversations:
    return KnowledgeConversations(store(), identity())


def _load_conversation(conversation: dict) -> None:
    state.chat, state.knowledge_outputs = _conversations().load(conversation["id"])
    state.pending_submission = None


def _new_conversation() -> str:
    state.chat, state.knowledge_outputs, state.pending_submission = [], [], None
    return _conversations().new()


def _confirm_entry(entry_id: int) -> None:
    try:
        state.knowledge_outputs = _conversations().confirm(state.session_id, entry_id, identity())
        st.toast("ナレッジを確定しました。ライブラリに登録されています。", icon="✅")
    except (PermissionError, ValueError) as exc:
        st.toast(str(exc), icon="⚠️")


def _start_new() -> None:
    state.knowledge_conversation_id = _new_conversation()
    st.query_params["session"] = state.knowledge_conversation_id
    state.confirm_reset = False


state.session_id = bind_conversation("knowledge", load=_load_conversation, new=_new_conversation)
recent_conversations("knowledge", state.session_id)


def _extract_all(files: list[tuple[str, bytes]], passwords: dict[str, str]) -> list:
    """Each file extracted once per content and password (reruns hit the cache); passwords by SHA-256."""
    return [extract_cached(name, data, passwords.get(content_sha256(data))) for name, data in files]


def _password_key(index: int, doc, docs: list) -> str:
    """pw_<name>, or with index and hash when two pending files share a name (widget keys must be unique)."""
    if sum(d.name == doc.name for d in docs) == 1:
        return f"pw_{doc.name}"
    return f"pw_{doc.name}_{index}_{doc.sha256[:12]}"


def _run_turn(text: str, docs: list) -> None:
    with st.status("モデルが応答を作成しています…", expanded=False) as status:
        outcome = _conversations().submit(state.session_id, state.chat, state.knowledge_outputs, text, docs,
                                          state.llm_client, log=debug_sink())
        status.update(label=outcome.result.status_label,
                      state="complete" if outcome.result.ok else "error")


# ---- input: chat box with attachments; held as a pending submission until every file is readable
st.caption(upload_limit_text())
prompt = st.chat_input(f"事例や質問を入力（PDF / DOCX / TXT、1 ファイル {MAX_UPLOAD_BYTES // 2**20} MB まで添付できます）",
                       accept_file="multiple", file_type=["pdf", "docx", "txt"], key="knowledge_input")
if prompt:
    files, refused = [], []
    for upload in prompt.files or []:
        data = upload.getvalue()
        if len(data) > MAX_UPLOAD_BYTES:  # named below and held, never dropped silently; its bytes are not kept
            refused.append({"name": upload.name, "size": len(data)})
        else:
            files.append((upload.name, data))
    state.pending_submission = {"text": prompt.text or "", "files": files, "passwords": {}, "refused": refused}

pending = state.pending_submission
if pending:
    docs = _extract_all(pending["files"], pending["passwords"])
    locked = [(i, d) for i, d in enumerate(docs) if d.needs_password]
    if pending.get("refused"):
        for item in pending["refused"]:
            st.error(f"{safe_text(item['name'], single_line=True)}: {too_large_message(item['size'])}")
        st.warning("入力内容は保持しています。大きすぎるファイルを除いて送信するか、取り消してファイルを分けてください。")
        col1, col2 = st.columns(2)
        if col1.button("大きすぎるファイルを除いて送信", key="pending_drop_refused"):
            pending["refused"] = []
            st.rerun()
        if col2.button("送信を取り消す", key="pending_cancel"):
            state.pending_submission = None
            st.rerun()
    elif locked:
        with st.form("pdf_password"):
            st.warning("パスワードで保護された PDF があります。入力内容は保持しています。")
            entered = {}
            for i, d in locked:
                if d.error and pending["passwords"].get(d.sha256):
                    st.error(f"{d.name}: {d.error}")
                entered[d.sha256] = st.text_input(f"{d.name} のパスワード", type="password",
                                                  key=_password_key(i, d, docs))
            col1, col2 = st.columns(2)
            unlock = col1.form_submit_button("パスワードで開く")
            skip = col2.form_submit_button("このファイルを除いて送信")
        if unlock:
            pending["passwords"].update(entered)
            st.rerun()
        if skip:
            skipped = {i for i, _ in locked}
            pending["files"] = [f for i, f in enumerate(pending["files"]) if i not in skipped]
            st.rerun()
    else:
        state.pending_submission = None
        for d in docs:
            if d.error:
                st.error(f"{d.name}: {d.error}")
            for w in d.warnings:
                st.warning(f"{d.name}: {w}")
        readable = [d for d in docs if d.ok and d.paragraphs]
        if pending["text"].strip() or readable:
            _run_turn(pending["text"], readable)
        elif docs:
            st.info("読み取れるテキストがなかったため送信しませんでした。内容を入力して送信してください。")

chat_col, side_col = st.columns([3, 2], gap="large")

with chat_col:
    if not state.chat:
        with st.chat_message("assistant"):
            st.markdown("契約審査ナレッジの作成をお手伝いします。どの種類の契約書で、どの条項が問題になったか教えてください。"
                        "契約書ファイルを添付することもできます（テキストはメモリ上でのみ処理し、保存しません）。")
    for entry in state.chat:
        with st.chat_message(entry["role"]):
            if entry.get("failed") and entry["role"] == "assistant":
                if state.get("debug_enabled"):  # internal details only in debug mode
                    st.error(f"⚠️ {entry['content']}（{entry.get('error_type')}、{entry.get('attempts', 0)} 回試行）")
                    st.code("\n".join(entry.get("errors") or []) or "-", language=None)
                    with st.expander("モデルの生出力", expanded=True):
                        st.code(entry.get("raw") or "（出力なし）", language="json")
                else:  # seed 003 §2.2: the user sees a temporary error
                    st.error("⚠️ 一時的なエラーが発生しました。入力内容は保持しています。同じ内容で再送信してください。")
                if st.button("同じ内容で再送信", key=f"resend_{entry.get('retry_of')}"):
                    _conversations().resend(state.session_id, state.chat, state.knowledge_outputs, entry["retry_of"],
                                            state.llm_client, log=debug_sink())
                    st.rerun()
                continue
            st.markdown(safe_markdown(entry["content"]) or "（添付のみ）")
            for att in entry.get("attachments") or []:
                st.caption(f"📎 {safe_text(att['name'], single_line=True)}（{att['summary']}）")
            if entry["role"] == "user" and entry.get("gated"):
                with st.expander("送信しなかった全文（コピーして短くしてから送り直せます）"):
                    st.code(entry.get("user_text") or "", language=None, wrap_lines=True)
            if entry["role"] == "user" and entry.get("file_texts"):
                with st.expander("抽出したテキスト（先頭）"):
                    for text in entry["file_texts"]:
                        st.text(text[:800])
            if entry.get("method") and state.get("debug_enabled"):  # internal captions only in debug mode
                st.caption(f"方式: {entry['method']} · 呼び出し {entry.get('attempts', 1)} 回 · {schema_caption(entry)}")

with side_col:
    turn = current_state(state.chat)
    st.subheader("進行状況")
    if turn:
        phase = turn["state"]["phase"]
        st.progress((list(PHASES).index(phase) + 1) / len(PHASES), text=PHASES[phase])
        st.markdown(f"**モード:** {MODES.get(turn['control']['mode'], turn['control']['mode'])}")
        missing = turn["state"]["missing_info"]
        if missing:
            st.markdown("**まだ必要な情報**")
            for i, item in enumerate(missing):  # keyed by position: the model may repeat an item
                st.checkbox(safe_text(item, single_line=True), value=False, disabled=True, key=f"missing_{i}")
        else:
            st.success("必要な情報はそろっています")
    else:
        st.caption("まだ会話がありません。")

    st.subheader("ナレッジ")
    if state.knowledge_outputs:
        for i, entry in enumerate(state.knowledge_outputs):
            with st.container(border=True):
                st.markdown(f"#### {safe_text(entry['knowledge_title'], single_line=True) or '（タイトル未設定）'}")
                if entry.get("status"):
                    st.caption(f"{ENTRY_STATUS.get(entry['status'], entry['status'])} · No.{entry['id']} · 版 {entry['version']}")
                for key in ("contract_type", "target_clause", "review_points", "action_plan", "clause_sample"):
                    st.markdown(f"**{FIELD_LABELS[key]}**")
                    st.text(entry[key] or "—")
                st.download_button("この JSON をダウンロード", json.dumps(clean_entry(entry), ensure_ascii=False, indent=2),
                                   file_name=f"knowledge_{i + 1}.json", mime="application/json", key=f"dl_entry_{i}")
                if entry.get("status") == "draft":
                    st.button("✅ このナレッジを確定する", key=f"confirm_entry_{entry['id']}", type="primary",
                              on_click=_confirm_entry, args=(entry["id"],),
                              help="確定するとライブラリで確定済みになります。以後の会話では新しい下書きが作られます。")
        col1, col2 = st.columns(2)
        col1.download_button("全件 CSV", entries_csv(state.knowledge_outputs), file_name="knowledge.csv",
                             mime="text/csv", key="dl_csv")
        col2.download_button("全件 JSON", entries_json(state.knowledge_outputs), file_name="knowledge.json",
                             mime="application/json", key="dl_json")
    else:
        st.caption("ドラフトができるとここに表示されます。")
    if any(e.get("turn") for e in state.chat):
        st.download_button("全ターン JSONL", turns_jsonl(state.chat), file_name="turns.jsonl",
                           mime="application/jsonl", key="dl_turns")
    drafts = [e for e in state.knowledge_outputs if e.get("status") == "draft"]
    if not state.get("confirm_reset"):
        if st.button("新しい会話を始める", key="reset_chat"):
            if drafts:
                state.confirm_reset = True
            else:
                _start_new()
            st.rerun()
    else:
        st.warning(f"確定していない下書きが {len(drafts)} 件あります。下書きはライブラリに残りますが、この会話からは離れます。"
                   "新しい会話を始めますか？")
        yes_col, no_col = st.columns(2)
        yes_col.button("はい、新しく始める", key="reset_yes", on_click=_start_new, type="primary")
        no_col.button("キャンセル", key="reset_no", on_click=lambda: state.update(confirm_reset=False))
