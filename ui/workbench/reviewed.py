"""レビュー済みセット: the regression cases reviewers made (``core.review``) replayed on the provider of this tab,
with the prompt versions in use and, optionally, another model; per case whether the answer now matches what
the reviewer decided. :func:`draft_replay` runs the same set with the prompt text being edited in the workbench,
unsaved (``core.review.replay``'s ``drafts``: served to this run only, never recorded as a version)."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.prompts import load_prompt, version_of
from core.review.replay import DRAFT_JA, draft_label, replay_reviewed
from ui import safe
from ui.kept import kept
from ui.session import store

PROMPT_TEXT_PREFIX = "wb_prompt_text_"  # the workbench's prompt editor (ui.workbench.replay), one key per prompt


def _show(rows: list[dict], prefix: str) -> None:
    matched = sum(r["判定と一致"].startswith("✅") for r in rows)
    st.metric("レビューの判定と一致", f"{matched} / {len(rows)}")
    safe.table(pd.DataFrame(rows), hide_index=True, width="stretch", key=f"{prefix}_table")


def editor_draft() -> tuple[str, str] | None:
    """The prompt being edited in the workbench's editor when it differs from the text in use: ``(name, text)``."""
    name = kept("wb_prompt_name")  # the editor's tab may be closed (lazy tabs): its last values (ui.kept)
    text = kept(f"{PROMPT_TEXT_PREFIX}{name}") if name else None
    if not name or not str(text or "").strip():
        return None
    try:
        return (name, str(text)) if str(text).strip() != load_prompt(name) else None
    except (OSError, ValueError):
        return None


def reviewed_tab(prefix: str = "wb_reviewed") -> None:
    state = st.session_state
    cases = store().list_review_scenarios()
    if not cases:
        st.info("まだ回帰ケースがありません。レビュー ページで判定を記録した項目を「回帰ケースにする」と追加されます。")
        return
    client = state.llm_client
    st.caption(f"回帰ケース {len(cases)} 件を、いま使われているプロンプト版と {getattr(client, 'name', '?')} で再生し、"
               "レビューの判定（修正後の回答の事実）と一致するかを確かめます。新しいプロンプト版は、ワークベンチで保存すると使われます。"
               "保存せずに試すには、デバッグログ → 再実行 のプロンプト編集欄の「下書きをレビュー済みセットで試す」を使います。")
    model = st.text_input("モデル（空欄ならプロバイダーの既定）", key=f"{prefix}_model", max_chars=200)
    draft = editor_draft()
    use_draft = False
    if draft is not None:
        use_draft = st.checkbox(f"編集中の {draft[0]} の{DRAFT_JA}で再生する（版として記録されません）",
                                key=f"{prefix}_use_draft")
    if st.button("▶️ レビュー済みセットで再実行", key=f"{prefix}_run", type="primary"):
        drafts = dict([draft]) if use_draft and draft else None
        with st.spinner("回帰ケースを再生しています…"):
            rows = replay_reviewed(store(), lambda: client, model=model.strip() or None, drafts=drafts)
        state[f"{prefix}_rows"] = [r.as_row() for r in rows]
    rows = state.get(f"{prefix}_rows")
    if rows:
        _show(rows, prefix)


def draft_replay(name: str, text: str, prefix: str = "wb_draft") -> None:
    """The reviewed set against ``text`` — the unsaved draft of prompt ``name`` in the editor — on this tab's
    provider: nothing is saved; the rows say 「未保存の下書き」."""
    state = st.session_state
    cases = store().list_review_scenarios()
    same = str(text or "").strip() == load_prompt(name)
    help_text = ("まだ回帰ケースがありません。" if not cases else
                 "内容が使用中の版と同じです。" if same else None)
    if st.button(f"🧪 下書きをレビュー済みセットで試す（保存しない・回帰ケース {len(cases)} 件）", key=f"{prefix}_run",
                 disabled=bool(help_text), help=help_text):
        with st.spinner("回帰ケースを下書きで再生しています…"):
            rows = replay_reviewed(store(), lambda: state.llm_client, drafts={name: text})
        state[f"{prefix}_rows"] = {"name": name, "rows": [r.as_row() for r in rows],
                                   "label": draft_label({name: version_of(text)})}
    shown = state.get(f"{prefix}_rows")
    if shown and shown["name"] == name:
        st.caption(f"{shown['label']} で再生しました。版として記録されていません（使用中の版は変わりません）。")
        _show(shown["rows"], prefix)
