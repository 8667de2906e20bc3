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
