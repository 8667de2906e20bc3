"""A database outage (PostgreSQL stopped, the SQLite file unwritable, a full disk) is a Japanese notice,
never a traceback, and loses nothing the user typed.

* :func:`page_guard` wraps ``navigation.run()`` in ``app.py``: a store error anywhere in a page stops that
  page with :data:`OUTAGE_NOTICE` instead of Streamlit's exception box (``client.showErrorDetails`` is
  ``"none"`` as well, for anything else).
* :func:`protect` wraps a button callback the same way (callbacks run before the page does).
* :func:`hold` keeps what a page was about to send (a message, a form) when sending it failed, and
  :func:`held_input` shows it with 「再送信」 and 「破棄」 buttons until it is sent.
* :func:`notice` (drawn above every page) shows the outage and checks the database again on every rerun
  and, in the browser, every :data:`RETRY_SECONDS` seconds: once it answers a read and a write the
  notice goes away by itself and the page comes back.

``TurnBusy`` (another turn of the same conversation still running) is handled alike, with its own text.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from functools import wraps
from typing import Any, Callable, Iterator

import streamlit as st
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from core.store import get_store
from core.store.conversations import TurnBusy

logger = logging.getLogger(__name__)

OUTAGE_KEY = "db_outage"
HELD_KEY = "held_inputs"
RETRY_SECONDS = 5
OUTAGE_NOTICE = ("データベースに接続できない（または書き込めない）ため、いまは保存も表示の更新もできません。"
                 "入力した内容はこの画面に保持しています。復旧すると自動でこの表示が消え、保持した内容を再送信できます。")
RECOVERED_NOTICE = "データベースが復旧しました。保持していた内容は「再送信」で送れます。"
# Store errors that mean "the database is not usable right now" (connection refused or lost, read-only,
# disk full, pool exhausted), as opposed to a bug in our code.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (DBAPIError, DisconnectionError, PoolTimeout)
SHOWN_KEY = "db_outage_shown"  # the notice is already on this run's page
HOLD_ERRORS: tuple[type[BaseException], ...] = (TurnBusy, *OUTAGE_ERRORS)  # what makes a page keep the input


def _state() -> Any:
    return st.session_state


def mark_outage(exc: BaseException, where: str) -> None:
    """Remember the outage (shown by :func:`notice`) and log it once per run, without the user's text."""
    _state()[OUTAGE_KEY] = True
    logger.warning("database unavailable during %s: %s", where, type(exc).__name__, exc_info=exc)


_KEEPERS: dict[str, Callable[[Any], None]] = {}


def keep_on_failure(widget_key: str, keep: Callable[[Any], None]) -> None:
    """A page registers its chat input before it reads the store: if the page then fails on the store, the
    value just submitted (which Streamlit drops when its widget is not drawn) is handed to ``keep``."""
    _KEEPERS[widget_key] = keep


def _salvage() -> None:
    state = _state()
    for widget_key, keep in list(_KEEPERS.items()):
        try:
            value = state.get(widget_key)
        except Exception:  # noqa: BLE001 - a widget of another page
            continue
        if value:
            keep(value)


def note(exc: BaseException, where: str) -> None:
    """A failure a page handled itself (it kept the input): remembered when it is an outage."""
    if isinstance(exc, OUTAGE_ERRORS):
        mark_outage(exc, where)


@contextmanager
def page_guard() -> Iterator[None]:
    """Around a page: a store error becomes the outage notice; a busy conversation its own notice."""
    try:
        yield
    except TurnBusy as exc:
        _salvage()
        st.warning(exc.message, icon="⏳")
    except OUTAGE_ERRORS as exc:
        mark_outage(exc, "page")
        _salvage()
        if not _state().get(SHOWN_KEY):
            _show_outage()
            _watch()


def protect(callback: Callable[..., Any]) -> Callable[..., Any]:
    """A button callback that cannot raise a store error at the user (see :func:`page_guard`)."""
    @wraps(callback)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except TurnBusy as exc:
            st.toast(exc.message, icon="⏳")
        except OUTAGE_ERRORS as exc:
            mark_outage(exc, getattr(callback, "__name__", "callback"))
        return None
    return guarded


