"""ナレッジに質問 answers as regression cases (core.review.regression → core.knowledge.ask_scenario): a reviewed
ask-the-KB answer becomes a stored case that asks its question again of the store's current library and checks
only checkable facts (answered / not found, the entry cited first, the entries the correction names, required
phrases); `python -m core.eval --stored` and the replay of the reviewed set run it; the replay with an unsaved
prompt draft (never saved, rows say 「未保存の下書き」) against a scripted client that follows its prompt."""
from __future__ import annotations

import pytest

from bench.knowledge_recall import REVIEWER as LIBRARIAN
from bench.knowledge_recall import load_library
from core.eval.runner import main as eval_main
from core.eval.runner import run_scenario
from core.identity import OPERATOR, REVIEWER, Identity
from core.knowledge.ask import NO_KNOWLEDGE, ask
from core.knowledge.retrieval import knowledge_index
from core.llm.offline import OfflineClient
from core.prompts import load_prompt, prompt_version
from core.review.answers import ask_answer
from core.review.intake import give_feedback
from core.review.regression import NotReplayable, entry_citation, expectations, make_regression_case
from core.review.replay import replay_reviewed
from core.store.db import create_scratch_database
from core.store.prompt_versions import list_prompt_versions
from core.store.store import Store
from tests.helpers.clients import PromptFollowingAskClient as PromptFollowingClient
from tests.helpers.pg import shared_pg_url

ONE_SIDED = "相手だけがいつでも契約を解除できる条項には、普段どう対応していますか？ 担当 090-1234-5678"
NOTHING = "有給休暇の申請方法を教えて"
OPERATOR_ID = Identity(name="山田", email="yamada@example.jp", source="proxy")
SATO = Identity(name="佐藤", email="sato@example.jp", source="proxy", roles=frozenset({OPERATOR, REVIEWER}))
MARKER = PromptFollowingClient.MARKER


@pytest.fixture(params=["sqlite", "postgresql"])
def library(request, tmp_path):
    """The recall set's confirmed library in a fresh store, on both engines (the case, the review rows and the
    library all in the one store)."""
    url = f"sqlite:///{tmp_path / 'ask-review.db'}" if request.param == "sqlite" else \
        create_scratch_database(shared_pg_url())
    store = Store(url)
    ids = load_library(store)
    yield store, ids
    store.engine.dispose()


def reviewed(store, question: str, verdict: str, corrected=None, session="ask-abc", turn=0) -> int:
    """An ask-the-KB answer as the page gives it, thumbed down and reviewed: the item id."""
    answer = ask(question, knowledge_index(store), OfflineClient())
    held = ask_answer(session, turn, question=question, text=answer.answer, ok=answer.ok,
                      sources=[h.source() for h in answer.sources], model="offline")
    _, item_id = give_feedback(store, session, turn, "down", OPERATOR_ID, answer=held)
    store.record_review(item_id, SATO, verdict=verdict, corrected_answer=corrected)
    return item_id


def test_a_corrected_ask_answer_is_a_case_that_fails_until_a_draft_prompt_fixes_it(library, capsys):
    store, ids = library
    first = ids["outsourcing-termination-convenience"]
    hits = knowledge_index(store).search(ONE_SIDED, n=3)
    second = hits[1]
    assert hits[0].entry_id == first and second.entry_id != first
    item_id = reviewed(store, ONE_SIDED, "incorrect", {"text": "売買契約の整理を先に示すべき", "outcome": "answered",
                                                        "citations": [second.title, str(first)]})
    scenario_id, scenario = make_regression_case(store, item_id, SATO)
    assert scenario["flow"] == "ask"
    assert scenario["turns"] == [{"message": scenario["turns"][0]["message"]}]
    assert "090-1234-5678" not in scenario["turns"][0]["message"]  # the snapshot's question, masked
    assert scenario["expect"] == {"outcome": "answered", "first_citation": second.title,
                                  "citations_include": [second.title, f"No.{first}"]}
    assert store.list_review_scenarios()[0]["scenario"] == scenario

    # the offline answer still cites No.<first> first: the case fails, on the stored path and the CLI alike
    [row] = replay_reviewed(store, OfflineClient)
    assert (row.scenario_id, row.item_id, row.flow, row.matches) == (scenario_id, item_id, "ask", False)
    assert any(f.startswith("first_citation") for f in row.failures)
    assert eval_main(["--stored", "--db", store.url]) == 1
    assert "FAIL  [ask] レビュー #" in capsys.readouterr().out

    # the model follows its prompt: the prompt in use fails, an unsaved draft that says so passes
    follower = PromptFollowingClient()
    [row] = replay_reviewed(store, lambda: follower)
    assert not row.matches and "下書き" not in row.prompt_version
    in_use = prompt_version("knowledge_answer_system")
    draft = load_prompt("knowledge_answer_system") + "\n" + MARKER
    [row] = replay_reviewed(store, lambda: follower, drafts={"knowledge_answer_system": draft})
    assert any(MARKER in s for s in follower.systems)
    # the draft cites only the second entry: first_citation (by title) now holds, the required No.<first> is missing
    assert not row.matches and [f.split(":")[0] for f in row.failures] == ["citations_include"]
    assert row.prompt_version.startswith("未保存の下書き（knowledge_answer_system@")
    assert row.as_row()["プロンプト版"] == row.prompt_version
    # never saved, never the version in use
    assert prompt_version("knowledge_answer_system") == in_use and MARKER not in load_prompt("knowledge_answer_system")
    assert list_prompt_versions(store, "knowledge_answer_system") == []


