"""Outside text stays text, exports stay data (issue #15), on every page, through the public paths.

Hostile text is seeded through the HTTP API (a customer's symptom and booking form), the knowledge
interview (a scripted model's output, a provider's error text, a typed display name), the library's edit
form, the FAQ, uploads with crafted file names and a crafted ``?session=``; then every page is walked:

- no string any page hands to Streamlit's markdown renderer renders a link, an image or raw HTML, or
  holds a URL a GFM autolinker would link (``tests.pages.hostile``);
- every CSV download keeps every cell as data (no formula start; numbers as numbers; one row per record);
- with debug mode off, no page shows an internal word (``skip``, ``booking.confirmed``,
  ``structured_output``, ``kb:030``, raw statuses …) — the デバッグログ page is the debug view.
"""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from core.identity import Identity
from core.store import get_store
from core.text.spreadsheet import FORMULA_STARTS
from tests.pages import hostile
from tests.pages.conftest import APP

LOCKED = Path(__file__).resolve().parents[3] / "shared/testdata/pdf-samples/libreoffice-writer-password.pdf"
DEBUG_TABS = ("記録", "再実行", "一括再実行", "シナリオ化", "レビュー済みセット")  # lazy: each visited on its own
SELECT_FIRST = {"selection": {"rows": [0], "columns": [], "cells": []}}


@pytest.fixture
def downloads(monkeypatch):
    """Every file a page offers for download in this test: {file name: bytes} (the last one wins). A file
    built on click (a deferred download) is built here as a click would build it."""
    files: dict[str, bytes] = {}
    original = MemoryMediaFileStorage.load_and_get_id
    original_deferred = MediaFileManager.add_deferred

    def capture(self, path_or_data, mimetype, kind, filename=None):
        if filename and isinstance(path_or_data, bytes):
            files[filename] = path_or_data
        return original(self, path_or_data, mimetype, kind, filename)

    def capture_deferred(self, callable_, mimetype, coordinates, file_name=None, **kwargs):
        if file_name:
            data = callable_()
            files[file_name] = data.encode("utf-8") if isinstance(data, str) else data
        return original_deferred(self, callable_, mimetype, coordinates, file_name=file_name, **kwargs)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", capture)
    monkeypatch.setattr(MediaFileManager, "add_deferred", capture_deferred)
    return files


@pytest.fixture
def seeded():
    return hostile.seed(get_store())


def visit(page: str | None = None, *, session: str | None = None, state: dict | None = None,
          params: dict | None = None) -> AppTest:
    """A fresh browser on ``page`` (the knowledge page when None), with ``?session=`` and widget state."""
    at = AppTest.from_file(APP, default_timeout=120)
    query = {**(params or {}), **({"session": session} if session else {})}
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    if page:
        at.switch_page(page)
        for key, value in query.items():
            at.query_params[key] = value
        at.run()
    if state:
        for key, value in state.items():
            at.session_state[key] = value
        at.run()
    assert not at.exception, at.exception
    return at


