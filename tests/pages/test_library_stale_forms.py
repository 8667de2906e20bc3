"""ナレッジライブラリ, stale forms (issue 23): the edit form carries the version it shows; saving it or pressing
確定する after a colleague saved a newer version is refused with a Japanese notice that shows what changed,
the typed text stays, and nothing of the colleague's change is reverted."""
from __future__ import annotations

from core.store import get_store
from tests.pages.test_library_page import ADMIN_ID, click_row, library, seed


def button(at, label):
    return next(b for b in at.button if b.label == label)


def field(at, eid, name):
    key = f"lib_field_{eid}_{name}"
    return at.text_area(key=key) if name in ("review_points", "action_plan", "clause_sample") else at.text_input(key=key)


def test_saving_a_form_opened_before_a_colleagues_save_is_refused_and_keeps_the_typed_text():
    eid = seed(1)[0]
    at = click_row(library(), 0)
    field(at, eid, "review_points").set_value("自分が書いた審査ポイント")
    get_store().edit_entry(eid, {"action_plan": "同僚が直した対応方針"}, ADMIN_ID)  # meanwhile, another replica
    button(at, "変更を保存").click().run()
    assert not at.exception
    notice = [e.value for e in at.error if "ほかの人が変更しました" in e.value]
    assert notice and "表示していた版: 1、現在の版: 2" in notice[0]
    assert "同僚が直した対応方針" in [t.value for t in at.text]  # what changed, as text
    assert field(at, eid, "review_points").value == "自分が書いた審査ポイント"  # the typed text stays
    entry = get_store().get_entry(eid)
    assert (entry["version"], entry["action_plan"]) == (2, "同僚が直した対応方針")
    assert entry["review_points"] == "上限の有無を確認"  # nothing of the stale form was written
    button(at, "入力を残して最新の版に合わせる").click().run()
    assert field(at, eid, "review_points").value == "自分が書いた審査ポイント"
    button(at, "変更を保存").click().run()
    assert not at.exception
    entry = get_store().get_entry(eid)
    assert (entry["version"], entry["review_points"], entry["action_plan"]) == (
        3, "自分が書いた審査ポイント", "同僚が直した対応方針")  # both changes stand


def test_confirming_a_version_the_person_never_saw_is_refused():
    eid = seed(1)[0]
    at = click_row(library(), 0)
    field(at, eid, "review_points").set_value("下書き中の文")
    at.checkbox(key=f"lib_confirm_incomplete_{eid}").check().run()  # the seeded draft has no 条文例 (issue 24)
    get_store().edit_entry(eid, {"action_plan": "確定前に差し替えた文"}, ADMIN_ID)
    button(at, "✅ 確定する").click().run()
    assert not at.exception
    assert any("ほかの人が変更しました" in e.value for e in at.error)
    assert get_store().get_entry(eid)["status"] == "draft"
    button(at, "最新の版を表示する（入力は破棄）").click().run()
    assert field(at, eid, "action_plan").value == "確定前に差し替えた文"
    at.checkbox(key=f"lib_confirm_incomplete_{eid}").check().run()
    button(at, "✅ 確定する").click().run()
    assert get_store().get_entry(eid)["status"] == "confirmed"


def test_an_untouched_form_follows_a_colleagues_save():
    eid = seed(1)[0]
    at = click_row(library(), 0)
    get_store().edit_entry(eid, {"action_plan": "同僚の変更"}, ADMIN_ID)
    at.run()
    assert field(at, eid, "action_plan").value == "同僚の変更"
    assert not [e for e in at.error if "ほかの人が変更しました" in e.value]
