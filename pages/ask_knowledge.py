"""ナレッジに質問: a reviewer asks in their own words and gets an answer built only from confirmed entries,
with the entries it used (No., title) as citations (``core.knowledge.ask``)."""
from __future__ import annotations

import streamlit as st

from core.ids import new_id
from core.knowledge.ask import MAX_QUESTION_CHARS, ask
from core.knowledge.ask_slots import AskBusy, ask_slot
from core.knowledge.retrieval import knowledge_index
from ui.feedback import ask_feedback
from ui.knowledge_base import answer_view
from ui.session import debug_sink, leave_pages_directory_mode, provider_caption, store

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

state = st.session_state
st.title("🔎 ナレッジに質問")
provider_caption()
st.caption("確定済みのナレッジだけを根拠に答えます。根拠にしたナレッジの No. とタイトルを示し、該当するものがなければそう答えます。")

with st.form("ask_form"):
    question = st.text_area("質問", key="ask_question", max_chars=MAX_QUESTION_CHARS, height=100,
                            placeholder="例: 相手だけがいつでも契約を解除できる条項には、いつもどう対応していますか？")
    asked = st.form_submit_button("質問する", type="primary")

if asked:
    if not question.strip():
        st.warning("質問を入力してください。")
    else:
        try:
            with st.spinner("確定済みのナレッジを検索しています…"), ask_slot():
                answer = ask(question, knowledge_index(store()), state.llm_client, log=debug_sink(),
                             session_id=state.setdefault("ask_session_id", f"ask-{new_id(10)}"))
            state.ask_last = {"question": question, "ok": answer.ok, "answer": answer.answer,
                              "sources": [{**h.source(), "quote": answer.quotes.get(h.entry_id, "")}
                                          for h in answer.sources]}
        except AskBusy as busy:  # the question stays in the form
            st.warning(busy.message, icon="⏳")

answer_view(state.get("ask_last"))
ask_feedback(state.get("ask_last"), state.get("ask_session_id"), getattr(state.llm_client, "model", ""))