def test_a_draft_makes_a_failing_case_pass(library):
    store, _ = library
    second = knowledge_index(store).search(ONE_SIDED, n=3)[1]
    item_id = reviewed(store, ONE_SIDED, "partial", {"citations": [f"No.{second.entry_id}"], "must_include": ["対応方針"]})
    _, scenario = make_regression_case(store, item_id, SATO)
    assert scenario["expect"] == {"outcome": "answered", "first_citation": f"No.{second.entry_id}",
                                  "message_contains": ["対応方針"]}
    follower = PromptFollowingClient()
    assert not replay_reviewed(store, lambda: follower)[0].matches
    draft = load_prompt("knowledge_answer_system") + "\n" + MARKER
    [row] = replay_reviewed(store, lambda: follower, drafts={"knowledge_answer_system": draft})
    assert row.matches, row.failures
    assert row.as_row()["判定と一致"] == "✅ 一致" and "未保存の下書き" in row.as_row()["プロンプト版"]


def test_correct_answers_pass_found_and_not_found_and_the_library_is_the_current_one(library, capsys):
    store, ids = library
    first = ids["outsourcing-termination-convenience"]
    found = reviewed(store, ONE_SIDED, "correct", session="ask-one")
    nothing = reviewed(store, NOTHING, "correct", session="ask-two")
    _, found_case = make_regression_case(store, found, SATO)
    _, nothing_case = make_regression_case(store, nothing, SATO)
    assert found_case["expect"] == {"outcome": "answered", "first_citation": f"No.{first}"}  # as it was: the first only
    assert nothing_case["expect"] == {"outcome": "not_found"}
    assert [r.matches for r in replay_reviewed(store, OfflineClient)] == [True, True]
    assert eval_main(["--stored", "--db", store.url]) == 0
    out = capsys.readouterr().out
    assert out.count("PASS  [ask]") == 2
    # the case asks the store's library as it is now: the entry archived, another one is cited first
    store.set_entry_status(first, "archive", LIBRARIAN)
    result = run_scenario(found_case, OfflineClient, store=store)
    assert not result.passed and result.final["citations"] and f"No.{first}" not in result.final["citations"]


def test_what_cannot_be_a_case(library):
    store, _ = library
    item_id = reviewed(store, ONE_SIDED, "incorrect", {"text": "自由記述だけ"})
    with pytest.raises(NotReplayable, match="確かめられる事実"):
        make_regression_case(store, item_id, SATO)
    blank, _ = store.enqueue_review("ask-x", 0, "ask", "thumbs_down", snapshot={"question": "", "answer": "a"})
    store.record_review(blank, SATO, verdict="incorrect", corrected_answer={"outcome": "not_found"})
    with pytest.raises(NotReplayable, match="質問が残っていない"):
        make_regression_case(store, blank, SATO)


@pytest.mark.parametrize("right, expect", [
    ({"outcome": "not_found", "citations": ["12"], "must_include": ["該当する"]},
     {"outcome": "not_found", "message_contains": ["該当する"]}),
    ({"citations": ["No.12", "#７", "業務委託契約：一方的な任意解除権の制限", "No.12"]},
     {"outcome": "answered", "first_citation": "No.12", "citations_include": ["No.12", "No.7",
                                                                              "業務委託契約：一方的な任意解除権の制限"]}),
    ({"outcome": "fallback", "text": "x"}, {}),
    ({"outcome": "answered", "urgency": "critical", "fields": {"contract_type": "x"}}, {"outcome": "answered"}),
])
def test_ask_expectations_are_checkable_facts_only(right, expect):
    assert expectations("ask", right) == expect


def test_entry_citations():
    assert [entry_citation(x) for x in ("12", "No.12", "no12", "＃１２", "Ｎｏ．１２", " No. 3 ", "第12条の件")] == \
        ["No.12", "No.12", "No.12", "No.12", "No.12", "No.3", "第12条の件"]


def test_the_adapter_reports_the_answer_citations_and_outcome(library):
    store, ids = library
    first = ids["outsourcing-termination-convenience"]
    result = run_scenario({"name": "ask", "flow": "ask", "turns": [{"message": ONE_SIDED}],
                           "expect": {"outcome": "answered", "first_citation": f"No.{first}",
                                      "citations_include": ["業務委託契約：一方的な任意解除権の制限"]}},
                          OfflineClient, store=store)
    assert result.passed, result.failures
    assert result.final["citations"][0] == f"No.{first}" and result.final["message"].startswith("当社の確定済みナレッジ")
    missing = run_scenario({"name": "ask", "flow": "ask", "turns": [{"message": NOTHING}],
                            "expect": {"outcome": "answered"}}, OfflineClient, store=store)
    assert not missing.passed and missing.final["outcome"] == "not_found" and missing.final["message"] == NO_KNOWLEDGE
