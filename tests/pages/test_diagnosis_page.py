"""車両問診 page through AppTest (offline provider, real manual index): a full session to a booking,
rewind from the page, the critical-urgency banner, and a model failure that keeps the transcript."""
import base64

from core.llm.scripted import ScriptedClient
from core.paths import ROOT

MIRAI = "kaiwa-mirai-hv-2022"
PHONE = "090-1234-5678"


def open_diagnosis(app):
    app.switch_page("pages/diagnosis.py").run()
    assert not app.exception
    return app


def click(at, key):
    at.button(key=key).click().run()
    assert not at.exception, at.exception
    return at


def say(at, text):
    at.chat_input(key="diag_input").set_value(text).run()
    assert not at.exception, at.exception
    return at


def to_symptom(at, vehicle=MIRAI):
    click(at, f"diag_vehicle_{vehicle}")
    return click(at, "diag_choice_yes")


def keys(at):
    return [b.key for b in at.button]


def sidebar_text(at):
    return "\n".join(m.value for m in at.sidebar.markdown)


def svg_shown(at, relative):
    """True when the picture at the repo-relative path is on the page (SVGs are inlined as data URLs)."""
    body = (ROOT / relative).read_text(encoding="utf-8").split(">", 1)[1]  # after the <svg …> tag
    urls = [url for img in at.get("image") for url in img.value if url.startswith("data:image/svg+xml;base64,")]
    return any(body in base64.b64decode(url.split(",", 1)[1]).decode("utf-8") for url in urls)


def test_full_session_from_vehicle_to_booking_with_edit(app):
    at = open_diagnosis(app)
    assert at.title[0].value == "🚗 車両問診"
    assert any("オフライン" in c.value for c in at.caption)  # provider_caption
    assert {"diag_vehicle_kaiwa-mirai-hv-2022", "diag_vehicle_kaiwa-trek-4wd-2020"} <= set(keys(at))
    assert any("ミライバ ハイブリッド" in m.value for m in at.markdown)
    assert svg_shown(at, "data/vehicles/kaiwa-mirai-hv-2022.svg") and svg_shown(at, "data/vehicles/kaiwa-trek-4wd-2020.svg")

    click(at, f"diag_vehicle_{MIRAI}")
    assert "お間違いないですか" in at.chat_message[-1].markdown[0].value
    assert svg_shown(at, "data/vehicles/kaiwa-mirai-hv-2022.svg")
    assert {"diag_choice_yes", "diag_choice_no"} <= set(keys(at))
    click(at, "diag_choice_yes")
    assert "車両の選択" not in sidebar_text(at) and "ミライバ" in sidebar_text(at)

    say(at, "停車中に音がする")
    assert at.chat_message[-2].markdown[0].value == "停車中に音がする"
    assert "どんな音に近いですか" in at.chat_message[-1].markdown[0].value
    # a metallic squeal is not the hybrid's normal motor sound: the manual's section, then an inspection
    click(at, "diag_choice_キーキー・キーッ（高い金属音）")
    answer = at.chat_message[-1]
    assert "正常な動作（異音・振動がするとき）の条件に当てはまらない" in answer.markdown[0].value
    assert any("取扱説明書「異音・振動がするとき」（p.464）" in m.value for m in answer.markdown)
    assert any(c.value.startswith("📖 参照した取扱説明書: 「異音・振動がするとき」p.464") for c in answer.caption)
    manual = next(e for e in answer.expander if e.label == "📖 取扱説明書の該当箇所")
    assert "p.464" in manual.markdown[0].value and len(manual.markdown[0].value) > 60
    assert "問診ターン:** 2 / 8" in sidebar_text(at)
    assert at.session_state["diag_response"].current_step == "reservation"
    assert {"diag_choice_dispatch", "diag_choice_visit", "diag_choice_skip"} <= set(keys(at))
    click(at, "diag_choice_dispatch")
    at.text_input(key="diag_field_name").input("山田 太郎")
    at.text_input(key="diag_field_phone").input(PHONE)
    at.text_area(key="diag_field_address").input("テスト市中央1-2-3 駐車場")
    click(at, "diag_booking_submit")
    assert at.session_state["diag_response"].current_step == "booking_confirm"
    summary = at.chat_message[-1].markdown[-1].value
    assert "**お名前:** 山田 太郎" in summary and f"**電話番号:** {PHONE}" in summary
    assert {"diag_choice_confirm", "diag_choice_edit"} <= set(keys(at))
    assert [b.label for b in at.button if b.key in ("diag_choice_confirm", "diag_choice_edit")] == ["✅ 確定する", "✏️ 修正する"]

    click(at, "diag_choice_edit")  # 修正: the form comes back with what was entered
    assert at.text_input(key="diag_field_name").value == "山田 太郎"
    assert at.text_input(key="diag_field_phone").value == PHONE
    assert at.text_area(key="diag_field_address").value == "テスト市中央1-2-3 駐車場"
    at.text_input(key="diag_field_name").input("山田 花子")
    click(at, "diag_booking_submit")
    assert "**お名前:** 山田 花子" in at.chat_message[-1].markdown[-1].value
    click(at, "diag_choice_confirm")
    done = at.chat_message[-1]
    assert "✅ ロードサービス・出張点検を受け付けました" in done.markdown[0].value
    assert "**お名前:** 山田 花子" in done.markdown[-1].value
    assert at.session_state["diag_response"].current_step == "done"
    assert "ステップ:** 完了" in sidebar_text(at) and "予約種別:** ロードサービス・出張点検" in sidebar_text(at)
    assert "diag_choice_restart" in keys(at)

    click(at, "diag_choice_restart")
    assert at.session_state["diag_response"].current_step == "vehicle_id"
    assert len(at.session_state["diag_transcript"]) == 1 and len(at.chat_message) == 1


