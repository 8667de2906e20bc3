"""Who is using this tab, for the pages: :func:`current_identity` and the sidebar block that shows it.

The identity is resolved
by :func:`core.identity.resolve_identity` from ``st.user`` (only when ``[auth]`` is configured and
the user logged in), the trusted proxy headers in ``st.context.headers`` (only when
``KAIWA_TRUST_PROXY_HEADERS=1``), the display name typed once into the sidebar
(``st.session_state["local_user_name"]``, remembered for the browser by :mod:`ui.display_name`) and the
admin unlock of this session (``st.session_state["admin_unlocked"]``, set by the admin password form of
:func:`admin_gate`).

The password form slows down and then locks repeated failures (:func:`core.identity.unlock_wait`) per
person — the client address (the socket's, or with ``KAIWA_TRUST_PROXY_HEADERS=1`` the address the proxy
appended to ``X-Forwarded-For``) together with the account (the verified user, else the browser session)
— and per verified user across addresses, after 10 failures; so one person's wrong guesses never lock the
form for a verified colleague behind the same address. Unverified people (a typed name, nobody signed in)
cannot be told apart beyond their browser session, which is free to make anew, so together they share a
larger budget per address (slowed after 20 failures, locked after 50): new tabs gain a guesser no more.
Counted in the store so a new tab or another replica does not reset them; every attempt is in the audit
log with who, when and from where.
"""
from __future__ import annotations

import hashlib
import logging
import math
import time
from typing import Any, Mapping

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core.identity import (
    ADDRESS_FREE_FAILURES,
    ADDRESS_LOCK_FAILURES,
    WINDOW_SECONDS,
    AuthSettings,
    Identity,
    UnlockWait,
    check_admin_password,
    clean_value,
    load_auth_settings,
    resolve_identity,
    unlock_wait,
)
from core.store import get_store
from ui import display_name
from ui.safe import plain

logger = logging.getLogger(__name__)
clock = time.time  # the wall clock of the attempt counting (a test moves it)

LOCAL_NAME_KEY = "local_user_name"
ADMIN_UNLOCKED_KEY = "admin_unlocked"
NO_ADMIN_HELP = """\
マニュアルの追加・置き換え・削除・再構築は **管理者だけ** が行えます。いまは管理者が設定されていないため、\
この画面は閲覧のみです（契約ナレッジ作成・車両問診・FAQ はこれまでどおり使えます）。

管理者を有効にするには、次のどちらかを設定してからアプリを再起動してください。

1. **認証済みの利用者を管理者にする**: `.streamlit/secrets.toml` に `[auth]`（OIDC ログイン）を設定するか、\
認証プロキシ（oauth2-proxy など）の後ろで環境変数 `KAIWA_TRUST_PROXY_HEADERS=1` を設定します。\
そのうえで `KAIWA_ADMINS` に管理者の **確認済みメールアドレス** をカンマ区切りで指定します（名前は使えません）。
2. **管理者パスワードを使う**: `.streamlit/secrets.toml` に `admin_password = "…"` を書きます\
（環境変数 `KAIWA_ADMIN_PASSWORD` でも可）。この画面でパスワードを入力すると、そのセッションだけ管理者になります。
"""

SOURCE_LABELS = {"oidc": "ログイン済み（OIDC）", "proxy": "認証プロキシで確認済み",
                 "local": "未確認（入力された表示名）", "anonymous": "未設定"}


def _secrets() -> dict[str, Any]:
    try:
        return dict(st.secrets)
    except Exception:  # noqa: BLE001 - no secrets.toml: environment variables only
        return {}


def auth_settings() -> AuthSettings:
    return load_auth_settings(secrets=_secrets())


def _oidc_user(settings: AuthSettings) -> Mapping[str, Any] | None:
    if not settings.oidc_configured:
        return None
    try:
        return st.user.to_dict() if st.user.is_logged_in else None
    except Exception:  # noqa: BLE001 - no user info available in this context
        return None


def _headers(settings: AuthSettings) -> Mapping[str, Any] | None:
    if not settings.trust_proxy:
        return None
    try:
        return st.context.headers
    except Exception:  # noqa: BLE001 - no request headers (e.g. tests, bare mode)
        return None


