"""Seed 000 §10: the RAG answer call, citation hygiene (relative cut, whole-sentence excerpts) and
retrieval filtered by vehicle."""
from __future__ import annotations

import json
from types import SimpleNamespace

import jsonschema
from diagnosis_fakes import MIRAI, TREK, FakeRetriever, Hit, TaskClient, answer

from core.diagnosis import ChatRequest, ChatStep
from core.diagnosis import llm_calls
from core.diagnosis.offline_policy import manual_digest
from core.diagnosis.rag import (CITATION_RATIO, MAX_QUERY_CHARS, NO_RAG_ANSWER, RagHit, excerpt, offline_answer,
                                rag_search, relative_cut, sentences, to_sources)
from core.diagnosis.steps.diagnosing import handle_diagnosing
from core.llm.scripted import ScriptedClient
from core.paths import ROOT
from core.schemas import load_schema
from core.text.untrusted import OPEN

MANUAL = json.loads((ROOT / "data/manuals/kaiwa-trek-4wd-2020.json").read_text(encoding="utf-8"))
FUEL = next(s for s in MANUAL["sections"] if s["section_id"] == "kaiwa-trek-4wd-2020:s022")  # 季節による影響
ANSWERS_END = ("。", "！", "？", "）", "」")


def hit(section=FUEL, score=0.62, **kw) -> RagHit:
    return RagHit(section_id=section["section_id"], section=section["section"], chapter=section["chapter"],
                  page=section["page"], content_type=section["content_type"], has_warning=section["has_warning"],
                  text=section["text"], score=score, **kw)


OTHER = RagHit(section_id="t:s90", section="シートベルトの着用", chapter="安全装備", page=40, content_type="general",
               has_warning=False, text="シートベルトは必ず着用してください。着用しないと警告音が鳴ります。", score=0.35)


