"""A confirmation typed into the interview (「確定」「これでお願いします」) and a reply that claims one.

Typing 「確定」 used to get 「ナレッジを確定しました。」 while the entry stayed a draft. Now a typed
confirmation confirms through the same path as the 「✅ このナレッジを確定する」 button
(:meth:`core.store.store.Store.set_entry_status`: permission-checked, audited, recorded with who), and the
reply says what really happened; a reply that claims a confirmation that did not happen gets a note
saying so and pointing to the button. Plain string checks on short, capped text: no regular expression.
"""
from __future__ import annotations

CONFIRM_WORDS = ("確定", "問題ありません", "問題ない", "これで大丈夫", "これでお願いします", "これでOK", "OKです",
                 "承認", "了承", "それでお願いします", "大丈夫です", "以上です")
# A message with any of these is not a confirmation: a negation, a wait, a question, a field edit.
NOT_CONFIRMING = ("しない", "しません", "せず", "まだ", "待って", "まって", "やめ", "取り消", "取消", "保留", "前に",
                  "?", "？", ":", "：", "ですか", "ますか")
MAX_CONFIRM_CHARS = 30  # a confirmation is a short message, not a paragraph that mentions 「確定」
CLAIMS = ("確定しました", "確定いたしました", "確定済みにしました", "確定させました")

CONFIRMED_NOTE = "✅ ライブラリで確定済みにしました（No.{ids}・記録: {who}）。以後の会話では新しい下書きが作られます。"
NOTHING_TO_CONFIRM = "ℹ️ 確定できる下書きがまだありません。草案ができてから「確定」と送るか、ボタンで確定してください。"
NOT_CONFIRMED_NOTE = ("⚠️ ライブラリではまだ確定されていません（{reason}）。"
                      "右の「✅ このナレッジを確定する」ボタンを押して確定してください。")


# 「なお第10条は問題ありません」 says something about an article, not 「confirm this draft」.
ASIDE_WORDS = ("なお", "ちなみに")


def _names_article(message: str) -> bool:
    """「第10条」「第３条」 anywhere in the (short) message."""
    start = message.find("第")
    while start >= 0:
        if "条" in message[start + 1:start + 6]:
            return True
        start = message.find("第", start + 1)
    return False


# An entry a reviewer can sign has its action plan and a clause sample; the interviewer's placeholder
# for a waived sample is not one.
REQUIRED_FOR_CONFIRMATION = {"action_plan": "対応方針", "clause_sample": "条文例"}
PLACEHOLDERS = ("（条文例は事案に応じて作成してください）", "（未設定）")
# 「不足のまま確定」: the typed confirmation of an incomplete entry, after being told what it lacks.
CONFIRM_INCOMPLETE_WORDS = ("不足のまま確定", "このまま確定", "未設定のまま確定", "未入力のまま確定", "空欄のまま確定")
INCOMPLETE_NOTE = ("⚠️ {missing}が未設定のため、まだ確定していません。「対応方針: …」「条文例: 「…」」のように送って"
                   "補うか、このまま確定する場合は「不足のまま確定」と送ってください。")


def missing_for_confirmation(entry: dict | None) -> list[str]:
    """The labels of the fields an entry lacks to be signed (「対応方針」「条文例」), [] when complete."""
    entry = entry or {}
    return [label for key, label in REQUIRED_FOR_CONFIRMATION.items()
            if not str(entry.get(key) or "").strip() or str(entry.get(key)).strip() in PLACEHOLDERS]


def incomplete_label(entry: dict | None) -> str:
    """「（対応方針・条文例が未設定）」 for an incomplete entry, "" for a complete one."""
    missing = missing_for_confirmation(entry)
    return f"（{'・'.join(missing)}が未設定）" if missing else ""


def accepts_incomplete(text: str | None) -> bool:
    return any(w in (text or "") for w in CONFIRM_INCOMPLETE_WORDS)


def is_typed_confirmation(text: str | None) -> bool:
    """Whether the user's message is a confirmation of the draft (short, a confirm word, no negation,
    question, ``項目: …`` edit, or remark about an article)."""
    message = (text or "").strip().rstrip("。！!")
    if not message or len(message) > MAX_CONFIRM_CHARS:
        return False
    if any(w in message for w in ASIDE_WORDS) or _names_article(message):
        return False
    return any(w in message for w in CONFIRM_WORDS) and not any(w in message for w in NOT_CONFIRMING)


def claims_confirmation(message: str | None) -> bool:
    """Whether an assistant reply says the knowledge was confirmed."""
    return any(w in (message or "") for w in CLAIMS)