def current_identity(settings: AuthSettings | None = None) -> Identity:
    """The identity of this tab's user (see module docstring)."""
    settings = settings or auth_settings()
    state = st.session_state
    display_name.restore(state, LOCAL_NAME_KEY)  # the name this browser remembers, on the tab's first run
    return resolve_identity(settings, oidc_user=_oidc_user(settings), headers=_headers(settings),
                            local_name=state.get(LOCAL_NAME_KEY), admin_unlocked=bool(state.get(ADMIN_UNLOCKED_KEY)))


def _set_local_name() -> None:
    name = clean_value(st.session_state.get("local_user_name_input"))
    if name:
        st.session_state[LOCAL_NAME_KEY] = name


def _change_local_name() -> None:
    st.session_state[LOCAL_NAME_KEY] = ""
    st.session_state.local_user_name_input = ""


def _lock_admin() -> None:
    st.session_state[ADMIN_UNLOCKED_KEY] = False


def render_identity_sidebar() -> Identity:
    """The sidebar block: who is signed in (「未確認」 for a typed name), the one-time name input,
    login / logout when OIDC is configured, and leaving admin mode. Returns the identity."""
    settings = auth_settings()
    who = current_identity(settings)
    with st.sidebar:
        st.subheader("利用者")
        role = "管理者" if who.is_admin else "レビュアー" if who.is_reviewer else "オペレーター"
        st.markdown(f"👤 **{plain(who.label)}**（{role}）")
        st.caption(SOURCE_LABELS.get(who.source, who.source) + (f" · {plain(who.email)}" if who.email else ""))
        if settings.oidc_configured:
            if who.source == "oidc":
                if st.button("ログアウト", key="identity_logout"):
                    st.logout()
            elif st.button("ログイン", key="identity_login", type="primary"):
                try:
                    st.login()
                except Exception as exc:  # noqa: BLE001 - e.g. Authlib missing or [auth] incomplete
                    logger.warning("login failed: %s", exc)
                    st.error("ログインを開始できませんでした。.streamlit/secrets.toml の [auth] 設定と "
                             "Authlib のインストールを確認してください。")
        if not who.verified and not st.session_state.get(LOCAL_NAME_KEY):
            st.text_input("表示名（最初に一度だけ入力してください）", key="local_user_name_input",
                          max_chars=60, placeholder="例: 山田", on_change=_set_local_name,
                          help="会話や登録内容の担当者として記録され、このブラウザに記憶されます。"
                               "認証されていないため「未確認」と表示され、権限は変わりません。")
        if who.source == "local":
            st.button("表示名を変更", key="identity_change_name", type="tertiary", on_click=_change_local_name,
                      help="このブラウザに記憶した表示名を消して、入力し直します。")
        display_name.sync(st.session_state, LOCAL_NAME_KEY)
        if st.session_state.get(ADMIN_UNLOCKED_KEY):
            st.button("管理者モードを終了", key="identity_admin_lock", on_click=_lock_admin)
    return who


def _client_address(settings: AuthSettings) -> str | None:
    """Where the attempt comes from: behind a trusted proxy, the address it appended to ``X-Forwarded-For``
    (the last one; earlier ones are whatever the client sent); else the socket's (None on localhost)."""
    if settings.trust_proxy:
        forwarded = ""
        for key, value in (_headers(settings) or {}).items():
            if str(key).strip().lower() == "x-forwarded-for":
                forwarded = str(value)[:1000]
        last = clean_value(forwarded.split(",")[-1]) if forwarded else ""
        if last:
            return last[:100]
    try:
        return clean_value(st.context.ip_address)[:100] or None
    except Exception:  # noqa: BLE001 - no request context (tests, bare mode)
        return None


def _session_key() -> str:
    ctx = get_script_run_ctx()
    session = getattr(ctx, "session_id", "") or "none"
    return "session:" + hashlib.sha256(session.encode()).hexdigest()[:24]


