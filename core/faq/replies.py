"""Fixed Japanese replies of the FAQ bot: non-task answers, not found (also for a fact the articles do not
state, and for one question of several), fallback (reason + next step)."""
from __future__ import annotations

import re

NEXT_STEP = "お急ぎの場合やお車の状態に関わるご相談は、店頭またはお電話で担当者にお問い合わせください。"

GREETING = ("こんにちは。カイワ自動車 販売店の FAQ チャットです。{topics}などについてのご質問に、"
            "FAQ 記事をもとにお答えします。お気軽にご質問ください。")
THANKS = "どういたしまして。ほかにもご不明な点があれば、お気軽にご質問ください。"
FAREWELL = "ご利用ありがとうございました。またいつでもご質問ください。"
ABOUT_BOT = ("こちらはカイワ自動車 販売店の FAQ チャットです。{topics}などについて、FAQ 記事を検索して根拠の記事を"
             "示しながらお答えします。返金や保証適用の判断など、担当者の正式な判断が必要なご相談は担当者へおつなぎします。")
OUT_OF_SCOPE = ("申し訳ございません。こちらはカイワ自動車 販売店の FAQ チャットのため、そのご質問にはお答えできません。"
                "{topics}などについてのご質問でしたらお答えします。")
NOT_FOUND = ("申し訳ございません。ご質問に該当する FAQ 記事が見つかりませんでした。記事にない内容は、"
             "不確かなご案内にならないよう回答を控えております。\n"
             "・言葉を変えて、もう一度ご質問ください（例: 「車検の費用」「オイル交換の時期」）。\n"
             "・" + NEXT_STEP)
NOT_FOUND_FACT = ("申し訳ございません。FAQ 記事には、ご質問の{label}についての記載がありません。記事にない内容は、"
                  "不確かなご案内にならないよう回答を控えております。\n・{next_step}\n・" + NEXT_STEP)
PART_NOT_FOUND = "・「{question}」については、該当する FAQ 記事が見つかりませんでした。{next_step}"
FALLBACK = {
    "timeout": ("申し訳ございません。ただいま FAQ 検索の応答がなく（{attempts} 回試しましたがタイムアウトしました）、"
                "回答をお調べできませんでした。\n・少し時間をおいて、もう一度ご質問ください。\n・" + NEXT_STEP),
    "kb_error": ("申し訳ございません。FAQ 検索でエラーが発生したため、回答をお調べできませんでした。\n"
                 "・少し時間をおいて、もう一度ご質問ください。\n・" + NEXT_STEP),
    "model": ("申し訳ございません。回答文の作成に失敗したため、お答えできませんでした。\n"
              "・少し時間をおいて、もう一度ご質問ください。\n・" + NEXT_STEP),
    "internal": ("申し訳ございません。システム内部の問題により回答を作成できませんでした。\n"
                 "・少し時間をおいて、もう一度ご質問ください。\n・" + NEXT_STEP),
}
HANDOFF_NOTE = "（担当者への引き継ぎを受け付けました）"
DEFAULT_TOPICS = ("メンテナンス", "保証", "予約・来店", "ロードサービス", "支払い")


def not_found_for(label: str, next_step: str) -> str:
    """Not found because the articles do not state the fact asked for (a price, a duration)."""
    return NOT_FOUND_FACT.format(label=label, next_step=next_step)


def part_not_found(question: str, label: str | None = None, next_step: str | None = None) -> str:
    """One question of several that no article answers."""
    step = next_step or "言い方を変えてご質問いただくか、担当者にお問い合わせください。"
    if label:
        step = f"{label}の記載がありません。{step}"
    return PART_NOT_FOUND.format(question=question.strip(" ?？。")[:60], next_step=step)


def topics_text(categories: list[str] | None) -> str:
    names = [c for c in (categories or DEFAULT_TOPICS) if c][:5]
    return "、".join(names)


def non_task(kind: str, categories: list[str] | None = None) -> str:
    template = {"greeting": GREETING, "thanks": THANKS, "farewell": FAREWELL,
                "about": ABOUT_BOT}.get(kind, OUT_OF_SCOPE)
    return template.format(topics=topics_text(categories))


def fallback(error_type: str | None, attempts: int | None = None) -> str:
    if error_type == "timeout":
        return FALLBACK["timeout"].format(attempts=attempts or 1)
    if error_type == "kb_error":
        return FALLBACK["kb_error"]
    if error_type and (error_type.startswith("nlg_") or error_type.startswith("model_")):
        return FALLBACK["model"]
    return FALLBACK["internal"]


_KB_ID = re.compile(r"kb:\d+")


def remove_unknown_ids(message: str, allowed: set[str]) -> str:
    """``message`` with mentions of article ids outside ``allowed`` removed."""
    return _KB_ID.sub(lambda m: m.group(0) if m.group(0) in allowed else "", message)
