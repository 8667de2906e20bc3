"""Text extraction from uploaded files, in memory only (seed 001: nothing is written to disk).

PDF through pypdf (``pdf``), DOCX through python-docx (``word``), text files as UTF-8, UTF-16 or
cp932 (``plain``). Every failure is a Japanese message on the result, never an exception. Uploads
are hostile, so every extraction runs within the budgets of ``budget``; ``cache`` extracts each
upload once.
"""
from core.documents.budget import (
                                   MAX_CHARS,
                                   MAX_CHARS_PER_DOCUMENT,
                                   MAX_CHARS_PER_PAGE,
                                   MAX_DOCX_PARAGRAPHS,
                                   MAX_PAGES,
                                   MAX_UPLOAD_BYTES,
                                   too_large_message,
                                   upload_limit_text,
)
from core.documents.cache import cache_key, clear_cache, extract_cached
from core.documents.document import ExtractedDocument, content_sha256, paragraphs_from_lines
from core.documents.extract import extract_document
from core.documents.plain import decode_text, looks_binary

__all__ = ["MAX_CHARS", "MAX_CHARS_PER_DOCUMENT", "MAX_CHARS_PER_PAGE", "MAX_DOCX_PARAGRAPHS", "MAX_PAGES",
           "MAX_UPLOAD_BYTES", "ExtractedDocument", "cache_key", "clear_cache", "content_sha256", "decode_text",
           "extract_cached", "extract_document", "looks_binary", "paragraphs_from_lines", "too_large_message",
           "upload_limit_text"]
