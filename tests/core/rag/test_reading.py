"""Query expansion by reading (core.rag.reading): kana, casual spelling and homophone slips gain the
corpus's own words; a query already in the corpus's words gains nothing."""
from __future__ import annotations

from core.rag.reading import ReadingIndex
from core.rag.text_retriever import TextRetriever

CORPUS = [("a", "エンジン警告灯が点灯したときは販売店で点検を受けてください。"),
          ("b", "信号待ちでエンジンが止まるのはアイドリングストップ機能です。"),
          ("c", "寒い朝にマフラーから白い湯気が出るのは正常です。音がする場合は点検してください。")]


def index() -> ReadingIndex:
    readings = ReadingIndex()
    readings.sync_texts(CORPUS)
    return readings


def test_kana_words_gain_the_corpus_spelling():
    expanded = index().expand("えんじん けいこくとうが てんとうした")
    assert {"エンジン", "警告灯", "点灯"} <= set(expanded.split()[3:])


def test_words_without_spaces_and_short_whole_words():
    readings = index()
    assert "信号待ち" in readings.expand("しんごうまちでえんじんがとまった") or "信号" in readings.expand("しんごうまちでえんじんがとまった")
    assert "湯気" in readings.expand("まふらーから ゆげが でる")   # a two-kana word standing alone
    assert "湯気" not in readings.expand("ゆげたが ある")          # not inside a longer word


def test_a_homophone_slip_gains_the_word_it_meant():
    assert index().expand("エンジン警告灯が店頭した").endswith(" 点灯")


def test_a_query_in_the_corpus_words_is_unchanged():
    readings = index()
    for query in ("エンジン警告灯が点灯した", "信号待ちでエンジンが止まる", "マフラーから白い湯気"):
        assert readings.expand(query) == query


def test_texts_are_read_once_and_new_ones_added():
    readings = index()
    size = len(readings)
    readings.sync_texts(CORPUS)
    assert len(readings) == size
    readings.sync_texts([("d", "ワイパーの拭きむらが気になる")])
    assert "ワイパー" in readings.expand("わいぱーの ふきむら")


class CountingEmbedder:
    key = "counting"
    cosine_range = (0.0, 1.0)

    def passages(self, texts):
        return [[1.0, float(len(t) % 7)] for t in texts]

    def query_vector(self, text):
        return [1.0, 0.0]


def test_text_retriever_offers_the_expansion():
    retriever = TextRetriever([(i, t, {}) for i, t in CORPUS], embedder=CountingEmbedder())
    assert "警告灯" in retriever.expand_query("けいこくとうが ついた")


def test_an_expansion_is_remembered_until_the_index_reads_a_new_term(monkeypatch):
    """Issue #25: a turn expands the same symptom for each of its searches; the expansion is computed once
    per state of the index, and a term read since (another upload) is seen at once. Counted."""
    readings = index()
    calls = []
    real = readings._expand
    monkeypatch.setattr(readings, "_expand", lambda query: calls.append(query) or real(query))
    first = readings.expand("まふらーから ゆげが でる")
    assert readings.expand("まふらーから ゆげが でる") == first and len(calls) == 1
    assert "排気管" not in first
    readings.sync_texts([("d", "排気管（はいきかん）から水が垂れるのは正常です。")])
    readings.add("排気管", "ハイキカン")
    assert "排気管" in readings.expand("はいきかんから みず") and len(calls) == 2
    assert readings.expand("まふらーから ゆげが でる") == first and len(calls) == 3  # computed again, same answer
    long_query = "ゆげ " * 300  # over MAX_QUERY_CHARS: expanded every time, never remembered
    readings.expand(long_query)
    readings.expand(long_query)
    assert len(calls) == 5 and all(len(key[1]) <= 400 for key in readings._expanded)
