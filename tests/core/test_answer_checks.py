"""core.text.answer_checks: echoes, figures no source states, another language's script (issue #26)."""
import pytest

from core.text.answer_checks import echoes, figures, not_japanese, unsupported_figures


def test_an_answer_that_is_the_question_again_is_an_echo():
    assert echoes("ワイパーが動かないのはなぜですか？", "ワイパーが動かないのはなぜですか")
    assert echoes("オイル交換の目安は", "オイル交換の目安はどのくらいですか？")  # a part of it
    assert echoes("  ＯＩＬ 交換！", "oil交換")  # NFKC, case, spaces and punctuation do not count


def test_an_answer_that_adds_to_the_question_is_not_an_echo():
    assert not echoes("ワイパーが動かない場合は、まずヒューズ（15A）を確認してください。", "ワイパーが動かない")
    assert not echoes("はい", "はい")  # too short to judge
    assert not echoes("", "質問") and not echoes("回答です", "")


def test_figures_are_read_as_value_and_unit():
    found = {(f.text, f.value, f.unit) for f in figures("保証は5年6万km、10万km、¥5,000、3,300円、30%、6ヶ月、1.5L")}
    assert {("5年", 5, "年"), ("6万km", 60000, "km"), ("10万km", 100000, "km"), ("¥5,000", 5000, "円"),
            ("3,300円", 3300, "円"), ("30%", 30, "%"), ("6ヶ月", 6, "か月"), ("1.5L", 1.5, "L")} <= found
    assert figures("手順 3 を行い、5 months later") == []  # bare numbers and English words are not figures


def test_the_invented_warranty_figure_is_caught_and_the_stated_one_passes():
    article = "特別保証は新車登録から5年または10万kmのいずれか早い方です。"
    assert unsupported_figures("保証は5年6万kmまでです。", [article]) == ["6万km"]
    assert unsupported_figures("特別保証は5年または100,000kmです。", [article]) == []  # same figure, other notation
    assert unsupported_figures("3,000円かかります。", [article, "費用はいくら？"]) == ["3,000円"]
    assert unsupported_figures("3,000円かかります。", [article, "3000円くらい？"]) == []  # the user said it


@pytest.mark.parametrize("text", ["货款", "买方应在收到货物后三十日内支付全部货款", "货款の支払期限", "한국어 텍스트입니다"])
def test_another_languages_script_is_not_japanese(text):
    assert not_japanese(text)


@pytest.mark.parametrize("text", ["買主は貨款を支払う。", "秘密保持契約", "髙﨑様の契約について", "𠮷野家の件",
                                  "Article 5 (Limitation of Liability)", ""])
def test_japanese_text_passes(text):
    assert not not_japanese(text)


def test_checks_are_bounded_on_huge_input():
    huge = "1万km" * 200_000
    assert len(figures(huge)) <= 8000 and not echoes(huge, "x")


def test_the_figures_of_a_source_are_read_once(monkeypatch):
    """Issue #25: every diagnosis turn checks its answer against the same manual sections; each section's
    figures are found once and remembered (counted)."""
    from core.text import answer_checks

    answer_checks._stated.cache_clear()
    read: list[str] = []
    real = answer_checks.figures
    monkeypatch.setattr(answer_checks, "figures", lambda text: read.append(text) or real(text))
    source = "タイヤの空気圧は240kPaです。"
    assert answer_checks.unsupported_figures("空気圧は240kPaと300kPaです", [source]) == ["300kPa"]
    assert answer_checks.unsupported_figures("空気圧は250kPaです", [source, None]) == ["250kPa"]
    assert read.count(source) == 1
