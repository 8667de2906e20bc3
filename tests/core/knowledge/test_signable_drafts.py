"""Issue #24, knowledge interview: drafts a reviewer can sign. Quoted clauses kept whole (nested 「」,
『』), an aside about another article neither re-targets nor confirms, intent framing becomes review
language, the user's typography is kept, an incomplete entry is never confirmed in one step without
saying what it lacks, and the knowledge base proposes and cites only related entries."""
from __future__ import annotations

import json

import pytest

from bench.knowledge_recall import REVIEWER, load_library
from core.identity import Identity
from core.knowledge.ask import answering, ask
from core.knowledge.case_facts import as_typed, outer_quotes, typed_forms
from core.knowledge.confirmation import is_typed_confirmation, missing_for_confirmation
from core.knowledge.conversation import KnowledgeConversations
from core.knowledge.retrieval import KnowledgeHit, KnowledgeIndex, expand_query
from core.knowledge.review_language import plain_statement
from core.knowledge.similar import CaseKey, related, similar_entries
from core.llm.offline import OfflineClient
from core.llm.scripted import ScriptedClient
from core.store.store import Store

YAMADA = Identity(name="山田", source="local")
NESTED = "受託者が従前から保有する著作物（以下「既存著作物」という。）の著作権は受託者に留保される。"


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'k.db'}")
    yield s
    s.engine.dispose()


def interview(store, turns, client=None):
    conversations = KnowledgeConversations(store, YAMADA)
    cid = conversations.new()
    chat, outputs = [], []
    for text in turns:
        conversations.submit(cid, chat, outputs, text, [], client or OfflineClient())
    return conversations, cid, chat, outputs


def test_outer_quotes_keep_nested_quotes_and_read_double_brackets():
    assert outer_quotes(f"条文例は「{NESTED}」としたい") == [NESTED]
    assert outer_quotes(f"条文例は『{NESTED}』です") == [NESTED]
    assert outer_quotes("「短い」") == []  # a word in quotes is not a clause
    assert outer_quotes("「閉じていない条文の例がここにあります") == ["閉じていない条文の例がここにあります"]


@pytest.mark.parametrize("sample_turn", [f"条文例は「{NESTED}」としたい", f"条文例: 『{NESTED}』",
                                         f"推奨する条文は『{NESTED}』です。"])
def test_a_clause_sample_with_nested_quotes_is_kept_whole(store, sample_turn):
    _, _, _, outputs = interview(store, [
        "ソフトウェア開発契約の第12条（知的財産権）で、受託者の既存の著作物まで委託者に移転する条項だった。", sample_turn])
    assert outputs[-1]["clause_sample"] == NESTED


@pytest.mark.parametrize("aside", ["なお第10条は問題ありません。", "ちなみに第3条は今回は対象外です。",
                                   "第15条については了承済みです。"])
def test_an_aside_about_another_article_keeps_the_target_and_the_review_points(store, aside):
    case = ["業務委託契約の第8条（損害賠償）で、賠償額の上限がない点が問題でした。また間接損害まで含まれる点も懸念です。",
            "以上です"]
    _, _, _, before = interview(store, case)
    conversations, cid, chat, after = interview(store, [*case, aside])
    assert after[-1]["target_clause"] == before[-1]["target_clause"] == "第8条（損害賠償）"
    assert after[-1]["review_points"] == before[-1]["review_points"]
    assert not store.list_entries(conversation_id=cid, status="confirmed")  # 「問題ありません」 here confirms nothing
    assert not is_typed_confirmation(aside)


@pytest.mark.parametrize("said, plain", [
    ("方針としては、既存著作物は受託者に留保し利用許諾で足りるよう求めたいです。", "既存著作物は受託者に留保し利用許諾で足りるよう求める"),
    ("対応としては再委託先の責任を明記するよう求めたいです", "再委託先の責任を明記するよう求める"),
    ("交渉方針としては、相手方にも同等の義務を課すよう求めたいと考えています", "相手方にも同等の義務を課すよう求める"),
    ("方針は、賠償上限を設けたい", "賠償上限を設ける")])
def test_intent_framing_becomes_neutral_review_language(said, plain):
    assert plain_statement(said) == plain


def test_full_width_typography_is_kept_as_typed(store):
    _, _, chat, outputs = interview(store, [
        "業務委託契約の第８条（損害賠償）で、賠償額の上限がない点が問題でした。",
        "方針としては、賠償上限を委託料の総額／１２か月分とするよう求めたいです。", "以上です"])
    entry = outputs[-1]
    assert entry["target_clause"] == "第８条（損害賠償）"
    assert "委託料の総額／１２か月分" in entry["action_plan"]
    assert "第８条（損害賠償）" in chat[-1]["content"]
    assert typed_forms(["a（b）", "c(d)"]) == {}  # typed both ways: nothing to restore
    assert as_typed("第8条(解除)", typed_forms(["第８条（"])) == "第８条（解除)"


