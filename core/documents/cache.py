"""The extraction cache: each upload is extracted once per (content, password), in memory.

Results are kept in a small in-process LRU keyed by the content's SHA-256 (and a hash of the
password), never the file bytes, never on disk; bounded by entries and by total characters.
"""
from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections import OrderedDict

from core.documents import budget as limits
from core.documents.document import ExtractedDocument, content_sha256
from core.documents.extract import extract_document

_cache: OrderedDict[tuple[str, str], ExtractedDocument] = OrderedDict()
_cache_chars = 0
_cache_lock = threading.Lock()


def _weight(doc: ExtractedDocument) -> int:
    return len(doc.text) + sum(len(t) for t in doc.page_texts)


def _copy(doc: ExtractedDocument, name: str) -> ExtractedDocument:
    return dataclasses.replace(doc, name=name, paragraphs=list(doc.paragraphs), page_texts=list(doc.page_texts),
                               warnings=list(doc.warnings))


def cache_key(data: bytes, password: str | None = None) -> tuple[str, str]:
    """(content SHA-256, password SHA-256): the password itself is not kept."""
    secret = hashlib.sha256(password.encode("utf-8", "surrogatepass")).hexdigest() if password else ""
    return content_sha256(data), secret


def extract_cached(name: str, data: bytes, password: str | None = None) -> ExtractedDocument:
    """:func:`extract_document`, once per (content, password): later calls (reruns of a page, the
    same file under another name) get a copy of the first result. Oversized files are not cached."""
    global _cache_chars
    if len(data) > limits.MAX_UPLOAD_BYTES:
        return extract_document(name, data, password)
    key = cache_key(data, password)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return _copy(hit, name)
    doc = extract_document(name, data, password)
    stored = _copy(doc, name)
    with _cache_lock:
        if key not in _cache:
            _cache[key] = stored
            _cache_chars += _weight(stored)
        while _cache and (len(_cache) > limits.CACHE_ENTRIES or _cache_chars > limits.CACHE_CHARS):
            _, evicted = _cache.popitem(last=False)
            _cache_chars -= _weight(evicted)
    return doc


def clear_cache() -> None:
    global _cache_chars
    with _cache_lock:
        _cache.clear()
        _cache_chars = 0
