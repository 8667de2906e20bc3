"""Stale library forms: the edit form of an entry carries the version it was opened at, and a save or
確定する over a newer version (someone saved in between) is refused by the store
(:class:`core.store.library.StaleEntry`). This module keeps that version per entry in the session, shows
the refusal in Japanese with what changed (the version the form showed beside the current one, as text),
and keeps what the person typed in the form: 「入力を残して最新の版に合わせる」 moves the form onto the
current version with the typed text left as it is (a save then sends only the fields the person changed,
so a colleague's change to another field stays), 「最新の版を表示する」 drops the typed text."""
from __future__ import annotations

from typing import Any, Mapping

import streamlit as st

from core.store.library import StaleEntry, changed_fields
from core.validation import ENTRY_FIELDS
from ui.safe import lines


def _form_key(eid: int) -> str:
    return f"lib_form_{eid}"


def _stale_key(eid: int) -> str:
    return f"lib_stale_{eid}"


def _field_key(eid: int, field: str) -> str:
    return f"lib_field_{eid}_{field}"


def _snapshot(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {"version": int(entry["version"]), "fields": {f: str(entry.get(f) or "") for f in ENTRY_FIELDS}}


def form_snapshot(eid: int, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The version (and field values) the form stands for: the one it was opened at while the person has
    typed something, else the entry as it is now (an untouched form follows a colleague's save)."""
    state = st.session_state
    shown = state.get(_form_key(eid))
    typed = [state.get(_field_key(eid, f)) for f in ENTRY_FIELDS]
    untouched = shown is None or all(v is None or v == shown["fields"][f] for f, v in zip(ENTRY_FIELDS, typed))
    if untouched and not state.get(_stale_key(eid)) and (shown is None or shown["version"] != int(entry["version"])):
        shown = _snapshot(entry)
        state[_form_key(eid)] = shown
        for field in ENTRY_FIELDS:
            state.pop(_field_key(eid, field), None)
    return shown


def typed_changes(shown: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """Only the fields the person changed from the version the form showed."""
    return {f: values[f] for f in ENTRY_FIELDS if f in values and values[f] != shown["fields"].get(f)}


def refused(eid: int, exc: StaleEntry) -> None:
    """Remember the refusal (shown by :func:`notice` until the person chooses what to do)."""
    shown = st.session_state.get(_form_key(eid)) or {"version": exc.shown, "fields": {}}
    st.session_state[_stale_key(eid)] = {"message": str(exc), "shown": shown, "current": exc.current}


def forget(eid: int, *, clear_form: bool = False) -> None:
    st.session_state.pop(_stale_key(eid), None)
    if clear_form:
        st.session_state.pop(_form_key(eid), None)
        for field in ENTRY_FIELDS:
            st.session_state.pop(_field_key(eid, field), None)


def _rebase(eid: int) -> None:
    """Onto the current version: the fields the person typed in keep the typed text, the others show the
    current text (so a save sends only what the person changed)."""
    state = st.session_state
    stale = state.pop(_stale_key(eid), None)
    if not (stale and stale["current"]):
        return
    before = stale["shown"].get("fields") or {}
    current = _snapshot(stale["current"])
    for field in ENTRY_FIELDS:
        typed = state.get(_field_key(eid, field))
        if typed is None or typed == before.get(field):
            state[_field_key(eid, field)] = current["fields"][field]
    state[_form_key(eid)] = current


def notice(eid: int, labels: Mapping[str, str]) -> None:
    """The refusal, what changed (as plain text: entry text is never rendered as markup) and the two ways on."""
    stale = st.session_state.get(_stale_key(eid))
    if not stale:
        return
    before, now = stale["shown"].get("fields") or {}, stale["current"] or {}
    with st.container(border=True):
        st.error(lines(stale["message"]), icon="🔁")
        for field in changed_fields({**before, "status": now.get("status")} if before else {}, now):
            label = labels.get(field, "状態" if field == "status" else field)
            st.markdown(f"**{label}**")
            old_col, new_col = st.columns(2)
            old_col.caption(f"表示していた版（版 {stale['shown'].get('version')}）")
            old_col.text(before.get(field, "") or "—")
            new_col.caption(f"現在の版（版 {now.get('version')}）")
            new_col.text(str(now.get(field) or "") or "—")
        keep_col, drop_col = st.columns(2)
        keep_col.button("入力を残して最新の版に合わせる", key=f"lib_rebase_{eid}", type="primary",
                        on_click=_rebase, args=(eid,))
        drop_col.button("最新の版を表示する（入力は破棄）", key=f"lib_reload_{eid}", on_click=forget, args=(eid,),
                        kwargs={"clear_form": True})