def test_an_incomplete_draft_is_not_confirmed_by_a_typed_confirmation_without_saying_why(store):
    conversations, cid, chat, outputs = interview(store, [
        "業務委託契約の第8条（損害賠償）で、賠償額の上限がない点が問題でした。", "以上です", "確定"])
    assert missing_for_confirmation(outputs[-1]) == ["対応方針", "条文例"]
    assert not store.list_entries(conversation_id=cid, status="confirmed")
    assert "対応方針・条文例が未設定" in chat[-1]["content"] and "不足のまま確定" in chat[-1]["content"]
    conversations.submit(cid, chat, outputs, "不足のまま確定", [], OfflineClient())
    assert store.list_entries(conversation_id=cid, status="confirmed")


def test_a_complete_draft_is_still_confirmed_by_a_typed_confirmation(store):
    _, cid, _, outputs = interview(store, [
        "業務委託契約の第8条（損害賠償）で、賠償額の上限がない点が問題でした。",
        "委託料総額を上限とするよう修正を求めるべきです。「賠償額は委託料の総額を上限とする。」", "確定"])
    assert missing_for_confirmation(outputs[-1]) == []
    assert store.list_entries(conversation_id=cid, status="confirmed")


def test_a_model_turn_claiming_a_confirmation_of_an_incomplete_draft_confirms_nothing(store):
    draft = {"contract_type": "業務委託契約", "knowledge_title": "業務委託契約：上限", "target_clause": "第8条",
             "review_points": "・上限を確認する", "action_plan": "", "clause_sample": ""}
    turn = json.dumps({"control": {"schema_version": "1.0", "mode": "finalize"},
                       "state": {"phase": "review_knowledge", "missing_info": []},
                       "assistant_message": "草案をまとめました。内容をご確認ください。", "knowledge_json": draft}, ensure_ascii=False)
    _, cid, chat, _ = interview(store, ["業務委託契約の第8条の件", "確定"], client=ScriptedClient([turn] * 6))
    assert not store.list_entries(conversation_id=cid, status="confirmed")
    assert "対応方針・条文例が未設定" in chat[-1]["content"]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('signable') / 'library.db'}")
    ids = load_library(store)
    yield KnowledgeIndex(store), ids, store
    store.engine.dispose()


@pytest.mark.parametrize("question, key", [("委託先が勝手に別の会社へ外注するのを止めたい", "subcontract"),
                                           ("退去のときにクロスの張り替え費用を全部請求された", "lease-restoration"),
                                           ("ＮＤＡの秘密保持期間が短すぎると感じる", "nda-term"),
                                           ("NDAの秘密保持期間が短すぎると感じる", "nda-term")])
def test_the_reviewers_words_find_the_entry_in_review_terms(library, question, key):
    index, ids, _ = library
    assert ids[key] in [h.entry_id for h in index.search(question, n=3)]


def test_the_query_is_folded_and_expanded_but_kept():
    assert expand_query("ＮＤＡの期間") .startswith("NDAの期間")
    assert "再委託" in expand_query("外注先の管理") and "原状回復" in expand_query("壁紙の張り替え")
    assert expand_query("下請法の書面") == "下請法の書面"  # the law's name is not a subcontracting question


def test_similar_entries_are_only_about_the_same_contract_type_or_topic(library):
    index, ids, _ = library
    key = CaseKey("秘密保持契約", "第6条(秘密保持期間)", "秘密保持契約\n秘密保持\n存続期間が1年しかない", "秘密保持")
    hits = similar_entries(index, key)
    assert hits and all(related("秘密保持契約", "秘密保持", h.entry) for h in hits)
    assert ids["nda-term"] in [h.entry_id for h in hits]


def test_ask_cites_a_later_entry_only_when_it_answers_the_question():
    def hit(i, score, ctype, clause):
        return KnowledgeHit(i, score, {"contract_type": ctype, "target_clause": clause, "knowledge_title": ""})

    top = hit(1, 0.7, "秘密保持契約", "第7条(秘密保持期間)")
    unrelated = hit(2, 0.4, "売買契約", "第6条(代金の支払)")
    same_type = hit(3, 0.35, "秘密保持契約", "第9条(返還・廃棄)")
    close = hit(4, 0.65, "売買契約", "第6条(代金の支払)")
    assert answering("秘密保持の期間は何年？", [top, unrelated, same_type]) == [top, same_type]
    assert answering("秘密保持の期間は何年？", [top, close]) == [top, close]  # the best may be the wrong one


