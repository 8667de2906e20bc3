"""Guards of seed 000 §11: choices, icons, topic relevance, waiting / duplicate messages, spec routing."""
from __future__ import annotations

import pytest

from core.diagnosis.context import Thresholds
from core.diagnosis.guards import (ICON_KEYWORDS, append_default_choices, attach_icons, icon_for, is_duplicate_question,
                                   is_irrelevant_topic, is_waiting_message, raise_for_coverage, should_hint_spec,
                                   should_route_to_spec_check)
from core.diagnosis.rag import RagHit
from core.paths import ROOT


def rag(section="節", content_type="specification", has_warning=False, score=0.6):
    return RagHit(section_id=f"v:{section}", section=section, chapter="c", page=1, content_type=content_type,
                  has_warning=has_warning, text="本文", score=score)


# --- choices -----------------------------------------------------------------------------------------

def test_append_default_choices_dedupes_and_appends_defaults():
    out = append_default_choices(["赤色", "黄色", "赤色", " 黄色 ", "わからない", "✏️ 自由入力", ""])
    assert [(c.value, c.label) for c in out] == [("赤色", "赤色"), ("黄色", "黄色"), ("dont_know", "わからない"),
                                                 ("free_input", "✏️ 自由入力")]


def test_append_default_choices_keeps_model_strings_as_value_and_label():
    out = append_default_choices(["ABS警告灯（ABSの文字）"])
    assert out[0].value == out[0].label == "ABS警告灯（ABSの文字）"


def test_no_model_choices_still_offers_dont_know_and_free_input():
    for empty in (None, [], ["", "  ", "わからない"]):
        assert [(c.value, c.label) for c in append_default_choices(empty)] == [("dont_know", "わからない"),
                                                                               ("free_input", "✏️ 自由入力")]


@pytest.mark.parametrize("label,icon", [
    ("エンジン警告灯（エンジンの形）", "engine.svg"), ("ABS警告灯", "abs.svg"), ("ブレーキ警告灯（赤）", "brake.svg"),
    ("油圧警告灯", "oil-pressure.svg"), ("充電警告灯", "battery.svg"), ("バッテリーのマーク", "battery.svg"),
    ("水温警告灯", "coolant-temp.svg"), ("エアバッグ警告灯", "airbag.svg"), ("パワステ警告灯", "power-steering.svg"),
    ("タイヤ空気圧警告灯", "tire-pressure.svg"), ("ハイブリッドシステム警告灯", "hybrid.svg"), ("４ＷＤ警告灯", "4wd.svg"),
    ("横滑り防止の表示灯", "skid.svg"), ("VSC OFF", "skid.svg"), ("燃料残量警告灯", "fuel.svg"),
])
def test_icon_for_maps_keywords(label, icon):
    assert icon_for(label) == f"data/icons/warning-lights/{icon}"


def test_every_icon_file_exists_is_small_svg():
    for _, filename in ICON_KEYWORDS:
        path = ROOT / "data" / "icons" / "warning-lights" / filename
        data = path.read_bytes()
        assert data.lstrip().startswith(b"<svg") and len(data) <= 2048, filename


def test_attach_icons_only_for_warning_light_topics():
    labels = ["エンジン警告灯", "ABS警告灯", "よくわからないマーク"]
    with_icons = attach_icons(append_default_choices(labels), "点灯している警告灯の種類")
    assert [c.icon for c in with_icons] == ["data/icons/warning-lights/engine.svg", "data/icons/warning-lights/abs.svg",
                                            None, None, None]
    for topic in ("ランプの色", "表示灯の種類", "インジケーターの状態"):
        assert attach_icons(append_default_choices(labels), topic)[0].icon is not None
    assert all(c.icon is None for c in attach_icons(append_default_choices(labels), "異音が出るタイミング"))


# --- topic relevance / waiting / duplicate -------------------------------------------------------------

