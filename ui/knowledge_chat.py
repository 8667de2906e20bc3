"""The contract-knowledge interview's widgets: the upload hold (files too large, locked PDFs), the chat
transcript with its failed turns, the progress panel and the draft cards with their downloads."""
from __future__ import annotations

import json
from typing import Any, Callable

import streamlit as st

from core.documents import MAX_UPLOAD_BYTES, content_sha256, extract_cached, too_large_message
from core.knowledge.confirmation import missing_for_confirmation
from core.knowledge.export import clean_entry, entries_csv, entries_json
from core.knowledge.session import current_state, turns_jsonl
from core.schema_versions import describe as schema_caption
from core.store.conversations import TurnBusy
from ui import history
from ui.safe import plain, safe_markdown

PHASES = {"collect_case": "① 事例ヒアリング", "organize_risks": "② リスク整理",
          "draft_knowledge": "③ ナレッジ草案", "review_knowledge": "④ レビュー・確定"}
MODES = {"interview": "ヒアリング", "clarify": "確認", "finalize": "草案提示"}
FIELD_LABELS = {"knowledge_title": "タイトル", "contract_type": "契約類型", "target_clause": "対象条項",
                "review_points": "審査ポイント", "action_plan": "対応方針", "clause_sample": "条文例"}
ENTRY_STATUS = {"draft": "🟡 下書き", "confirmed": "🟢 確定済み", "archived": "⚪ アーカイブ"}
GREETING = ("契約審査ナレッジの作成をお手伝いします。どの種類の契約書で、どの条項が問題になったか教えてください。"
            "契約書ファイルを添付することもできます（テキストはメモリ上でのみ処理し、保存しません）。")


def _extract_all(files: list[tuple[str, bytes]], passwords: dict[str, str]) -> list:
    """Each file extracted once per content and password (reruns hit the cache); passwords by SHA-256."""
    return [extract_cached(name, data, passwords.get(content_sha256(data))) for name, data in files]


def _password_key(index: int, doc, docs: list) -> str:
    """pw_<name>, or with index and hash when two pending files share a name (widget keys must be unique)."""
    if sum(d.name == doc.name for d in docs) == 1:
        return f"pw_{doc.name}"
    return f"pw_{doc.name}_{index}_{doc.sha256[:12]}"


def submission(prompt: Any) -> dict[str, Any]:
    """The chat input's value (text and files) as a pending submission; a file over the limit is named and
    held back, never dropped silently (its bytes are not kept)."""
    files, refused = [], []
    for upload in getattr(prompt, "files", None) or []:
        data = upload.getvalue()
        if len(data) > MAX_UPLOAD_BYTES:
            refused.append({"name": upload.name, "size": len(data)})
        else:
            files.append((upload.name, data))
    return {"text": getattr(prompt, "text", None) or "", "files": files, "passwords": {}, "refused": refused}


def keep_submission(prompt: Any) -> None:
    """What was just typed, kept when the page failed on the store before it could take it."""
    st.session_state.pending_submission = {**submission(prompt), "held": "outage"}


