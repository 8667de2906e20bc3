"""Casual kana, missing spaces and typos reach the same manual section as standard writing, with the
same step and urgency (real manual index, offline provider)."""
from __future__ import annotations

import pytest

from core.diagnosis.scenario import run_scenario
from core.llm.offline import OfflineClient

TREK = "kaiwa-trek-4wd-2020"
PAIRS = [
    (None, "エンジン警告灯がついた", "えんじんけいこくとうが ついた"),
    (None, "エンジン警告灯が点灯した", "エンジンけいこくとうが店頭した"),
    (TREK, "信号待ちでエンジンが止まった", "しんごうまちで えんじんが とまった"),
    (None, "信号待ちでエンジンが止まった", "しんごうまちでえんじんがとまった"),
    (TREK, "寒い朝、マフラーから白い湯気が出る", "ふゆのあさ まふらーから しろい ゆげが でる"),
    (None, "ブレーキを踏むとキーキー鳴る", "ぶれーきを ふむと きーきー なる"),
    (None, "タイヤの空気圧の警告灯がついた", "たいやの くうきあつの けいこくとうが ついた"),
    (TREK, "エアコンが効かない", "えあこんが きかない"),
    (None, "走ると下からガラガラ変な音がする", "はしると したから がらがら へんな おとがする"),
    (None, "ブレーキペダルが床まで沈む", "ぶれーきぺだるが ゆかまで しずむ"),
]


def play(vehicle, text):
    scenario = {"turns": [{"message": text}]}
    if vehicle:
        scenario["vehicle"] = vehicle
    return run_scenario(scenario, OfflineClient(), [])


@pytest.mark.parametrize("vehicle,standard,casual", PAIRS, ids=[p[2] for p in PAIRS])
def test_casual_writing_reaches_the_same_section(vehicle, standard, casual, real_retriever):
    a, b = play(vehicle, standard), play(vehicle, casual)
    assert (b["step"], b["urgency"]) == (a["step"], a["urgency"])
    if a["citations"]:
        assert a["citations"][0] in b["citations"][:3] and b["citations"][0] in a["citations"][:3]
    else:
        assert not b["citations"] or a["step"] == "reservation"