# ---- what the user typed ----------------------------------------------------------------------------------
def hold(key: str, payload: dict[str, Any], text: str, *, busy: bool = False) -> None:
    """Keep ``payload`` (what :func:`held_input` hands back to resend) and ``text`` (how it looks)."""
    _state().setdefault(HELD_KEY, {})[key] = {"payload": payload, "text": text, "busy": busy}


def held(key: str) -> dict[str, Any] | None:
    return (_state().get(HELD_KEY) or {}).get(key)


def release(key: str) -> None:
    (_state().get(HELD_KEY) or {}).pop(key, None)


def send_or_hold(key: str, payload: dict[str, Any], text: str, send: Callable[[dict[str, Any]], Any]) -> bool:
    """``send(payload)``; when the store is down or the conversation busy the payload is held instead
    (nothing lost). Returns whether it was sent."""
    try:
        send(payload)
    except TurnBusy:
        hold(key, payload, text, busy=True)
        return False
    except OUTAGE_ERRORS as exc:
        mark_outage(exc, f"send:{key}")
        hold(key, payload, text)
        return False
    release(key)
    return True


def held_input(key: str, send: Callable[[dict[str, Any]], Any]) -> None:
    """The kept input of ``key`` (if any): its text, why it was kept, 「再送信」 and 「破棄」."""
    item = held(key)
    if item is None:
        return
    down = down_now()
    if down and not _state().get(SHOWN_KEY):  # the write failed in this very run, after the notice's place
        st.warning(OUTAGE_NOTICE, icon="⚠️")
        _state()[SHOWN_KEY] = True
        _watch()  # re-enables 「再送信」 within RETRY_SECONDS of the database taking writes again
    with st.container(border=True):
        if item.get("busy"):
            st.warning("前のメッセージの処理が終わっていなかったため、次の内容は送信していません。", icon="⏳")
        else:
            st.warning("データベースに接続できなかったため、次の内容は送信していません（保持しています）。", icon="💾")
        st.text(item["text"] or "（入力内容）")
        resend_col, drop_col = st.columns(2)
        resend_col.button("再送信", key=f"held_resend_{key}", type="primary", disabled=down,
                          on_click=lambda: send_or_hold(key, item["payload"], item["text"], send))
        drop_col.button("破棄", key=f"held_drop_{key}", on_click=release, args=(key,))


# ---- the notice above every page --------------------------------------------------------------------------
def _healthy() -> bool:
    try:
        health = get_store().check_health()
    except Exception as exc:  # noqa: BLE001 - the store cannot even be opened
        logger.warning("database still unavailable: %s", type(exc).__name__)
        return False
    return health.readable and health.writable


@st.fragment(run_every=RETRY_SECONDS)
def _watch() -> None:
    """In the browser: check again every few seconds and bring the whole page back once it answers."""
    if _healthy():
        _state()[OUTAGE_KEY] = False
        st.rerun(scope="app")
    st.caption(f"⏳ {RETRY_SECONDS} 秒ごとに接続を確認しています…")


def down_now() -> bool:
    """Whether the outage this session saw is still on: checked again (a read and a write) whenever it
    was, and forgotten as soon as the database answers."""
    state = _state()
    if not state.get(OUTAGE_KEY):
        return False
    if _healthy():
        state[OUTAGE_KEY] = False
        return False
    return True


def notice() -> None:
    """Above every page: the outage notice while the database is unusable (checked again now)."""
    state = _state()
    state[SHOWN_KEY] = False
    was_down = bool(state.get(OUTAGE_KEY))
    if not down_now():
        if was_down and state.get(HELD_KEY):
            st.success(RECOVERED_NOTICE, icon="✅")
        return
    _show_outage()
    _watch()


def _show_outage() -> None:
    """The notice, and what is kept to send again once the database is back."""
    st.warning(OUTAGE_NOTICE, icon="⚠️")
    _state()[SHOWN_KEY] = True
    kept = [item["text"] for item in (_state().get(HELD_KEY) or {}).values() if item.get("text")]
    pending = _state().get("pending_submission") or {}
    if pending.get("held") and pending.get("text"):
        kept.append(pending["text"])
    for text in kept:
        st.caption("保持している入力（復旧後に再送信できます）:")
        st.text(text)

