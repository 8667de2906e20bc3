"""The 利用者 block of the sidebar through AppTest: anonymous → a typed name shown as unverified,
an OIDC user (st.user seeded) with the logout button, a proxy header only when trusted.

AppTest reruns only the page of an ``st.navigation`` app, never app.py, so the block is run on its
own here (``AppTest.from_function``) to see it after a widget interaction.
"""
import pytest
from streamlit.testing.v1 import AppTest

import ui.identity


def _script():
    from ui.identity import render_identity_sidebar

    render_identity_sidebar()


@pytest.fixture
def app():
    at = AppTest.from_function(_script, default_timeout=30)
    at.run()
    assert not at.exception
    return at


def sidebar_markdown(at):
    return [m.value for m in at.sidebar.markdown]


def test_anonymous_then_typed_name_is_unverified(app):
    assert any("匿名" in m and "オペレーター" in m for m in sidebar_markdown(app))
    app.sidebar.text_input(key="local_user_name_input").input("  山田\x07 ").run()
    assert not app.exception
    assert app.session_state["local_user_name"] == "山田"
    assert any("山田（未確認）" in m for m in sidebar_markdown(app))
    assert any("未確認" in c.value for c in app.sidebar.caption)
    assert not [t for t in app.sidebar.text_input if t.key == "local_user_name_input"]  # asked once


def test_oidc_user_with_logout(app):
    app.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x"}
    app.user = {"is_logged_in": True, "name": "佐藤 花子", "email": "hanako@example.com"}
    app.run()
    assert not app.exception
    assert any("佐藤 花子" in m and "未確認" not in m for m in sidebar_markdown(app))
    assert [b.label for b in app.sidebar.button if b.key == "identity_logout"] == ["ログアウト"]
    assert not [t for t in app.sidebar.text_input if t.key == "local_user_name_input"]


def test_oidc_configured_but_logged_out_offers_login(app):
    app.secrets["auth"] = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x"}
    app.user = {"is_logged_in": False}
    app.run()
    assert [b.label for b in app.sidebar.button if b.key == "identity_login"] == ["ログイン"]


@pytest.mark.parametrize("trusted", [False, True])
def test_proxy_header_only_when_trusted(monkeypatch, app, trusted):
    if trusted:
        monkeypatch.setenv("KAIWA_TRUST_PROXY_HEADERS", "1")
    calls = []

    def headers(settings):
        calls.append(settings.trust_proxy)
        return {"x-forwarded-user": "suzuki"} if settings.trust_proxy else None

    monkeypatch.setattr(ui.identity, "_headers", headers)
    app.run()
    shown = any("suzuki" in m for m in sidebar_markdown(app))
    assert shown is trusted


def test_admin_mode_can_be_left(app):
    app.session_state["admin_unlocked"] = True
    app.run()
    assert any("管理者" in m for m in sidebar_markdown(app))
    app.sidebar.button(key="identity_admin_lock").click().run()
    assert app.session_state["admin_unlocked"] is False
    assert any("オペレーター" in m for m in sidebar_markdown(app))
