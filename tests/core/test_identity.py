"""Identity resolution (OIDC → proxy header → typed name → anonymous), roles and permissions,
auth settings from env / secrets, and the admin password check."""
from __future__ import annotations

import pytest

from core.identity import (
    ANONYMOUS,
    FREE_FAILURES,
    LOCK_FAILURES,
    PERMISSIONS,
    WINDOW_SECONDS,
    AuthSettings,
    Identity,
    check_admin_password,
    load_auth_settings,
    resolve_identity,
    unlock_wait,
)


def test_identity_properties():
    local = Identity(name="山田")
    assert not local.verified and local.user_id == "local:山田" and local.label == "山田（未確認）"
    proxy = Identity(name="yamada", email="yamada@example.com", source="proxy")
    assert proxy.verified and proxy.user_id == "yamada@example.com" and proxy.label == "yamada"
    assert ANONYMOUS.name == "匿名" and ANONYMOUS.source == "anonymous" and not ANONYMOUS.verified
    assert ANONYMOUS.roles == frozenset({"operator"})


def test_permissions_by_role():
    operator = Identity(name="a", source="oidc")
    admin = Identity(name="b", source="oidc", roles=frozenset({"operator", "admin"}))
    for permission in ("manual.write", "prompt.write", "entry.archive", "debug.clear", "scenario.write"):
        assert PERMISSIONS[permission] == {"admin"}
        assert admin.can(permission) and not operator.can(permission)
    for permission in ("entry.edit", "entry.confirm", "booking.update"):
        assert operator.can(permission) and admin.can(permission)
    assert not admin.can("no.such.permission")


def test_load_settings_from_env_and_secrets():
    s = load_auth_settings({"KAIWA_TRUST_PROXY_HEADERS": "1", "KAIWA_USER_HEADER": "X-Auth-User",
                            "KAIWA_ADMINS": " Boss@Example.com , 管理者 ,", "KAIWA_ADMIN_PASSWORD": "envpw"}, {})
    assert s.trust_proxy and s.user_header == "X-Auth-User" and s.email_header == "X-Forwarded-Email"
    assert s.admins == {"boss@example.com"} and s.admin_password == "envpw" and not s.oidc_configured  # e-mails only
    s = load_auth_settings({}, {"admin_password": "secret", "auth": {"redirect_uri": "http://x/oauth2callback"},
                                "KAIWA_TRUST_PROXY_HEADERS": "0"})
    assert s.admin_password == "secret" and s.oidc_configured and not s.trust_proxy
    assert load_auth_settings({}, None) == AuthSettings()
    assert not AuthSettings().admin_configured
    assert not AuthSettings(admins=frozenset({"x"})).admin_configured  # nobody can be verified as x
    assert AuthSettings(admins=frozenset({"x"}), trust_proxy=True).admin_configured
    assert AuthSettings(admin_password="pw").admin_configured



def test_auth_settings_read_their_own_keys_not_the_whole_environment():
    """Issue #25: the API loads these settings on every request; a copy of the whole environment decoded
    every variable of the process each time. Only the settings' keys are looked up (counted)."""
    from collections.abc import Mapping

    class Environ(Mapping):
        def __init__(self, values):
            self.values, self.read = values, []

        def __getitem__(self, key):
            self.read.append(key)
            return self.values[key]

        def __iter__(self):
            self.read.append("*every key*")
            return iter(self.values)

        def __len__(self):
            return len(self.values)

        def __contains__(self, key):
            return key in self.values

    env = Environ({"KAIWA_TRUST_PROXY_HEADERS": "yes", "KAIWA_REVIEWERS": "r@example.com", "PATH": "/bin",
                   **{f"OTHER_{i}": "x" for i in range(50)}})
    s = load_auth_settings(env, {})
    assert s.trust_proxy and s.reviewers == {"r@example.com"}
    assert sorted(env.read) == ["KAIWA_REVIEWERS", "KAIWA_TRUST_PROXY_HEADERS"]

def test_oidc_first_when_configured():
    s = AuthSettings(oidc_configured=True, trust_proxy=True, admins=frozenset({"boss@example.com"}))
    who = resolve_identity(s, oidc_user={"is_logged_in": True, "name": "Boss", "email": "Boss@Example.com"},
                           headers={"X-Forwarded-User": "other"}, local_name="typed")
    assert who.source == "oidc" and who.email == "boss@example.com" and who.user_id == "boss@example.com"
    assert who.roles == {"operator", "admin"} and who.can("manual.write")
    # logged out: falls through to the proxy header
    who = resolve_identity(s, oidc_user={"is_logged_in": False}, headers={"X-Forwarded-User": "other"})
    assert who.source == "proxy" and who.name == "other" and not who.can("manual.write")
    # an OIDC user dict is ignored when OIDC is not configured
    who = resolve_identity(AuthSettings(), oidc_user={"is_logged_in": True, "name": "Boss"}, local_name="山田")
    assert who.source == "local"


