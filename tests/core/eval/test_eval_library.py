"""Confirmed knowledge entries as a regression set for the knowledge flow (core.eval.library and
``python -m core.eval --from-library``): conversations replayed and checked against what was confirmed,
entries that cannot be replayed left out and counted, and a set that fails when the flow would no longer
produce what the reviewers confirmed."""
from __future__ import annotations

import yaml

from core.documents import extract_document
from core.eval.library import regression_scenarios
from core.eval.runner import load_file, main, make_client, run_files, run_library, run_scenario
from core.identity import ADMIN, OPERATOR, Identity
from core.knowledge.conversation import KnowledgeConversations
from core.llm.offline import OfflineClient
from core.store.store import Store

REVIEWER = Identity(name="審査", source="proxy", roles=frozenset({OPERATOR, ADMIN}))
CASES = [
    ["業務委託契約の第8条（損害賠償）で、賠償額の上限がない点が問題でした。山田（090-1234-5678）から相談がありました。",
     "委託料の総額を上限とするよう修正を求めるべきです。", "おまかせ"],
    ["秘密保持契約の第5条（秘密保持）の存続期間が1年と短く、漏えいのおそれがある点が懸念でした。",
     "存続期間を5年に延長するよう交渉すべきです。", "おまかせ"],
    ["売買契約の第11条（支払条件）で、支払が翌々月末と遅い点が負担でした。", "この内容でまとめてください"],
]


def interview(store, turns, documents=()):
    conversations = KnowledgeConversations(store, REVIEWER)
    cid = conversations.new()
    chat, outputs = [], []
    for i, text in enumerate(turns):
        conversations.submit(cid, chat, outputs, text, list(documents) if i == 0 else [], OfflineClient())
    conversations.confirm(cid, outputs[0]["id"], REVIEWER)
    return outputs[0]["id"]


def library(tmp_path) -> Store:
    store = Store(f"sqlite:///{tmp_path / 'library.db'}")
    for turns in CASES:
        interview(store, turns)
    doc = extract_document("契約.txt", "第10条（再委託）乙は自由に再委託できる。".encode())
    interview(store, ["業務委託契約の第10条（再委託）が問題でした。", "事前承諾を求めるべきです。", "おまかせ"], [doc])
    [orphan] = store.record_knowledge(None, [{"contract_type": "売買契約", "knowledge_title": "取込み", "target_clause": "第1条",
                                              "review_points": "r", "action_plan": "a", "clause_sample": "c"}], REVIEWER)
    store.set_entry_status(orphan, "confirm", REVIEWER)
    return store


def test_confirmed_entries_become_scenarios_that_pass_and_unreplayable_ones_are_counted(tmp_path):
    store = library(tmp_path)
    scenarios, skipped = regression_scenarios(store)
    assert len(scenarios) == 3 and skipped == {"attachments": 1, "no_conversation": 1}
    dumped = yaml.safe_dump(scenarios, allow_unicode=True)
    assert "090-1234-5678" not in dumped and "[電話番号]" in dumped  # user text is masked in a shared file
    first = scenarios[-1]  # newest first: the list follows the library's order
    assert first["turns"][-1] == {"action": "confirm"}
    assert first["expect"]["knowledge_contains"]["contract_type"] == "業務委託契約"
    assert first["expect"]["knowledge_contains"]["target_clause"] == "第8条"
    results = [run_scenario(s, lambda: make_client("offline")) for s in scenarios]
    assert all(r.passed for r in results), [r.failures for r in results]
    partial = next(s for s in scenarios if s["expect"]["knowledge_contains"]["contract_type"] == "売買契約")
    assert "clause_sample" not in partial["expect"]["knowledge_fields"]  # only what the confirmed entry had filled


def test_the_set_fails_when_the_flow_no_longer_gives_what_was_confirmed(tmp_path):
    store = library(tmp_path)
    entry = next(e for e in store.list_entries(status="confirmed") if e["contract_type"] == "秘密保持契約")
    store.edit_entry(entry["id"], {"contract_type": "業務委託契約", "target_clause": "第9条(秘密保持)"}, REVIEWER)
    scenarios, _ = regression_scenarios(store)
    edited = next(s for s in scenarios if f"No.{entry['id']} " in s["name"])
    result = run_scenario(edited, lambda: make_client("offline"))
    assert not result.passed
    assert any("contract_type" in f for f in result.failures) and any("第9条" in f for f in result.failures)


def test_the_command_runs_the_library_or_writes_it_as_a_scenario_file(tmp_path, capsys):
    store = library(tmp_path)
    url = store.url
    store.engine.dispose()
    assert main(["--from-library", "--db", url]) == 0
    out, err = capsys.readouterr()
    assert "3 passed, 0 failed" in out and "left out: attachments 1, no_conversation 1" in err
    target = tmp_path / "library_regression.yaml"
    assert main(["--from-library", "--db", url, "--write", str(target)]) == 0
    assert len(load_file(target)) == 3
    assert all(r.passed for r in run_files([target]))
    results, skipped, count = run_library(url)
    assert count == 3 and len(results) == 3


def test_an_empty_library_is_an_error_to_write_and_nothing_to_run(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    assert main(["--from-library", "--db", url, "--write", str(tmp_path / "x.yaml")]) == 2
    assert main(["--from-library", "--db", url]) == 2  # no scenarios at all
    capsys.readouterr()
