"""Text files: UTF-8, UTF-16 (with a BOM or ASCII-heavy) or cp932; binary data refused."""
from __future__ import annotations

import codecs

from core.documents import budget as limits
from core.documents.budget import Budget
from core.documents.document import ExtractedDocument, paragraphs_from_lines

_TEXT_CONTROLS = set("\t\n\r\f\v\x1a")  # \x1a: the DOS end-of-file mark some editors leave


def _utf16_without_bom(data: bytes) -> str | None:
    """The encoding of BOM-less UTF-16 whose ASCII characters (newlines at least) leave NUL bytes
    on one side only; None otherwise."""
    sample = data[:8192]
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    if len(data) % 2 or max(even, odd) < 4 * max(min(even, odd), 1):
        return None
    return "utf-16-le" if odd > even else "utf-16-be"


def decode_text(data: bytes) -> tuple[str | None, str | None]:
    """(text, encoding): UTF-8 (with or without BOM), UTF-16 (BOM, or BOM-less with ASCII in it),
    then cp932 (Shift_JIS); (None, None) if none fits."""
    candidates: list[str] = []
    if data.startswith(codecs.BOM_UTF8):
        candidates.append("utf-8-sig")
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        candidates.append("utf-16")
    elif b"\x00" in data[:8192] and (guess := _utf16_without_bom(data)):
        candidates.append(guess)
    candidates += ["utf-8", "cp932"]
    for encoding in candidates:
        try:
            return data.decode(encoding), encoding
        except UnicodeDecodeError:
            continue
    return None, None


def looks_binary(text: str) -> bool:
    """NUL characters, or more than 1 % control characters in the first 64k: not a text file."""
    if "\x00" in text:
        return True
    sample = text[:65_536]
    controls = sum(1 for ch in sample if ch < " " and ch not in _TEXT_CONTROLS)
    return controls * 100 > len(sample)


def extract_text_file(doc: ExtractedDocument, data: bytes, budget: Budget) -> None:
    text, encoding = decode_text(data)
    if text is None:
        doc.error = "文字コードを判別できませんでした（UTF-8、UTF-16 または Shift_JIS で保存してください）。"
        return
    if looks_binary(text):
        doc.error = "テキストではないデータ（バイナリ）が含まれています。文字だけのテキストファイルを添付してください。"
        return
    if encoding == "cp932":
        doc.warnings.append("Shift_JIS (cp932) として読み込みました。")
    elif encoding and encoding.startswith("utf-16"):
        doc.warnings.append("UTF-16 として読み込みました。")
    text, cut = budget.take(text)
    if cut:
        doc.warnings.append(f"文字数が上限（{limits.MAX_CHARS_PER_DOCUMENT:,} 文字）を超えたため、途中までを読み取りました。")
    doc.paragraphs = paragraphs_from_lines(text)