def test_rewind_from_the_page_restores_the_earlier_turn(app):
    at = to_symptom(open_diagnosis(app))
    say(at, "メーターに黄色いランプが点灯している")
    lamp = "diag_choice_ABS警告灯（「ABS」の文字のランプ）"
    assert svg_shown(at, "data/icons/warning-lights/abs.svg")  # icons next to the lamp choices
    click(at, lamp)
    assert "どのように点いていますか" in at.chat_message[-1].markdown[0].value
    assert {"diag_rewind_1", "diag_rewind_2"} <= set(keys(at))
    assert "問診ターン:** 2 / 8" in sidebar_text(at)

    click(at, "diag_rewind_2")  # back to the lamp question, the ABS answer is gone
    assert "次のどれに近いですか" in at.chat_message[-1].markdown[0].value
    assert [m.name for m in at.chat_message][-2:] == ["user", "assistant"]
    assert at.chat_message[-2].markdown[0].value == "メーターに黄色いランプが点灯している"
    assert "diag_rewind_2" not in keys(at) and lamp in keys(at)
    assert "問診ターン:** 1 / 8" in sidebar_text(at)
    assert at.session_state["diag_service"].get_session(at.session_state["diag_response"].session_id).diagnostic_turn == 1

    click(at, "diag_choice_エンジン警告灯（エンジンの形をした黄色のマーク）")
    assert "どのように点いていますか" in at.chat_message[-1].markdown[0].value
    assert "ABS" not in " ".join(e.get("text", "") for e in at.session_state["diag_transcript"])


def test_critical_symptom_shows_the_red_banner_and_no_visit(app):
    at = to_symptom(open_diagnosis(app))
    say(at, "ブレーキペダルが床まで沈む")
    assert len(at.error) == 1 and at.error[0].icon == "🚨"
    assert "緊急度: 緊急" in at.error[0].value and "自走不可" in at.error[0].value
    assert "来場の目安: 今すぐ" in at.error[0].value
    buttons = keys(at)
    assert "diag_choice_dispatch" in buttons and "diag_choice_skip" in buttons and "diag_choice_visit" not in buttons
    assert "走行:** 自走不可" in sidebar_text(at) and "緊急度:** 緊急" in sidebar_text(at)
    say(at, "自分で運転して来店します")  # typed visit request is refused too
    assert "自走禁止" in at.chat_message[-1].markdown[0].value
    assert any("として受け付けました" in c.value for c in at.chat_message[-1].caption)
    click(at, "diag_reset")  # 最初からやり直す: a new session at the vehicle choice, no banner
    assert at.session_state["diag_response"].current_step == "vehicle_id" and not at.error
    assert len(at.chat_message) == 1 and "diag_vehicle_kaiwa-mirai-hv-2022" in keys(at)


def test_model_failure_shows_the_fallback_and_keeps_the_transcript(app):
    at = to_symptom(open_diagnosis(app))
    say(at, "走行中に異音がする")
    before = len(at.session_state["diag_transcript"])
    at.session_state["llm_client"] = ScriptedClient([])  # every call fails
    say(at, "右前のタイヤのあたりから聞こえます")
    last = at.chat_message[-1]
    assert "回答を作成できませんでした" in last.markdown[0].value and "会話に残っています" in last.markdown[0].value
    assert any("モデルの呼び出しに失敗した" in c.value for c in last.caption)
    assert len(at.session_state["diag_transcript"]) == before + 2
    assert at.chat_message[-4].markdown[0].value == "走行中に異音がする"
    assert at.get("toast") and "定型の案内" in at.get("toast")[0].value