def test_hostile_text_is_never_a_link_or_an_image_on_any_page(seeded, downloads):
    walks = {
        "knowledge ?session=": visit(session=hostile.HOSTILE_SESSION),
        "knowledge": visit(session=seeded.knowledge_id),
        "diagnosis": visit("pages/diagnosis.py", session=seeded.diagnosis_id),
        "diagnosis ?session=": visit("pages/diagnosis.py", session=hostile.HOSTILE_SESSION),
        "faq": visit("pages/faq.py", session=seeded.faq_id),
        "faq ?session=": visit("pages/faq.py", session=hostile.HOSTILE_SESSION),
        "library": visit("pages/library.py", state={"lib_table": SELECT_FIRST}),
        "bookings": visit("pages/bookings.py", state={"bk_table": SELECT_FIRST}),
        "debug log": visit("pages/debug_log.py", params={"conversation": seeded.knowledge_id},
                           state={f"wb_detail_{r['id']}": True for r in get_store().list_debug_records()}),
        **{f"debug log · {tab}": visit("pages/debug_log.py", params={"conversation": seeded.knowledge_id},
                                       state={"wb_tab": tab}) for tab in DEBUG_TABS[1:]},
        "analytics": visit("pages/analytics.py"),
        "manual admin": visit("pages/manual_admin.py"),
    }
    # the places the issue names, each seen on its page (so the walk really showed them)
    shown = {name: " ".join(v for _, v in hostile.markup_strings(at)) for name, at in walks.items()}
    assert "指定された会話" in shown["knowledge ?session="] and "指定された会話" in shown["faq ?session="]
    assert "upstream said" in shown["debug log"]  # the provider's error text on デバッグログ
    assert "フロー: knowledge · 損害賠償" in shown["debug log · シナリオ化"]  # the conversation title on シナリオ化
    assert "作成 !\\[x\\]" in shown["library"]  # the typed display name in the library
    assert "予約 KW-" in shown["bookings"] and "ブレーキが効かない" in shown["diagnosis"]
    for name, at in walks.items():
        hostile.assert_inert(at, name)

    # upload file names in error lines and in the password form
    at = walks["knowledge"]
    at.chat_input[0].set_value("添付です").upload(hostile.HOSTILE_FILE, b"").run()
    assert not at.exception and any("空のファイルです" in e.value for e in at.error)
    hostile.assert_inert(at, "knowledge upload error")
    at.chat_input[0].set_value("鍵付きです").upload("![p](http://127.0.0.1:9/p.png).pdf", LOCKED.read_bytes()).run()
    assert not at.exception and any(t.label.endswith("のパスワード") for t in at.text_input)
    hostile.assert_inert(at, "knowledge locked upload")
    at.button(key="FormSubmitter:pdf_password-このファイルを除いて送信").click().run()
    at.chat_input[0].set_value("大きすぎる").upload(hostile.HOSTILE_FILE, b"x" * (10 * 2**20 + 1)).run()
    assert not at.exception and any("大きすぎます" in e.value for e in at.error)
    hostile.assert_inert(at, "knowledge refused upload")


def _sidebar():
    from ui.identity import render_identity_sidebar

    render_identity_sidebar()


def test_a_typed_display_name_in_the_sidebar_is_text():
    at = AppTest.from_function(_sidebar, default_timeout=30)
    at.run()
    at.sidebar.text_input(key="local_user_name_input").input(hostile.HOSTILE_NAME).run()
    assert not at.exception and any("未確認" in m.value for m in at.sidebar.markdown)
    assert not hostile.offending_values([m.value for m in at.sidebar.markdown] + [c.value for c in at.sidebar.caption])


def _cells(data: bytes) -> list[list[str]]:
    assert data.startswith(b"\xef\xbb\xbf")
    return list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))


