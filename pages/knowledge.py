"""契約ナレッジ作成: the contract-knowledge interview (chat, attachments, draft card, downloads)."""
from __future__ import annotations

import streamlit as st

from core.documents import MAX_UPLOAD_BYTES, upload_limit_text
from core.knowledge.conversation import KnowledgeConversations
from ui import knowledge_chat, outage
from ui.conversations import bind_conversation, recent_conversations
from ui.display_name import recorded_as
from ui.feedback import answer_feedback
from ui.knowledge_base import similar_panel
from ui.safe import lines
from ui.session import debug_sink, identity, leave_pages_directory_mode, provider_caption, store
from ui.streaming import stream_caption, streaming

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

state = st.session_state
state.setdefault("pending_submission", None)  # {"text", "files": [(name, bytes)], "passwords", "refused"}

outage.keep_on_failure("knowledge_input", knowledge_chat.keep_submission)  # typed text survives an outage
st.title("📝 契約ナレッジ作成")
provider_caption()


def _conversations() -> KnowledgeConversations:
    return KnowledgeConversations(store(), identity())


def _load_conversation(conversation: dict) -> None:
    state.chat, state.knowledge_outputs = _conversations().load(conversation["id"])
    state.pending_submission = None


def _new_conversation() -> str:
    state.chat, state.knowledge_outputs, state.pending_submission = [], [], None
    return _conversations().new()


@outage.protect
def _confirm_entry(entry_id: int) -> None:
    try:
        state.knowledge_outputs = _conversations().confirm(state.session_id, entry_id, identity())
        st.toast("ナレッジを確定しました。ライブラリに登録されています。", icon="✅")
    except (PermissionError, ValueError) as exc:
        st.toast(lines(str(exc)), icon="⚠️")


def _resend(retry_of: str) -> None:
    with outage.page_guard(), streaming():  # the reply appears as the model writes it
        _conversations().resend(state.session_id, state.chat, state.knowledge_outputs, retry_of, state.llm_client,
                                log=debug_sink())


@outage.protect
def _start_new() -> None:
    state.knowledge_conversation_id = _new_conversation()
    st.query_params["session"] = state.knowledge_conversation_id
    state.confirm_reset = False


state.session_id = bind_conversation("knowledge", load=_load_conversation, new=_new_conversation)
recent_conversations("knowledge", state.session_id)

# ---- input: chat box with attachments; held as a pending submission until every file is readable
st.caption(upload_limit_text())
prompt = st.chat_input(f"事例や質問を入力（PDF / DOCX / TXT、1 ファイル {MAX_UPLOAD_BYTES // 2**20} MB まで添付できます）",
                       accept_file="multiple", file_type=["pdf", "docx", "txt"], key="knowledge_input")
if prompt:
    state.pending_submission = knowledge_chat.submission(prompt)

submission = state.pending_submission
ready = knowledge_chat.resolve_pending(state)
if ready is not None:
    with st.status("モデルが応答を作成しています…", expanded=True) as status, streaming(status):
        try:
            outcome = _conversations().submit(state.session_id, state.chat, state.knowledge_outputs, *ready,
                                              state.llm_client, log=debug_sink())
        except outage.HOLD_ERRORS as exc:  # not stored: the text and files stay, to send again
            outage.note(exc, "knowledge")
            state.pending_submission = knowledge_chat.held(submission, exc)
            status.update(label="送信できませんでした（入力内容は保持しています）", state="error", expanded=False)
            st.rerun()
        status.update(label=outcome.result.status_label, state="complete" if outcome.result.ok else "error",
                      expanded=False)
    if state.get("debug_enabled"):
        stream_caption()

chat_col, side_col = st.columns([3, 2], gap="large")
with chat_col:
    knowledge_chat.transcript(state.chat, debug=bool(state.get("debug_enabled")), on_resend=_resend,
                              on_answer=lambda i, latest: answer_feedback("knowledge", state.session_id, i, latest=latest))

with side_col:
    knowledge_chat.progress_panel(state.chat, state.knowledge_outputs)
    knowledge_chat.draft_cards(state.knowledge_outputs, state.chat, on_confirm=_confirm_entry)
    if state.knowledge_outputs:
        recorded_as(identity())  # who a confirmation (button or typed 「確定」) is recorded as
    similar_panel(lambda: _conversations().similar(state.session_id, state.chat, state.knowledge_outputs),
                  (state.session_id, len(state.chat), tuple((e.get("id"), e.get("version")) for e in state.knowledge_outputs)))
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
