"""Issue #26 on llama.cpp's real server (SmolLM2-135M-Instruct, the small model whose tokenizer writes Japanese
at ~1.5× the console's estimate): at a 512-token context the model check measures the token ratio with the
server's own tokenizer and no request is sent that cannot fit; and a server killed mid-answer is a typed
connection error with its Japanese message, never "unknown"."""
from __future__ import annotations

import os
import signal
import threading

from core.engine import structured_call
from core.faq.config import FAQConfig
from core.faq.flow import ask, start_session
from core.faq.kb import default_kb
from core.llm.base import DROPPED
from core.llm.llamacpp import SMOLLM, LlamaServer, ServerConfig
from core.llm.registry import ProviderRegistry
from core.llm.settings import load_settings
from core.llm.stream import stream_to
from core.results import provider_error_ja
from tests.real_server.conftest import THREADS


def _server(tmp_path, n_ctx):
    # SMOLLM resolves to the GGUF the ``smollm2_gguf`` fixture fetched (the wheel alone, issue #21)
    return LlamaServer(ServerConfig(model=SMOLLM, n_ctx=n_ctx, threads=THREADS, log_file=str(tmp_path / "server.log")))


def _client(server, **extra):
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": server.model, "KAIWA_PROVIDER": "openai",
           "KAIWA_TIMEOUT": "300", "KAIWA_TOKEN_GAP_TIMEOUT": "120", "KAIWA_TURN_DEADLINE": "600",
           "KAIWA_MAX_REPAIRS": "0", "KAIWA_MAX_OUTPUT_TOKENS": "96", **extra}
    return ProviderRegistry(load_settings(env)).get_active()


def test_at_a_512_token_context_no_request_is_sent_that_cannot_fit(tmp_path, smollm2_gguf):
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
              "additionalProperties": False}
    line = "あなたは契約審査の担当者を助けるアシスタントです。"
    with _server(tmp_path, 512) as server:
        client = _client(server)
        assert client.context_tokens == 512 and client.token_ratio_exact and client.token_ratio > 1.2
        log = []
        result = ask(start_session("small"), "オイル交換の目安はどのくらいですか？", client=client, kb=default_kb(), log=log,
                     config=FAQConfig(plan_with_model=False))
        assert result.message  # the FAQ's system prompts alone exceed 512 SmolLM2 tokens: a typed failure, not sent
        assert log and all(r["call"].get("not_sent") and r["outcome"] == "provider_error:context_overflow" for r in log)
        for lines, fits in ((10, False), (4, True)):
            # 10 lines: the raw estimate (ratio 1) fits 512 with the output limit, SmolLM2's real count does not
            call_log = []
            structured_call(client, [{"role": "system", "content": line * lines}, {"role": "user", "content": "はい"}],
                            schema=schema, name="t", max_repairs=0, log=call_log, strategies=("structured_output",))
            record = call_log[0]
            assert bool(record["call"].get("not_sent")) is not fits, record["call"]
            if fits:
                assert record["outcome"] != "provider_error:context_overflow"
                assert record["usage"]["prompt_tokens"] + record["call"]["max_tokens"] <= 512
            else:
                assert record["outcome"] == "provider_error:context_overflow"
                assert record["call"]["prompt_tokens_counted"] > record["call"]["prompt_tokens_est"] / client.token_ratio


class KillOnFirstToken:
    """A page sink that kills the server (SIGKILL, its own process group) when the first text arrives."""

    def __init__(self, server):
        self.server, self.killed = server, threading.Event()

    def update(self, key, text):
        if not self.killed.is_set():
            self.killed.set()
            os.killpg(self.server.process.pid, signal.SIGKILL)

    def restart(self, key, reason):
        pass

    def finish(self, key, ok, timings):
        pass


def test_a_server_killed_mid_answer_is_a_connection_error(smollm2_gguf, tmp_path):
    schema = {"type": "object", "properties": {"answer": {"type": "string", "minLength": 1}}, "required": ["answer"],
              "additionalProperties": False}  # at least one character of text: the sink always sees some
    with _server(tmp_path, 1024) as server:
        client = _client(server, KAIWA_MAX_OUTPUT_TOKENS="400")
        client.strategies = ("structured_output",)
        sink = KillOnFirstToken(server)
        log = []
        with stream_to(sink):
            result = structured_call(client, [{"role": "user", "content": "Write a long story about a cat."}],
                                     schema=schema, name="story", max_repairs=0, log=log, stream_field="answer",
                                     max_tokens=400)
    assert sink.killed.is_set() and not result.ok
    assert result.provider_error == "connection"  # not "unknown"
    first = log[0]
    assert first["outcome"] == "provider_error:connection" and first["call"].get("connection") == DROPPED
    assert "途中で切れました" in provider_error_ja("connection", timer=DROPPED)
    assert all(r["outcome"] == "provider_error:connection" for r in log)  # the retry found no server: typed too
