"""An extracted document (text by paragraph and page, warnings, error) and the paragraph rebuilder."""
from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field

from core.documents.budget import MAX_CHARS

_HEADING = re.compile(r"^(第\s*[0-9０-９一二三四五六七八九十百]+\s*条|[0-9０-９]+[\.．]|[（(][0-9０-９一二三四五六七八九十]+[）)]|前文|附則|別紙)")
_HEADING_SPAN = 40  # _HEADING only ever looks at the start of a line
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
    truncated: bool = False  # the text is longer than MAX_CHARS, so for_prompt() cuts it
    size: int = 0  # bytes uploaded
    sha256: str = ""  # of the uploaded bytes
    too_large: bool = False  # over MAX_UPLOAD_BYTES: nothing was read

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

    def metadata(self) -> dict[str, object]:
        """What a store may keep about the attachment: never its text."""
        return {"name": self.name, "size": self.size, "pages": self.pages, "sha256": self.sha256}


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
        if current and _HEADING.match(line[:_HEADING_SPAN]):
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


def content_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