def held(pending: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    """``pending`` kept after sending it failed (the database was down, or the conversation busy): shown
    by :func:`resolve_pending` with 「再送信」 until the user sends or drops it."""
    return {**pending, "held": "busy" if isinstance(exc, TurnBusy) else "outage"}


def _held_box(state: Any, pending: dict[str, Any]) -> None:
    if pending["held"] == "busy":
        st.warning("前のメッセージの処理が終わっていなかったため、次の内容は送信していません。", icon="⏳")
    else:
        st.warning("データベースに接続できなかったため、次の内容は送信していません（保持しています）。", icon="💾")
    names = "、".join(name for name, _ in pending["files"])
    st.text((pending["text"] or "（本文なし）") + (f"\n添付: {names}" if names else ""))
    col1, col2 = st.columns(2)
    if col1.button("再送信", key="pending_resend", type="primary"):
        pending.pop("held", None)
        st.rerun()
    if col2.button("破棄", key="pending_drop"):
        state.pending_submission = None
        st.rerun()


def resolve_pending(state: Any) -> tuple[str, list] | None:
    """The held submission (``state.pending_submission``: text, files, passwords, refused files), asked
    about until every file is readable or left out: (text, readable documents) once it can be sent, else
    None. Nothing the user typed or uploaded is dropped silently: a submission that could not be stored
    (``held``) waits for 「再送信」."""
    pending = state.pending_submission
    if not pending:
        return None
    if pending.get("held"):
        _held_box(state, pending)
        return None
    docs = _extract_all(pending["files"], pending["passwords"])
    locked = [(i, d) for i, d in enumerate(docs) if d.needs_password]
    if pending.get("refused"):
        for item in pending["refused"]:
            st.error(f"{plain(item['name'])}: {too_large_message(item['size'])}")
        st.warning("入力内容は保持しています。大きすぎるファイルを除いて送信するか、取り消してファイルを分けてください。")
        col1, col2 = st.columns(2)
        if col1.button("大きすぎるファイルを除いて送信", key="pending_drop_refused"):
            pending["refused"] = []
            st.rerun()
        if col2.button("送信を取り消す", key="pending_cancel"):
            state.pending_submission = None
            st.rerun()
        return None
    if locked:
        with st.form("pdf_password"):
            st.warning("パスワードで保護された PDF があります。入力内容は保持しています。")
            entered = {}
            for i, d in locked:
                if d.error and pending["passwords"].get(d.sha256):
                    st.error(f"{plain(d.name)}: {d.error}")
                entered[d.sha256] = st.text_input(f"{plain(d.name)} のパスワード", type="password",
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
        return None
    state.pending_submission = None
    for d in docs:
        if d.error:
            st.error(f"{plain(d.name)}: {d.error}")
        for w in d.warnings:
            st.warning(f"{plain(d.name)}: {w}")
    readable = [d for d in docs if d.ok and d.paragraphs]
    if pending["text"].strip() or readable:
        return pending["text"], readable
    if docs:
        st.info("読み取れるテキストがなかったため送信しませんでした。内容を入力して送信してください。")
    return None


def transcript(chat: list[dict[str, Any]], *, debug: bool, on_resend: Callable[[str], None],
               on_answer: Callable[[int, bool], None] | None = None) -> None:
    """The chat so far. A failed turn shows seed 003's plain message (details only in debug mode) and a
    resend button that calls ``on_resend(retry_of)``. ``on_answer(index, latest)`` draws what goes under each
    assistant answer (its 👍/👎)."""
    if not chat:
        with st.chat_message("assistant"):
            st.markdown(GREETING)
    for i, entry in history.shown(chat, "knowledge_history_all", per_exchange=2):
        with st.chat_message(entry["role"]):
            _entry(entry, debug, on_resend)
            if on_answer is not None and entry["role"] == "assistant":
                on_answer(i, i == len(chat) - 1)


def _entry(entry: dict[str, Any], debug: bool, on_resend: Callable[[str], None]) -> None:
    """One chat entry; a failed answer shows seed 003's plain message and the resend button."""
    if entry.get("failed") and entry["role"] == "assistant":
        if debug:  # internal details only in debug mode
            st.error(f"⚠️ {entry['content']}（{entry.get('error_type')}、{entry.get('attempts', 0)} 回試行）")
            st.code("\n".join(entry.get("errors") or []) or "-", language=None)
            with st.expander("モデルの生出力", expanded=True):
                st.code(entry.get("raw") or "（出力なし）", language="json")
        else:  # seed 003 §2.2: the user sees a temporary error
            st.error("⚠️ 一時的なエラーが発生しました。入力内容は保持しています。同じ内容で再送信してください。")
        if st.button("同じ内容で再送信", key=f"resend_{entry.get('retry_of')}"):
            on_resend(entry["retry_of"])
            st.rerun()
        return
    st.markdown(safe_markdown(entry["content"]) or "（添付のみ）")
    for att in entry.get("attachments") or []:
        st.caption(f"📎 {plain(att['name'])}（{att['summary']}）")
    if entry["role"] == "user" and entry.get("gated"):
        with st.expander("送信しなかった全文（コピーして短くしてから送り直せます）"):
            st.code(entry.get("user_text") or "", language=None, wrap_lines=True)
    if entry["role"] == "user" and entry.get("file_texts"):
        with st.expander("抽出したテキスト（先頭）"):
            for text in entry["file_texts"]:
                st.text(text[:800])
    if entry.get("method") and debug:  # internal captions only in debug mode
        st.caption(f"方式: {entry['method']} · 呼び出し {entry.get('attempts', 1)} 回 · {schema_caption(entry)}")


def progress_panel(chat: list[dict[str, Any]], outputs: list[dict[str, Any]] | None = None) -> None:
    """進行状況: the phase, the mode and what is still missing, from the last valid turn; once the entry is
    confirmed in the library, that it is confirmed (No. and a link), whatever the last turn said."""
    turn = current_state(chat)
    st.subheader("進行状況")
    confirmed = [e for e in outputs or [] if e.get("status") == "confirmed"]
    if confirmed:
        st.progress(1.0, text="✅ 確定済み")
        numbers = "、".join(f"No.{e['id']}" for e in confirmed)
        st.success(f"ナレッジは確定済みです（{numbers}）。ライブラリで確認・編集できます。")
        st.page_link("pages/library.py", label="ライブラリで開く", icon="📚", query_params={"entry": str(confirmed[0]["id"])})
        return
    if not turn:
        st.caption("まだ会話がありません。")
        return
    phase = turn["state"]["phase"]
    st.progress((list(PHASES).index(phase) + 1) / len(PHASES), text=PHASES[phase])
    st.markdown(f"**モード:** {MODES.get(turn['control']['mode'], turn['control']['mode'])}")
    missing = turn["state"]["missing_info"]
    if missing:
        st.markdown("**まだ必要な情報**")
        for i, item in enumerate(missing):  # keyed by position: the model may repeat an item
            st.checkbox(plain(item), value=False, disabled=True, key=f"missing_{i}")
    else:
        st.success("必要な情報はそろっています")


def incomplete_ack(entry: dict[str, Any], *, key: str) -> bool:
    """For an entry without 対応方針 or 条文例: say what is missing and ask for an explicit tick before
    the confirm button works (never a one-click confirmation of an incomplete entry). True when the
    entry may be confirmed now."""
    missing = missing_for_confirmation(entry)
    if not missing:
        return True
    st.warning(f"{'・'.join(missing)}が未設定です。確定すると、この不足のままライブラリの確定済みナレッジになります。")
    return st.checkbox(f"{'・'.join(missing)}が未設定のまま確定する", key=key)


def draft_cards(outputs: list[dict[str, Any]], chat: list[dict[str, Any]], *,
                on_confirm: Callable[[int], None]) -> None:
    """ナレッジ: one card per drafted entry (status, fields, its JSON, a confirm button for drafts),
    then the CSV / JSON of all entries and the JSONL of every turn."""
    st.subheader("ナレッジ")
    if not outputs:
        st.caption("ドラフトができるとここに表示されます。")
    for i, entry in enumerate(outputs):
        with st.container(border=True):
            st.markdown(f"#### {plain(entry['knowledge_title']) or '（タイトル未設定）'}")
            if entry.get("status"):
                st.caption(f"{ENTRY_STATUS.get(entry['status'], entry['status'])} · No.{entry['id']} · 版 {entry['version']}")
            for key in ("contract_type", "target_clause", "review_points", "action_plan", "clause_sample"):
                st.markdown(f"**{FIELD_LABELS[key]}**")
                st.text(entry[key] or "—")
            st.download_button("この JSON をダウンロード", json.dumps(clean_entry(entry), ensure_ascii=False, indent=2),
                               file_name=f"knowledge_{i + 1}.json", mime="application/json", key=f"dl_entry_{i}")
            if entry.get("status") == "draft":
                allowed = incomplete_ack(entry, key=f"confirm_incomplete_{entry['id']}")
                st.button("✅ このナレッジを確定する", key=f"confirm_entry_{entry['id']}", type="primary",
                          on_click=on_confirm, args=(entry["id"],), disabled=not allowed,
                          help="確定するとライブラリで確定済みになります。以後の会話では新しい下書きが作られます。")
    if outputs:
        col1, col2 = st.columns(2)
        col1.download_button("全件 CSV", entries_csv(outputs), file_name="knowledge.csv", mime="text/csv", key="dl_csv")
        col2.download_button("全件 JSON", entries_json(outputs), file_name="knowledge.json",
                             mime="application/json", key="dl_json")
    if any(e.get("turn") for e in chat):
        st.download_button("全ターン JSONL", turns_jsonl(chat), file_name="turns.jsonl",
                           mime="application/jsonl", key="dl_turns")
