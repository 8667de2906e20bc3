"""The wire against llama.cpp's real server: Gemma's template and the message stack, context overflow
(typed, learnt from, never resent larger), the first-token timeout that includes a busy server's queue,
and the model check."""
from __future__ import annotations

import threading
import time

import httpx

from core.engine import RetryPolicy, structured_call, text_call
from core.faq.kb import default_kb
from core.faq.nodes import _articles_text
from core.knowledge.turn import call_llm, entry_schema, system_prompt, turn_schema
from core.llm.base import classify_bad_request
from core.llm.openai_compat import OpenAICompatibleClient
from core.llm.registry import ProviderRegistry
from core.llm.settings import load_settings
from core.prompts import load_prompt, render
from core.schemas import load_schema
from tests.real_server.conftest import SMALL_CTX, TEST_OUTPUT_TOKENS, check_records, real_env

SEED_STACK = [{"role": "system", "content": "あなたは契約審査の担当者です。"},
              {"role": "assistant", "content": "どの契約書についてのご相談ですか？"},  # seed 001: few-shot right after system
              {"role": "user", "content": "秘密保持契約です。"}]


def test_gemma_template_refuses_the_seed_stack_and_the_engine_sends_one_it_accepts(llama, monkeypatch):
    raw = httpx.post(f"{llama.base_url}/chat/completions", timeout=60,
                     json={"model": llama.model, "messages": SEED_STACK, "max_tokens": 8})
    assert raw.status_code == 400 and "Conversation roles must alternate" in raw.text
    err = classify_bad_request(400, raw.json(), raw.text, model=llama.model)
    assert err.kind == "template"  # its own cause, never "method unsupported"

    real_env(monkeypatch, llama)
    client = ProviderRegistry(load_settings()).get_active()
    info = client.server_info
    assert info.reachable and info.server == "llama.cpp" and info.served_model == llama.model and not info.notice
    assert client.context_tokens == 2048 and info.tools_in_prompt is False
    log = []
    reply = text_call(client, SEED_STACK, task="probe", log=log)
    assert reply  # the same stack, made to alternate, is accepted
    assert [m["role"] for m in log[0]["messages"]] == ["system", "user", "assistant", "user"]
    check_records(log, model=llama.model)


def test_overflow_on_a_small_context_is_typed_and_never_resent(llama_small, monkeypatch):
    real_env(monkeypatch, llama_small)
    client = ProviderRegistry(load_settings()).get_active()
    log = []
    started = time.monotonic()
    result = call_llm("秘密保持契約の件です", [], system_prompt(), [], client, turn_schema(), entry_schema(), log=log)
    assert time.monotonic() - started < 60  # refused before any generation
    assert not result.ok and result.provider_error == "context_overflow"
    assert "コンテキスト長" in result.errors[0] and "構造化出力の方式" not in result.error_text
    sent = [r for r in log if not r["call"].get("not_sent")]
    # counted with the server's own tokenizer (/tokenize, issue #26): a prompt that cannot fit is never sent
    assert not sent and client.token_ratio_exact
    assert log[-1]["call"]["prompt_tokens_counted"] > SMALL_CTX
    assert {r["strategy"] for r in log} == {"structured_output"}  # no other strategy with an equal or larger prompt
    assert log[-1]["outcome"] == "provider_error:context_overflow" and "これ以上縮められません" in log[-1]["errors"][-1]


def test_a_context_set_too_large_is_learnt_from_the_overflow_and_the_prompt_refitted(llama_small, monkeypatch):
    real_env(monkeypatch, llama_small, KAIWA_CONTEXT_TOKENS="8192")  # configured wrong: the server has 768
    client = ProviderRegistry(load_settings()).get_active()
    assert client.context_tokens == 8192
    hits = [h.as_dict() for h in default_kb().search("オイル交換の目安は？", n_results=3)]
    messages = [{"role": "system", "content": load_prompt("faq_answer_system")},
                {"role": "user", "content": render("faq_answer_user", question="オイル交換の目安は？", query="オイル交換 目安",
                                                   articles=_articles_text(hits))}]
    log = []
    result = structured_call(client, messages, schema=load_schema("faq_answer"), name="faq_answer", log=log,
                             strategies=("structured_output",), max_repairs=0)
    overflow = [r for r in log if r["outcome"] == "provider_error:context_overflow"]
    assert len(overflow) == 1 and overflow[0]["call"]["server_n_ctx"] == SMALL_CTX
    after = log[log.index(overflow[0]) + 1:]
    assert after and after[0]["call"]["size"] < overflow[0]["call"]["size"]  # strictly smaller, articles trimmed
    assert "参照テキスト" in " ".join(after[0]["call"]["fit"]) and client.context_tokens == SMALL_CTX
    assert result.ok or result.provider_error != "context_overflow"


def test_the_first_token_timeout_includes_the_queue_of_a_busy_server(llama_small):
    stop = threading.Event()
    generating = threading.Event()

    def occupy_the_only_slot() -> None:
        # it writes until the context is full (ignore_eos), whatever it says: the only slot stays busy
        body = {"model": llama_small.model, "messages": [{"role": "user", "content": "Count from 1 to 500."}],
                "max_tokens": 4000, "temperature": 0, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", f"{llama_small.base_url}/chat/completions", json=body, timeout=300) as response:
            for _ in response.iter_lines():
                generating.set()
                if stop.is_set():
                    return  # closing the connection makes llama.cpp stop generating

    blocker = threading.Thread(target=occupy_the_only_slot, daemon=True)
    blocker.start()
    try:
        assert generating.wait(120)
        client = OpenAICompatibleClient(model=llama_small.model, base_url=llama_small.base_url, timeout=300,
                                        first_token_timeout=2, max_output_tokens=TEST_OUTPUT_TOKENS)
        log = []
        started = time.monotonic()
        result = structured_call(client, [{"role": "user", "content": "こんにちは"}], schema=load_schema("faq_plan"),
                                 name="faq_plan", log=log, deadline=60, retry=RetryPolicy(max_retries=0))
        assert time.monotonic() - started < 45
        assert not result.ok and result.provider_error == "timeout" and result.timer == "first_token"
        assert "最初のトークン待ち" in result.status_label
        assert log[0]["call"]["timeout"] == "first_token" and client.last_timeout["timer"] == "first_token"
    finally:
        stop.set()
        blocker.join(60)


def test_a_forced_tool_call_answered_in_text_falls_through_at_once(llama_small):
    # a client that has not asked /props: it learns from the answer (plain text, no tool call) instead
    client = OpenAICompatibleClient(model=llama_small.model, base_url=llama_small.base_url, timeout=300,
                                    max_output_tokens=48, context_tokens=SMALL_CTX)
    client.max_repairs = 0
    log = []
    result = structured_call(client, [{"role": "user", "content": "オイル交換の予約をしたい"}],
                             schema=load_schema("faq_plan"), name="faq_plan", log=log,
                             strategies=("tool_call", "structured_output"))
    assert [r["strategy"] for r in log] == ["tool_call", "structured_output"]
    assert log[0]["outcome"] == "provider_error:unsupported" and log[0]["raw_output"]  # its text, kept for tuners
    assert log[0]["usage"]["completion_tokens"] <= 48 and result.method == "structured_output"