def test_ask_says_when_a_source_lacks_its_action_plan_or_clause_sample(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'k.db'}")
    try:
        cid = store.create_conversation("knowledge", REVIEWER)
        [entry_id] = store.record_knowledge(cid, [{
            "contract_type": "秘密保持契約", "knowledge_title": "秘密保持契約（NDA）：存続期間の確保",
            "target_clause": "第7条（有効期間）", "review_points": "・秘密保持義務の存続期間を確認する",
            "action_plan": "", "clause_sample": ""}], REVIEWER)
        store.set_entry_status(entry_id, "confirm", REVIEWER)
        answer = ask("NDAの存続期間はどう確認する？", KnowledgeIndex(store), OfflineClient())
        assert [h.entry_id for h in answer.sources] == [entry_id]
        assert f"No.{entry_id} は対応方針・条文例が未設定のナレッジです" in answer.answer
    finally:
        store.engine.dispose()


def _turn(message, knowledge=None, phase="collect_case"):
    return json.dumps({"control": {"schema_version": "1.0", "mode": "interview"},
                       "state": {"phase": phase, "missing_info": []},
                       "assistant_message": message, "knowledge_json": knowledge}, ensure_ascii=False)


DRAFT = {"contract_type": "業務委託契約", "knowledge_title": "業務委託契約：賠償上限の設定", "target_clause": "第8条",
         "review_points": "・上限を確認する", "action_plan": "・委託料総額を上限とする", "clause_sample": "賠償額は委託料総額を上限とする。"}


def test_a_turn_with_null_knowledge_json_keeps_the_last_draft(store):
    """Seed 001: a successful turn replaces the knowledge array with the turn's normalised knowledge;
    seed 003 §4.2: null means no draft in this turn. The library keeps the draft, the page shows it."""
    client = ScriptedClient([_turn("草案をまとめました。内容をご確認ください。", DRAFT, "draft_knowledge"),
                             _turn("承知しました。ほかに補足があれば教えてください。")])
    _, cid, chat, outputs = interview(store, ["業務委託契約の第8条の件です。", "補足はあとで送ります。"], client=client)
    assert chat[-1]["turn"]["knowledge_json"] is None
    assert [e["knowledge_title"] for e in outputs] == [DRAFT["knowledge_title"]]
    assert store.conversation_outputs(cid)[0]["action_plan"] == DRAFT["action_plan"]


@pytest.mark.parametrize("wrapped", [
    "```json\n{turn}\n```",
    "以下が出力です。\n{turn}\nよろしくお願いします。",
    "説明: 次の JSON です。```\n{turn}\n```"])
def test_json_in_prose_or_a_code_fence_under_native_structured_output_is_read(store, wrapped):
    """Seeds 003 §4.1 / §5 and 004 (parseStructuredOutput: direct → code block → brace extraction): a
    model that wraps its JSON in prose or a fence under response_format still gives a valid turn, and
    the debug record says which stage read it."""
    log: list = []
    conversations = KnowledgeConversations(store, YAMADA)
    cid = conversations.new()
    chat, outputs = [], []
    client = ScriptedClient([wrapped.format(turn=_turn("草案をまとめました。内容をご確認ください。", DRAFT, "draft_knowledge"))],
                            strategies=("structured_output",))
    conversations.submit(cid, chat, outputs, "業務委託契約の第8条の件です。", [], client, log=log)
    assert not chat[-1].get("failed") and outputs[-1]["clause_sample"] == DRAFT["clause_sample"]
    assert client.requests[0].response_format is not None  # the native schema was asked for
    assert log[-1]["parse_stage"] in ("code_block", "brace_extraction")


def test_a_failed_turn_keeps_the_raw_output_and_the_error_type_for_the_tuner(store):
    """Seed 001: on failure the raw output and the error type are added to the history (shown in debug
    mode on the page, and in the debug log)."""
    log: list = []
    conversations = KnowledgeConversations(store, YAMADA)
    cid = conversations.new()
    chat, outputs = [], []
    client = ScriptedClient(["これは JSON ではありません"] * 3, strategies=("structured_output",))
    conversations.submit(cid, chat, outputs, "業務委託契約の第8条の件です。", [], client, log=log)
    failed = chat[-1]
    assert failed["failed"] and failed["error_type"] == "parse_error"
    assert failed["raw"] == "これは JSON ではありません"
    assert any(r.get("raw_output") == "これは JSON ではありません" or "これは JSON" in str(r.get("raw_output"))
               for r in log)