def _assert_data_only(name: str, rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            bare = cell.lstrip(" \t\r\n\u3000")
            if bare and bare[0] in FORMULA_STARTS:
                assert re.fullmatch(r"[+-]?[0-9][0-9,]*(\.[0-9]+)?", cell), f"{name}: formula cell {cell!r}"
            assert not cell.startswith(("\t", "\r")), f"{name}: {cell!r}"


def test_every_csv_download_keeps_hostile_cells_as_data(seeded, downloads):
    store = get_store()
    store.edit_entry(seeded.entry_id, {"action_plan": "一行目\r=2+3\r\n@SUM(A1)", "review_points": "-3"},
                     Identity(name="=1+1", source="local"))
    visit("pages/library.py")
    library = _cells(downloads["knowledge.csv"])
    visit(session=seeded.knowledge_id)  # the interview's own 全件 CSV
    interview = _cells(downloads["knowledge.csv"])
    visit("pages/bookings.py")
    bookings = _cells(downloads["bookings.csv"])
    visit("pages/analytics.py")
    analytics = {name: _cells(data) for name, data in downloads.items() if name.endswith(".csv")
                 and name not in ("knowledge.csv", "bookings.csv")}
    assert len(analytics) == 12
    for name, rows in {"library": library, "interview": interview, "bookings": bookings, **analytics}.items():
        _assert_data_only(name, rows)

    for rows in (library, interview):  # one row per entry, whatever the cells hold
        assert len(rows) == 2
        entry = dict(zip(rows[0], rows[1]))
        assert entry["タイトル"].startswith("'=cmd|") and entry["対応方針"] == "一行目\n=2+3\n@SUM(A1)"
        assert entry["審査ポイント"] == "-3" and entry["更新者"] == "'=1+1（未確認）"
    assert len(bookings) == 2 and dict(zip(*bookings))["お名前"] == hostile.HOSTILE_NAME
    missed = analytics[next(n for n in analytics if n.startswith("faq_not_found_"))]
    assert len(missed) >= 2 and all(len(row) == len(missed[0]) for row in missed)


def test_the_bookings_csv_carries_what_the_desk_needs_in_words_people_read(seeded, downloads):
    store = get_store()
    store.set_booking_status(seeded.booking, "confirmed", Identity(name="受付 花子", source="local"))
    visit("pages/bookings.py")
    header, row = _cells(downloads["bookings.csv"])
    booking = dict(zip(header, row))
    stored = store.get_booking(seeded.booking)
    assert booking["予約番号"] == seeded.booking and booking["状態"] == "確定" and booking["種別"] == "ロードサービス・出張点検"
    assert booking["緊急度"] in ("緊急", "高", "中", "低", "なし") and booking["自走"] in ("走行可", "自走不可", "未判定")
    assert booking["電話番号"] == "090-1234-5678" and booking["現在地・住所"] == f"'=1+2 {hostile.IMAGE}"
    assert booking["症状"] == stored["symptom"] and len(booking["症状"]) > 40  # the full symptom, not the table's 40
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+09:00", booking["受付日時（日本時間）"])
    assert booking["最終更新者"] == "受付 花子（未確認）" and booking["受付者"] == "api"
    assert "anonymous:api" not in ",".join(row) and "confirmed" not in ",".join(row)
    assert "希望日時" in header


INTERNAL = re.compile(r"\bskip\b|booking\.[a-z]+|entry\.[a-z]+|structured_output|tool_call|prompt_extract|kb:\d"
                      r"|\b(?:draft|requested|confirmed|cancelled|archived)\b|parse_error|schema_error|provider_error"
                      r"|knowledge/|diagnosis/|faq/|draft_knowledge|\bfinalize\b|kb_search|not_found|local:|anonymous:")


def _visible(at: AppTest) -> list[str]:
    """Every text a person sees on the page: markdown-bearing strings, table headers and cells, metrics,
    plain text, choices of select boxes."""
    out = [value for _, value in hostile.markup_strings(at)]
    for table in at.dataframe:
        frame = table.value
        out += [str(c) for c in frame.columns]
        out += [str(v) for column in frame.columns for v in frame[column].tolist()]
    out += [str(m.value) for m in at.metric] + [str(t.value) for t in at.get("text")]
    for box in [*at.selectbox, *at.multiselect]:
        out += [str(o) for o in box.options]
    return out


def test_internal_words_appear_only_in_debug_views(seeded, monkeypatch):
    monkeypatch.setenv("KAIWA_DEBUG", "0")
    store = get_store()
    store.set_booking_status(seeded.booking, "confirmed", Identity(name="受付", source="local"))
    skipped = hostile.skipped_booking()  # an API customer who chose 「今は予約しない」
    faq = visit("pages/faq.py", session=seeded.faq_id)
    faq.chat_input(key="faq_input").set_value("オイル交換の目安は？").run()
    walks = {"faq": faq, "knowledge": visit(session=seeded.knowledge_id),
             "diagnosis": visit("pages/diagnosis.py", session=seeded.diagnosis_id),
             "diagnosis (skipped)": visit("pages/diagnosis.py", session=skipped),
             "library": visit("pages/library.py", state={"lib_table": SELECT_FIRST, "lib_status": []}),
             "bookings": visit("pages/bookings.py", state={"bk_table": SELECT_FIRST}),
             "analytics": visit("pages/analytics.py"), "manual admin": visit("pages/manual_admin.py")}
    assert any("5,000km" in text for text in _visible(faq))  # the answer is there, without its article id
    assert any("今は予約しない" in text for text in _visible(walks["diagnosis (skipped)"]))
    for name, at in walks.items():
        found = sorted({m.group(0) for text in _visible(at) for m in INTERNAL.finditer(text)})
        assert not found, f"{name} shows internal words: {found}"
