"""Keyword urgency rules from data/urgency_rules.yaml, checked against the file's own tests list."""
from __future__ import annotations

import pytest

from core.diagnosis.urgency_rules import default_rules, keyword_urgency_check, load_rules

RULES = default_rules()


def test_yaml_has_rules_for_every_level_and_a_tests_list():
    levels = {r.level for r in RULES.rules}
    assert levels == {"critical", "high", "medium", "low"}
    assert len(RULES.tests) >= 50
    assert RULES.level_info["critical"] == {"visit_urgency": "immediate", "can_drive": False}
    assert RULES.level_info["high"] == {"visit_urgency": "today", "can_drive": True}
    assert RULES.level_info["medium"] == {"visit_urgency": "this_week", "can_drive": True}


@pytest.mark.parametrize("case", RULES.tests, ids=lambda c: c["text"])
def test_yaml_examples(case):
    assert keyword_urgency_check(case["text"]).level == case["expect"]


def test_nfkc_normalisation_before_matching():
    assert keyword_urgency_check("４ＷＤ警告灯が点滅している").level == "high"
    assert keyword_urgency_check("水温計がＨまで上がっている").level == "critical"


def test_result_carries_reason_rule_and_level_defaults():
    result = keyword_urgency_check("ブレーキペダルが床まで沈む")
    assert result.is_critical
    assert result.rule_ids == ["brake_failure"]
    assert result.reasons == ["ブレーキの効きに異常がある可能性"]
    assert result.can_drive is False and result.visit_urgency == "immediate"
    none = keyword_urgency_check("給油口の開け方がわからない")
    assert none.level == "none" and none.reasons == [] and none.can_drive is None


def test_check_many_keeps_the_highest_level_and_merges_same_level_reasons():
    result = RULES.check_many(["最近燃費が悪くなった", "走行中にガラガラと音がする", "ハンドルが重い"])
    assert result.level == "high"
    assert result.rule_ids == ["abnormal_noise", "steering_heavy"]
    assert RULES.check_many(["エアコンが冷えない", "ブレーキがきかない！"]).level == "critical"
    assert RULES.check_many([]).level == "none"


def test_patterns_are_single_line_so_texts_are_checked_one_by_one():
    # joined with a newline the湯気 rule's "^(?!.*マフラー)" look-ahead would only see the first line
    assert RULES.check_many(["冬の朝マフラーから湯気が出る"]).level == "none"
    assert RULES.check_many(["冬の朝マフラーから湯気が出る", "ボンネットのすき間から湯気が出ている"]).level == "critical"


def test_load_rules_from_another_file(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("levels:\n  medium:\n    visit_urgency: this_week\n    can_drive: true\n    rules:\n"
                    "      - {id: x, reason: テスト, patterns: ['ぴよぴよ']}\n", encoding="utf-8")
    rules = load_rules(path)
    assert rules.check("ぴよぴよ鳴る").level == "medium"
    assert rules.check("ブレーキがきかない").level == "none"


@pytest.mark.parametrize("text, level, rule", [
    # katakana English, written the rules' way by data/urgency_synonyms.yaml
    ("オイルプレッシャーのワーニングランプがオンになった", "critical", "oil_pressure_warning"),
    ("チェックエンジンランプが点きっぱなし", "high", "engine_warning"),
    ("TPMSのアラートが出た", "medium", "tyre_pressure_warning"),
    ("フューエルエコノミーがかなりダウンしてる", "medium", "fuel_economy"),
    # IME homophone slips and kana spellings
    ("バッテリーの警告等がつきっぱなし", "high", "charging_warning"),
    ("すいおんけいがえいちまであがってる", "critical", "overheating"),
    ("ブレーキがきかにゃい", "critical", "brake_failure"),
    # other words for a leak, an airbag, a loose wheel
    ("給油口のあたりから燃料がしたたっている", "critical", "fuel_leak"),
    ("ぶつかってふうせんみたいなのがでてきた", "critical", "airbag_deployed"),
    ("車輪ががたついて、今にも取れそうです", "critical", "wheel_off"),
    ("クーラーつけても あついよー", "medium", "aircon"),
    # low: the cabin's small things
    ("シートの生地がちょっとほつれてきた", "low", "cabin_minor_defect"),
    ("ボディに鳥のフンの跡が残って取れない", "low", "cabin_minor_defect"),
    ("サンバイザーのミラーのライトがつかない", "low", "interior_light"),
])
def test_other_words_for_the_same_symptom(text, level, rule):
    result = keyword_urgency_check(text)
    assert (result.level, result.rule_ids[0]) == (level, rule)


def test_a_replacement_adds_a_match_and_never_hides_one():
    # 「ガス欠」 stays out of the ガス → ガソリン replacement; the original spelling still matches
    assert keyword_urgency_check("ガス欠になりそう").level == "none"
    assert keyword_urgency_check("ガソリンが漏れてる").level == "critical"
    assert keyword_urgency_check("ガスくさい、ガソリンのにおいがする").level == "critical"


def test_a_denied_smoke_or_an_unlit_red_lamp_is_not_critical():
    assert keyword_urgency_check("焦げ臭いとか煙とかは全然ないんですが、エンジンからカラカラ音がします").level == "high"
    assert keyword_urgency_check("煙は出ていないけど、エンジンから異音がする").level == "high"
    assert keyword_urgency_check("水温計がいつもより上まで来てる、まだ赤いランプはついてないけど").level != "critical"
    assert keyword_urgency_check("ボンネットから煙が出てる").level == "critical"
    assert keyword_urgency_check("赤いランプがついた").level == "critical"


def test_a_texts_rule_check_is_remembered_and_each_caller_gets_its_own_result():
    """Issue #25: a turn re-checks every symptom collected so far (``check_many``); each text is checked once
    per rule set and remembered (bounded), each caller getting a result of its own to change. Counted."""
    from core.diagnosis.urgency_rules import load_rules

    rules = load_rules()
    text = "ブレーキペダルが床まで沈む"
    first = rules.check(text)
    first.reasons.append("changed by a caller")
    first.can_drive = True
    again = rules.check(text)
    assert rules._checked.cache_info().misses == 1 and rules._checked.cache_info().hits == 1
    assert again == rules._check(text) and "changed by a caller" not in again.reasons
    assert again.level == "critical" and again.can_drive is False
    many = rules.check_many([text, "エアコンの風が弱い"])
    assert many.level == "critical" and rules._checked.cache_info().misses == 2