def _ends_at_sentence(text: str) -> bool:
    """Every line but a heading ends a sentence, and so does the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return bool(lines) and lines[-1].endswith(ANSWERS_END) and all(
        line.endswith(ANSWERS_END) or len(line) <= 24 for line in lines)


# --- citation hygiene ------------------------------------------------------------------------------

def test_relative_cut_drops_hits_far_below_the_top():
    assert 0.5 < CITATION_RATIO < 1
    kept = relative_cut([hit(score=0.62), OTHER])  # 0.35 < ratio × 0.62
    assert [h.section_id for h in kept] == [FUEL["section_id"]]
    close = RagHit(**{**OTHER.as_dict(), "score": 0.6})
    assert len(relative_cut([hit(score=0.62), close])) == 2
    assert [s.section_id for s in to_sources([hit(score=0.62), OTHER])] == [FUEL["section_id"]]
    assert relative_cut([]) == []


def test_excerpts_never_end_mid_sentence_nor_on_an_orphan_heading():
    for limit in range(60, len(FUEL["text"]) + 40, 7):
        text = excerpt(FUEL["text"], limit)
        assert text and FUEL["text"].startswith(text.split("\n")[0])
        assert not text.endswith("季節による影響"), limit
        last = text.splitlines()[-1]
        assert last.endswith(ANSWERS_END) or last in FUEL["text"].splitlines(), (limit, last)
    # the observed case: 200 characters used to stop inside 「車両の状…」
    source = to_sources([hit()])[0]
    assert "車両の状" not in source.content.splitlines()[-1] or source.content.endswith("。")
    assert _ends_at_sentence(source.content) and len(source.content) <= 260
    long_first = "あ" * 300 + "。次の文です。"
    assert excerpt(long_first, 100) == "あ" * 300 + "。"  # one long sentence is kept whole


def test_offline_diagnosis_digest_drops_the_trailing_heading():
    digest = manual_digest(FUEL["text"])
    assert not digest.rstrip().endswith("季節による影響")


def test_sentences_split_at_japanese_and_ascii_ends():
    assert sentences("燃費が落ちます。本当？はい!\n見出し") == ["燃費が落ちます。", "本当？", "はい!", "見出し"]


# --- vehicle filter --------------------------------------------------------------------------------

def test_search_is_filtered_by_vehicle_and_drops_other_vehicles_hits(make_ctx):
    mine = Hit("m:s1", "ブレーキ鳴き", score=0.7, vehicle_id=MIRAI)
    foreign = Hit("t:s1", "ブレーキ鳴き（トレック）", score=0.9, vehicle_id=TREK)
    retriever = FakeRetriever([foreign, mine])
    ctx = make_ctx(retriever=retriever)
    hits = rag_search(ctx, "ブレーキが鳴く", MIRAI)
    assert [h.section_id for h in hits] == ["m:s1"] and retriever.queries == [("ブレーキが鳴く", MIRAI)]


def test_make_model_year_select_the_catalogue_vehicle(make_ctx):
    retriever = FakeRetriever([Hit("t:s1", "異音", score=0.7, vehicle_id=TREK)])
    ctx = make_ctx(retriever=retriever)
    trek = next(v for v in ctx.catalog if v.vehicle_id == TREK)
    hits = rag_search(ctx, "異音がする", None, make=trek.make, model=trek.model, year=trek.year)
    assert [h.section_id for h in hits] == ["t:s1"] and retriever.queries == [("異音がする", TREK)]
    assert rag_search(ctx, "異音がする", None, make=trek.make, model=trek.model, year=1999) == []
    with_year = Hit("t:s2", "異音", score=0.8, vehicle_id=TREK)
    with_year.year = 2015  # a chunk whose own metadata names another model year
    ctx = make_ctx(retriever=FakeRetriever([with_year]))
    assert rag_search(ctx, "異音", TREK, year=trek.year) == []


def test_over_long_query_is_searched_by_its_beginning(make_ctx):
    retriever = FakeRetriever([Hit("m:s1", "異音", score=0.7)])
    rag_search(make_ctx(retriever=retriever), "異音" * MAX_QUERY_CHARS, MIRAI)
    assert len(retriever.queries[0][0]) == MAX_QUERY_CHARS


# --- the answer call -------------------------------------------------------------------------------

def test_offline_answer_is_schema_valid_and_quotes_whole_sentences(make_ctx, session_at):
    log: list = []
    ctx = make_ctx(log=log)
    session = session_at(vehicle_id=TREK)
    result = llm_calls.rag_answer(ctx, session, "最近、燃費が悪くなった。タイヤの空気圧は関係ある？", [hit(), OTHER])
    assert result.ok and result.grounded
    assert [s.section_id for s in result.sources] == [FUEL["section_id"]]  # the seat belt section is cut
    quoted = result.sources[0].content
    assert "空気圧" in quoted and _ends_at_sentence(quoted)
    for sentence in sentences(quoted):
        assert sentence in FUEL["text"]
    assert quoted.splitlines()[0] == "燃費が悪くなったと感じたら、次の点を確認してください。"  # the list's lead first
    assert "（p.244）" in result.answer and quoted.splitlines()[-1] in result.answer
    assert any(r.get("prompt") == "rag_answer" for r in log)  # tagged for the debug log
    for hits in ([hit().as_dict()], []):  # the offline reply itself is valid JSON for the schema
        reply = offline_answer(SimpleNamespace(context={"question": "燃費が悪い", "hits": hits}))
        jsonschema.validate(reply, load_schema("rag_answer"))


def test_invalid_model_answer_is_repaired(make_ctx, session_at):
    good = {"answer": "タイヤの空気圧を確認してください。", "sources": [
        {"section_id": FUEL["section_id"], "section": FUEL["section"], "page": 244,
         "content": "・タイヤ空気圧が規定値（前240kPa／後230kPa）より低くないか。空気圧の低下は燃費悪化の大きな原因です。"},
        {"section_id": "invented:s1", "section": "架空の節", "page": 1, "content": "架空の文。"}]}
    client = ScriptedClient(['{"answer": ""}', json.dumps(good, ensure_ascii=False)])
    result = llm_calls.rag_answer(make_ctx(client=client), session_at(), "燃費が悪い", [hit()])
    assert result.ok and len(client.requests) == 2 and client.requests[0].task == "rag_answer"
    assert [s.section_id for s in result.sources] == [FUEL["section_id"]]  # the invented section is dropped
    assert result.sources[0].content.startswith("・タイヤ空気圧") and result.sources[0].score == 0.62


def test_quote_not_in_the_section_is_replaced_by_its_excerpt(make_ctx, session_at):
    made_up = {"answer": "x", "sources": [{"section_id": FUEL["section_id"], "section": "s", "page": None,
                                           "content": "燃費は必ず20％良くなります。"}]}
    client = ScriptedClient([json.dumps(made_up, ensure_ascii=False)])
    result = llm_calls.rag_answer(make_ctx(client=client), session_at(), "燃費", [hit()])
    assert result.sources[0].content == excerpt(FUEL["text"]) and "20％良く" not in result.sources[0].content


def test_answer_that_stays_invalid_fails_cleanly(make_ctx, session_at):
    client = ScriptedClient(["not json", '{"answer": 1}', '{"sources": []}'])
    result = llm_calls.rag_answer(make_ctx(client=client), session_at(), "燃費が悪い", [hit()])
    assert not result.ok and result.error_type and result.sources is None and len(client.requests) == 3


def test_no_rag_prompt_when_nothing_is_found(make_ctx, session_at):
    client = TaskClient()
    result = llm_calls.rag_answer(make_ctx(client=client), session_at(), "ナビの地図を更新したい", [])
    request = client.requests[0]
    assert request.task == "rag_answer" and "記載は見つかりませんでした" in request.messages[-1]["content"]
    assert "NO_RAG_ANSWER_PROMPT" in request.messages[-1]["content"]
    assert result.ok and result.sources == [] and not result.grounded and result.answer == NO_RAG_ANSWER
    far = [RagHit(**{**OTHER.as_dict(), "score": 0.31})]
    assert llm_calls.rag_answer(make_ctx(client=TaskClient()), session_at(), "燃費", far).grounded is True


def test_provide_answer_shows_the_manual_answer_with_its_sources(make_ctx, session_at):
    client = TaskClient({"diagnostic_response": [answer()]})
    hits = [Hit(FUEL["section_id"], FUEL["section"], score=0.62, page=244, text=FUEL["text"], vehicle_id=MIRAI),
            Hit("m:s90", "シートベルトの着用", score=0.35, text=OTHER.text, vehicle_id=MIRAI)]
    ctx = make_ctx(client=client, retriever=FakeRetriever(hits))
    session = session_at(ChatStep.DIAGNOSING, symptom="燃費が悪くなった")
    r = handle_diagnosing(session, ChatRequest(message="タイヤの空気圧は見ていない"), ctx)
    assert client.tasks() == ["diagnostic_response", "rag_answer"]
    assert r.rag_answer and "取扱説明書「燃費を良くするために" in r.rag_answer
    assert [s.section_id for s in r.rag_sources] == [FUEL["section_id"]]
    assert _ends_at_sentence(r.rag_sources[0].content) and session.last_rag_sources == r.rag_sources


def test_a_failed_answer_call_keeps_the_retrieval_citations(make_ctx, session_at):
    client = TaskClient({"diagnostic_response": [answer()], "rag_answer": ["broken"] * 3})
    hits = [Hit("m:s18", "ブレーキ鳴き", score=0.7, text="ブレーキをかけたときに音がすることがあります。")]
    ctx = make_ctx(client=client, retriever=FakeRetriever(hits))
    r = handle_diagnosing(session_at(ChatStep.DIAGNOSING), ChatRequest(message="ブレーキで鳴く"), ctx)
    assert not r.fallback and r.rag_answer is None and [s.section_id for s in r.rag_sources] == ["m:s18"]


def test_the_section_the_diagnosis_cited_is_the_one_the_rag_answer_quotes(make_ctx, session_at):
    ctx = make_ctx()
    session = session_at(vehicle_id=TREK)
    lower = RagHit(**{**OTHER.as_dict(), "score": 0.2})  # far below the top: the cut alone would drop it
    result = llm_calls.rag_answer(ctx, session, "シートベルトの警告音が鳴る", [hit(score=0.9), lower], preferred=lower)
    assert result.ok and [s.section_id for s in result.sources][:1] == ["t:s90"]
    assert "シートベルトの着用" in result.answer


def test_a_tasks_wire_schema_is_built_once_and_each_call_gets_its_own_copy(monkeypatch):
    """Issue #25: the strict-mode wire copy of a diagnosis task's schema is built once per task (every
    structured call built it again), each call gets a copy of its own, equal to a fresh build. Counted."""
    from core.schemas import to_strict_schema

    llm_calls._wire_text.cache_clear()
    built: list[dict] = []
    monkeypatch.setattr(llm_calls, "to_strict_schema", lambda schema: built.append(schema) or to_strict_schema(schema))
    first = llm_calls.wire_schema(llm_calls.RAG_ANSWER_TASK)
    first["properties"] = {}  # a caller's copy is its own
    again = llm_calls.wire_schema(llm_calls.RAG_ANSWER_TASK)
    assert len(built) == 1 and again == to_strict_schema(load_schema(llm_calls.RAG_ANSWER_TASK))
    assert again["properties"] and again["additionalProperties"] is False


def test_a_query_searched_in_two_phrasings_starts_the_second_ones_vector_before_the_first_search(make_ctx):
    """Issue #25: when the reading expansion gives a second phrasing, its query vector is started (the
    retriever's ``prefetch``) before the first search embeds its own, so the two are computed side by side."""
    class Expanding(FakeRetriever):
        def __init__(self):
            super().__init__([Hit("m:s1", "ブレーキ鳴き", score=0.7)])
            self.events: list = []

        def expand_query(self, query):
            return query + " 金属音"

        def prefetch(self, texts):
            self.events.append(("prefetch", list(texts)))

        def search(self, query, vehicle_id=None, n_results=5, mode="hybrid"):
            self.events.append(("search", query))
            return super().search(query, vehicle_id, n_results, mode)

    retriever = Expanding()
    rag_search(make_ctx(retriever=retriever), "ブレーキがきしむ", MIRAI)
    assert retriever.events == [("prefetch", ["ブレーキ 金属音"]), ("search", "ブレーキがきしむ 金属音"),
                                ("search", "ブレーキ 金属音")]
    plain = Expanding()
    plain.expand_query = lambda query: query  # one phrasing: nothing to start beside it
    rag_search(make_ctx(retriever=plain), "ブレーキがきしむ", MIRAI)
    assert plain.events == [("search", "ブレーキがきしむ")]


