"""車両問診: the vehicle diagnosis chat (seed 000) — vehicle picker, photo check, the interview with
choice buttons, urgency banner, manual citations, rewind, booking form and confirmation."""
from __future__ import annotations

import streamlit as st

from core.diagnosis import ChatRequest, PromptInfo, view
from core.diagnosis.conversation import DiagnosisConversations
from core.text.markup import safe_markdown, safe_text
from ui import history, outage
from ui.conversations import bind_conversation, recent_conversations
from ui.feedback import answer_feedback
from ui.session import debug_sink, identity, leave_pages_directory_mode, provider_caption, store
from ui.streaming import streaming

leave_pages_directory_mode()  # first: a fresh server's deep link must run app.py before this page

state = st.session_state
if "diag_convs" not in state:  # the stored conversation path (the HTTP API uses the same one)
    state.diag_convs = DiagnosisConversations(store(), client=state.llm_client, owner=identity())
state.diag_convs.sessions.owner = identity()
state.diag_service = state.diag_convs.service
state.setdefault("diag_transcript", [])  # view.send keeps it: user / assistant entries


def _load_conversation(conversation: dict) -> bool:
    resumed = state.diag_convs.resume(conversation["id"])
    if resumed is None:
        return False
    state.diag_transcript, state.diag_response = resumed.transcript, resumed.response
    return True


def _new_conversation() -> str:
    state.diag_response = state.diag_convs.start(state.diag_transcript, client=state.llm_client, log=debug_sink())
    return state.diag_response.session_id


def _follow(response) -> None:
    """A restart or an expired session moved to a new session id: the URL follows it."""
    if response.session_id != state.get("diagnosis_conversation_id"):
        state.diagnosis_conversation_id = response.session_id
        st.query_params["session"] = response.session_id


# ---- actions (button callbacks run before the page is drawn) -------------------------------------
def _request(fields: dict) -> None:
    current = state.diag_response
    with streaming():  # the answer (and the manual's answer) appear as the model writes them
        response = state.diag_convs.send(state.diag_transcript, ChatRequest(session_id=current.session_id, **fields),
                                         prompt=current.prompt, client=state.llm_client, log=debug_sink())
    state.diag_response = response
    _follow(response)
    if response.fallback:
        st.toast("モデルの呼び出しに失敗したため、定型の案内を表示しました。", icon="⚠️")


def _send(**fields) -> None:
    """One request; kept for 「再送信」 when the database is down or the conversation busy (ui.outage)."""
    label = view.request_label(ChatRequest(**fields), state.diag_response.prompt) or "（操作）"
    outage.send_or_hold("diagnosis", fields, label, _request)


def _choose(action: str | None, value: str) -> None:
    _send(action=action, action_value=value)


def _rewind(turn: int) -> None:
    _send(rewind_to_turn=turn)


def _submit_booking(names: list[str]) -> None:
    _send(action="submit_booking", action_value={n: state.get(f"diag_field_{n}") or "" for n in names})


@outage.protect
def _reset() -> None:
    _new_conversation()
    _follow(state.diag_response)


# ---- widgets for the latest prompt ----------------------------------------------------------------
def _vehicle_picker(prompt: PromptInfo) -> None:
    for col, choice in zip(st.columns(len(prompt.choices)), prompt.choices):
        card = view.vehicle_card(choice.value)
        with col.container(border=True):
            if card["image"]:
                st.image(card["image"], width=240)
            st.markdown(f"**{card['title']}**")
            st.caption(card["subtitle"])
            st.button("この車を選ぶ", key=f"diag_vehicle_{choice.value}", type="primary",
                      on_click=_choose, args=(prompt.action, choice.value))


def _choice_buttons(prompt: PromptInfo) -> None:
    labels = view.CONFIRM_LABELS if prompt.type == "booking_confirm" else {}
    for choice in prompt.choices:
        icon = view.asset_path(choice.icon)
        target = st
        if icon:
            icon_col, target = st.columns([1, 14], vertical_alignment="center")
            icon_col.image(icon, width=24)
        label = labels.get(choice.value) or safe_text(choice.label, single_line=True)  # model text: no links or images
        target.button(label, key=f"diag_choice_{choice.value}",
                      on_click=_choose, args=(prompt.action, choice.value))


