"""Kaiwa Console core: the structured-turn engine and every flow, usable without Streamlit.

The layers, from the ground up; each imports only from those below it (``[tool.importlinter]`` in
pyproject.toml, checked by ``tests/test_architecture.py``):

1. text utilities, schemas and data: ``paths``, ``ids``, ``text`` (normalisation, masking, markup, quoting,
   input gates, Japanese tokens), ``documents`` (upload extraction), ``schemas``, ``schema_versions``,
   ``parsing``, ``validation``, ``results``, ``prompts``, ``identity``, ``vehicles``;
2. LLM clients and settings: ``llm`` (client protocol, OpenAI-compatible and offline clients, strategies,
   settings, registry) and ``debuglog`` (one record per model call);
3. the engine: ``engine`` (``structured_call``);
4. store and retrieval: ``store``, ``rag``;
5. the flows, independent of one another: ``knowledge``, ``diagnosis``, ``faq``;
6. workbench, analytics and evaluation: ``workbench``, ``analytics``, ``eval``, ``shipped_vectors``.

Above ``core`` sit ``ui`` (shared Streamlit widgets), ``api`` (the HTTP API) and ``pages``.

The engine's entry points are offered here too, ``from core import structured_call, ScriptedClient``
(docs/python-api.md): parse, validate, call and the scripted client. They live in the modules named in
``PUBLIC``, which is the truth; they are imported on first use (PEP 562), so ``import core.text.pii`` does not
load the engine and the OpenAI SDK. ``core`` is the layers' container, not a layer: the contracts allow it.
"""
from __future__ import annotations

import importlib
from typing import Any

# name → the module it lives in
PUBLIC = {
    "parse_structured_output": "core.parsing",  # JSON out of a model's text: direct, code block, braces
    "validate_json": "core.validation",  # one JSON text against one schema → StructuredResult
    "parse_and_validate_turn": "core.validation",  # a knowledge turn: turn schema, then entry schema → TurnResult
    "StructuredResult": "core.results",
    "TurnResult": "core.results",
    "LLMRequest": "core.llm.base",
    "LLMResponse": "core.llm.base",
    "ProviderError": "core.llm.base",
    "ScriptedClient": "core.llm.scripted",  # a client that answers from a list: tests and examples
    "structured_call": "core.engine",  # strategy chain → parse → validate → repair; never raises
    "text_call": "core.engine",  # one plain-text answer through the same retries and deadline
    "RetryPolicy": "core.engine",
}
__all__ = [
    "LLMRequest", "LLMResponse", "ProviderError", "RetryPolicy", "ScriptedClient", "StructuredResult",
    "TurnResult", "parse_and_validate_turn", "parse_structured_output", "structured_call", "text_call",
    "validate_json",
]  # the names of PUBLIC (tests/core/test_public_surface.py)


def __getattr__(name: str) -> Any:
    if name not in PUBLIC:
        raise AttributeError(f"module 'core' has no attribute {name!r}")
    value = getattr(importlib.import_module(PUBLIC[name]), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *PUBLIC})
