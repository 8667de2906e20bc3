"""Japanese tokens for BM25, chunking of manuals and documents, and the fusion maths."""
from __future__ import annotations

import numpy as np
import pytest
from rag_helpers import tiny_manual

from core.rag.chunks import MAX_CHARS, document_chunks, infer_content_type, infer_has_warning, manual_chunks, split_text
from core.rag.hybrid import fuse
from core.text.ja_tokens import JapaneseTokenizer, get_tokenizer


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer()


def test_fault_codes_stay_whole(tok):
    tokens = tok("エンジン警告灯がついてP0301とU0100が出た")
    assert "p0301" in tokens and "u0100" in tokens
    assert "0301" not in tokens and "p" not in tokens


def test_full_width_codes_and_numbers_with_units(tok):
    tokens = tok("Ｐ０４２０が記録、空気圧は230 kPa、オイルは3.2L、12Vバッテリー、100km/h")
    assert {"p0420", "230kpa", "3.2l", "12v", "100km/h"} <= set(tokens)


def test_particles_aux_verbs_and_symbols_are_dropped(tok):
    tokens = tok("ブレーキを踏んだらペダルが奥まで入る。")
    for dropped in ("を", "が", "まで", "だ", "た", "。"):
        assert dropped not in tokens
    assert "ブレーキ" in tokens and "ペダル" in tokens and "踏む" in tokens  # normalized form


def test_compound_nouns_also_yield_their_parts():
    tokens = JapaneseTokenizer("C+A")("ブレーキペダル")
    assert tokens[0] == "ブレーキペダル" and {"ブレーキ", "ペダル"} <= set(tokens)
    assert JapaneseTokenizer("C")("ブレーキペダル") == ["ブレーキペダル"]


def test_surface_form_and_bad_mode():
    assert "踏ん" in JapaneseTokenizer("C", "surface")("踏んだ")
    with pytest.raises(ValueError):
        JapaneseTokenizer("D")


def test_split_text_keeps_short_text_and_splits_long_with_overlap():
    assert split_text("短い文です。") == ["短い文です。"]
    sentences = [f"これは{i}番目の文で、ブレーキの点検について説明しています。" for i in range(60)]
    parts = split_text("".join(sentences))
    assert len(parts) >= 3
    assert all(len(p) <= MAX_CHARS for p in parts)
    for a, b in zip(parts, parts[1:]):  # consecutive parts share at least one sentence
        assert any(s in a and s in b for s in sentences)
    assert all(s in "".join(parts) for s in sentences)


def test_manual_chunks_metadata_is_scalar_and_long_sections_split():
    manual = tiny_manual(extra="ブレーキ液の量を点検します。" * 80)
    chunks = manual_chunks(manual)
    brake = [c for c in chunks if c.section_id == "test-car:s001"]
    assert len(brake) >= 2 and len({c.chunk_id for c in chunks}) == len(chunks)
    for c in chunks:
        assert all(isinstance(v, (str, int, float, bool)) for v in c.metadata.values())
        assert c.metadata["vehicle_id"] == "test-car"
    assert {c.page for c in brake} == {10} and all(c.content_type == "danger" for c in brake)


def test_content_type_and_warning_inference():
    assert infer_content_type("⚠危険 高電圧部品に触れないでください") == "danger"
    assert infer_content_type("警告 走行中は操作しないでください") == "warning"
    assert infer_content_type("交換の手順を説明します") == "procedure"
    assert infer_content_type("1. カバーを外します。\n2. 電池を入れます。") == "procedure"
    assert infer_content_type("エアコンは快適な温度に保ちます") == "general"
    assert infer_has_warning("⚠ 注意してください") and not infer_has_warning("快適です")


def test_document_chunks_one_group_per_page():
    chunks = document_chunks("v1", "manual.pdf", [["1ページ目の本文です。"], ["警告 2ページ目です。"]])
    assert [c.page for c in chunks] == [1, 2]
    assert chunks[1].content_type == "warning" and chunks[1].has_warning
    assert chunks[0].source == "pdf:manual.pdf" and chunks[0].section_id.startswith("v1:pdf-")


