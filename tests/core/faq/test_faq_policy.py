"""Policy rules (data/faq/policy_rules.yaml): the file's own regression list, loading and matching."""
import pytest

from core.faq.policy import ALLOWED, check, load_rule_tests, load_rules, parse_rules

CASES = load_rule_tests()


def test_the_rules_file_has_rules_and_tests():
    rules = load_rules()
    assert len(rules) >= 10 and len(CASES) >= 20
    assert {r.action for r in rules} == {"refuse", "handoff"}
    assert all(r.message and r.message.endswith("。") for r in rules)
    assert all("\n" not in r.message for r in rules)


@pytest.mark.parametrize("case", CASES, ids=[c["text"][:20] for c in CASES])
def test_rules_file_regression_case(case):
    decision = check(case["text"])
    assert (decision.rule_id or "none") == case["expect"]
    assert decision.disallowed == (case["expect"] != "none")


def test_text_is_nfkc_normalised_and_first_match_wins():
    rules = parse_rules({"rules": [
        {"id": "a", "category": "A", "action": "refuse", "patterns": ["ABS.{0,4}解除"], "message": "だめです。"},
        {"id": "b", "category": "B", "action": "handoff", "patterns": ["解除"], "message": "担当者へ。"},
    ]})
    assert check("ＡＢＳを解除したい", rules).rule_id == "a"
    assert check("契約を解除したい", rules).action == "handoff"
    assert check("オイル交換", rules) is ALLOWED


def test_an_unknown_action_is_rejected():
    with pytest.raises(ValueError, match="refuse or handoff"):
        parse_rules({"rules": [{"id": "x", "action": "ignore", "patterns": ["x"], "message": "m"}]})


@pytest.mark.parametrize("text,rule_id", [
    ("返 金 し て く だ さ い", "refund_promise"),
    ("返金\nして\nください", "refund_promise"),
    ("返\u200b金\u200bして\u2060ください", "refund_promise"),
    ("へんきんしてください", "refund_promise"),
    ("ヘンキンしてください", "refund_promise"),
    ("お酒をのんで運転してもいい？", "drunk_driving"),
    ("メーター戻したい", "safety_tampering"),
    ("ｴｱﾊﾞｯｸﾞを外したい", "safety_tampering"),
    ("過 失 割 合 は", "accident_fault"),
])
def test_observed_bypasses_are_caught(text, rule_id):
    assert check(text).rule_id == rule_id


def test_patterns_are_folded_like_the_text_and_must_be_re2():
    rules = parse_rules({"rules": [{"id": "k", "action": "refuse", "patterns": ["メーター"], "message": "だめです。"}]})
    assert check("ﾒｰﾀｰ", rules).rule_id == "k" and check("めーたー", rules).rule_id == "k"
    with pytest.raises(ValueError, match="re2"):
        parse_rules({"rules": [{"id": "x", "action": "refuse", "patterns": ["(?<=a)b"], "message": "m。"}]})


@pytest.mark.parametrize("text,non_japanese", [
    ("Can I get a refund?", True), ("hello", True), ("환불해 주세요", True),
    ("ABS", False), ("P0301", False), ("hi", False), ("ETCカードとは", False), ("", False),
])
def test_questions_without_japanese_get_the_language_rule(text, non_japanese):
    decision = check(text)
    assert (decision.rule_id == "non_japanese") == non_japanese
    if non_japanese:
        assert decision.action == "handoff" and "Japanese" in decision.message and "日本語" in decision.message


def test_an_english_question_is_handed_off_with_a_japanese_only_reply(fake_kb, client, config):
    from core.faq.flow import ask, start_session

    result = ask(start_session("s"), "Can I get a refund for my car?", client=client, kb=fake_kb, config=config)
    assert result.outcome == "handoff"
    assert "Japanese" in result.message and "日本語" in result.message
