"""ナレッジライブラリ (AppTest): one page of entries at a time with a total and a pager, search and filters in
the database, the selection following the entry that was saved (issue #15), exports built on click."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import core.knowledge.export as export
import core.store.base as store_base
from core.identity import ADMIN, OPERATOR, Identity
from core.store import get_store
from tests.pages.conftest import APP

OPERATOR_ID = Identity(name="山田", email="yamada@example.jp", source="proxy", roles=frozenset({OPERATOR}))
ADMIN_ID = Identity(name="管理者", email="admin@example.jp", source="proxy", roles=frozenset({OPERATOR, ADMIN}))
TITLES = ("損害賠償の上限", "秘密情報の範囲", "契約解除の条件")


@pytest.fixture
def clock(monkeypatch):
    """Entries stamped one minute apart, in the order they are made."""
    minute = {"n": 0}

    def now():
        minute["n"] += 1
        return f"2025-06-10T{minute['n'] // 60:02d}:{minute['n'] % 60:02d}:00.000+00:00"

    monkeypatch.setattr(store_base, "now_iso", now)
    return minute


def seed(n: int, titles=TITLES) -> list[int]:
    """``n`` drafts (the titles repeat), oldest first."""
    return [get_store().record_knowledge(None, [{"knowledge_title": titles[i % len(titles)], "contract_type":
                                                 "業務委託契約" if i % 2 else "秘密保持契約",
                                                 "target_clause": f"第{i}条", "review_points": "上限の有無を確認"}],
                                         OPERATOR_ID)[0] for i in range(n)]


def library() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("pages/library.py").run()
    assert not at.exception, at.exception
    return at


def click_row(at: AppTest, row: int) -> AppTest:
    """What the browser sends when the user selects a row of the table."""
    at.session_state["lib_table"] = {"selection": {"rows": [row], "columns": []}}
    return at.run()


def shown_entry(at: AppTest) -> int | None:
    """The entry number the detail pane shows."""
    heads = [s.value for s in at.subheader if s.value.startswith("No.")]
    return int(heads[0].split()[0][3:]) if heads else None


def test_the_selection_follows_the_saved_entry_when_the_list_re_sorts(clock):
    ids = seed(3)  # shown newest first: ids[2], ids[1], ids[0]
    at = library()
    assert list(at.dataframe[0].value["No."]) == [ids[2], ids[1], ids[0]]
    click_row(at, 2)
    assert shown_entry(at) == ids[0]
    at.text_input(key=f"lib_field_{ids[0]}_knowledge_title").set_value("損害賠償の上限（改訂）")
    next(b for b in at.button if b.label == "変更を保存").click().run()
    assert not at.exception
    assert list(at.dataframe[0].value["No."]) == [ids[0], ids[2], ids[1]]  # the saved entry moved to the top…
    assert shown_entry(at) == ids[0]  # …and the detail pane stayed on it
    assert at.session_state["lib_table"]["selection"]["rows"] == [0]  # the table highlights it where it now is
    assert get_store().get_entry(ids[0])["knowledge_title"] == "損害賠償の上限（改訂）"
    at.run()
    assert shown_entry(at) == ids[0]
    click_row(at, 2)  # a later click still means the row the user saw
    assert shown_entry(at) == ids[1]


def test_confirming_keeps_the_confirmed_entry_open(clock):
    ids = seed(3)
    at = click_row(library(), 1)
    assert shown_entry(at) == ids[1]
    # the seeded drafts have no 対応方針 / 条文例: the button waits for an explicit tick (issue #24)
    assert at.button(key="lib_confirm").disabled and any("対応方針・条文例が未設定" in w.value for w in at.warning)
    at.checkbox(key=f"lib_confirm_incomplete_{ids[1]}").check().run()
    at.button(key="lib_confirm").click().run()
    assert get_store().get_entry(ids[1])["status"] == "confirmed"
    assert shown_entry(at) == ids[1] and list(at.dataframe[0].value["No."])[0] == ids[1]


def test_the_library_is_read_one_page_at_a_time_with_a_total(clock):
    ids = seed(120)
    at = library()
    assert list(at.dataframe[0].value["No."]) == ids[::-1][:50]
    assert any(c.value.startswith("1–50 / 120 件") for c in at.caption)
    at.number_input(key="lib_page").set_value(3).run()
    assert list(at.dataframe[0].value["No."]) == ids[::-1][100:]
    assert any(c.value.startswith("101–120 / 120 件") for c in at.caption)
    click_row(at, 0)
    assert shown_entry(at) == ids[19]
    at.text_input(key="lib_query").set_value("賠償").run()  # a new search starts on page 1, nothing open
    found = [i for n, i in enumerate(ids) if n % 3 == 0][::-1]
    assert list(at.dataframe[0].value["No."]) == found[:40] and len(found) == 40
    assert not at.number_input and shown_entry(at) is None
    at.text_input(key="lib_query").set_value("情 範囲").run()  # one character, and a word of two
    assert len(at.dataframe[0].value) == 40 and set(at.dataframe[0].value["タイトル"]) == {"秘密情報の範囲"}
    at.multiselect(key="lib_types").set_value(["業務委託契約"]).run()
    assert set(at.dataframe[0].value["契約類型"]) == {"業務委託契約"} and len(at.dataframe[0].value) == 20


def test_a_page_past_the_end_turns_back_to_the_last_page(clock):
    seed(60)
    at = library()
    at.number_input(key="lib_page").set_value(2).run()
    assert len(at.dataframe[0].value) == 10
    for entry_id in [e["id"] for e in get_store().list_entries(limit=20)]:
        get_store().set_entry_status(entry_id, "archive", ADMIN_ID)
    at.run()
    assert not at.exception and len(at.dataframe[0].value) == 40 and not at.number_input


def test_exports_are_built_when_clicked_from_every_entry_found_not_on_each_rerun(clock, deferred, monkeypatch):
    ids = seed(60)
    built: list[str] = []
    for name in ("entries_csv", "entries_json", "turns_jsonl"):
        original = getattr(export, name)
        monkeypatch.setattr(export, name, lambda *a, _o=original, _n=name, **k: built.append(_n) or _o(*a, **k))
    at = library()
    at.run()
    at.checkbox(key="lib_keep").check().run()
    assert built == []  # three reruns, nothing exported
    assert set(deferred) == {"knowledge.csv", "knowledge.json", "knowledge_turns.jsonl"}
    csv = deferred["knowledge.csv"]().decode("utf-8-sig")
    assert built == ["entries_csv"]
    assert len(csv.strip().splitlines()) == 61  # every entry the filters find, not only the page of 50
    assert f"\n{ids[0]}," in csv and f"\n{ids[59]}," in csv
    assert len(__import__("json").loads(deferred["knowledge.json"]())) == 60
