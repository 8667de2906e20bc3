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
    ("TPMSのアラートが出た", "high", "tyre_pressure_warning"),
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


@pytest.mark.parametrize("text, level", [
    ("もし走行中にブレーキが効かなくなったら、どういう手順で止めればいいですか？", "none"),
    ("万が一エンジンから煙が出たときはどうすればいい？", "none"),
    # a report next to the what-if, 「もしかして」 and 「もしもし」 are no hypotheticals
    ("さっきブレーキが効かなくなった。もしまた起きたらどうすればいい？", "critical"),
    ("もしかしてブレーキが効かない？どうしよう", "critical"),
    ("もしもし、ブレーキが効かなくて止まらないんです", "critical"),
])
def test_what_if_questions_are_information(text, level):
    assert keyword_urgency_check(text).level == level


def test_a_denied_smoke_or_an_unlit_red_lamp_is_not_critical():
    assert keyword_urgency_check("焦げ臭いとか煙とかは全然ないんですが、エンジンからカラカラ音がします").level == "high"
    assert keyword_urgency_check("煙は出ていないけど、エンジンから異音がする").level == "high"
    assert keyword_urgency_check("水温計がいつもより上まで来てる、まだ赤いランプはついてないけど").level != "critical"
    assert keyword_urgency_check("ボンネットから煙が出てる").level == "critical"
    assert keyword_urgency_check("赤いランプがついた").level == "critical"


@pytest.mark.parametrize("text, level", [
    ("ランプも点いていないし、変な音もしないのですが、給油までの距離が前より短くなりました", "medium"),
    ("特に警告灯が点いたりしているわけではないが、冷却水の交換時期を知りたい", "none"),
    ("先週パンクしたタイヤはお店で修理済みです。交換時期の目安を教えてください", "none"),
    ("エンジンを止めたあと、ボンネットから少し甘いにおいがする。下には何も垂れていない", "medium"),
    ("計器の中に電池のような絵が灯りました", "high"),
    ("前はリッター15は走っとったのに、最近11くらいしか走らへんねん", "medium"),
    ("暖房を入れてもなかなか温まらず、足元が冷える", "medium"),
    ("ワイパーを動かすと、フロントガラスに細い筋が残ります", "low"),
    ("天井の小さな明かりが点かなくなりました", "low"),
    # the same words, not denied
    ("警告灯が点いたまま消えない", "high"),
    ("エンジンから変な音がする", "high"),
    ("ボンネットから甘いにおいがして、下に緑色の水が垂れている", "high"),
])
def test_denied_resolved_and_described_symptoms(text, level):
    assert keyword_urgency_check(text).level == level


@pytest.mark.parametrize("text, level", [
    ("高速で止まった。再始動できず。路肩にいます", "critical"),  # written negation 「できず」
    ("ブレーキが効かず、止まれなかった", "critical"),
    ("アイドリング中に車全体がブルンブルン揺れる", "high"),
    ("音とか振動とかは全くないんですが、ハンドルを離すと少し右に流れます", "medium"),
    ("最近満タンにしても前より全然もたない", "medium"),
    ("この夏は冷房の効きがどうも弱い", "medium"),
    ("うしろのせきのライトがつかないよ", "low"),
    ("内装の小キズ", "low"),
    ("運転席の窓のゴムがちょっとめくれてきてる", "low"),
])
def test_terse_written_and_child_phrasing(text, level):
    assert keyword_urgency_check(text).level == level


@pytest.mark.parametrize("text, level", [
    # the kana fold applies a rule's negations folded too (it once matched 「煙ハ出テイナイ」 as smoke)
    ("けむりは でてないけど、えんじんから へんなおとが する", "high"),
    ("くるまから ひがでてる", "critical"),
    ("振動とかはぜんぜんないです。ハンドルが少し右に流れる", "medium"),
    # and a white smoke from the front of the car stays critical (only the exhaust's is excluded)
    ("車の前のほうから白い煙がもくもくと出てきました", "critical"),
    ("マフラーから白い煙が出る", "high"),
])
def test_folded_text_meets_folded_negations(text, level):
    assert keyword_urgency_check(text).level == level