def test_fuse_scores_are_bounded_sorted_and_calibrated():
    bm25 = np.array([5.0, 1.0, 0.0, 0.5])
    coverage = np.array([1.0, 0.3, 0.0, 0.1])
    cosines = np.array([0.9, 0.85, 0.83, np.nan])
    out = fuse(bm25_scores=bm25, coverage=coverage, cosines=cosines, cosine_range=(0.8, 0.9), n_results=10)
    scores = [f.score for f in out]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
    assert out[0].index == 0 and out[0].score == pytest.approx(1.0)  # first in both, full evidence
    only_bm25 = next(f for f in out if f.index == 3)
    assert only_bm25.dense_rank is None and only_bm25.score <= 0.5
    # a query nothing answers: top by rank but no evidence, so a low score
    weak = fuse(bm25_scores=np.array([0.1, 0.0]), coverage=np.array([0.05, 0.0]),
                cosines=np.array([0.79, 0.7]), cosine_range=(0.8, 0.9))
    assert weak[0].score < 0.1
    with pytest.raises(ValueError):
        fuse(bm25_scores=bm25, coverage=coverage, cosines=cosines, cosine_range=(0.8, 0.9), mode="magic")


# --- long input: Sudachi never sees more than its byte limit, and the time is bounded ----------

def test_long_input_is_tokenised_in_pieces_without_sudachi_error(tok):
    sentence = "エンジンをかけると異音がして、ブレーキを踏むとキーキー鳴ります。"
    text = sentence * 700  # 67,200 bytes: one Sudachi call would raise "Input is too long"
    tokens = tok(text)
    assert tokens.count("ブレーキ") == 700 and "異音" in tokens


def test_pieces_respect_the_byte_limit_and_end_at_sentences():
    from core.text.ja_tokens import PIECE_BYTES, pieces

    text = "ブレーキを踏むと音がする。" * 3000 + "改行なしの長い文" * 4000
    parts = pieces(text)
    assert "".join(parts) == text
    assert all(len(p.encode("utf-8")) <= PIECE_BYTES for p in parts)
    assert parts[0].endswith("。")
    assert pieces("🚗" * 10, max_bytes=8) == ["🚗🚗"] * 5  # 4-byte characters are never split


def test_input_without_sentence_ends_and_huge_input_are_bounded(tok):
    from core.text.ja_tokens import MAX_INPUT_CHARS

    assert len(tok("警" * 60_000)) > 0  # 180,000 bytes, no sentence end anywhere
    huge = "ブレーキ。" * (MAX_INPUT_CHARS // 5 + 50_000)
    assert tok(huge).count("ブレーキ") == MAX_INPUT_CHARS // 5  # only the first MAX_INPUT_CHARS are read
    assert "1km" not in tok("1" + " " * 50_000 + "km")  # a number and its unit are at most 3 spaces apart


def test_a_pdf_with_headed_sections_is_one_chunk_per_section_across_pages():
    """Issue #24: an uploaded manual with headed sections is chunked like the bundled ones."""
    from core.rag.chunks import is_heading

    pages = [["1. ブレーキ警告灯", "ブレーキ警告灯が点灯したときは、安全な場所に停車してください。",
              "警告: そのまま走行しないでください。", "2. タイヤの交換", "ジャッキアップの前に輪止めをしてください。"],
             ["タイヤのナットを対角線の順に締めます。", "■ 給油", "給油口はスマートキーで開けます。"]]
    chunks = document_chunks("v1", "manual.pdf", pages)
    assert [(c.section, c.page) for c in chunks] == [("1. ブレーキ警告灯", 1), ("2. タイヤの交換", 1), ("■ 給油", 2)]
    assert "対角線" in chunks[1].text  # the section runs over the page break
    assert chunks[0].has_warning and not chunks[2].has_warning
    assert len({c.section_id for c in chunks}) == 3
    assert not is_heading("100円です") and not is_heading("2024年1月1日") and is_heading("第2章 点検と手入れ")


def test_a_pdf_without_headings_is_still_grouped_per_page():
    chunks = document_chunks("v1", "plain.pdf", [["本文だけの段落です。"], ["次のページの本文です。"]])
    assert [c.page for c in chunks] == [1, 2]