def _attempt_keys(who: Identity, settings: AuthSettings) -> tuple[list[str], dict[str, Any]]:
    """The keys the attempts are counted under, and where they come from (for the audit log)."""
    address = address_key = _client_address(settings) or "localhost"
    session = _session_key()
    # a typed name is anybody's: counting it would let anyone lock the real person out, so an unverified
    # person is their browser session
    account = f"user:{who.user_id}" if who.verified else session
    keys = [session, f"ip:{address_key}|{account}"]
    if who.verified:
        keys.append(f"user:{who.user_id}")
    else:  # new sessions are free to make: the unverified behind one address share a larger budget
        keys.append(f"addr:{address_key}")
    return keys, {"ip": address, "session": session.split(":", 1)[1]}


def _limits(key: str) -> dict[str, int]:
    """The address-wide key has the larger budget; the person's own keys the usual one."""
    return {"free": ADDRESS_FREE_FAILURES, "lock": ADDRESS_LOCK_FAILURES} if key.startswith("addr:") else {}


def _unlock_wait(keys: list[str], now: float) -> UnlockWait:
    failures = get_store().admin_failures(keys, now=now, window=WINDOW_SECONDS)
    waits = [unlock_wait(times, now, **_limits(key)) for key, times in failures.items()]
    return max(waits or [UnlockWait(0.0, False, 0)], key=lambda w: (w.locked, w.seconds))


def _wait_text(wait: UnlockWait) -> str:
    if wait.locked:
        return (f"管理者パスワードの誤りが続いたため、パスワードでの切り替えをロックしています。"
                f"約 {math.ceil(wait.seconds / 60)} 分後にもう一度お試しください（この試行は記録されています）。")
    return f"管理者パスワードの誤りが続いています。{math.ceil(wait.seconds)} 秒待ってからもう一度入力してください。"


def _unlock() -> None:
    state = st.session_state
    password = state.get("admin_password_input")
    state.admin_password_input = ""
    settings = auth_settings()
    who = current_identity(settings)
    keys, where = _attempt_keys(who, settings)
    now = clock()
    store = get_store()
    wait = _unlock_wait(keys, now)
    if wait.seconds > 0:  # not even checked: slowing down is the point
        store.record_admin_refused(who, where=where, wait_seconds=wait.seconds, locked=wait.locked)
        state.admin_unlock_notice = ("error", _wait_text(wait))
        return
    ok = check_admin_password(settings, password)
    # a colleague's success does not give the address-wide budget back to someone guessing beside them
    store.record_admin_attempt([k for k in keys if not (ok and k.startswith("addr:"))], ok, who, now=now, where=where)
    if ok:
        state[ADMIN_UNLOCKED_KEY] = True
        state.admin_unlock_notice = ("success", "管理者モードに切り替えました（このセッションのみ）。")
        return
    logger.warning("admin password: failed attempt from %s", where["ip"])
    after = _unlock_wait(keys, now)
    state.admin_unlock_notice = ("error", "管理者パスワードが違います。" + (
        _wait_text(after) if after.seconds > 0 else ""))


def admin_gate(who: Identity, settings: AuthSettings, what: str) -> None:
    """For a user who is not admin: that ``what`` (「マニュアルの追加・…」) is admin-only, how to enable
    admin when nobody is configured, and the admin password form when a password is configured."""
    notice = st.session_state.pop("admin_unlock_notice", None)
    if notice is not None:
        getattr(st, notice[0])(notice[1])
    if not settings.admin_configured:
        st.info(NO_ADMIN_HELP, icon="🔒")
    else:
        st.warning(f"{what}は管理者だけが行えます（現在の利用者: {plain(who.label)}）。一覧は閲覧できます。", icon="🔒")
    if settings.admin_password:
        keys, _ = _attempt_keys(who, settings)
        wait = _unlock_wait(keys, clock())
        if wait.locked and notice is None:
            st.error(_wait_text(wait))
        with st.form("admin_unlock_form", clear_on_submit=False):
            st.text_input("管理者パスワード", type="password", key="admin_password_input")
            st.form_submit_button("管理者モードにする", on_click=_unlock, disabled=wait.locked)