@pytest.mark.parametrize("text, level", [
    ("フューエルのスメルがキャビンにすごくて、アンダーボディからリークしてるっぽい", "critical"),
    ("ハイウェイでエンジンがストールして、リスタートしようとしてもかからない。今ショルダーに停めてる", "critical"),
    ("車庫のコンクリートに茶色い油のしみが毎朝増えている", "critical"),
    ("はんどる が ぜんぜん まわらなく なった", "critical"),  # kana spaced word by word
    ("ぶれーきをふむとぺだるがどんどんしずんでいって とまれない", "critical"),
    ("明日ロングドライブ、パンク修理キットでテンポラリーに直したタイヤのままで大丈夫？", "high"),
    ("くるまが はしると うしろから ガタンガタンって おおきいおとが するの", "high"),
    ("燃費が前月比で約2割悪化。警告灯の点灯や異音は特にないとのこと", "medium"),
    ("エアコン使ったあと車の下に水がポタポタ、透明で臭いもない", "none"),
    ("だんぼう つけても ぜんぜん あったかく ならない", "medium"),
    ("くるまの なか あつくて えあこん つけても すずしく ならないよ", "medium"),
    ("ルームミラーのところの小さな電灯が切れてしまいました", "low"),
    ("後部座席のドアトリムにスレ傷があります", "low"),
    ("さむい あさ くるまの うしろの つつから しろい ゆげが でてたよ", "none"),
])
def test_spaced_kana_loanwords_and_listed_denials(text, level):
    assert keyword_urgency_check(text).level == level


@pytest.mark.parametrize("text, level", [
    ("高速道路の走行車線で急にエンジンが止まりまして、何度キーを回しても掛かりません。路肩に寄せています", "critical"),
    ("配送車両3号車、高速道路上でエンジン停止。再始動を試みるも不可。現在路肩に停車中", "critical"),
    ("煙は出てないけど、車の下に黒いドロッとしたのがポタポタ垂れてる。たぶんエンジンオイル", "critical"),
    ("ドライブ中にメーターにレッドのサーモメーターっぽいアイコンがついた", "critical"),
    ("ﾊﾝﾄﾞﾙ回らん たすけて", "critical"),
    ("走行中にブレーキの利きが急激に低下し、ペダルが底付きする", "critical"),
    ("ブレーキペダルがフロアまでダウンしてストップできない", "critical"),
    # a red battery lamp is the charging lamp: high per the spec
    ("エンジンかけたら赤い電池のマーク点いたまんまやねん", "high"),
    ("ハイウェイで100キロ超えるとステアリングがずっとシェイクする", "high"),
    ("右前のタイヤぺっちゃんこなんだけど、これで走っていいの？", "high"),
    ("曲がるときにタイヤのところからギコギコって音がする", "high"),
    ("キーレスの電池が弱っとるみたい", "low"),
    ("隣の車にドアぶつけられてちょい凹んだ", "low"),
    ("まっすぐ走っててもステアリングをちょっとライト側に当ててないとレフトに流れる", "medium"),
])
def test_business_voice_and_loanword_phrasing(text, level):
    assert keyword_urgency_check(text).level == level


@pytest.mark.parametrize("text, level", [
    # text and patterns are matched folded: a hiragana spelling meets the katakana exclusion
    ("さむい あさ まふらーから しろい ゆげが でてる だいじょうぶ?", "none"),
    ("エンジンルームからスモークが出てて、バーニングなスメルがする", "critical"),
    ("えっと あの エンジンの経国灯がついたんですけど 走るのは普通に走れる", "high"),
    ("メーターに きいろい エンジンの えが ついてるよ", "high"),
    ("最近年費が悪くて前より給油する回数が増えた", "medium"),
    ("エアコンのクーリングがウィークで、ホットなエアしかカムしない", "medium"),
    # a repaired leak is history, not a symptom
    ("去年オイル漏れ直してもろたけど、次のオイル交換ってどんくらい走ったらしたらええの?", "none"),
    ("オイル漏れがひどい", "critical"),
    ("カップホルダーがブロークンしてドリンクがフィットしない", "low"),
    ("どあみらーの かばーに ひびが はいっちゃった", "low"),
])
def test_one_spelling_covers_both_scripts_and_more_loanwords(text, level):
    assert keyword_urgency_check(text).level == level


@pytest.mark.parametrize("text, level", [
    ("主人が運転していたら、ブレーキがふにゃっとして床まで入ってしまい、なかなか止まらなかったそうです", "critical"),
    ("ブレーキペダルがスポンジーで、フルで踏んでもストッピングパワーがほぼゼロ", "critical"),
    ("走行中にあかいブレーキの警告當が点きました", "critical"),
    ("エアコンガンガンにして停めてたら車の下に水たまり。オイルとかじゃなくて透明な水っぽいやつ", "none"),
    ("ダッシュボードにエアバッグのワーニングランプがずっとオン。アクシデントとかは一切なし、ぶつけてもないです", "high"),
])
def test_soft_pedals_old_kanji_and_denied_oil_or_collision(text, level):
    assert keyword_urgency_check(text).level == level