def test_on_a_small_context_the_guards_second_request_keeps_the_question_and_the_manual(make_ctx, session_at):
    """The answer guard's regeneration is the first request plus the rejected answer and the reason; fitted
    to a small context it trims the manual's text as the first did, and never drops the question with it
    (it did: the model was asked again with only the reason to answer from)."""
    question = "最近、燃費が悪くなった。タイヤの空気圧は関係ある？"
    source = {"section_id": FUEL["section_id"], "section": FUEL["section"], "page": 244,
              "content": "・タイヤ空気圧が規定値（前240kPa／後230kPa）より低くないか。空気圧の低下は燃費悪化の大きな原因です。"}
    echo = json.dumps({"answer": question, "sources": [source]}, ensure_ascii=False)
    good = json.dumps({"answer": "タイヤの空気圧が低いと燃費が悪くなります。規定値を確認してください。", "sources": [source]},
                      ensure_ascii=False)
    client = ScriptedClient([echo, good])
    client.context_tokens = 600  # the section does not fit whole
    log = []
    result = llm_calls.rag_answer(make_ctx(client=client, log=log), session_at(), question, [hit()])
    assert result.ok and result.answer.startswith("タイヤの空気圧が低いと")
    first, second = client.requests[0].messages, client.requests[1].messages
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"] and second[0] == first[0]
    assert question in second[1]["content"] and OPEN in second[1]["content"] and FUEL["section"] in second[1]["content"]
    assert second[2]["content"] == echo
    fits = [r["call"].get("fit", []) for r in log if r["task"] == "rag_answer"]
    assert len(fits) == 2 and all("参照テキスト" in " ".join(f) for f in fits)
    assert not any("以前の会話" in note for f in fits for note in f)
