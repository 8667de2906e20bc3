"""The knowledge base at work in the console (AppTest): similar confirmed entries beside the interview once
the contract type and clause are known, 進行状況 once the entry is confirmed, 「ナレッジに質問」 with its
citations and links, and the library opening an entry from ``?entry=<No.>``."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from bench.knowledge_recall import load_library
from core.knowledge.ask import NO_KNOWLEDGE
from core.store import get_store
from tests.pages.conftest import APP


def browser(page: str | None = None, **params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    if page:
        at.switch_page(page)
        for key, value in params.items():
            at.query_params[key] = value
        at.run()
        assert not at.exception
    return at


def links(at) -> list[str]:
    return [str(p.proto.query_string) + " " + p.proto.label for p in at.get("page_link")]


def markdowns(at) -> list[str]:
    return [m.value for m in at.markdown]


def test_similar_confirmed_entries_show_once_contract_type_and_clause_are_known():
    ids = load_library(get_store())
    at = browser()
    at.chat_input[0].set_value("業務委託契約の件で相談です。").run()
    assert "似ている確定済みナレッジ" not in [s.value for s in at.subheader]
    at.chat_input[0].set_value("第10条（再委託）で、相手方が無断で下請に出せる定めになっていました。").run()
    assert not at.exception
    assert "似ている確定済みナレッジ" in [s.value for s in at.subheader]
    want = ids["subcontract"]
    assert any(m.startswith(f"**No.{want} 業務委託契約：再委託の事前承諾**") for m in markdowns(at))
    assert any(f"entry={want}" in link for link in links(at))
    assert f"当社の確定済みナレッジ No.{want}" in at.session_state.chat[-1]["content"]  # proposed as house style


def test_progress_shows_when_the_entry_is_confirmed():
    at = browser()
    at.chat_input[0].set_value("業務委託契約の第8条（損害賠償）で、賠償の上限がない点が問題でした。").run()
    at.chat_input[0].set_value("委託料総額を上限とするよう修正を求めるべきです。「賠償額は委託料総額を上限とする。」").run()
    entry_id = at.session_state.knowledge_outputs[0]["id"]
    assert not any("確定済み" in p.text for p in at.get("progress"))
    at.button(key=f"confirm_entry_{entry_id}").click().run()
    assert not at.exception
    assert any(p.text == "✅ 確定済み" for p in at.get("progress"))
    assert any(f"No.{entry_id}" in s.value and "確定済み" in s.value for s in at.success)
    assert any(f"entry={entry_id}" in link for link in links(at))


def test_ask_the_knowledge_base_page_answers_with_citations_and_keeps_the_question():
    ids = load_library(get_store())
    at = browser("pages/ask_knowledge.py")
    assert at.title[0].value == "🔎 ナレッジに質問"
    at.text_area(key="ask_question").input("相手だけがいつでも契約を解除できる条項には、普段どう対応していますか？")
    at.button[0].click().run()
    assert not at.exception
    want = ids["outsourcing-termination-convenience"]
    assert at.session_state.ask_last["sources"][0]["entry_id"] == want
    assert any(m.startswith(f"**No.{want} 業務委託契約：一方的な任意解除権の制限**") for m in markdowns(at))
    assert any(f"entry={want}" in link for link in links(at))
    assert at.text_area(key="ask_question").value.startswith("相手だけが")  # what was typed survives
    at.text_area(key="ask_question").input("会議室の予約はどうすればいい？")
    at.button[0].click().run()
    assert at.session_state.ask_last["answer"] == NO_KNOWLEDGE and at.session_state.ask_last["sources"] == []
    assert any("該当するものがありませんでした" in i.value for i in at.info)


def test_the_library_opens_the_entry_a_link_names():
    ids = load_library(get_store())
    want = ids["dispatch"]
    at = browser("pages/library.py", entry=str(want))
    assert any(s.value.startswith(f"No.{want} 労働者派遣契約：派遣労働者の交代要請") for s in at.subheader)
    bad = browser("pages/library.py", entry="not-a-number")
    assert not bad.exception and not any(s.value.startswith("No.") for s in bad.subheader)
