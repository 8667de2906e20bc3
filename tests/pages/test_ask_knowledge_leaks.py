"""「ナレッジに質問」 page leaks nothing the library masks (issue 23): an unmasked entry's personal data and the
question's leave masked, and an obedient model's answer (``tests/fakes/obedient.py``) shows no uncited
entry, no system prompt and no attacker address."""
from __future__ import annotations

from bench.knowledge_recall import load_library
from core.llm.scripted import ScriptedClient
from core.store import get_store
from tests.core.knowledge.test_ask_leaks import EMAIL, PHONE, QUESTION, plant
from tests.fakes.obedient import EVIL_IMAGE, EVIL_LINK, PLANTED, echo_question, obedient
from tests.pages.test_knowledge_base_pages import browser


def page_text(at) -> str:
    """Everything the page shows of the answer (the question box holds the person's own text)."""
    last = at.session_state.ask_last
    return "\n".join([m.value for m in at.markdown] + [t.value for t in at.text] + [c.value for c in at.caption]
                     + [last["answer"], repr(last["sources"])])


def ask_on_page(client, question: str):
    at = browser("pages/ask_knowledge.py")
    at.session_state["llm_client"] = client
    at.text_area(key="ask_question").input(question)
    at.button[0].click().run()
    assert not at.exception
    return at


def test_the_page_masks_an_unmasked_entry_and_the_question():
    store = get_store()
    load_library(store)
    plant(store, action_plan=f"・相手だけがいつでも解除できる条項には予告期間を求める\n・窓口 {PHONE} / {EMAIL}")
    at = ask_on_page(ScriptedClient([echo_question]), f"{QUESTION} 連絡は taro @ example.com")
    shown = page_text(at)
    assert at.session_state.ask_last["sources"]
    for secret in (PHONE, EMAIL, "taro @ example.com"):
        assert secret not in shown


def test_the_page_shows_no_leak_from_an_obedient_model():
    store = get_store()
    load_library(store)
    plant(store, review_points="・相手だけがいつでも契約を解除できる条項かを確認する\n" + PLANTED)
    at = ask_on_page(ScriptedClient([obedient]), QUESTION)
    shown = page_text(at)
    assert len(at.session_state.ask_last["sources"]) == 1
    for leaked in (EVIL_IMAGE, EVIL_LINK, PLANTED, "回答係です"):
        assert leaked not in shown
