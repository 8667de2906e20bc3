"""Expectation checks of the scenario runner: each key passes and fails, unknown keys fail."""
import pytest

from core.eval.expectations import CHECKS, check_expectations

FINAL = {"step": "diagnosing", "urgency": "high", "can_drive": False, "citations": ["kb:001", "kb:002"],
         "message": "詳しくは kb:001 をご覧ください。", "outcome": "answered",
         "trace": [{"node": "API"}, {"node": "TOOL", "error_type": None}]}


@pytest.mark.parametrize("expect", [
    {"step": "diagnosing"}, {"urgency": "high"}, {"can_drive": False}, {"outcome": "answered"},
    {"outcome_in": ["not_found", "answered"]}, {"citations_min": 2}, {"citations_max": 2},
    {"message_contains": "kb:001"}, {"message_contains": ["詳しくは", "ご覧ください"]},
    {"no_pii_in_trace": True}, {"no_pii_in_trace": False}, {"trace_nodes_include": ["API", "TOOL"]},
])
def test_expectation_holds(expect):
    assert check_expectations(expect, FINAL, []) == []


@pytest.mark.parametrize("expect, fragment", [
    ({"step": "done"}, "step: expected 'done'"),
    ({"urgency": "low"}, "urgency"),
    ({"can_drive": True}, "can_drive"),
    ({"outcome": "not_found"}, "outcome: expected 'not_found', got 'answered'"),
    ({"outcome_in": ["refused", "handoff"]}, "outcome_in"),
    ({"citations_min": 3}, "citations_min: expected >= 3, got 2"),
    ({"citations_max": 1}, "citations_max: expected <= 1, got 2"),
    ({"message_contains": ["kb:001", "kb:999"]}, "missing ['kb:999']"),
    ({"trace_nodes_include": ["NLG"]}, "missing ['NLG']"),
    ({"outcom": "answered"}, "unknown expectation 'outcom'"),
])
def test_expectation_fails_with_a_readable_message(expect, fragment):
    failures = check_expectations(expect, FINAL, [])
    assert len(failures) == 1 and fragment in failures[0]


@pytest.mark.parametrize("leak", ["090-1234-5678", "taro@example.com", "4111 1111 1111 1111"])
def test_no_pii_in_trace_looks_at_the_trace_and_the_debug_records(leak):
    in_trace = {**FINAL, "trace": [{"node": "IR", "query": f"連絡先 {leak}"}]}
    assert "no_pii_in_trace" in check_expectations({"no_pii_in_trace": True}, in_trace, [])[0]
    in_log = check_expectations({"no_pii_in_trace": True}, FINAL, [{"messages": [{"content": leak}]}])
    assert in_log and "no_pii_in_trace" in in_log[0]


def test_all_contract_keys_are_known():
    assert set(CHECKS) == {"step", "urgency", "can_drive", "citations_min", "citations_max", "message_contains",
                           "message_not_contains", "first_citation", "citations_include",
                           "outcome", "outcome_in", "no_pii_in_trace", "trace_nodes_include",
                           "phase", "mode", "knowledge_fields", "knowledge_contains", "knowledge_typed", "knowledge_not_contains",
                           "confirmed", "turns_max"}


def test_message_not_contains_and_first_citation():
    final = {"message": "取扱説明書「油圧警告灯」の手順", "citations": ["kaiwa-mirai-hv-2022:s041", "kaiwa-mirai-hv-2022:s038"]}
    assert check_expectations({"message_not_contains": ["ボタンから選ぶか"], "first_citation": "s041"}, final, []) == []
    problems = check_expectations({"message_not_contains": "油圧", "first_citation": "s038"}, final, [])
    assert len(problems) == 2 and "message_not_contains" in problems[0] and "first_citation" in problems[1]
    assert check_expectations({"first_citation": "kb:001"}, {"citations": []}, [])


def test_cited_entries_by_id_or_title():
    """ナレッジに質問 reports its citations' titles: first_citation and citations_include match an id (ending)
    or a title (NFKC-folded, whole); an id never matches a longer number."""
    final = {"citations": ["No.112", "No.7"], "citation_titles": ["売買契約：催告解除", "ＮＤＡ：秘密保持期間"]}
    assert check_expectations({"first_citation": "売買契約：催告解除", "citations_include": ["No.7", "NDA：秘密保持期間"]},
                              final, []) == []
    assert check_expectations({"first_citation": "No.112"}, final, []) == []
    problems = check_expectations({"first_citation": "No.12", "citations_include": ["No.12", "売買契約"]}, final, [])
    assert len(problems) == 2 and "first_citation" in problems[0] and "No.112 売買契約：催告解除" in problems[0]
    assert "citations_include: missing ['No.12', '売買契約']" in problems[1]
    assert check_expectations({"citations_include": "kb:002"}, FINAL, []) == []  # without titles: ids only


def test_knowledge_contains_folds_width_and_knowledge_typed_does_not():
    final = {"knowledge": {"target_clause": "第８条（損害賠償）"}}
    assert check_expectations({"knowledge_contains": {"target_clause": "第8条(損害賠償)"}}, final, []) == []
    assert check_expectations({"knowledge_typed": {"target_clause": "第８条（損害賠償）"}}, final, []) == []
    assert check_expectations({"knowledge_typed": {"target_clause": "第8条(損害賠償)"}}, final, [])
