"""ナレッジに質問 answers as regression cases on the レビュー page (AppTest), and the workbench's replay of the
reviewed set with the prompt draft in the editor, unsaved: a reviewer corrects an ask-the-KB answer (the entry it
should cite first), makes it a case, and the replay of 回帰セット shows one case passing and one failing; a tuner
edits knowledge_answer_system in デバッグログ → 再実行 and, without saving, sees the failing case now match
(「未保存の下書き」), while no version is recorded and the prompt in use is unchanged."""
from __future__ import annotations

import pytest

import ui.identity
from bench.knowledge_recall import load_library
from core.identity import Identity
from core.knowledge.ask import ask
from core.knowledge.retrieval import knowledge_index
from core.llm.offline import OfflineClient
from core.prompts import load_prompt, prompt_version
from core.review.answers import ask_answer
from core.review.intake import give_feedback
from core.review.regression import make_regression_case
from core.store import get_store
from core.store.prompt_versions import list_prompt_versions
from tests.helpers.clients import PromptFollowingAskClient
from tests.pages.test_workbench_page import open_tab

REVIEWER = {"x-forwarded-user": "sato", "x-forwarded-email": "sato@example.jp"}
SATO = Identity(name="佐藤", email="sato@example.jp", source="proxy", roles=frozenset({"operator", "reviewer"}))
ONE_SIDED = "相手だけがいつでも契約を解除できる条項には、普段どう対応していますか？"


@pytest.fixture
def as_reviewer(monkeypatch):
    monkeypatch.setenv("KAIWA_TRUST_PROXY_HEADERS", "1")
    monkeypatch.setenv("KAIWA_REVIEWERS", "sato@example.jp")
    monkeypatch.setenv("KAIWA_REVIEW_SAMPLE", "0")
    monkeypatch.setattr(ui.identity, "_headers", lambda settings: REVIEWER if settings.trust_proxy else None)


def thumbs_down_ask(session: str, log: list | None = None) -> int:
    """An answer of ナレッジに質問 given 👎 as the page does (the library loaded first): the item id."""
    store = get_store()
    answer = ask(ONE_SIDED, knowledge_index(store), OfflineClient(), log=log)
    held = ask_answer(session, 0, question=ONE_SIDED, text=answer.answer, ok=answer.ok,
                      sources=[h.source() for h in answer.sources], model="offline")
    return give_feedback(store, session, 0, "down", Identity(name="op"), answer=held)[1]


def test_a_reviewer_makes_a_case_from_an_ask_answer_and_the_replay_shows_pass_and_fail(app, as_reviewer):
    store = get_store()
    load_library(store)
    hits = knowledge_index(store).search(ONE_SIDED, n=3)
    passing = thumbs_down_ask("ask-ok")
    store.record_review(passing, SATO, verdict="correct")
    make_regression_case(store, passing, SATO)
    item_id = thumbs_down_ask("ask-wrong")
    at = app.switch_page("pages/review.py").run()
    assert not at.exception, at.exception
    at.session_state["rv_selected"] = item_id
    at.run()
    at.button(key=f"rv_claim_{item_id}").click().run()
    shown = "\n".join(m.value for m in at.markdown)
    assert ONE_SIDED in shown and f"`{hits[0].entry_id}`" in shown  # the question, the answer's cited entries
    at.radio(key=f"rv_verdict_{item_id}").set_value("incorrect").run()
    at.selectbox(key=f"rv_fix_{item_id}_outcome").set_value("answered").run()
    at.text_input(key=f"rv_fix_{item_id}_citations").set_value(f"{hits[1].title}、No.{hits[0].entry_id}").run()
    at.button(key=f"rv_record_{item_id}").click().run()
    assert not at.exception, at.exception
    assert store.get_review_item(item_id)["corrected_answer"] == {
        "outcome": "answered", "citations": [hits[1].title, f"No.{hits[0].entry_id}"]}
    at.button(key=f"rv_regress_{item_id}").click().run()
    assert not at.exception, at.exception
    assert any("回帰ケース No." in s.value and "first_citation" in s.value for s in at.success)
    case = store.list_review_scenarios()[-1]["scenario"]
    assert case["flow"] == "ask" and case["turns"] == [{"message": ONE_SIDED}]
    assert case["expect"] == {"outcome": "answered", "first_citation": hits[1].title,
                              "citations_include": [hits[1].title, f"No.{hits[0].entry_id}"]}

    at.button(key="rv_replay_run").click().run()  # 回帰セット on this tab's offline provider
    assert not at.exception, at.exception
    assert at.metric[0].value == "1 / 2"
    [table] = [d.value for d in at.dataframe if "判定と一致" in d.value.columns]
    assert list(table["フロー"]) == ["ask", "ask"]
    assert list(table["判定と一致"]) == ["✅ 一致", "❌ 不一致"]
    assert "first_citation" in table["不一致の内容"].iloc[1]


