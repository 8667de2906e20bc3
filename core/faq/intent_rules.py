"""Deterministic intent rules for the FAQ bot (the offline IR policy and the IR fallback).

``classify(text, previous_query)`` returns a ``faq_intent`` object: ``question`` for greetings,
thanks and questions about the bot itself; ``oos`` for topics a car dealer's FAQ does not cover
(weather, stocks, recipes …) when no dealer word is present; ``procedure`` for how-to / paperwork
requests; ``faq`` otherwise. The query is the question without politeness fillers; a short
follow-up (「それは…」「じゃあ…」) is completed with the previous turn's query.
"""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from core.faq.kb import load_articles

GREETING = re.compile(r"^(こんにちは|こんばんは|おはよう|はじめまして|初めまして|もしもし|やあ|どうも|hello|hi)[!！。、\s]*$|^(こんにちは|こんばんは|おはようございます)", re.I)
THANKS = re.compile(r"(ありがとう(ございます|ございました)?|有難う(ございます|ございました)?|助かりました|助かります|わかりました|分かりました|了解)[!！。\s]*$")
FAREWELL = re.compile(r"(さようなら|さよなら|またね|バイバイ|失礼します)[!！。\s]*$")
ABOUT_BOT = re.compile(r"(あなた|君|きみ|このボット|このチャット|このAI|ボット)(は|って)(誰|だれ|何|なに|どなた)"
                       r"|何ができ|なにができ|どんな(こと|質問)(に|が|を)?(答え|でき|聞け)|何を聞け|使い方がわから")
OOS_WORDS = ("天気", "天候", "気温", "株価", "株式", "為替", "仮想通貨", "ビットコイン", "ニュース", "レシピ", "料理",
             "献立", "映画", "ドラマ", "アニメ", "音楽", "歌", "野球", "サッカー", "占い", "星座", "宝くじ", "競馬",
             "恋愛", "彼氏", "彼女", "宿題", "数学", "翻訳", "ゲーム", "観光", "旅行先", "ホテル", "レストラン",
             "ランチ", "ラーメン", "政治", "選挙", "総理", "ダイエット", "筋トレ", "ペット", "就職", "転職", "小説",
             "詩を", "ジョーク", "冗談", "なぞなぞ")
PROCEDURE_CUES = ("手続き", "手続", "必要書類", "書類", "申し込み", "申込", "やり方", "方法", "流れ", "どうすれば",
                  "どうしたら", "どうやって", "登録", "名義変更", "住所変更", "廃車", "予約したい", "予約を取り",
                  "変更したい", "届け出", "届出")
# Words that make a question about the dealer even when no article keyword matches.
DEALER_WORDS = ("車", "クルマ", "くるま", "販売店", "お店", "店舗", "店頭", "カイワ", "ミライバ", "トレック", "整備",
                "点検", "修理", "部品", "保証", "保険", "予約", "来店", "ディーラー", "エンジン", "タイヤ", "納車",
                "見積", "支払", "ローン", "会員", "ポイント", "アプリ")
# Too general to make an off-topic question (「カイワ自動車の株価」) a dealer question.
GENERIC_WORDS = ("車", "クルマ", "くるま", "カイワ", "自動車", "お店")
FILLERS = re.compile(r"(すみません|すいません|あのー?|えっと|ちょっと|お伺いしたいのですが|質問です|質問があります"
                     r"|を?教えてください|を?教えて(ほしい|欲しい)?|について(知りたい|教えて)?|知りたいです|知りたい"
                     r"|お願いします|お願い)[、。,\s]*")
FOLLOWUP = re.compile(r"^(それ|その|そちら|そっち|じゃあ|じゃ|では|なら|あと|ちなみに|他に|ほかに|また|それと|あれ)")


def normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "").strip()


@lru_cache(maxsize=1)
def kb_terms() -> frozenset[str]:
    """Kanji / katakana words (2+ chars) of the KB's titles and keywords."""
    terms: set[str] = set()
    for article in load_articles():
        for source in (article.title, *article.keywords, article.category):
            terms.update(re.findall(r"[一-龥々ァ-ヶー]{2,}", normalize(source)))
    return frozenset(terms)


def domain_hits(text: str) -> list[str]:
    found = [w for w in DEALER_WORDS if w in text]
    found += [t for t in kb_terms() if t in text and t not in found]
    return found


_PII_LABEL = re.compile(r"\[(電話番号|メール|カード番号|マイナンバー|郵便番号|住所)\]")


def rewrite_query(text: str) -> str:
    """The question without fillers and without the sentences that only carry masked personal data."""
    parts = [p for p in re.split(r"(?<=[。！？!?\n])", normalize(text)) if p.strip()]
    kept = [p for p in parts if not _PII_LABEL.search(p)] or [_PII_LABEL.sub("", p) for p in parts]
    query = FILLERS.sub("", "".join(kept)).strip(" 、。,\n")
    return query or normalize(text)


def is_followup(text: str) -> bool:
    return bool(FOLLOWUP.match(normalize(text))) and len(normalize(text)) <= 30


def classify(text: str, previous_query: str | None = None) -> dict:
    """A ``faq_intent`` object for ``text`` (already PII-masked)."""
    t = normalize(text)
    domain = domain_hits(t)
    base = {"query": rewrite_query(t), "keywords": domain[:8]}
    if GREETING.search(t) and len(t) <= 20 or THANKS.search(t) and len(t) <= 25 or FAREWELL.search(t):
        return {**base, "intent_type": "question", "confidence": 0.9, "reason": "あいさつ・お礼などの非タスク発話"}
    if ABOUT_BOT.search(t):
        return {**base, "intent_type": "question", "confidence": 0.85, "reason": "このチャット自体についての質問"}
    oos = [w for w in OOS_WORDS if w in t]
    if oos and not [d for d in domain if d not in GENERIC_WORDS]:
        return {**base, "intent_type": "oos", "confidence": 0.85,
                "reason": f"販売店FAQの対象外の話題（{oos[0]}）"}
    if previous_query and is_followup(t):
        rest = re.sub(r"^[はもってので、,\s]+", "", FOLLOWUP.sub("", t))
        base["query"] = f"{previous_query} {rewrite_query(rest)}".strip()
        base["keywords"] = domain_hits(base["query"])[:8]
    kind = "procedure" if any(c in t for c in PROCEDURE_CUES) else "faq"
    confidence = 0.85 if domain else 0.5
    reason = "手続き・方法についての質問" if kind == "procedure" else "販売店FAQへの質問"
    return {**base, "intent_type": kind, "confidence": confidence, "reason": reason}
