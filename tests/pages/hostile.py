"""Hostile text seeded through the console's public paths, and a check that no page renders it as a
link or an image (issue #15): the HTTP API (a customer's symptom and booking form), the knowledge
interview (model output from a scripted client, typed display names, an upload's file name), a
provider error's text, the library's edit form and the FAQ.

``seed(store)`` writes it all; ``markup_strings(at)`` is every string a page handed to Streamlit's
markdown renderer; ``assert_inert(at)`` fails on any of them that would render a link, an image or
raw HTML, or that holds a URL a GFM autolinker would turn into a link.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient
from markdown_it import MarkdownIt

from api.main import app as api_app
from api.main import get_client, get_retriever
from core.faq.conversation import FAQConversations
from core.identity import Identity
from core.knowledge.conversation import KnowledgeConversations
from core.llm.base import ProviderError
from core.llm.offline import OfflineClient
from core.llm.scripted import ScriptedClient
from core.store.debug_sink import StoredDebugLog
from tests.core.diagnosis.diagnosis_fakes import MIRAI, KeywordManualRetriever

OUTSIDE = "127.0.0.1:9"  # nothing listens there; a browser that fetches it shows the test failing
IMAGE = f"![x](http://{OUTSIDE}/img.png)"
RAW_IMG = f"<img src=http://{OUTSIDE}/raw.png>"
JS_LINK = "[a](javascript:alert(1))"
AUTOLINK = f"<http://{OUTSIDE}/auto>"
BARE = f"http://{OUTSIDE}/bare www.example.invalid"
HOSTILE = f"{IMAGE} {RAW_IMG} {JS_LINK} {AUTOLINK} {BARE}"
HOSTILE_NAME = f"{IMAGE}{JS_LINK}"  # a typed display name (the sidebar takes 60 characters)
HOSTILE_FILE = f"![f](http://{OUTSIDE}/file.png).txt"
HOSTILE_SESSION = f"[s](http://{OUTSIDE}/s)![i](http://{OUTSIDE}/i.png)"
# A page may name the outside host as text, never as something to fetch or follow.
_MD = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable(["table", "strikethrough"])
_MD.validateLink = lambda url: True  # render javascript: links too, so the check sees them


def knowledge_turn(title: str, message: str) -> str:
    return json.dumps({"control": {"schema_version": "1.0", "mode": "finalize"},
                       "state": {"phase": "draft_knowledge", "missing_info": [f"条文例 {IMAGE}"]},
                       "assistant_message": message,
                       "knowledge_json": {"contract_type": f"業務委託契約 {IMAGE}", "knowledge_title": title,
                                          "target_clause": f"第8条 {RAW_IMG}", "review_points": HOSTILE,
                                          "action_plan": f"=HYPERLINK(\"http://{OUTSIDE}/x\") {JS_LINK}",
                                          "clause_sample": AUTOLINK}}, ensure_ascii=False)


@dataclass
class Seeded:
    knowledge_id: str
    diagnosis_id: str
    faq_id: str
    entry_id: int
    booking: str


def _api_session(choice: str) -> str:
    """A customer of the HTTP API with a hostile symptom who picks ``choice`` at the reservation step:
    ``dispatch`` fills in a hostile booking form and confirms it, ``skip`` books nothing."""
    api_app.dependency_overrides[get_retriever] = KeywordManualRetriever
    api_app.dependency_overrides[get_client] = OfflineClient
    try:
        client = TestClient(api_app, raise_server_exceptions=False)

        def post(**body: Any) -> dict:
            response = client.post("/api/chat", json=body)
            assert response.status_code == 200, response.text
            return response.json()

        sid = post()["session_id"]
        post(session_id=sid, action="select_vehicle", action_value=MIRAI)
        post(session_id=sid, action="confirm_photo", action_value="yes")
        post(session_id=sid, message=f"ブレーキが効かない {HOSTILE}")
        form = post(session_id=sid, action="reserve", action_value=choice)
        if choice == "dispatch":
            assert form["prompt"]["type"] == "booking_form", form
            post(session_id=sid, action="submit_booking",
                 action_value={"name": HOSTILE_NAME, "phone": "090-1234-5678", "address": f"=1+2 {IMAGE}"})
            form = post(session_id=sid, action="booking", action_value="confirm")
        assert form["current_step"] == "done", form
    finally:
        api_app.dependency_overrides.clear()
    return sid


def skipped_booking() -> str:
    return _api_session("skip")


def seed(store) -> Seeded:
    """Hostile text in every kind of stored data the pages show."""
    sid = _api_session("dispatch")
    [booking] = store.list_bookings(conversation_id=sid)
    typed = Identity(name=HOSTILE_NAME, source="local")
    conversations = KnowledgeConversations(store, typed)
    kid = conversations.new()
    chat: list = []
    outputs: list = []
    log = StoredDebugLog(store, typed)
    conversations.submit(kid, chat, outputs, f"事例です {IMAGE} {RAW_IMG} {JS_LINK}", [],  # not the whole answer: an echo is no answer (issue 26)
                         ScriptedClient([knowledge_turn(f"損害賠償 {IMAGE}", f"草案です {HOSTILE}")]), log=log)
    failing = ScriptedClient([ProviderError("server_error", f"upstream said {HOSTILE}", status=500)] * 4)
    conversations.submit(kid, chat, outputs, f"続きです {JS_LINK}", [], failing, log=log)
    entry_id = outputs[0]["id"]
    store.edit_entry(entry_id, {"knowledge_title": f"=cmd|' /C calc'!A0 {IMAGE}"}, typed)
    faq = FAQConversations(store, typed)
    fid, state = faq.new()
    faq.ask(fid, state, [], f"保証の {HOSTILE} について教えて", client=OfflineClient())
    return Seeded(knowledge_id=kid, diagnosis_id=sid, faq_id=fid, entry_id=entry_id, booking=booking["number"])


def markup_strings(at) -> list[tuple[str, str]]:
    """(kind, text) of everything on the page that Streamlit renders as markdown: bodies, captions,
    alerts, headings, toasts, widget labels and help, expander and tab labels, metric labels."""
    out: list[tuple[str, str]] = []
    for kind in ("markdown", "caption", "title", "header", "subheader", "info", "warning", "error", "success",
                 "toast", "latex"):
        for element in at.get(kind):
            value = getattr(element, "value", None)
            if isinstance(value, str):
                out.append((kind, value))
    for kind in ("button", "checkbox", "toggle", "text_input", "text_area", "selectbox", "multiselect", "radio",
                 "number_input", "date_input", "slider", "select_slider", "color_picker", "time_input",
                 "download_button", "expander", "tab", "status", "metric", "chat_input", "form_submit_button"):
        for element in at.get(kind):
            for attr in ("label", "help", "placeholder"):
                value = getattr(element, attr, None)
                if isinstance(value, str) and value:
                    out.append((f"{kind}.{attr}", value))
            proto = getattr(element, "proto", None)
            for attr in ("label", "help"):
                value = getattr(proto, attr, None) if proto is not None else None
                if isinstance(value, str) and value:
                    out.append((f"{kind}.proto.{attr}", value))
    return out


def offending_values(values: list[str]) -> list[str]:
    """The strings that would render a link, an image or raw HTML, or hold an autolinkable URL."""
    bad = []
    for value in values:
        html = _MD.render(value)
        if "<a " in html or "<img" in html or "://" in value or "www." in value.lower():
            bad.append(value)
    return bad


def offending(at) -> list[tuple[str, str]]:
    """(kind, text) of the page's markdown-bearing strings that :func:`offending_values` rejects."""
    return [(kind, value) for kind, value in markup_strings(at) if offending_values([value])]


def assert_inert(at, where: str = "") -> None:
    bad = offending(at)
    assert not bad, f"{where}: outside text rendered as markup: {bad[:5]}"
