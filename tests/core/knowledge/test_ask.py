"""Ask the knowledge base (core.knowledge.ask): one schema-checked call through the engine, an answer built
only from confirmed entries with the entries it used as citations, 「該当するナレッジはありません。」 when
none fits, and an offline answer that quotes the entries."""
import json

import pytest

from bench.knowledge_recall import REVIEWER, load_library
from core.knowledge.ask import FAILED, NO_KNOWLEDGE, ask
from core.knowledge.retrieval import KnowledgeIndex
from core.llm.offline import OfflineClient
from core.llm.scripted import ScriptedClient
from core.store.store import Store
from tests.helpers.clients import RecordingClient

ONE_SIDED = "相手だけがいつでも契約を解除できる条項には、普段どう対応していますか？"


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('ask') / 'library.db'}")
    ids = load_library(store)
    yield KnowledgeIndex(store), ids, store
    store.engine.dispose()


def test_the_offline_answer_quotes_the_entry_and_cites_it(library):
    index, ids, store = library
    client, log = RecordingClient(), []
    answer = ask(ONE_SIDED, index, client, log=log)
    want = ids["outsourcing-termination-convenience"]
    assert answer.ok and answer.sources and answer.sources[0].entry_id == want
    entry = store.get_entry(want)
    assert f"No.{want}「{entry['knowledge_title']}」" in answer.answer
    assert "任意解除には90日前までの書面による予告を要件とする" in answer.answer  # the entry's words
    response = answer.as_response()
    assert response["sources"][0] == {"entry_id": want, "title": "業務委託契約：一方的な任意解除権の制限",
                                      "contract_type": "業務委託契約", "score": response["sources"][0]["score"]}
    assert [s["score"] for s in response["sources"]] == sorted((s["score"] for s in response["sources"]), reverse=True)
    assert len(client.requests) == 1 and client.requests[0].task == "knowledge_answer"  # one call, via the engine
    assert [r["task"] for r in log] == ["knowledge_answer"] and log[0]["outcome"] == "ok"
    assert "<<<DOCUMENT>>>" in client.requests[0].messages[1]["content"]


def test_nothing_fits_means_no_call_and_the_no_knowledge_answer(library):
    index, _, _ = library
    client = RecordingClient()
    for question in ("有給休暇の申請方法を教えて", "", "   "):
        answer = ask(question, index, client)
        assert answer.ok and answer.answer == NO_KNOWLEDGE and answer.sources == []
    assert client.requests == []


def test_an_answer_citing_nothing_retrieved_is_no_answer(library):
    index, ids, _ = library
    invented = {"answer": "一般には90日前の予告が望ましいとされています。", "sources": [{"entry_id": 99999, "content": "x"}]}
    answer = ask(ONE_SIDED, index, ScriptedClient([json.dumps(invented, ensure_ascii=False)]))
    assert answer.ok and answer.answer == NO_KNOWLEDGE and answer.sources == []
    none = {"answer": "該当するナレッジはありません。", "sources": []}
    assert ask(ONE_SIDED, index, ScriptedClient([json.dumps(none, ensure_ascii=False)])).answer == NO_KNOWLEDGE


def test_cited_entries_come_most_relevant_first_and_quotes_are_checked(library):
    index, ids, _ = library
    hits = index.search(ONE_SIDED, n=3)
    assert len(hits) >= 2
    reply = {"answer": "No.xx によれば…", "sources": [
        {"entry_id": hits[1].entry_id, "content": "ナレッジにない文です。"},
        {"entry_id": hits[0].entry_id, "content": hits[0].entry["action_plan"].split("\n")[0]},
        {"entry_id": hits[0].entry_id, "content": "重複"}]}
    answer = ask(ONE_SIDED, index, ScriptedClient([json.dumps(reply, ensure_ascii=False)]))
    assert [h.entry_id for h in answer.sources] == [hits[0].entry_id, hits[1].entry_id]
    assert answer.quotes[hits[0].entry_id] and answer.quotes[hits[1].entry_id] == ""  # an invented quote is not shown


def test_a_failed_model_call_is_a_japanese_failure_not_an_exception(library):
    index, _, _ = library
    answer = ask(ONE_SIDED, index, ScriptedClient(["broken"] * 9))
    assert not answer.ok and answer.answer == FAILED and answer.error_type


def test_personal_data_in_the_question_never_reaches_the_model(library):
    index, _, _ = library
    client = RecordingClient()
    ask("山田（090-1234-5678）から、相手だけがいつでも解除できる条項について聞かれた", index, client)
    sent = json.dumps([m["content"] for m in client.requests[0].messages], ensure_ascii=False)
    assert "090-1234-5678" not in sent and "090-1234-5678" not in json.dumps(client.requests[0].context,
                                                                            ensure_ascii=False)


def test_the_offline_provider_answers_without_any_key(library):
    index, ids, _ = library
    answer = ask("NDAの秘密保持義務が契約終了と同時に消える案への対応は？", index, OfflineClient())
    assert answer.sources[0].entry_id == ids["nda-term"] and "5年間" in answer.answer
    assert REVIEWER.can("entry.confirm")


class BrokenIndex:
    def search(self, *args, **kwargs):
        raise RuntimeError("the embedder is gone")


def test_a_broken_index_is_a_failed_answer_not_an_exception():
    client = RecordingClient()
    answer = ask(ONE_SIDED, BrokenIndex(), client)
    assert not answer.ok and answer.answer == FAILED and answer.error_type == "retrieval" and client.requests == []