def test_a_tuner_replays_the_reviewed_set_with_the_unsaved_draft(app):
    store = get_store()
    load_library(store)
    second = knowledge_index(store).search(ONE_SIDED, n=3)[1]
    log: list = []
    item_id = thumbs_down_ask("ask-draft", log)
    for record in log:  # the debug log needs a record to open the workbench
        store.add_debug_record(record, Identity(name="op"))
    store.record_review(item_id, SATO, verdict="incorrect", corrected_answer={"citations": [str(second.entry_id)]})
    make_regression_case(store, item_id, SATO)
    in_use = prompt_version("knowledge_answer_system")
    app.session_state["llm_client"] = PromptFollowingAskClient()
    at = app.switch_page("pages/debug_log.py").run()
    assert not at.exception, at.exception
    open_tab(at, "レビュー済みセット")  # lazy tabs: only the open one runs
    assert not [c for c in at.checkbox if c.key == "wb_reviewed_use_draft"]  # no draft yet
    at.button(key="wb_reviewed_run").click().run()
    assert at.metric[0].value == "0 / 1"  # the prompt in use: the model cites the best entry first

    open_tab(at, "再実行")
    at.selectbox(key="wb_prompt_name").set_value("knowledge_answer_system").run()
    assert at.button(key="wb_draft_run").disabled  # the editor holds the text in use: nothing to try
    draft = load_prompt("knowledge_answer_system") + "\n" + PromptFollowingAskClient.MARKER
    at.text_area(key="wb_prompt_text_knowledge_answer_system").set_value(draft).run()
    at.button(key="wb_draft_run").click().run()
    assert not at.exception, at.exception
    assert any(c.value.startswith("未保存の下書き（knowledge_answer_system@") and "版として記録されていません" in c.value
               for c in at.caption)
    tables = [d.value for d in at.dataframe if "判定と一致" in d.value.columns]
    assert [list(t["判定と一致"]) for t in tables] == [["✅ 一致"]]  # the draft's
    assert tables[0]["プロンプト版"].iloc[0].startswith("未保存の下書き（knowledge_answer_system@")
    assert [m.value for m in at.metric if m.label == "レビューの判定と一致"] == ["1 / 1"]

    open_tab(at, "レビュー済みセット")  # the editor's tab is closed now: its draft is kept (ui.kept)
    at.checkbox(key="wb_reviewed_use_draft").check().run()  # the reviewed-set tab: the editor's draft too
    at.button(key="wb_reviewed_run").click().run()
    assert [m.value for m in at.metric if m.label == "レビューの判定と一致"] == ["1 / 1"]
    open_tab(at, "再実行")  # and back in the editor, the draft is still what was typed
    assert at.text_area(key="wb_prompt_text_knowledge_answer_system").value == draft
    # never saved: no version recorded, the text in use is unchanged
    assert list_prompt_versions(store, "knowledge_answer_system") == []
    assert prompt_version("knowledge_answer_system") == in_use
    assert PromptFollowingAskClient.MARKER not in load_prompt("knowledge_answer_system")
