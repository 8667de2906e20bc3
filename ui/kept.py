"""Widget values kept while their tab is closed.

A lazy tab (``st.tabs(..., on_change="rerun")``, drawn only while ``.open``) does not draw its widgets while
another tab is open, and Streamlit drops the state of every widget a run does not draw: what the user typed in
the closed tab would be lost. :func:`keep` copies a widget's value to a key of its own after each run that draws
it; :func:`kept` gives it back as the widget's initial value when the tab is opened again (a widget with a key
takes its identity from the key, so the changing initial value does not make it a new widget). A choice
widget (selectbox, multiselect, number) whose initial value changed from run to run would be drawn anew in
the browser on every run (an open list loses its options under the pointer): :func:`restore` puts its kept
value back into its state instead, once, when its tab opens again."""
from __future__ import annotations

from typing import Any

import streamlit as st

PREFIX = "_kept_"


def kept(key: str, default: Any = None) -> Any:
    """The value the widget ``key`` had when it was last drawn, else ``default``."""
    return st.session_state.get(PREFIX + key, default)


def keep(key: str, value: Any) -> Any:
    """Remember the widget ``key``'s value (returned unchanged)."""
    st.session_state[PREFIX + key] = value
    return value


def restore(key: str) -> None:
    """Before the widget ``key`` is drawn: give it its kept value if its state was dropped (its tab was closed)."""
    state = st.session_state
    if key not in state and PREFIX + key in state:
        state[key] = state[PREFIX + key]


def forget(key: str) -> None:
    st.session_state.pop(PREFIX + key, None)
