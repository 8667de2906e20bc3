"""The typed display name is remembered for the browser (issue #15): typing it writes a cookie through
the cookie component; a later tab of the same browser (a reload) starts with it, so edits are recorded
under it, never as 「匿名」; it stays 「未確認」 and never grants a role; 「表示名を変更」 forgets it.

AppTest cannot send cookies, so the cookies a browser would send are given to ``ui.display_name``
through its one reader; the component's arguments are read from the element tree. The real browser
check is tests/e2e/test_e2e_display_name.py."""
from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from streamlit.testing.v1 import AppTest

from core.store import get_store
from tests.pages.conftest import APP
from ui import display_name


def _sidebar():
    from ui.identity import render_identity_sidebar

    render_identity_sidebar()


@pytest.fixture
def browser_cookies(monkeypatch):
    """The cookies the (simulated) browser sends with its connection."""
    cookies: dict[str, str] = {}
    monkeypatch.setattr(display_name, "browser_cookies", lambda: dict(cookies))
    return cookies


def sidebar() -> AppTest:
    at = AppTest.from_function(_sidebar, default_timeout=30)
    at.run()
    assert not at.exception
    return at


def cookie_writes(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.json_args) for c in at.get("component_instance")
            if json.loads(c.proto.json_args).get("method") == "set"]


def test_typing_a_name_writes_the_cookie(browser_cookies):
    at = sidebar()
    assert not cookie_writes(at)  # nothing to remember yet
    at.sidebar.text_input(key="local_user_name_input").input("山田 太郎").run()
    [write] = cookie_writes(at)
    assert write["cookie"] == display_name.COOKIE and write["value"] == "山田 太郎"
    assert write["options"]["path"] == "/" and write["options"]["sameSite"] == "strict"
    assert write["options"]["expires"] > "2026"  # a year ahead, not the session


def test_a_reload_starts_with_the_remembered_name_and_shows_who_is_recorded(browser_cookies):
    browser_cookies[display_name.COOKIE] = quote("山田 太郎")  # what universal-cookie stores
    at = sidebar()
    assert any("山田 太郎（未確認）" in m.value for m in at.sidebar.markdown)
    assert not [t for t in at.sidebar.text_input if t.key == "local_user_name_input"]  # not asked again
    assert not cookie_writes(at)  # already remembered: nothing to write


def test_an_edit_after_a_reload_is_recorded_under_the_remembered_name(browser_cookies):
    store = get_store()
    cid = store.create_conversation("knowledge", None)
    (entry,) = store.record_knowledge(cid, [{"knowledge_title": "損害賠償"}], None)
    browser_cookies[display_name.COOKIE] = quote("山田 太郎")
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("pages/library.py").run()
    at.session_state["lib_table"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    assert any(c.value == "記録される操作者: 山田 太郎（未確認）" for c in at.caption)
    at.text_input(key=f"lib_field_{entry}_knowledge_title").set_value("損害賠償の上限")  # submitted with the form
    at.button(key=f"FormSubmitter:lib_edit_{entry}-変更を保存").click().run()
    assert not at.exception
    history = store.entry_history(entry)
    assert history[-1]["action"] == "edit" and history[-1]["changed_by_label"] == "山田 太郎（未確認）"


def test_the_cookie_is_outside_input_and_never_grants_a_role(browser_cookies, monkeypatch):
    monkeypatch.setenv("KAIWA_ADMINS", "admin@example.jp,管理者")
    monkeypatch.setenv("KAIWA_TRUST_PROXY_HEADERS", "1")
    browser_cookies[display_name.COOKIE] = quote("管理者\u0007\u202e  ![x](http://127.0.0.1:9/c.png)")
    at = sidebar()
    shown = " ".join(m.value for m in at.sidebar.markdown)
    assert "管理者 !\\[x\\]" in shown and "（未確認）**（オペレーター）" in shown and "\u202e" not in shown
    assert "://" not in shown
    browser_cookies[display_name.COOKIE] = "%E5%B1%B1%FF"  # not UTF-8: no name at all
    assert display_name.remembered() == ""


def test_changing_the_name_forgets_it(browser_cookies):
    browser_cookies[display_name.COOKIE] = quote("山田")
    at = sidebar()
    at.sidebar.button(key="identity_change_name").click().run()
    assert any("匿名" in m.value for m in at.sidebar.markdown)
    [write] = cookie_writes(at)
    assert write["value"] == "" and write["options"]["expires"] < "2100"  # an expired cookie
    at.sidebar.text_input(key="local_user_name_input").input("佐藤").run()
    assert cookie_writes(at)[0]["value"] == "佐藤"
