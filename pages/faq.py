"""FAQ: the UC-01 chat (KB search → answer with citations) with outcome badges and a per-turn trace."""
from __future__ import annotations

import streamlit as st

from core.faq.conversation import FAQConversations
from core.faq.kb import FaultyKB, default_kb
from core.faq.report import latency_frame, outcome_badge, trace_frame, without_article_ids
from core.text.markup import safe_markdown, safe_text
from ui import charts, history, outage, safe
from ui.conversations import bind_conversation, recent_conversations
from ui.feedback import answer_feedback
from ui.session import debug_sink, identity, leave_pages_directory_mode, provider_caption, store
from ui.streaming import streaming

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

state = st.session_state
state.setdefault("faq_chat", [])  # [{"user", "message", "citations", "outcome", "trace"}]


def _conversations() -> FAQConversations:
    return FAQConversations(store(), identity())


def _load_conversation(conversation: dict) -> bool:
    state.faq_state, state.faq_chat = _conversations().load(conversation)
    return True


def _new_conversation() -> str:
    conversation_id, state.faq_state = _conversations().new()
    state.faq_chat = []
    return conversation_id

outage.keep_on_failure("faq_input", lambda text: outage.hold("faq", {"text": text.strip()}, text))
st.title("❓ FAQ")
provider_caption()
bind_conversation("faq", load=_load_conversation, new=_new_conversation)
recent_conversations("faq", state.faq_conversation_id)
st.caption("カイワ自動車 販売店の FAQ 記事を検索し、根拠の記事を示して回答します。"
           "返金・保証適用・事故の過失などの判断が必要なご相談は、担当者へおつなぎします。")

with st.sidebar:
    with st.expander("FAQ 運用者向け設定", expanded=False):
        st.toggle("KB 検索のタイムアウトを再現（障害注入）", key="faq_fault_timeout",
                  help="ON にすると FAQ 検索が毎回タイムアウトし、再試行のあと縮退応答になります。")
        if st.button("FAQ の会話をリセット", key="faq_reset"):
            state.faq_conversation_id = _new_conversation()
            st.query_params["session"] = state.faq_conversation_id
            st.rerun()


def _knowledge_base():
    kb = default_kb()
    return FaultyKB(kb, mode="timeout") if state.get("faq_fault_timeout") else kb


def _ask(payload: dict) -> None:
    with st.spinner("FAQ を検索しています…（初回は検索インデックスの準備に時間がかかります）"), streaming():
        result = _conversations().ask(state.faq_conversation_id, state.faq_state, state.faq_chat, payload["text"],
                                      client=state.llm_client, kb=_knowledge_base(), log=debug_sink())
    state.faq_state = result.state


def _run_turn(text: str) -> None:
    outage.send_or_hold("faq", {"text": text}, text, _ask)  # kept for 「再送信」 when it cannot be stored


def _show_citations(citations: list[str]) -> None:
    kb = default_kb()
    for article_id in citations:
        article = kb.article(article_id)
        if article is None:
            continue
        ref = f"{article.id}" if state.get("debug_enabled") else ""  # the KB id is internal: debug mode only
        with st.expander(f"📄 {ref}「{safe_text(article.title, single_line=True)}」（{safe_text(article.category, single_line=True)}）"):
            st.markdown(safe_markdown(article.body))


def _show_trace(turn: dict, index: int, latest: bool) -> None:
    trace = turn["trace"]
    if not trace or not state.get("debug_enabled"):  # no graph run (over-long input); node names: debug only
        return
    with st.expander(f"🔎 トレース（{len(trace)} ノード・合計 {sum(e['latency_ms'] for e in trace):.0f} ms）"):
        # chart and table for the latest turn only (or on demand): drawing them for every past turn
        # made each rerun grow with the history
        if latest or st.toggle("表とグラフを表示", key=f"faq_trace_show_{index}"):
            st.caption("ノード別の処理時間 (ms)")
            data, spec = charts.spec("bar", latency_frame(trace), y="latency_ms", horizontal=True)
            st.vega_lite_chart(data, spec, height=220, width="stretch")  # plain Vega-Lite: no Altair per rerun
            safe.table(trace_frame(trace), hide_index=True, key=f"faq_trace_{index}")
        else:
            st.caption(" → ".join(f"{e.get('node')} {float(e.get('latency_ms') or 0):.0f} ms" for e in trace))


prompt = st.chat_input("ご質問を入力してください（例: オイル交換の目安は？）", key="faq_input")
if prompt and prompt.strip():
    _run_turn(prompt.strip())
outage.held_input("faq", _ask)

if not state.faq_chat:
    with st.chat_message("assistant"):
        st.markdown("こんにちは。点検・車検、保証、予約、ロードサービス、お支払いなどについてご質問ください。")

for i, turn in history.shown(state.faq_chat, "faq_history_all"):
    with st.chat_message("user"):
        st.markdown(safe_markdown(turn["user"]))  # the user's own words, as typed (the flow only sees a masked copy)
    with st.chat_message("assistant"):
        label, color = outcome_badge(turn["outcome"])
        st.badge(label, color=color)
        st.markdown(safe_markdown(without_article_ids(turn["message"])))  # article ids: debug views only
        if turn["citations"]:
            st.caption("根拠の記事")
            _show_citations(turn["citations"])
        _show_trace(turn, i, latest=i == len(state.faq_chat) - 1)
        answer_feedback("faq", state.faq_conversation_id, i, latest=i == len(state.faq_chat) - 1)
