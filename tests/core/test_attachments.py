"""In-memory extraction of PDF / DOCX / text uploads, on real-world and generated files."""
import hashlib
from pathlib import Path

import pytest

from core.documents import (
    MAX_CHARS,
    MAX_UPLOAD_BYTES,
    ExtractedDocument,
    budget,
    cache,
    clear_cache,
    extract_cached,
    extract_document,
    paragraphs_from_lines,
)
from core.documents.budget import CACHE_ENTRIES
from tests.helpers.documents import make_docx, make_pdf

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "pdf-samples"


def sample(name: str) -> bytes:
    path = SAMPLES / name
    if not path.exists():  # the shared test data sits beside the repo in CI and here
        pytest.fail(f"missing shared test data: {path}")
    return path.read_bytes()


@pytest.mark.parametrize("name,pages", [
    ("minimal-document.pdf", 1), ("002-trivial-libre-office-writer.pdf", 1), ("pdflatex-4-pages.pdf", 4),
    ("multicolumn.pdf", 3), ("google-doc-document.pdf", 1),
])
def test_real_world_pdfs_yield_text(name, pages):
    doc = extract_document(name, sample(name))
    assert doc.ok and doc.pages == pages and doc.paragraphs and not doc.warnings
    assert len(doc.page_texts) == pages


def test_encrypted_pdf_asks_for_password_then_opens():
    data = sample("libreoffice-writer-password.pdf")
    locked = extract_document("locked.pdf", data)
    assert locked.needs_password and "パスワード" in locked.error and not locked.paragraphs
    wrong = extract_document("locked.pdf", data, password="nope")
    assert wrong.needs_password and "違います" in wrong.error
    opened = extract_document("locked.pdf", data, password="openpassword")
    assert opened.ok and opened.pages == 1 and "Lorem ipsum" in opened.text


def test_image_only_pdf_warns_that_no_text_was_found():
    doc = extract_document("scan.pdf", sample("imagemagick-CCITTFaxDecode.pdf"))
    assert doc.ok and doc.pages == 1 and doc.paragraphs == []
    assert any("画像" in w for w in doc.warnings)


def test_generated_pdf_keeps_pages_and_joins_wrapped_lines():
    data = make_pdf([["Article 1 (Purpose)", "This agreement sets out", "the terms of service."],
                     ["Article 8 (Damages)", "Liability is capped."]])
    doc = extract_document("gen.pdf", data)
    assert doc.ok and doc.pages == 2
    assert "Article 8 (Damages)" in doc.page_texts[1]
    assert any("This agreement sets out the terms of service." in p for p in doc.paragraphs)


@pytest.mark.parametrize("name,data", [
    ("broken.pdf", b"%PDF-1.7\n garbage without structure"),
    ("broken.pdf", b"\x00\x01\x02"),
    ("broken.docx", b"PK\x03\x04 not really a zip"),
    ("broken.docx", make_pdf([["not a docx"]])),
    ("empty.txt", b""),
    ("picture.png", b"\x89PNG...."),
])
def test_corrupt_or_unsupported_files_give_a_japanese_error(name, data):
    doc = extract_document(name, data)
    assert not doc.ok and doc.error and any("\u3040" <= ch <= "\u30ff" for ch in doc.error)


def test_docx_paragraphs_and_tables_in_document_order():
    data = make_docx(["業務委託契約書", "第1条（目的）本契約は業務の委託について定める。"],
                     [["条項", "内容"], ["第8条（損害賠償）", "上限なし"]],
                     ["第9条（解除）催告の上で解除できる。"])
    doc = extract_document("contract.docx", data)
    assert doc.ok and doc.kind == "docx"
    assert doc.paragraphs == ["業務委託契約書", "第1条(目的)本契約は業務の委託について定める。",
                              "条項 | 内容", "第8条(損害賠償) | 上限なし", "第9条(解除)催告の上で解除できる。"]


def test_text_files_utf8_bom_and_cp932_fallback():
    utf8 = extract_document("a.txt", "\ufeff第1条（目的）\n本契約は…。".encode("utf-8"))
    assert utf8.ok and utf8.paragraphs[0].startswith("第1条") and not utf8.warnings
    sjis = extract_document("b.txt", "第2条（秘密保持）\n秘密を守る。".encode("cp932"))
    assert sjis.ok and "秘密保持" in sjis.text and any("Shift_JIS" in w for w in sjis.warnings)
    garbage = extract_document("c.txt", bytes([0xff, 0xfe, 0x81, 0x00, 0xfd]) * 3)
    assert not garbage.ok and "文字コード" in garbage.error


