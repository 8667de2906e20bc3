"""Text extraction from uploaded files, in memory only (seed 001: nothing is written to disk).

PDF through pypdf (encrypted files need a password; image-only pages yield a warning), DOCX through
python-docx (paragraphs and tables in document order), text files as UTF-8 with a cp932 fallback.
Every failure is a Japanese message on the result, never an exception.
"""
from __future__ import annotations

import io
import re
import unicodedata
from dataclasses import dataclass, field

MAX_FILE_BYTES = 20 * 1024 * 1024
MAX_CHARS = 60_000  # passed to the model per file; the rest is cut with a warning

_HEADING = re.compile(r"^(第\s*[0-9０-９一二三四五六七八九十百]+\s*条|[0-9０-９]+[\.．]|[（(][0-9０-９一二三四五六七八九十]+[）)]|前文|附則|別紙)")
_SENTENCE_END = ("。", "」", ")", "）", ":", "：")


@dataclass
class ExtractedDocument:
    name: str
    kind: str  # pdf / docx / text / unknown
    paragraphs: list[str] = field(default_factory=list)
    pages: int | None = None
    page_texts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    needs_password: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def text(self) -> str:
        return "\n".join(self.paragraphs)

    def for_prompt(self) -> str:
        """The text block sent to the model, headed by the file name."""
        text = self.text
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS]
        return f"【{self.name}】\n{text}"

    def summary(self) -> str:
        parts = [f"{len(self.paragraphs)} 段落", f"{len(self.text):,} 文字"]
        if self.pages is not None:
            parts.insert(0, f"{self.pages} ページ")
        return " / ".join(parts)


def _kind(name: str) -> str:
    lower = name.lower()
    if lower.endswith(".pdf"):
        return "pdf"
    if lower.endswith(".docx"):
        return "docx"
    if lower.endswith((".txt", ".md", ".csv", ".text")):
        return "text"
    return "unknown"


def paragraphs_from_lines(text: str) -> list[str]:
    """Join wrapped lines into paragraphs: a line ending a sentence, a blank line, or a heading
    (第N条, 1., (1)) closes the current paragraph."""
    text = unicodedata.normalize("NFKC", text).replace("\r\n", "\n").replace("\r", "\n")
    paragraphs: list[str] = []
    current = ""
    for line in (ln.strip() for ln in text.split("\n")):
        if not line:
            if current:
                paragraphs.append(current)
                current = ""
            continue
        if current and _HEADING.match(line):
            paragraphs.append(current)
            current = line
        else:
            joiner = " " if current and current[-1].isascii() and line[0].isascii() else ""
            current = f"{current}{joiner}{line}" if current else line
        if current.endswith(_SENTENCE_END) or len(current) > 400:
            paragraphs.append(current)
            current = ""
    if current:
        paragraphs.append(current)
    return paragraphs


def _extract_pdf(doc: ExtractedDocument, data: bytes, password: str | None) -> None:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            if reader.decrypt(password or "") == 0:
                doc.needs_password = True
                doc.error = ("パスワードで保護された PDF です。パスワードを入力してください。" if not password
                             else "パスワードが違います。正しいパスワードを入力してください。")
                return
        doc.pages = len(reader.pages)
        for page in reader.pages:
            doc.page_texts.append(page.extract_text() or "")
    except DependencyError:
        doc.error = "この PDF の暗号方式を開くためのライブラリが不足しています（pypdf[crypto] を入れてください）。"
        return
    except FileNotDecryptedError:
        doc.needs_password = True
        doc.error = "パスワードで保護された PDF です。パスワードを入力してください。"
        return
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, OSError) as exc:
        doc.error = f"PDF を読み取れませんでした（ファイルが壊れている可能性があります: {type(exc).__name__}）。"
        return
    doc.paragraphs = paragraphs_from_lines("\n\n".join(doc.page_texts))
    if not doc.paragraphs:
        doc.warnings.append("テキストが見つかりませんでした。画像だけの PDF（スキャン）の可能性があります。"
                            "文字として読み取れる PDF か、テキストを貼り付けてください。")


def _docx_blocks(document) -> list[str]:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    blocks: list[str] = []
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            text = item.text.strip()
            if text:
                blocks.append(text)
        elif isinstance(item, Table):
            for row in item.rows:
                cells: list[str] = []
                for cell in row.cells:
                    value = cell.text.strip()
                    if value and (not cells or cells[-1] != value):  # merged cells repeat
                        cells.append(value)
                if cells:
                    blocks.append(" | ".join(cells))
    return blocks


def _extract_docx(doc: ExtractedDocument, data: bytes) -> None:
    try:
        from docx import Document

        document = Document(io.BytesIO(data))
        doc.paragraphs = [unicodedata.normalize("NFKC", b) for b in _docx_blocks(document)]
    except Exception as exc:  # noqa: BLE001 - python-docx raises many kinds for broken files
        doc.error = f"DOCX を読み取れませんでした（ファイルが壊れているか DOCX 形式ではありません: {type(exc).__name__}）。"
        return
    if not doc.paragraphs:
        doc.warnings.append("DOCX に本文テキストが見つかりませんでした。")


def decode_text(data: bytes) -> tuple[str | None, str | None]:
    """(text, encoding) trying UTF-8 (with BOM), then cp932 (Shift_JIS); (None, None) if neither fits."""
    for encoding in ("utf-8-sig", "cp932"):
        try:
            return data.decode(encoding), encoding
        except UnicodeDecodeError:
            continue
    return None, None


def extract_document(name: str, data: bytes, password: str | None = None) -> ExtractedDocument:
    """Extract the text of one uploaded file. Never raises; see ``error`` and ``warnings``."""
    doc = ExtractedDocument(name=name, kind=_kind(name))
    if len(data) > MAX_FILE_BYTES:
        doc.error = f"ファイルが大きすぎます（{len(data) / 1024 / 1024:.1f} MB、上限 {MAX_FILE_BYTES // 1024 // 1024} MB）。"
        return doc
    if not data:
        doc.error = "空のファイルです。"
        return doc
    if doc.kind == "pdf":
        _extract_pdf(doc, data, password)
    elif doc.kind == "docx":
        _extract_docx(doc, data)
    elif doc.kind == "text":
        text, encoding = decode_text(data)
        if text is None:
            doc.error = "文字コードを判別できませんでした（UTF-8 または Shift_JIS で保存してください）。"
            return doc
        if encoding == "cp932":
            doc.warnings.append("Shift_JIS (cp932) として読み込みました。")
        doc.paragraphs = paragraphs_from_lines(text)
    else:
        doc.error = "対応していない形式です（PDF / DOCX / テキストのみ）。"
        return doc
    if len(doc.text) > MAX_CHARS:
        doc.truncated = True
        doc.warnings.append(f"本文が長いため、先頭 {MAX_CHARS:,} 文字だけをモデルに渡します。")
    return doc
