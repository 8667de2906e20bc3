"""The admin password form (``ui.identity.admin_gate``) through AppTest: repeated failures slow down and
then lock, counted in the store per person (address and account: the verified user, else the session), per
verified user across addresses, and with a larger budget per address (issue 23: one person's guesses do not
lock out everyone behind the same address; new tabs gain an attacker at most that budget), and every
attempt is audited with who, when and from where. The form runs on its own (``AppTest.from_function``) with
the clock moved by the test."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import ui.identity
from core.identity import ADDRESS_FREE_FAILURES, ADDRESS_LOCK_FAILURES, FREE_FAILURES, LOCK_FAILURES, WINDOW_SECONDS
from core.store import get_store

PASSWORD = "kanri-pw"


def _gate():
    import streamlit as st

    from ui.identity import admin_gate, auth_settings, current_identity

    settings = auth_settings()
    who = current_identity(settings)
    if who.is_admin:
        st.success("管理者モード")
    else:
        admin_gate(who, settings, "テスト操作")


@pytest.fixture
def clock(monkeypatch):
    now = [1_800_000_000.0]
    monkeypatch.setattr(ui.identity, "clock", lambda: now[0])
    monkeypatch.setenv("KAIWA_ADMIN_PASSWORD", PASSWORD)
    return now


def tab():
    at = AppTest.from_function(_gate, default_timeout=30)
    at.run()
    assert not at.exception
    return at


def submit(at):
    return at.button[[b.label for b in at.button].index("管理者モードにする")]


def attempt(at, password):
    """Type and submit ``password`` if the form lets anyone (a locked form's button is disabled); the
    page's messages afterwards."""
    if not submit(at).disabled:
        at.text_input(key="admin_password_input").input(password)
        submit(at).click().run()
        assert not at.exception, at.exception
    return " ".join(e.value for e in at.error) + " ".join(s.value for s in at.success)


def unlocked(at) -> bool:
    return bool(at.session_state["admin_unlocked"]) if "admin_unlocked" in at.session_state else False


def test_thirty_wrong_guesses_then_the_right_one_does_not_unlock(clock, monkeypatch):
    monkeypatch.setattr(ui.identity, "_client_address", lambda settings: "203.0.113.7")
    at = tab()
    for _ in range(30):
        was_open = not submit(at).disabled
        attempt(at, "guess")
        assert not unlocked(at)
        if was_open:
            clock[0] += 61  # never waits out the slow-down: only the lock stops it
        else:
            at.run()  # a reload while locked: still locked
    text = attempt(at, PASSWORD)
    assert "ロックしています" in text and not unlocked(at) and submit(at).disabled
    audit = get_store().list_audit("admin", "password", limit=100)
    actions = [a["action"] for a in audit]
    assert actions == ["admin.unlock_failed"] * LOCK_FAILURES  # each one audited; nothing after the lock
    assert all(a["detail"]["ip"] == "203.0.113.7" and a["detail"]["session"] and a["at"] for a in audit)
    assert all(a["actor"] == "anonymous:匿名" for a in audit)  # who (here nobody signed in)

    at.run()  # a reload of the locked tab: still locked
    assert any("ロックしています" in e.value for e in at.error)

    clock[0] += WINDOW_SECONDS + 1  # the lock lapses
    at.run()
    assert "管理者モード" in attempt(at, PASSWORD) and unlocked(at)
    assert get_store().list_audit("admin", "password", limit=1)[0]["action"] == "admin.unlock"


def _proxy_user(monkeypatch, email: str, address: str = "203.0.113.7") -> None:
    """``email`` signed in at the proxy, in their own browser (AppTest gives every tab one session id)."""
    monkeypatch.setenv("KAIWA_TRUST_PROXY_HEADERS", "1")
    monkeypatch.setattr(ui.identity, "_session_key", lambda: f"session:{email}")
    monkeypatch.setattr(ui.identity, "_headers", lambda settings: {
        "X-Forwarded-User": email.split("@")[0], "X-Forwarded-Email": email, "X-Forwarded-For": address})


def test_one_person_locked_out_does_not_lock_out_a_colleague_behind_the_same_address(clock, monkeypatch):
    _proxy_user(monkeypatch, "mallory@example.jp")
    at = tab()
    for _ in range(LOCK_FAILURES + 2):
        attempt(at, "guess")
        clock[0] += 61
    assert "ロックしています" in attempt(tab(), PASSWORD)  # the guesser, in any tab
    _proxy_user(monkeypatch, "sato@example.jp")  # a colleague behind the same corporate address
    colleague = tab()
    assert not any("ロックしています" in e.value for e in colleague.error)
    assert "管理者モード" in attempt(colleague, PASSWORD) and unlocked(colleague)


def test_new_tabs_gain_an_anonymous_guesser_no_more_than_the_address_budget(clock, monkeypatch):
    monkeypatch.setattr(ui.identity, "_client_address", lambda settings: "198.51.100.20")
    current = ["session:0"]
    monkeypatch.setattr(ui.identity, "_session_key", lambda: current[0])
    for n in range(ADDRESS_LOCK_FAILURES):
        current[0] = f"session:{n // (FREE_FAILURES - 1)}"  # a fresh tab before its own count slows it down
        if "パスワードが違います" not in attempt(tab(), "guess"):  # refused unchecked: told to wait
            break
    failed = [a for a in get_store().list_audit("admin", "password", limit=200) if a["action"] == "admin.unlock_failed"]
    assert len(failed) == ADDRESS_FREE_FAILURES  # then the address slows every unverified guesser down
    _proxy_user(monkeypatch, "sato@example.jp", "198.51.100.20")  # a signed-in colleague is not affected
    colleague = tab()
    assert "管理者モード" in attempt(colleague, PASSWORD) and unlocked(colleague)


def test_after_a_few_failures_the_next_try_must_wait(clock):
    at = tab()
    for _ in range(3):
        assert "パスワードが違います" in attempt(at, "guess")
    text = attempt(at, PASSWORD)  # at once: refused without being checked
    assert "待ってから" in text and not unlocked(at)
    clock[0] += 3
    assert "管理者モード" in attempt(at, PASSWORD) and unlocked(at)


def test_a_verified_user_is_counted_across_addresses(clock, monkeypatch):
    monkeypatch.setenv("KAIWA_TRUST_PROXY_HEADERS", "1")
    address = ["198.51.100.1"]
    monkeypatch.setattr(ui.identity, "_headers", lambda settings: {
        "X-Forwarded-User": "tanaka", "X-Forwarded-Email": "tanaka@example.jp",
        "X-Forwarded-For": f"10.0.0.9, {address[0]}"})
    at = tab()
    for n in range(LOCK_FAILURES):
        address[0] = f"198.51.100.{n + 1}"  # hopping addresses and tabs does not help
        attempt(tab() if n % 2 else at, "guess")
        clock[0] += 61
    assert "ロックしています" in attempt(tab(), PASSWORD)  # a new tab from yet another address
    ips = {a["detail"]["ip"] for a in get_store().list_audit("admin", "password", limit=100)}
    assert "198.51.100.1" in ips and "10.0.0.9" not in ips  # the proxy's own entry, not the client's claim
