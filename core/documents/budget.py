"""The budgets every extraction runs within (uploads are hostile), and the upload-limit messages.

Output past a budget is cut with a warning; a file that cannot be read within it gets an error.
"""
from __future__ import annotations

from typing import Callable

MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # per file; .streamlit/config.toml maxUploadSize sits a bit above
MAX_CHARS = 60_000  # passed to the model per file; the rest is cut with a warning
MAX_CHARS_PER_PAGE = 20_000  # a dense page holds 2,000-5,000
MAX_CHARS_PER_DOCUMENT = 400_000
MAX_PAGES = 500
MAX_EXTRACT_SECONDS = 20.0  # wall clock per document; pages or blocks after it are left out
MAX_DOCX_UNCOMPRESSED = 32 * 1024 * 1024  # sum of the zip members' declared sizes
MAX_DOCX_MEMBERS = 2_000
MAX_DOCX_PARAGRAPHS = 20_000  # w:p, w:tr and w:tc elements over all XML parts
MAX_DOCX_GRID_SPAN = 64  # Word allows 63 columns; python-docx repeats a cell once per spanned column
MAX_PDF_STREAM_BYTES = 8 * 1024 * 1024  # one decompressed PDF stream
MAX_PDF_STREAM_TOKENS = 300_000  # tokens parsed from one content stream (pypdf parses ~150k/s)
MAX_PDF_SHOWN_PER_PAGE = 2 * MAX_CHARS_PER_PAGE  # string operand length of Tj/TJ/'/" per page
CACHE_ENTRIES = 32
CACHE_CHARS = 4_000_000  # total text held by the extraction cache

_MB = 1024 * 1024

def upload_limit_text() -> str:
    """The size limit as the UI states it."""
    return f"添付は 1 ファイル {MAX_UPLOAD_BYTES // _MB} MB まで（PDF / DOCX / TXT）"


def too_large_message(size: int) -> str:
    return f"ファイルが大きすぎます（{size / _MB:.1f} MB、上限 {MAX_UPLOAD_BYTES // _MB} MB）。"



class Budget:
    """Characters and wall-clock time left for one document."""

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.deadline = clock() + MAX_EXTRACT_SECONDS
        self.chars = 0

    def out_of_time(self) -> bool:
        return self.clock() > self.deadline

    def take(self, text: str) -> tuple[str, bool]:
        """``text`` cut to what the document budget still allows, and whether it was cut."""
        room = MAX_CHARS_PER_DOCUMENT - self.chars
        cut = len(text) > room
        text = text[:max(room, 0)]
        self.chars += len(text)
        return text, cut

    @property
    def full(self) -> bool:
        return self.chars >= MAX_CHARS_PER_DOCUMENT