def test_proxy_headers_only_when_trusted_and_case_insensitive():
    headers = {"x-forwarded-user": "yamada", "X-FORWARDED-EMAIL": "Yamada@Example.com"}
    assert resolve_identity(AuthSettings(), headers=headers) == ANONYMOUS
    who = resolve_identity(AuthSettings(trust_proxy=True), headers=headers)
    assert who == Identity(name="yamada", email="yamada@example.com", source="proxy")
    custom = AuthSettings(trust_proxy=True, user_header="X-Auth-Request-User", email_header="X-Auth-Request-Email")
    assert resolve_identity(custom, headers={"x-auth-request-email": "a@b.jp"}).name == "a@b.jp"
    assert resolve_identity(custom, headers=headers) == ANONYMOUS


def test_header_values_are_capped_and_stripped_of_control_characters():
    s = AuthSettings(trust_proxy=True)
    who = resolve_identity(s, headers={"X-Forwarded-User": "ya\x00ma\x1bda\u202e\r\n  san" + "x" * 10_000})
    assert who.name.startswith("yamada san") and len(who.name) == 200
    assert not any(ord(c) < 32 or c == "\u202e" for c in who.name)
    assert resolve_identity(s, headers={"X-Forwarded-User": "\x00\x07 "}) == ANONYMOUS
    assert resolve_identity(s, headers={"X-Forwarded-Email": "not an email"}) .email is None


def test_local_name_and_anonymous():
    s = AuthSettings(admins=frozenset({"山田"}), admin_password="pw")
    who = resolve_identity(s, local_name="  山田 ")
    assert who.name == "山田" and who.label == "山田（未確認）"
    assert not who.can("manual.write")  # a typed name never matches the admin list
    assert resolve_identity(s, local_name="   ") == ANONYMOUS
    assert resolve_identity(s) == ANONYMOUS


@pytest.mark.parametrize("local_name", ["山田", None])
def test_admin_unlocked_session_is_admin(local_name):
    who = resolve_identity(AuthSettings(admin_password="pw"), local_name=local_name, admin_unlocked=True)
    assert who.roles == {"operator", "admin"} and who.can("manual.write")


def test_proxy_admin_only_by_the_verified_email_header_never_by_the_user_name():
    s = load_auth_settings({"KAIWA_TRUST_PROXY_HEADERS": "1", "KAIWA_ADMINS": "boss@example.com, yamada, proxy:suzuki"})
    assert resolve_identity(s, headers={"X-Forwarded-Email": "Boss@Example.com"}).can("manual.write")
    assert resolve_identity(s, headers={"X-Forwarded-User": "x", "X-Forwarded-Email": "boss@example.com"}).is_admin
    for user in ("yamada", "Yamada", "suzuki", "boss@example.com"):  # a user name is not an e-mail
        assert not resolve_identity(s, headers={"X-Forwarded-User": user}).is_admin
    assert not resolve_identity(s, headers={"X-Forwarded-User": "boss@example.com",
                                            "X-Forwarded-Email": "mallory@example.com"}).is_admin


def test_oidc_admin_only_by_a_verified_email_never_by_the_name_claim():
    s = AuthSettings(oidc_configured=True, admins=frozenset({"boss@example.com"}))
    renamed = resolve_identity(s, oidc_user={"name": "boss@example.com", "email": "mallory@example.com",
                                             "email_verified": True, "sub": "m-1"})
    assert not renamed.is_admin and renamed.user_id == "mallory@example.com"
    unverified = resolve_identity(s, oidc_user={"name": "Mallory", "email": "boss@example.com",
                                                "email_verified": False, "sub": "m-1"})
    assert not unverified.is_admin and unverified.email is None and unverified.user_id == "oidc:sub:m-1"
    assert not resolve_identity(s, oidc_user={"email": "boss@example.com", "email_verified": "false"}).is_admin
    verified = resolve_identity(s, oidc_user={"name": "Boss", "email": "boss@example.com", "email_verified": True})
    assert verified.is_admin
    assert resolve_identity(s, oidc_user={"name": "Boss", "email": "boss@example.com"}).is_admin  # not sent: trusted


def test_admin_password_attempts_slow_down_then_lock():
    now = 1_000_000.0
    assert unlock_wait([], now).seconds == 0
    free = [now - 1] * (FREE_FAILURES - 1)
    assert unlock_wait(free, now).seconds == 0
    slowed = unlock_wait([now - 1] * FREE_FAILURES, now)
    assert 0 < slowed.seconds <= 2 and not slowed.locked
    waits = [unlock_wait([now] * n, now).seconds for n in range(FREE_FAILURES, LOCK_FAILURES)]
    assert waits == sorted(waits) and waits[-1] <= 60  # growing, capped
    locked = unlock_wait([now - 5] * LOCK_FAILURES, now)
    assert locked.locked and WINDOW_SECONDS - 10 < locked.seconds <= WINDOW_SECONDS
    assert unlock_wait([now - WINDOW_SECONDS - 1] * 30, now).seconds == 0  # old failures are forgotten


def test_check_admin_password():
    s = AuthSettings(admin_password="正しい-pw")
    assert check_admin_password(s, "正しい-pw")
    assert not check_admin_password(s, "wrong") and not check_admin_password(s, "") and not check_admin_password(s, None)
    assert not check_admin_password(AuthSettings(), "")
    assert not check_admin_password(AuthSettings(), "anything")
