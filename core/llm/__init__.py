"""LLM clients and their settings: the client protocol and typed provider errors (``base``), the
OpenAI-compatible client (``openai_compat``: streaming, timers, output-limit name, server probe), the offline
rule-driven client (``offline``), scripted clients for tests (``scripted``), the three structured-output
strategies (``strategies``), message stacks every chat template accepts and fitting a prompt to the context
(``messages``), output limits per schema (``limits``), streamed fields and the page's sink (``stream``),
settings from the environment (``settings``), the provider registry (``registry``) and a local llama.cpp
server with a small PyPI-shipped model (``llamacpp``)."""