def test_irrelevant_topic_detected_against_symptom_history_and_manual():
    history = [{"role": "user", "content": "ブレーキを踏むとキーキー鳴る"}]
    assert is_irrelevant_topic("カーナビの地図更新", "ブレーキを踏むとキーキー鳴る", history)
    assert not is_irrelevant_topic("ブレーキパッドの状態", "ブレーキを踏むとキーキー鳴る", history)
    assert not is_irrelevant_topic("異音が出るタイミング", "ブレーキを踏むとキーキー鳴る", history)  # generic words only
    assert not is_irrelevant_topic("", "何か", [])
    # a term found in the manual excerpts retrieved for the symptom is relevant
    assert not is_irrelevant_topic("ウェアインジケーター", "キーキー鳴る", [], extra_context="摩耗警告装置（ウェアインジケーター）")


def test_waiting_messages():
    assert is_waiting_message("内容をまとめますので、少々お待ちください。")
    assert is_waiting_message("確認いたします。")
    assert is_waiting_message("")
    assert not is_waiting_message("確認します。ランプの色は何色ですか？")
    assert not is_waiting_message("ブレーキパッドの摩耗が考えられます。販売店で点検を受けてください。")


def test_duplicate_question_detection():
    history = [{"role": "assistant", "content": "音はどんなときに聞こえますか？"},
               {"role": "user", "content": "ブレーキを踏んだとき"}]
    assert is_duplicate_question("音はどんなときに聞こえますか？", history)
    assert is_duplicate_question("音は、どんなときに聞こえますか", history)
    assert not is_duplicate_question("どんな音に近いですか？", history)
    assert not is_duplicate_question("ブレーキを踏んだとき", [{"role": "user", "content": "ブレーキを踏んだとき"}])


# --- spec routing -------------------------------------------------------------------------------------

def test_spec_route_when_all_path_conditions_hold():
    hits = [rag("a", score=0.7), rag("b", "procedure", score=0.45), rag("c", "general", score=0.35)]
    assert should_route_to_spec_check(hits, "none")
    assert should_route_to_spec_check(hits, "medium")


@pytest.mark.parametrize("level", ["critical", "high"])
def test_spec_gate_keyword_urgency(level):
    assert not should_route_to_spec_check([rag("a", score=0.8), rag("b", score=0.6)], level)


def test_spec_gate_any_warning_hit():
    assert not should_route_to_spec_check([rag("a", score=0.8), rag("b", score=0.6), rag("c", has_warning=True)], "none")


def test_spec_gate_more_danger_than_spec():
    hits = [rag("a", score=0.8), rag("b", "danger", score=0.6), rag("c", "warning", score=0.5)]
    assert not should_route_to_spec_check(hits, "none")


def test_spec_path_conditions_each_required():
    assert not should_route_to_spec_check([rag("a", score=0.49), rag("b", score=0.45)], "none")  # no strong hit
    assert not should_route_to_spec_check([rag("a", score=0.8)], "none")  # fewer than spec_min_count
    assert should_route_to_spec_check([rag("a", score=0.8)], "none", Thresholds(spec_min_count=1))
    mixed = [rag("a", score=0.8), rag("b", score=0.6), rag("c", "danger"), rag("d", "danger"), rag("e", "danger")]
    assert not should_route_to_spec_check(mixed, "none")  # 40 % spec (and more danger)
    assert not should_route_to_spec_check([], "none")


def test_spec_hint_soft_threshold():
    assert should_hint_spec([rag("a", score=0.42), rag("b", "warning", has_warning=True, score=0.35)], "none")
    assert not should_hint_spec([rag("a", score=0.38)], "none")
    assert not should_hint_spec([rag("a", "danger", score=0.9)], "none")
    assert not should_hint_spec([rag("a", score=0.9)], "high")
    assert not should_hint_spec([], "none")


def test_manual_coverage_raise():
    assert raise_for_coverage("none", "not_covered") == "medium"
    assert raise_for_coverage("low", "not_covered") == "medium"
    assert raise_for_coverage("high", "not_covered") == "high"
    assert raise_for_coverage("low", "partially_covered") == "low"

