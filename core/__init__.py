"""Kaiwa Console core: the structured-turn engine and every flow, usable without Streamlit.

The layers, from the ground up; each imports only from those below it (``.importlinter``, checked by
``tests/test_architecture.py``):

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
"""