def test_huge_files_are_refused_and_long_text_is_cut_for_the_prompt():
    too_big = extract_document("big.txt", b"a" * (MAX_UPLOAD_BYTES + 1))
    assert not too_big.ok and too_big.too_large and "大きすぎ" in too_big.error and "上限 10 MB" in too_big.error
    long = extract_document("long.txt", ("あ" * 100 + "。\n").encode() * 700)
    assert long.ok and long.truncated and len(long.for_prompt()) <= MAX_CHARS + 20


def test_paragraphs_split_on_clause_headings():
    assert paragraphs_from_lines("前文\n第1条（目的）本契約は\n定める。\n第2条（定義）用語") == [
        "前文", "第1条(目的)本契約は定める。", "第2条(定義)用語"]


def test_metadata_names_size_pages_and_hash_but_never_the_text():
    data = make_pdf([["Article 1 (Purpose)"], ["Article 2"]])
    doc = extract_document("contract.pdf", data)
    assert doc.metadata() == {"name": "contract.pdf", "size": len(data), "pages": 2,
                              "sha256": hashlib.sha256(data).hexdigest()}
    assert "Article" not in repr(doc.metadata())


@pytest.fixture
def counted(monkeypatch):
    clear_cache()
    calls: list[tuple[str, str | None]] = []
    real = cache.extract_document

    def counting(name, data, password=None, **kwargs):
        calls.append((name, password))
        return real(name, data, password, **kwargs)

    monkeypatch.setattr(cache, "extract_document", counting)
    yield calls
    clear_cache()


def test_cached_extraction_runs_once_per_content_and_password(counted):
    data = sample("libreoffice-writer-password.pdf")
    for _ in range(3):
        assert extract_cached("locked.pdf", data).needs_password
    assert counted == [("locked.pdf", None)]
    for _ in range(2):
        assert "違います" in extract_cached("locked.pdf", data, "nope").error
        assert extract_cached("locked.pdf", data, "openpassword").ok
    assert counted == [("locked.pdf", None), ("locked.pdf", "nope"), ("locked.pdf", "openpassword")]


def test_cache_hit_under_another_name_is_an_independent_copy(counted):
    data = make_docx(["第1条（目的）本契約は業務の委託について定める。"], [["a", "b"]], [])
    first = extract_cached("a.docx", data)
    first.paragraphs.append("mutated by a caller")
    second = extract_cached("b.docx", data)
    assert len(counted) == 1 and second.name == "b.docx" and "mutated by a caller" not in second.paragraphs
    assert second.for_prompt().startswith("【b.docx】")


def test_cache_keeps_no_bytes_no_password_and_is_bounded(counted):
    for i in range(CACHE_ENTRIES + 8):
        extract_cached(f"{i}.txt", f"第{i}条（目的）本契約は定める。".encode())
    assert len(cache._cache) == CACHE_ENTRIES
    extract_cached("locked.pdf", sample("libreoffice-writer-password.pdf"), "openpassword")
    for key, doc in cache._cache.items():
        assert isinstance(doc, ExtractedDocument) and "openpassword" not in repr(key)
        assert not any(isinstance(value, (bytes, bytearray, memoryview)) for value in vars(doc).values())
    extract_cached("0.txt", "第0条（目的）本契約は定める。".encode())  # evicted first: extracted again
    assert counted.count(("0.txt", None)) == 2


def test_cache_is_bounded_by_characters_too(counted, monkeypatch):
    monkeypatch.setattr(budget, "CACHE_CHARS", 5_000)
    for i in range(5):
        extract_cached(f"{i}.txt", (f"{i}" + "あ" * 1_000 + "。\n").encode())
    assert 0 < cache._cache_chars <= 5_000 and len(cache._cache) < 5


def test_oversized_files_are_not_cached(counted):
    extract_cached("big.txt", b"a" * (MAX_UPLOAD_BYTES + 1))
    assert len(cache._cache) == 0
