"""Hostile uploads, generated here: every one ends as bounded text or a Japanese message, quickly.

Zip-bomb and million-paragraph DOCX, column-span and vertical-merge tables, PDFs whose small
compressed content stream shows enormous text, pypdf limit errors, encrypted / image-only /
truncated files, NUL-only and binary "text", Shift_JIS, CP932 and UTF-16 text. Unbudgeted, the
PDF and DOCX bombs here took minutes and gigabytes; the time bounds below are ten times what the
budgeted extraction needs, so load cannot flip them.
"""
from __future__ import annotations

import io
import random
import time
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest

from core.documents import (
    MAX_CHARS_PER_DOCUMENT,
    MAX_CHARS_PER_PAGE,
    MAX_DOCX_PARAGRAPHS,
    MAX_UPLOAD_BYTES,
    budget,
    extract_document,
)
from tests.helpers.documents import make_docx, make_pdf, pdf_from_objects

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "pdf-samples"
W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def japanese(message: str | None) -> bool:
    return bool(message) and any("\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff" for ch in message)


def measured(name: str, data: bytes, password: str | None = None):
    """(document, seconds, peak traced bytes) of one extraction."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        doc = extract_document(name, data, password)
    finally:
        seconds = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return doc, seconds, peak


def bounded(doc) -> bool:
    return (len(doc.text) <= MAX_CHARS_PER_DOCUMENT + len(doc.paragraphs)
            and all(len(t) <= MAX_CHARS_PER_PAGE for t in doc.page_texts))


# ---- generators -------------------------------------------------------------------------------

def pdf_pages(contents: list[bytes], *, compress: bool = True) -> bytes:
    """A PDF whose pages carry the given raw content streams (Flate-compressed), Helvetica as /F1."""
    n = len(contents)
    page_ids = [4 + 2 * i for i in range(n)]
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % p for p in page_ids), n),
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for page_id, content in zip(page_ids, contents):
        stream = zlib.compress(content, 9) if compress else content
        objects.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                       b"/Contents %d 0 R >>" % (page_id + 1))
        objects.append(b"<< %s/Length %d >>\nstream\n" % (b"/Filter /FlateDecode " if compress else b"", len(stream))
                       + stream + b"\nendstream")
    return pdf_from_objects(objects)




def text_page(line: str) -> bytes:
    return b"BT /F1 12 Tf 72 720 Td (%s) Tj ET" % line.encode()


def docx_with_body(chunks, repeat: int = 1, doctype: bytes = b"", part: str = "word/document.xml") -> bytes:
    """A DOCX made by python-docx whose document.xml body is replaced by ``chunks`` (bytes pieces,
    the whole list written ``repeat`` times, streamed through the compressor: nothing huge in memory)."""
    template = zipfile.ZipFile(io.BytesIO(make_docx(["x"], [["a", "b"]], [])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as target:
        for info in template.infolist():
            if info.filename != "word/document.xml":  # the main part may be renamed: the package points to it
                target.writestr(info, template.read(info).replace(b"document.xml", part.split("/")[-1].encode()))
        with target.open(part, "w", force_zip64=True) as body:
            body.write(b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n' + doctype +
                       b'<w:document xmlns:w="%s"><w:body>' % W_NS.encode())
            for _ in range(repeat):
                for chunk in chunks:
                    body.write(chunk)
            body.write(b"<w:sectPr/></w:body></w:document>")
    return out.getvalue()


def para(text: str) -> bytes:
    return f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>".encode()


# ---- DOCX -------------------------------------------------------------------------------------

def test_zip_bomb_docx_is_refused_from_its_declared_sizes():
    # 100 MB of one paragraph's text compressed to ~100 KB
    data = docx_with_body([para("x") + b"<w:p><w:r><w:t>"] + [b"A" * (1 << 20)] * 100 + [b"</w:t></w:r></w:p>"])
    assert len(data) < 1_000_000
    doc, seconds, peak = measured("bomb.docx", data)
    assert not doc.ok and "展開後のサイズ" in doc.error and "圧縮爆弾" in doc.error
    assert doc.paragraphs == [] and seconds < 10 and peak < 50 * 1024 * 1024


def test_lying_zip_member_cannot_inflate_past_its_declared_size():
    data = bytearray(docx_with_body([para("x")] * 10 + [b"<w:p><w:r><w:t>" + b"A" * 5_000_000 + b"</w:t></w:r></w:p>"]))
    # patch the central directory's uncompressed size of document.xml down to 1 KB
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        info = archive.getinfo("word/document.xml")
    doc = extract_document("liar.docx", bytes(_declare_size(bytes(data), info, 1024)))
    assert not doc.ok and japanese(doc.error) and bounded(doc)


def _declare_size(data: bytes, info: zipfile.ZipInfo, size: int) -> bytes:
    """Rewrite the declared uncompressed size of one member in its local header and central directory."""
    out = bytearray(data)
    name = info.filename.encode()
    for signature, offset in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):
        start = 0
        while (at := out.find(signature, start)) >= 0:
            name_at = at + (46 if signature == b"PK\x01\x02" else 30)
            if out[name_at:name_at + len(name)] == name:
                extra_len = int.from_bytes(out[at + (30 if signature == b"PK\x01\x02" else 28):][:2], "little")
                if int.from_bytes(out[at + offset:at + offset + 4], "little") == 0xFFFFFFFF:  # zip64: size in extra
                    extra = name_at + len(name)
                    zip64 = out.find(b"\x01\x00", extra, extra + extra_len)
                    out[zip64 + 4:zip64 + 12] = size.to_bytes(8, "little")
                else:
                    out[at + offset:at + offset + 4] = size.to_bytes(4, "little")
            start = at + 4
    return bytes(out)


def test_million_paragraph_docx_is_refused_before_python_docx_parses_it():
    data = docx_with_body([b"<w:p/>"], repeat=1_000_000)
    doc, seconds, peak = measured("many.docx", data)
    assert not doc.ok and "段落" in doc.error and f"{MAX_DOCX_PARAGRAPHS:,}" in doc.error
    assert seconds < 10 and peak < 100 * 1024 * 1024


def test_paragraph_count_is_checked_whatever_the_main_part_is_called():
    data = docx_with_body([b"<w:p/>"], repeat=MAX_DOCX_PARAGRAPHS + 1, part="word/body.bin")
    doc = extract_document("renamed.docx", data)
    assert not doc.ok and "段落" in doc.error
    small = extract_document("renamed.docx", docx_with_body([para("改名された本文")], part="word/body.bin"))
    assert small.ok and small.paragraphs == ["改名された本文"]  # python-docx follows the package relationship


def test_paragraph_count_covers_a_utf16_main_part():
    body = ('<?xml version="1.0" encoding="UTF-16"?><w:document xmlns:w="%s"><w:body>%s</w:body></w:document>'
            % (W_NS, "<w:p/>" * (MAX_DOCX_PARAGRAPHS + 1))).encode("utf-16")
    template = zipfile.ZipFile(io.BytesIO(make_docx(["x"], [["a", "b"]], [])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in template.infolist():
            target.writestr(info.filename, body if info.filename == "word/document.xml" else template.read(info))
    doc = extract_document("utf16.docx", out.getvalue())
    assert not doc.ok and "段落" in doc.error


def test_docx_just_under_the_paragraph_limit_is_read():
    data = docx_with_body([para("第1条（目的）本契約は")], repeat=MAX_DOCX_PARAGRAPHS - 10)
    doc = extract_document("long.docx", data)
    assert doc.ok and len(doc.paragraphs) == MAX_DOCX_PARAGRAPHS - 10
    assert doc.truncated  # longer than what the model gets


def test_huge_column_span_is_refused():
    table = (b"<w:tbl><w:tr><w:tc><w:tcPr><w:gridSpan w:val=\"1000000000\"/></w:tcPr>" + para("a")
             + b"</w:tc></w:tr></w:tbl>")
    doc, seconds, _ = measured("span.docx", docx_with_body([para("前文"), table]))
    assert not doc.ok and "列の結合" in doc.error and seconds < 10


def test_tall_vertical_merge_is_linear_and_keeps_the_text():
    first = b"<w:tr><w:tc><w:tcPr><w:vMerge w:val=\"restart\"/></w:tcPr>" + para("結合") + b"</w:tc><w:tc>" + para("0") + b"</w:tc></w:tr>"
    rest = b"<w:tr><w:tc><w:tcPr><w:vMerge/></w:tcPr><w:p/></w:tc><w:tc>" + para("n") + b"</w:tc></w:tr>"
    rows = 3_000  # python-docx walks up every merged cell: quadratic, minutes here
    doc, seconds, _ = measured("merge.docx", docx_with_body([b"<w:tbl>", first] + [rest] * rows + [b"</w:tbl>"]))
    assert doc.ok and seconds < 10
    assert doc.paragraphs[0] == "結合 | 0" and doc.paragraphs[1] == "結合 | n" and len(doc.paragraphs) == rows + 1


def test_docx_text_is_capped_per_document():
    body = [para("契約" * 5_000)] * (MAX_CHARS_PER_DOCUMENT // 10_000 + 20)
    doc = extract_document("big.docx", docx_with_body(body))
    assert doc.ok and len(doc.text) <= MAX_CHARS_PER_DOCUMENT + len(doc.paragraphs)
    assert any("上限" in w for w in doc.warnings)


@pytest.mark.parametrize("label,data", [
    ("garbage", random.Random(7).randbytes(50_000)),
    ("truncated", make_docx(["第1条（目的）本契約は…"], [["a", "b"]], [])[:3_000]),
    ("zip without a document", (lambda b: (zipfile.ZipFile(b, "w").writestr("x.txt", "hi"), b.getvalue())[1])(io.BytesIO())),
    ("broken xml", docx_with_body([b"<w:p><w:r><w:t>unclosed"])),
    ("undefined entity", docx_with_body([b"<w:p><w:r><w:t>&lol9;</w:t></w:r></w:p>"])),
])
def test_broken_docx_gets_a_japanese_error(label, data):
    doc = extract_document("broken.docx", data)
    assert not doc.ok and japanese(doc.error) and "DOCX" in doc.error and doc.paragraphs == []


def test_billion_laughs_docx_is_not_expanded():
    entities = b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1)) * 10) for i in range(1, 10))
    doctype = b'<!DOCTYPE w:document [<!ENTITY lol0 "lol">' + entities + b"]>"
    data = docx_with_body([b"<w:p><w:r><w:t>&lol9;</w:t></w:r></w:p>"], doctype=doctype)
    doc, seconds, peak = measured("laughs.docx", data)
    assert seconds < 10 and peak < 100 * 1024 * 1024 and bounded(doc)
    assert "lollol" not in doc.text and (doc.ok or japanese(doc.error))


# ---- PDF --------------------------------------------------------------------------------------

def test_pdf_with_enormous_string_in_a_tiny_stream_is_bounded():
    # 60 MB string: unbudgeted, 77 s and 770 MB for 60 M characters
    data = pdf_pages([text_page("第一ページは読める"), b"BT /F1 12 Tf 72 720 Td (" + b"A" * 60_000_000 + b") Tj ET"])
    assert len(data) < 100_000
    doc, seconds, peak = measured("bomb.pdf", data)
    assert seconds < 20 and peak < 200 * 1024 * 1024 and bounded(doc)
    assert doc.ok and doc.pages == 2 and doc.page_texts[1] == ""
    assert any("2 ページ目" in w and "省略" in w for w in doc.warnings)


def test_pdf_with_a_million_show_operators_is_bounded():
    # pypdf joins one line's text quadratically: 600 k operators took 374 s unbudgeted
    data = pdf_pages([b"BT /F1 12 Tf 72 720 Td " + b"(AAAAAAAAAAAAAAAAAAAA) Tj " * 1_000_000 + b"ET"])
    doc, seconds, _ = measured("tj.pdf", data)
    assert seconds < 30 and bounded(doc)
    assert not doc.ok and "読み取れませんでした" in doc.error


def test_pdf_with_dense_text_under_the_token_limit_is_bounded():
    # 40 k operators, few tokens each, but 800 k characters on one page
    data = pdf_pages([b"BT /F1 12 Tf 72 720 Td " + b"(" + b"A" * 20 + b") Tj " * 40_000 + b"ET",
                      text_page("Article 2 survives.")])
    doc, seconds, _ = measured("dense.pdf", data)
    assert seconds < 30 and bounded(doc) and doc.ok
    assert "Article 2 survives." in doc.text and any("1 ページ目" in w for w in doc.warnings)


def test_pdf_form_xobject_drawn_many_times_is_bounded():
    form_stream = b"BT /F1 12 Tf 72 720 Td " + b"(BBBBBBBBBB) Tj " * 2_000 + b"ET"
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> "
               b"/XObject << /X1 6 0 R >> >> /Contents 5 0 R >>"]
    page = zlib.compress(b"/X1 Do\n" * 100_000, 9)
    objects.append(b"<< /Filter /FlateDecode /Length %d >>\nstream\n" % len(page) + page + b"\nendstream")
    form = zlib.compress(form_stream, 9)
    objects.append(b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                   b"/Filter /FlateDecode /Length %d >>\nstream\n" % len(form) + form + b"\nendstream")
    doc, seconds, _ = measured("forms.pdf", pdf_from_objects(objects))
    assert seconds < 30 and bounded(doc) and japanese(doc.error or " ".join(doc.warnings))


def test_pdf_limit_reached_in_the_page_tree_is_a_japanese_error():
    kids = b"4 0 R " * 100_001  # pypdf allows 100,000 array elements
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [%s] /Count 1 >>" % kids,
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R >>",
               b"<< /Length 0 >>\nstream\n\nendstream"]
    doc = extract_document("tree.pdf", pdf_from_objects(objects))
    assert not doc.ok and "複雑すぎる" in doc.error


def test_pdf_text_is_capped_per_page_and_document(monkeypatch):
    monkeypatch.setattr(budget, "MAX_CHARS_PER_DOCUMENT", 1_000)
    data = make_pdf([[f"Line {p}-{i} of a long contract page." for i in range(40)] for p in range(6)])
    doc = extract_document("long.pdf", data)
    assert doc.ok and sum(len(t) for t in doc.page_texts) <= 1_000
    assert any("上限" in w and "1,000" in w for w in doc.warnings)


def test_pdf_page_with_too_many_characters_is_cut_with_one_warning():
    line = "Lorem ipsum dolor sit amet, consectetur adipiscing elit sed do eiusmod tempor."
    pages = [[line] * (MAX_CHARS_PER_PAGE // len(line) + 40)] * 3
    doc = extract_document("dense.pdf", make_pdf(pages))
    assert doc.ok and [len(t) for t in doc.page_texts] == [MAX_CHARS_PER_PAGE] * 3
    assert [w for w in doc.warnings if "文字数が多すぎる" in w] == [
        f"1、2、3 ページ目は文字数が多すぎるため、各ページ先頭 {MAX_CHARS_PER_PAGE:,} 文字だけを読み取りました。"]


def test_pdf_pages_over_the_limit_are_left_out(monkeypatch):
    monkeypatch.setattr(budget, "MAX_PAGES", 3)
    doc = extract_document("pages.pdf", make_pdf([[f"Page {i}."] for i in range(5)]))
    assert doc.ok and doc.pages == 5 and len(doc.page_texts) == 3
    assert any("先頭 3 ページ" in w for w in doc.warnings)


def test_extraction_stops_when_the_time_budget_runs_out():
    ticks = iter(range(0, 10_000, 2))  # every look at the clock costs 2 "seconds"
    doc = extract_document("slow.pdf", make_pdf([[f"Page {i} text.", "More."] for i in range(8)]), clock=lambda: next(ticks))
    assert doc.ok and 1 <= len(doc.page_texts) < 8 and "Page 0 text." in doc.text
    assert any("時間がかかりすぎる" in w for w in doc.warnings)


def test_encrypted_pdf_without_password_keeps_asking():
    doc = extract_document("locked.pdf", (SAMPLES / "libreoffice-writer-password.pdf").read_bytes())
    assert doc.needs_password and "パスワード" in doc.error and doc.paragraphs == []


def test_image_only_pdf_is_ok_with_a_warning():
    doc = extract_document("scan.pdf", (SAMPLES / "imagemagick-CCITTFaxDecode.pdf").read_bytes())
    assert doc.ok and doc.paragraphs == [] and any("画像だけ" in w for w in doc.warnings)


@pytest.mark.parametrize("label,data", [
    ("header only", b"%PDF-1.7\n"),
    ("garbage after header", b"%PDF-1.4\n" + random.Random(3).randbytes(20_000)),
    ("random", random.Random(4).randbytes(20_000)),
    ("docx renamed", make_docx(["x"], [["a", "b"]], [])),
])
def test_broken_pdf_gets_a_japanese_error(label, data):
    doc = extract_document("broken.pdf", data)
    assert not doc.ok and japanese(doc.error) and doc.paragraphs == []


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.glob("*.pdf")))
def test_truncated_real_pdfs_never_raise(name):
    data = (SAMPLES / name).read_bytes()
    for cut in (len(data) // 3, len(data) // 2, len(data) - 200):
        doc = extract_document(name, data[:cut])
        assert doc.ok or japanese(doc.error)
        assert all(japanese(w) for w in doc.warnings) and bounded(doc)


# ---- text -------------------------------------------------------------------------------------

@pytest.mark.parametrize("label,data", [
    ("nul only", b"\x00" * 10_000),
    ("nul inside utf-8", "第1条（目的）".encode() + b"\x00" * 50 + "本契約".encode()),
    ("png renamed", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random.Random(5).randbytes(5_000)),
    ("random bytes", random.Random(6).randbytes(5_000)),
    ("control characters", bytes(range(1, 9)) * 500),
])
def test_binary_text_file_is_rejected_in_japanese(label, data):
    doc = extract_document("data.txt", data)
    assert not doc.ok and japanese(doc.error) and doc.paragraphs == []


@pytest.mark.parametrize("encoding,warning", [
    ("shift_jis", "Shift_JIS"), ("cp932", "Shift_JIS"), ("utf-16", "UTF-16"),
    ("utf-16-be-bom", "UTF-16"), ("utf-16-le", "UTF-16"), ("utf-8", None), ("utf-8-sig", None),
])
def test_japanese_text_in_common_encodings_decodes(encoding, warning):
    text = "第1条（目的）\r\n本契約は、甲乙間の業務委託について定める。\r\n第2条（秘密保持）\r\n秘密を守る。\r\n"
    if encoding == "cp932":
        text += "①㈱髙﨑\r\n"  # NEC / IBM extensions that plain Shift_JIS lacks
    data = ("\ufeff" + text).encode("utf-16-be") if encoding == "utf-16-be-bom" else text.encode(encoding)
    doc = extract_document("contract.txt", data)
    assert doc.ok and "業務委託" in doc.text and "秘密保持" in doc.text
    assert (any(warning in w for w in doc.warnings) if warning else not doc.warnings)
    if encoding == "cp932":
        assert "㈱" in doc.text or "(株)" in doc.text  # NFKC may spell it out


def test_undecodable_text_gets_a_japanese_message():
    doc = extract_document("euc.txt", bytes([0xff, 0xfe, 0x81, 0x00, 0xfd, 0x80]) * 3 + b"\x80")
    assert not doc.ok and "文字コード" in doc.error


def test_long_text_file_is_capped_per_document():
    data = ("あ" * 99 + "。\n").encode() * (MAX_CHARS_PER_DOCUMENT // 100 + 500)
    assert len(data) < MAX_UPLOAD_BYTES
    doc, seconds, _ = measured("long.txt", data)
    assert doc.ok and len(doc.text) <= MAX_CHARS_PER_DOCUMENT + len(doc.paragraphs) and seconds < 30
    assert any("上限" in w for w in doc.warnings)


# ---- size -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["big.pdf", "big.docx", "big.txt"])
def test_file_over_the_upload_limit_is_refused_unread(name):
    doc = extract_document(name, b"%PDF-1.4\n" + b"0" * MAX_UPLOAD_BYTES)
    assert not doc.ok and doc.too_large and "大きすぎ" in doc.error and "10 MB" in doc.error
    assert doc.size == MAX_UPLOAD_BYTES + 9 and doc.paragraphs == []