def _booking_form(prompt: PromptInfo) -> None:
    for error in prompt.errors:
        st.error(error)
    with st.form("diag_booking_form"):
        for field in prompt.booking_fields:
            widget = st.text_area if field.kind == "textarea" else st.text_input
            widget(f"{field.label}{' *' if field.required else ''}", value=field.value,
                   placeholder=field.placeholder, key=f"diag_field_{field.name}")
        st.form_submit_button("入力内容を確認する", type="primary", key="diag_booking_submit",
                              on_click=_submit_booking, args=([f.name for f in prompt.booking_fields],))


def _summary(summary: dict[str, str]) -> None:
    with st.container(border=True):
        st.markdown("\n".join(f"- **{label}:** {safe_text(value, single_line=True) or '—'}"
                               for label, value in summary.items()))


def _prompt_widgets(prompt: PromptInfo, step: str) -> None:
    if step == "vehicle_id" and prompt.choices:
        _vehicle_picker(prompt)
        return
    if prompt.image and (image := view.asset_path(prompt.image)):
        st.image(image, width=320, caption="お選びのお車")
    if prompt.type == "booking_form":
        _booking_form(prompt)
        return
    if prompt.type == "booking_confirm":
        _summary(prompt.booking_summary)
    _choice_buttons(prompt)


def _assistant(entry: dict) -> None:
    if entry.get("notice"):
        st.info(entry["notice"])
    st.markdown(safe_markdown(entry["message"]))
    if entry.get("summary"):
        _summary(entry["summary"])
    if entry.get("judgment") and state.get("debug_enabled"):  # 「判定: …」 is internal: debug mode only
        st.caption(entry["judgment"])
    if entry.get("fallback"):
        st.caption(view.FALLBACK_NOTE)
    if entry["sources"]:
        st.caption(view.citation_caption(entry["sources"]))
        with st.expander("📖 取扱説明書の該当箇所"):
            if entry.get("rag_answer"):  # seed 000 §10: the manual's answer, then its sources
                st.markdown(safe_markdown(entry["rag_answer"]))
            for source in entry["sources"]:
                st.markdown(view.source_details(source))


# ---- page ---------------------------------------------------------------------------------------
outage.keep_on_failure("diag_input", lambda text: outage.hold("diagnosis", {"message": text.strip()}, text))
st.title("🚗 車両問診")
provider_caption()
bind_conversation("diagnosis", load=_load_conversation, new=_new_conversation)
recent_conversations("diagnosis", state.get("diagnosis_conversation_id"))
st.caption("症状をうかがい、取扱説明書を根拠に原因の候補と対処をご案内します。緊急時はロードサービス・点検予約まで手配できます。")

placeholder = ("症状を入力してください（例: エンジン警告灯がついた）" if state.diag_response.current_step == "free_text"
               else "メッセージを入力（ボタンの代わりに文字で答えることもできます）")
typed = st.chat_input(placeholder, key="diag_input")
if typed and typed.strip():
    with st.spinner("取扱説明書を確認しています…（初回は検索インデックスの準備に時間がかかります）"):
        _send(message=typed.strip())

outage.held_input("diagnosis", _request)
response = state.diag_response
session = state.diag_service.get_session(response.session_id)

with st.sidebar:
    st.subheader("🚗 問診の状態")
    st.markdown("\n".join(f"- **{label}:** {value}" for label, value in view.state_rows(session, response)))

st.button("🔄 最初からやり直す", key="diag_reset", on_click=_reset)
banner = view.urgency_banner(response.urgency)
if banner is not None:
    (st.error if banner.kind == "error" else st.warning)(banner.text, icon=banner.icon)

points = {int(s["turn"]) for s in session.state_snapshots} if session else set()
transcript = state.diag_transcript
for i, entry in history.shown(transcript, "diag_history_all", per_exchange=2):
    with st.chat_message(entry["role"]):
        if entry["role"] == "user":
            st.markdown(safe_markdown(entry["text"]))
            if entry.get("turn") in points:
                st.button("↩️ このターンに戻る", key=f"diag_rewind_{entry['turn']}", type="tertiary",
                          on_click=_rewind, args=(entry["turn"],))
            continue
        _assistant(entry)
        answer_feedback("diagnosis", state.get("diagnosis_conversation_id"), i, latest=i == len(transcript) - 1)
        if i == len(transcript) - 1:
            _prompt_widgets(response.prompt, response.current_step)
