"""Deterministic intent rules (offline IR and IR fallback): kinds, query rewrite, follow-ups."""
import pytest

from core.faq.intent_rules import classify, rewrite_query


@pytest.mark.parametrize("text, kind", [
    ("こんにちは", "question"),
    ("ありがとうございました", "question"),
    ("このチャットは何ができますか", "question"),
    ("明日の天気って晴れる？", "oos"),
    ("カイワ自動車の株価って今いくら？", "oos"),
    ("名義変更の手続きを教えてください", "procedure"),
    ("オイル交換の目安は？", "faq"),
    ("天気が悪い日のタイヤの空気圧は？", "faq"),  # an off-topic word next to a dealer topic stays faq
])
def test_intent_kinds(text, kind):
    result = classify(text)
    assert result["intent_type"] == kind
    assert 0.0 <= result["confidence"] <= 1.0 and result["query"] and result["reason"]


def test_query_rewrite_drops_fillers_and_masked_personal_data():
    assert rewrite_query("すみません、オイル交換の目安を教えてください") == "オイル交換の目安"
    assert rewrite_query("電話は[電話番号]です。車検の予約をしたい") == "車検の予約をしたい"
    assert "[メール]" not in rewrite_query("[メール]に送ってください")


def test_follow_up_is_completed_with_the_previous_query():
    assert classify("じゃあ中古車は？", previous_query="保証期間")["query"].startswith("保証期間 中古車")
    assert classify("オイル交換の目安は？", previous_query="保証期間")["query"] == "オイル交換の目安は?"  # NFKC
    assert classify("じゃあ中古車は？")["query"] == "じゃあ中古車は?"


def test_dealer_questions_without_kb_words_get_a_low_confidence():
    assert classify("あれってどうなってるの")["confidence"] < classify("オイル交換の目安は？")["confidence"]
