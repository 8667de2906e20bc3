"""The display name a user typed, remembered for their browser, and the line saying who will be recorded.

Without sign-in, the sidebar asks for a display name once; it is recorded (as 「未確認」, never granting
a role) on conversations, entries, bookings and debug records. It used to live only in the tab's
session, so every reload recorded later edits as 「匿名」. Now the browser keeps it in a cookie:

- written by the cookie manager of ``extra-streamlit-components`` (a maintained Streamlit component:
  the value goes to the browser as component data, never as script text), ``path=/``,
  ``SameSite=Strict``, for :data:`REMEMBER_DAYS` days;
- read back by Streamlit itself (``st.context.cookies``, sent with the page's connection), so a
  reload or a new tab starts with the name on its very first run; the value is percent-decoded and
  cleaned like any typed name (:func:`core.identity.clean_value`) — it is outside input;
- forgotten with 「表示名を変更」 (the cookie is overwritten with an expired one).

:func:`remembered` reads it, :func:`sync` keeps the cookie in step with the tab's name (draw it once per
run, in the sidebar), :func:`recorded_as` shows who a change will be recorded as.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from typing import Any, MutableMapping
from urllib.parse import unquote

import streamlit as st
from extra_streamlit_components import CookieManager

from core.identity import Identity, clean_value
from ui.safe import plain

logger = logging.getLogger(__name__)

COOKIE = "kaiwa_display_name"
REMEMBER_DAYS = 365
REMEMBERED_KEY = "display_name_cookie"  # what the browser remembered when this tab connected (or wrote since)
_MAX_COOKIE_CHARS = 2000


def browser_cookies() -> dict[str, str]:
    """The cookies the browser sent with this tab's connection (none in bare mode or AppTest)."""
    try:
        return dict(st.context.cookies)
    except Exception:  # noqa: BLE001 - no request context
        return {}


def remembered() -> str:
    """The display name this browser remembers ("" when none); cleaned like a typed name."""
    raw = str(browser_cookies().get(COOKIE) or "")[:_MAX_COOKIE_CHARS]
    try:
        return clean_value(unquote(raw, errors="strict"))
    except UnicodeDecodeError:
        return ""


def restore(state: MutableMapping[str, Any], name_key: str) -> None:
    """On a tab's first run, take the name its browser remembers (a name typed in this tab wins)."""
    if REMEMBERED_KEY in state:
        return
    state[REMEMBERED_KEY] = remembered()
    if state[REMEMBERED_KEY] and not state.get(name_key):
        state[name_key] = state[REMEMBERED_KEY]


def sync(state: MutableMapping[str, Any], name_key: str) -> None:
    """Write the cookie while the tab's name differs from what the browser remembers (drawn on every
    run until then, so a rerun never cuts the write short). An empty name forgets it."""
    name = clean_value(state.get(name_key))
    if name == state.get(REMEMBERED_KEY, ""):
        return
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=None)
    expires = today + timedelta(days=REMEMBER_DAYS) if name else today - timedelta(days=1)
    try:
        CookieManager(key="display_name_cookies").set(COOKIE, name, key="display_name_cookie_set", path="/",
                                                      expires_at=expires, same_site="strict")
    except Exception:  # noqa: BLE001 - the name still works for this tab; only remembering failed
        logger.exception("could not remember the display name in a cookie")


def recorded_as(who: Identity) -> None:
    """A caption: the name a change made now is recorded under (and how to give one when anonymous)."""
    if who.source == "anonymous":
        st.caption("記録される操作者: 匿名（サイドバーで表示名を入力すると、その名前で記録されます）")
    else:
        st.caption(f"記録される操作者: {plain(who.label)}")
