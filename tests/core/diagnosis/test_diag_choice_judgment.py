"""Typed text → choice: exact short-circuit and the 3-stage chain (seed 004), with the method logged."""
from __future__ import annotations

import json

import pytest

from core.diagnosis.actions import PHOTO_CHOICES, RESOLUTION_CHOICES, SPEC_CHOICES
from core.diagnosis.choice_judgment import exact_match, judge_choice, parse_tag
from core.diagnosis.models import Choice, SessionState
from core.diagnosis.offline_choice import match_choice
from core.llm.base import ProviderError
from core.llm.scripted import ScriptedClient

CHOICES = [Choice(value="dispatch", label="🚚 ロードサービス・出張点検を手配する"),
           Choice(value="visit", label="🏠 来店予約をする"), Choice(value="skip", label="今は予約しない")]
SESSION = SessionState(session_id="j1")


def test_exact_and_normalised_label_match_needs_no_model(make_ctx):
    client = ScriptedClient([])
    ctx = make_ctx(client=client, log=[])
    result = judge_choice(ctx, SESSION, "来店予約をする", CHOICES)
    assert (result.index, result.value, result.method) == (2, "visit", "exact")
    assert judge_choice(ctx, SESSION, "ＳＫＩＰ", CHOICES).value == "skip"  # matches the value after NFKC
    assert client.requests == [] and ctx.log == []
    assert exact_match("？", CHOICES) is None


def test_stage1_structured_output(make_ctx):
    client = ScriptedClient([json.dumps({"step": 1, "reason": "出張を希望"})])
    log: list = []
    result = judge_choice(make_ctx(client=client, log=log), SESSION, "家まで来てほしい", CHOICES, question="どうしますか")
    assert (result.index, result.value, result.method, result.reason) == (1, "dispatch", "structured_output", "出張を希望")
    assert [r["judgment_method"] for r in log] == ["structured_output"]
    assert log[0]["prompt"] == "choice_judgment" and log[0]["flow"] == "diagnosis"
    assert client.requests[0].response_format["json_schema"]["name"] == "choice_judgment"


def test_stage1_zero_means_none(make_ctx):
    result = judge_choice(make_ctx(client=ScriptedClient(['{"step": 0, "reason": "該当なし"}'])), SESSION, "天気は？", CHOICES)
    assert result.index is None and result.value is None and result.method == "structured_output"


def test_stage2_tag_fallback_after_invalid_stage1(make_ctx):
    client = ScriptedClient(["番号は2です", "考えた結果 [CHOICE:2] です"])
    log: list = []
    result = judge_choice(make_ctx(client=client, log=log), SESSION, "お店に持っていく", CHOICES)
    assert (result.index, result.value, result.method) == (2, "visit", "tag_fallback")
    assert client.requests[1].response_format is None and client.requests[1].tools is None  # plain text call
    assert client.requests[1].task == "choice_tag"
    assert [r["judgment_method"] for r in log] == ["tag_fallback", "tag_fallback"]
    assert log[1]["strategy"] == "plain_text"


def test_stage2_out_of_range_step_and_tag_fall_through_to_ai_judge(make_ctx):
    client = ScriptedClient([json.dumps({"step": 7, "reason": "?"}), "[CHOICE:9]",
                             json.dumps({"matched_index": 3, "reason": "予約しないと言っている"})])
    log: list = []
    result = judge_choice(make_ctx(client=client, log=log), SESSION, "やめとく", CHOICES)
    assert (result.index, result.value, result.method) == (3, "skip", "ai_judge")
    assert client.requests[2].task == "choice_evaluation"
    assert "条件" in client.requests[2].messages[-1]["content"]
    assert {r["judgment_method"] for r in log} == {"ai_judge"} and len(log) == 3


def test_every_stage_failing_gives_failed_without_raising(make_ctx):
    client = ScriptedClient([ProviderError("server_error", "down")] * 20)
    result = judge_choice(make_ctx(client=client, log=[]), SESSION, "うーん", CHOICES)
    assert result.index is None and result.method == "failed"


def test_parse_tag():
    assert parse_tag("[CHOICE:3]", 3) == 3
    assert parse_tag("answer: [choice: 1]\n", 3) == 1
    assert parse_tag("[CHOICE:4] [CHOICE:2]", 3) == 2
    assert parse_tag("[CHOICE:0]", 3) == 0
    assert parse_tag("2", 3) is None and parse_tag(None, 3) is None


def _dicts(choices):
    return [{"index": i, "value": c.value, "label": c.label} for i, c in enumerate(choices, 1)]


@pytest.mark.parametrize("text,choices,expected", [
    ("はい", PHOTO_CHOICES, 1), ("違う車です", PHOTO_CHOICES, 2),
    ("直りました", RESOLUTION_CHOICES, 1), ("まだ解決していません", RESOLUTION_CHOICES, 2), ("予約したいです", RESOLUTION_CHOICES, 3),
    ("もう試しました", SPEC_CHOICES, 3), ("解決しました！", SPEC_CHOICES, 1),
    ("レッカーを呼んでほしい", CHOICES, 1), ("自分で運転して持っていきます", CHOICES, 2), ("今はいいです", CHOICES, 3),
    ("今日の天気", CHOICES, 0),
])
def test_offline_matcher(text, choices, expected):
    assert match_choice(text, _dicts(choices))[0] == expected


def test_offline_client_runs_the_chain_with_structured_output(make_ctx):
    from core.llm.offline import OfflineClient

    log: list = []
    result = judge_choice(make_ctx(client=OfflineClient(), log=log), SESSION, "ロードサービスでお願いします", CHOICES)
    assert result.value == "dispatch" and result.method == "structured_output"
    assert log and all(r["outcome"] == "ok" for r in log)
