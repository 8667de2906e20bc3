"""LLM clients and their settings: the client protocol and typed provider errors (``base``), the
OpenAI-compatible client (``openai_compat``), the offline rule-driven client (``offline``), scripted
clients for tests (``scripted``), the three structured-output strategies (``strategies``), settings from
the environment (``settings``) and the provider registry (``registry``)."""
