"""One entry point: :func:`extract_document` picks the extractor by file name and never raises."""
from __future__ import annotations

import time
from typing import Callable

from core.documents import budget as limits
from core.documents.budget import Budget, too_large_message
from core.documents.document import ExtractedDocument, content_sha256
from core.documents.pdf import extract_pdf
from core.documents.plain import extract_text_file
from core.documents.word import extract_docx


def _kind(name: str) -> str:
    lower = name.lower()
    if lower.endswith(".pdf"):
        return "pdf"
    if lower.endswith(".docx"):
        return "docx"
    if lower.endswith((".txt", ".md", ".csv", ".text")):
        return "text"
    return "unknown"


def extract_document(name: str, data: bytes, password: str | None = None, *,
                     clock: Callable[[], float] = time.monotonic) -> ExtractedDocument:
    """Extract the text of one uploaded file within the budgets above. Never raises; see
    ``error`` and ``warnings``."""
    doc = ExtractedDocument(name=name, kind=_kind(name), size=len(data), sha256=content_sha256(data))
    if len(data) > limits.MAX_UPLOAD_BYTES:
        doc.too_large = True
        doc.error = too_large_message(len(data))
        return doc
    if not data:
        doc.error = "空のファイルです。"
        return doc
    budget = Budget(clock)
    try:
        if doc.kind == "pdf":
            extract_pdf(doc, data, password, budget)
        elif doc.kind == "docx":
            extract_docx(doc, data, budget)
        elif doc.kind == "text":
            extract_text_file(doc, data, budget)
        else:
            doc.error = "対応していない形式です（PDF / DOCX / テキストのみ）。"
    except Exception as exc:  # noqa: BLE001 - the last line of defence: a message, never a traceback
        doc.paragraphs, doc.page_texts = [], []
        doc.error = f"ファイルを読み取れませんでした（{type(exc).__name__}）。"
    if not doc.ok:
        return doc
    if len(doc.text) > limits.MAX_CHARS:
        doc.truncated = True
        doc.warnings.append(f"本文が長いため、先頭 {limits.MAX_CHARS:,} 文字だけをモデルに渡します。")
    return doc
