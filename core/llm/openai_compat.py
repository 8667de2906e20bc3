"""OpenAI-compatible client over the official ``openai`` SDK (OpenAI, Azure OpenAI v1, Ollama,
vLLM, llama.cpp server: anything speaking ``/v1/chat/completions``).

**Streaming by default.** Every request is sent with ``stream: true`` (and ``stream_options:
{include_usage: true}``) and read as server-sent events, so the answer can be shown as it is written
(``request.on_delta``) and the timeouts mean what they say:

- ``first_token_timeout``: from sending until the first content or tool-call text, which includes a
  busy server's queue (llama.cpp sends no byte, not even headers, while a request waits for a slot);
- ``token_gap_timeout``: the longest silence between two chunks once the answer has begun;
- ``request.budget``: what is left of the turn's deadline, over everything.

A server that answers a stream request with one JSON body is read as one response (within
``timeout``, the whole-request limit); a server that rejects ``stream`` or ``stream_options`` gets
requests without them from then on (``KAIWA_STREAM=0`` turns streaming off). The network is read in a
worker thread; the caller's thread waits on a queue with the timer that applies and calls
``on_delta`` itself (Streamlit widgets must be written from the script thread). A request that times
out is abandoned and its connection closed, so llama.cpp stops generating for it.

**Output limit.** ``request.max_tokens`` goes out as ``max_completion_tokens`` (``max_tokens`` when
``limit_param`` says so): a server that refuses the newer name gets the older one from then on, and
one that silently ignores it (Ollama) is caught by its usage (more tokens than asked) and switched too.

**Server check.** :meth:`probe` reads ``GET /v1/models`` (and llama.cpp's ``/props``): whether the
configured model is served, which id the server reports, and the context size it says
(llama.cpp ``meta.n_ctx`` / ``default_generation_settings.n_ctx``, vLLM ``max_model_len``). Azure OpenAI
lists base models there, not deployments, so a deployment name is never reported as missing.

The SDK's own retries are off (``max_retries=0``): the engine retries transient errors itself so that
every attempt is logged. Bodies are capped; anything that is not a chat completion (HTML from a
proxy, empty ``choices``, another JSON shape) is a typed ``bad_response``, never a Python exception.
"""
from __future__ import annotations

import json
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from openai import OpenAI

from core.llm.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    DROPPED,
    ERROR_BODY_CHARS,
    LLMRequest,
    LLMResponse,
    ProviderError,
    classify_bad_request,
    classify_exception,
)
from core.llm.messages import text_tokens
from core.prompts import load_prompt
from core.schemas import load_schema

logger = logging.getLogger("kaiwa.llm")


def calibration_texts() -> list[str]:
    """Texts like the console's prompts (Japanese instructions, a JSON schema) for ``/tokenize``."""
    from_prompts = [load_prompt(name)[:4000] for name in ("diagnosis_system", "faq_answer_system", "knowledge_system")]
    return [*from_prompts, json.dumps(load_schema("diagnostic_response"), ensure_ascii=False)[:4000]]

# Cap on the HTTP body, well above the output cap: JSON escapes (\uXXXX) inflate text up to 6x.
BODY_CAP_FACTOR = 8
BODY_CAP_SLACK = 64 * 1024
LIMIT_PARAMS = ("max_completion_tokens", "max_tokens")
PROBE_TIMEOUT = 5.0
IGNORED_LIMIT_SLACK = 1.1  # usage over limit × this (+8) means the server ignored the limit's name


@dataclass
class ServerInfo:
    """What :meth:`OpenAICompatibleClient.probe` learned (``reachable`` False: nothing)."""

    reachable: bool = False
    models: list[str] = field(default_factory=list)
    served_model: str = ""  # the id the server reports for our requests
    owned_by: str = ""
    server: str = ""  # llama.cpp / vllm / ollama / "" (unknown)
    context_tokens: int | None = None
    model_listed: bool = True
    tools_in_prompt: bool = True  # False: the chat template cannot show tools (llama.cpp chat_template_caps)
    notice: str = ""  # Japanese: the configured model is not served (shown in the sidebar)
    error: str = ""


class OpenAICompatibleClient:
    name = "openai"

    def __init__(self, *, model: str, api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 60.0, http_client: httpx.Client | None = None,
                 max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES, first_token_timeout: float | None = None,
                 token_gap_timeout: float | None = None, stream: bool = True, limit_param: str = "auto",
                 context_tokens: int | None = None, max_output_tokens: int | None = None):
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        self.max_output_bytes = max_output_bytes
        self.first_token_timeout = float(first_token_timeout or timeout)
        self.token_gap_timeout = float(token_gap_timeout or min(timeout, 30.0))
        self.stream = stream
        self.limit_param = limit_param if limit_param in LIMIT_PARAMS else "max_completion_tokens"
        self._limit_fixed = limit_param in LIMIT_PARAMS  # configured: never switched
        self._stream_options = True
        self.context_tokens = context_tokens  # configured (KAIWA_CONTEXT_TOKENS), else from the server
        self._context_configured = context_tokens is not None
        self.max_output_tokens = max_output_tokens
        self.token_ratio = 1.0  # server tokens per estimated token, learnt from usage (core.engine)
        self.token_ratio_exact = False  # True: measured with the server's tokenizer at the model check
        self.server_info: ServerInfo | None = None
        self.last_timeout: dict[str, Any] | None = None  # which timer fired last (sidebar)
        # Local servers (Ollama, llama.cpp) need no key, but the SDK insists on one.
        self._sdk = OpenAI(api_key=api_key or "not-needed", base_url=base_url or None,
                           timeout=timeout, max_retries=0, http_client=http_client)

    @property
    def max_body_bytes(self) -> int:
        return self.max_output_bytes * BODY_CAP_FACTOR + BODY_CAP_SLACK

    # ---- the server check ------------------------------------------------------------------------
    def probe(self, timeout: float = PROBE_TIMEOUT) -> ServerInfo:
        """``GET /v1/models`` (and llama.cpp's ``/props``); never raises. Sets ``server_info``, and
        ``context_tokens`` when it was not configured."""
        info = ServerInfo()
        try:
            raw = self._sdk.models.with_raw_response.list(timeout=timeout)
            data = raw.http_response.json()
        except Exception as exc:  # noqa: BLE001 - any failure: the check is simply unknown
            info.error = classify_exception(exc, model=self.model).kind
            self.server_info = info
            return info
        entries = [e for e in (data.get("data") if isinstance(data, dict) else None) or [] if isinstance(e, dict)]
        info.reachable = True
        info.models = [str(e.get("id")) for e in entries if e.get("id")]
        first = entries[0] if entries else {}
        info.owned_by = str(first.get("owned_by") or "")
        info.server = {"llamacpp": "llama.cpp", "vllm": "vllm", "library": "ollama", "ollama": "ollama"}.get(
            info.owned_by.lower(), "")
        aliases = {str(a) for e in entries for a in (e.get("aliases") or []) if isinstance(a, str)}
        info.model_listed = self.model in info.models or self.model in aliases
        mine = next((e for e in entries if e.get("id") == self.model), first)
        meta = mine.get("meta") if isinstance(mine.get("meta"), dict) else {}
        for value in (mine.get("max_model_len"), meta.get("n_ctx")):
            if isinstance(value, int) and value > 0:
                info.context_tokens = value
                break
        if info.server == "llama.cpp":
            root = str(self._sdk.base_url).rstrip("/").removesuffix("/v1")
            try:
                props = self._sdk.get(f"{root}/props", cast_to=object, options={"timeout": timeout})
                n_ctx = ((props or {}).get("default_generation_settings") or {}).get("n_ctx")
                if isinstance(n_ctx, int) and n_ctx > 0:
                    info.context_tokens = n_ctx
                caps = (props or {}).get("chat_template_caps")
                if isinstance(caps, dict) and caps.get("supports_tools") is False:
                    info.tools_in_prompt = False
            except Exception:  # noqa: BLE001 - /props is optional
                pass
            self._calibrate_tokens(root, timeout)
        if ".openai.azure.com" in str(self._sdk.base_url).lower():  # Azure lists base models, not deployments
            info.model_listed = True
        info.served_model = self.model if info.model_listed else (info.models[0] if len(info.models) == 1 else "")
        if not info.model_listed:
            offered = "、".join(info.models[:5]) or "（なし）"
            info.notice = (f"設定したモデル「{self.model}」はこのサーバーの提供モデルにありません（提供中: {offered}）。"
                           + ("llama.cpp はモデル名に関係なく読み込み済みのモデルで応答します。" if info.server == "llama.cpp"
                              else "モデル名 (OPENAI_MODEL) を確認してください。"))
        if info.server == "ollama" and not self._limit_fixed:
            self.limit_param = "max_tokens"  # Ollama's OpenAI API ignores max_completion_tokens
        if info.context_tokens and not self._context_configured:
            self.context_tokens = info.context_tokens
        self.server_info = info
        return info

    # ---- embeddings ------------------------------------------------------------------------------
    embedding_model = "text-embedding-3-small"  # OPENAI_EMBEDDING_MODEL (set by the registry)
    EMBED_BATCH = 256

    def embed(self, texts: list[str], *, query: bool = False) -> list[list[float]]:
        """Vectors of ``texts`` from ``/v1/embeddings`` (``embedding_model``, plain floats); typed errors."""
        vectors: list[list[float]] = []
        try:
            for start in range(0, len(texts), self.EMBED_BATCH):
                batch = [t if t.strip() else " " for t in texts[start:start + self.EMBED_BATCH]]
                response = self._sdk.embeddings.create(model=self.embedding_model, input=batch,
                                                       encoding_format="float")
                vectors.extend(list(d.embedding) for d in sorted(response.data, key=lambda d: d.index))
        except Exception as exc:  # noqa: BLE001 - typed like a chat call
            raise classify_exception(exc, model=self.embedding_model) from None
        return vectors

    def _calibrate_tokens(self, root: str, timeout: float) -> None:
        """llama.cpp: the server's own token count of the console's prompt texts (``POST /tokenize``) sets
        ``token_ratio`` before the first request, so a small context is never fitted on an estimate that runs
        low (SmolLM2's tokenizer writes Japanese at ~1.5× the estimate, Gemma's at ~0.6×): the ratio over all the
        samples. ``token_ratio_exact`` and :meth:`count_tokens` let the engine count a prompt near the context's
        end exactly, so a prompt that cannot fit is never sent. Any failure leaves the ratio as it was."""
        real = estimate = 0.0
        for text in calibration_texts():
            counted = self._tokenize(root, text, timeout)
            if counted is None:
                return
            real, estimate = real + counted, estimate + text_tokens(text)
        if estimate > 0:
            self.token_ratio = round(min(5.0, max(0.2, real / estimate)), 4)
            self.token_ratio_exact = True
            self._tokenize_root = root

    def _tokenize(self, root: str, text: str, timeout: float) -> int | None:
        try:
            body = self._sdk.post(f"{root}/tokenize", cast_to=object, body={"content": text}, options={"timeout": timeout})
        except Exception:  # noqa: BLE001 - /tokenize is optional
            return None
        tokens = body.get("tokens") if isinstance(body, dict) else None
        return len(tokens) if isinstance(tokens, list) else None

    def count_tokens(self, text: str) -> int | None:
        """llama.cpp's own count of ``text`` (None: not a llama.cpp server, or it did not answer)."""
        root = getattr(self, "_tokenize_root", None)
        return self._tokenize(root, text, PROBE_TIMEOUT) if root else None

    # ---- requests --------------------------------------------------------------------------------
    def _kwargs(self, request: LLMRequest, *, stream: bool) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": request.messages,
                                  "temperature": request.temperature}
        if request.max_tokens:
            kwargs[self.limit_param] = int(request.max_tokens)
        if request.response_format:
            kwargs["response_format"] = request.response_format
        if request.tools:
            kwargs["tools"] = request.tools
            if request.tool_choice is not None:
                kwargs["tool_choice"] = request.tool_choice
        if stream:
            kwargs["stream"] = True
            if self._stream_options:
                kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    def _adapt(self, err: ProviderError) -> bool:
        """Change what we send after a server refused a parameter; False when nothing is left to try."""
        if err.param in LIMIT_PARAMS and err.param == self.limit_param and not self._limit_fixed:
            self.limit_param = LIMIT_PARAMS[1 - LIMIT_PARAMS.index(err.param)]
            self._limit_fixed = True  # switch once, never back and forth
            logger.warning("server refused %s: sending %s from now on", err.param, self.limit_param)
            return True
        if err.param == "stream_options" and self._stream_options:
            self._stream_options = False
            return True
        if err.param == "stream" and self.stream:
            self.stream = False
            logger.warning("server refused streaming: one response per request from now on")
            return True
        return False

    def complete(self, request: LLMRequest) -> LLMResponse:
        end = time.perf_counter() + max(0.01, float(request.budget if request.budget is not None else request.timeout))
        for _ in range(4):
            budget = end - time.perf_counter()
            if budget <= 0:
                raise ProviderError("timeout", "制限時間を超えました", model=self.model, timer="deadline")
            try:
                response = (self._streamed(request, budget) if self.stream else self._whole(request, budget))
            except ProviderError as err:
                if err.kind == "unsupported_param" and self._adapt(err):
                    continue
                if err.kind == "timeout":
                    self.last_timeout = {"timer": err.timer, "seconds": self._timer_seconds(err.timer, budget),
                                         "at": time.time()}
                raise
            self._check_limit(request, response)
            if response.finish_reason == "content_filter" and not (response.content or response.tool_arguments):
                raise ProviderError("content_filter", "安全フィルターにより応答がブロックされました "
                                    "(finish_reason=content_filter)", 200, model=self.model)
            return response
        raise ProviderError("bad_request", "リクエストのパラメーターが受け付けられませんでした", model=self.model)

    def _timer_seconds(self, timer: str | None, budget: float) -> float:
        return {"first_token": self.first_token_timeout, "token_gap": self.token_gap_timeout,
                "request": self.timeout}.get(timer or "", round(budget, 1))

    def _check_limit(self, request: LLMRequest, response: LLMResponse) -> None:
        used = response.usage.get("completion_tokens")
        response.limit_param = self.limit_param if request.max_tokens else None
        if (request.max_tokens and isinstance(used, (int, float)) and not self._limit_fixed
                and used > request.max_tokens * IGNORED_LIMIT_SLACK + 8 and self.limit_param == LIMIT_PARAMS[0]):
            self.limit_param, self._limit_fixed = LIMIT_PARAMS[1], True
            logger.warning("server ignored max_completion_tokens (%s tokens for a limit of %s): sending max_tokens",
                           used, request.max_tokens)

    # ---- one response ----------------------------------------------------------------------------
    def _whole(self, request: LLMRequest, budget: float) -> LLMResponse:
        limit = max(0.01, min(float(request.timeout or self.timeout), budget))
        timer = "request" if limit < budget else "deadline"
        started = time.perf_counter()
        cancel = threading.Event()
        box: dict[str, Any] = {}
        worker = threading.Thread(target=self._fetch, args=(request, limit, cancel, box),
                                  name="kaiwa-llm-request", daemon=True)
        worker.start()
        worker.join(limit)
        if worker.is_alive():
            cancel.set()
            raise ProviderError("timeout", f"応答が {limit:g} 秒以内に完了しませんでした", model=self.model, timer=timer)
        if "error" in box:
            raise box["error"]
        if "body" not in box:  # pragma: no cover - the worker always leaves one or the other
            raise ProviderError("unknown", "応答がありませんでした", model=self.model)
        response = parse_completion(box["body"], model=self.model)
        response.latency_ms = (time.perf_counter() - started) * 1000
        response.timings["done_ms"] = round(response.latency_ms, 1)
        _deliver(request, response)
        return response

    def _fetch(self, request: LLMRequest, budget: float, cancel: threading.Event, box: dict[str, Any]) -> None:
        """Worker: send the request and read the body in chunks, up to the body cap."""
        try:
            with self._sdk.chat.completions.with_streaming_response.create(
                    **self._kwargs(request, stream=False), timeout=budget) as response:
                box["body"] = self._read_capped(response, cancel)
        except Exception as exc:  # typed for the engine; never leaks SDK internals upward
            box["error"] = classify_exception(exc, model=self.model)

    def _read_capped(self, response: Any, cancel: threading.Event) -> bytes:
        body = bytearray()
        for chunk in response.iter_bytes():
            if cancel.is_set():
                return bytes(body)
            body += chunk
            if len(body) > self.max_body_bytes:
                raise ProviderError("truncated", f"応答が大きすぎます（{self.max_body_bytes} バイト超）",
                                    response.status_code, body=bytes(body[:ERROR_BODY_CHARS]).decode(
                                        "utf-8", "replace"), model=self.model)
        return bytes(body)

    # ---- streamed --------------------------------------------------------------------------------
    def _streamed(self, request: LLMRequest, budget: float) -> LLMResponse:
        started = time.perf_counter()
        end = started + budget
        events: queue.Queue = queue.Queue()
        cancel = threading.Event()
        holder: dict[str, Any] = {}
        worker = threading.Thread(target=self._stream_worker, args=(request, budget, cancel, events, holder),
                                  name="kaiwa-llm-stream", daemon=True)
        worker.start()
        acc = _Accumulator(self.model, started)
        whole = False  # the server answered with one JSON body: the whole-request timer applies
        while True:
            now = time.perf_counter()
            remaining = end - now
            if whole:
                limit, timer = started + float(request.timeout or self.timeout) - now, "request"
            elif acc.first_token_at is None:
                limit, timer = started + self.first_token_timeout - now, "first_token"
            else:
                limit, timer = self.token_gap_timeout, "token_gap"
            if remaining <= limit:
                limit, timer = remaining, "deadline"
            try:
                event = events.get(timeout=max(0.0, limit))
            except queue.Empty:
                cancel.set()
                _close(holder)
                seconds = {"first_token": self.first_token_timeout, "token_gap": self.token_gap_timeout,
                           "request": float(request.timeout or self.timeout)}.get(timer, budget)
                what = {"first_token": "最初のトークンが", "token_gap": "次のトークンが", "request": "応答が",
                        "deadline": "応答が"}[timer]
                raise ProviderError("timeout", f"{what} {seconds:g} 秒以内に届きませんでした", model=self.model,
                                    timer=timer)
            kind = event[0]
            if kind == "headers":
                whole = not event[1]
            elif kind == "chunk":
                grew = acc.add(event[1], event[2])
                if grew and request.on_delta is not None:
                    request.on_delta(acc.raw, event[2])
            elif kind == "whole":
                response = parse_completion(event[1], model=self.model)
                response.latency_ms = (time.perf_counter() - started) * 1000
                response.timings.update(done_ms=round(response.latency_ms, 1), sent_at=started,
                                        first_token_at=time.perf_counter())
                _deliver(request, response)
                return response
            elif kind == "error":
                raise event[1]
            elif kind == "end":
                response = acc.response()
                response.latency_ms = (time.perf_counter() - started) * 1000
                response.timings["done_ms"] = round(response.latency_ms, 1)
                return response

    def _stream_worker(self, request: LLMRequest, budget: float, cancel: threading.Event, events: queue.Queue,
                       holder: dict[str, Any]) -> None:
        """Worker: send the stream request; queue ("headers", is_sse), then ("chunk", data, t) per event and
        ("end",), or ("whole", body) for a one-body answer, or ("error", ProviderError)."""
        try:
            with self._sdk.chat.completions.with_streaming_response.create(
                    **self._kwargs(request, stream=True), timeout=budget + 5) as response:
                holder["response"] = response
                sse = "text/event-stream" in response.headers.get("content-type", "").lower()
                events.put(("headers", sse))
                if not sse:
                    events.put(("whole", self._read_capped(response, cancel)))
                    return
                size = 0
                finished = False  # [DONE] or a finish_reason: a stream that just stops was cut off
                for line in response.iter_lines():
                    if cancel.is_set():
                        return
                    size += len(line) + 1
                    if size > self.max_body_bytes:
                        raise ProviderError("truncated", f"応答が大きすぎます（{self.max_body_bytes} バイト超）",
                                            200, model=self.model)
                    if not line or line.startswith(":"):
                        continue
                    field_name, _, value = line.partition(":")
                    value = value.strip()
                    if field_name == "error":  # llama.cpp reports a failure inside a stream as "error: {...}"
                        raise _stream_error(value, self.model)
                    if field_name != "data":
                        continue
                    if value == "[DONE]":
                        finished = True
                        break
                    try:
                        data = json.loads(value)
                    except ValueError:
                        raise ProviderError("bad_response", "ストリームの行が JSON ではありません", 200,
                                            body=value[:ERROR_BODY_CHARS], model=self.model) from None
                    if isinstance(data, dict) and data.get("error"):
                        raise _stream_error(value, self.model)
                    finished = finished or _has_finish_reason(data)
                    events.put(("chunk", data, time.perf_counter()))
                if not finished and not cancel.is_set():  # the server went away mid-answer (killed, restarted)
                    raise ProviderError("connection", "サーバーとの接続が応答の途中で切れました（ストリームが終了の印なしに途切れました）",
                                        model=self.model, timer=DROPPED)
            events.put(("end",))
        except Exception as exc:  # typed for the caller; never leaks SDK internals upward
            if not cancel.is_set():
                events.put(("error", classify_exception(exc, model=self.model)))


def _has_finish_reason(data: Any) -> bool:
    choices = data.get("choices") if isinstance(data, dict) else None
    return isinstance(choices, list) and any(isinstance(c, dict) and c.get("finish_reason") for c in choices)


def _close(holder: dict[str, Any]) -> None:
    """Close an abandoned stream's connection so the server stops generating for it."""
    response = holder.get("response")
    if response is not None:
        try:
            response.close()
        except Exception:  # noqa: BLE001 - closing from another thread may race with the reader
            pass


def _stream_error(value: str, model: str) -> ProviderError:
    try:
        body = json.loads(value)
    except ValueError:
        body = None
    status = None
    node = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else body
    if isinstance(node, dict) and isinstance(node.get("code"), int):
        status = node["code"]
    if status is not None and 400 <= status < 500 and status not in (401, 403, 404, 408, 429):
        return classify_bad_request(status, body, value[:ERROR_BODY_CHARS], model=model)
    kind = "server_error" if status is None or status >= 500 else "bad_request"
    return ProviderError(kind, f"ストリームの途中でエラーが返りました: {value[:200]}", status,
                         body=value[:ERROR_BODY_CHARS], model=model)


def _deliver(request: LLMRequest, response: LLMResponse) -> None:
    """A one-body answer to a caller that wanted deltas: one delta, the whole text."""
    raw = response.tool_arguments if response.tool_arguments is not None else response.content
    if request.on_delta is not None and raw:
        request.on_delta(raw)


class _Accumulator:
    """The answer rebuilt from stream chunks: content, the first tool call's arguments, refusal,
    finish reason, reported model, usage and the server's timings."""

    def __init__(self, model: str, started: float):
        self.model = model
        self.started = started  # perf_counter when the request was sent
        self.content: list[str] = []
        self.arguments: list[str] = []
        self.refusal: list[str] = []
        self.tool_index: Any = None
        self.finish: str | None = None
        self.usage: dict[str, Any] = {}
        self.served = ""
        self.server_timings: dict[str, Any] = {}
        self.first_token_at: float | None = None
        self.chunks = 0

    @property
    def raw(self) -> str:
        return "".join(self.arguments) if self.tool_index is not None else "".join(self.content)

    def add(self, data: Any, at: float) -> bool:
        """Take one chunk; True when the content or tool-call text grew."""
        if not isinstance(data, dict):
            return False
        self.chunks += 1
        if isinstance(data.get("model"), str) and data["model"]:
            self.served = data["model"]
        if isinstance(data.get("usage"), dict):
            self.usage = {k: v for k, v in data["usage"].items() if isinstance(v, (int, float))}
        if isinstance(data.get("timings"), dict):
            self.server_timings = data["timings"]
        grew = False
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            if isinstance(choice.get("finish_reason"), str):
                self.finish = choice["finish_reason"]
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
            text = delta.get("content")
            if isinstance(text, str) and text:
                self.content.append(text)
                grew = True
            if isinstance(delta.get("refusal"), str) and delta["refusal"]:
                self.refusal.append(delta["refusal"])
                grew = True
            for call in delta.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                index = call.get("index", 0)
                if self.tool_index is None:
                    self.tool_index = index
                if index != self.tool_index:
                    continue
                arguments = (call.get("function") or {}).get("arguments")
                if isinstance(arguments, str) and arguments:
                    self.arguments.append(arguments)
                    grew = True
                elif isinstance(arguments, (dict, list)):
                    self.arguments.append(json.dumps(arguments, ensure_ascii=False))
                    grew = True
        if grew and self.first_token_at is None:
            self.first_token_at = at
        return grew

    def response(self) -> LLMResponse:
        if not self.chunks:
            raise ProviderError("bad_response", "ストリームにデータがありませんでした", 200, model=self.model)
        timings: dict[str, float] = {"sent_at": self.started}
        if self.first_token_at is not None:  # perf_counter stamps (for the page's figures) and ms from sending
            timings["first_token_at"] = self.first_token_at
            timings["first_token_ms"] = round((self.first_token_at - self.started) * 1000, 1)
        for ours, theirs in (("server_prompt_ms", "prompt_ms"), ("server_predicted_ms", "predicted_ms")):
            if isinstance(self.server_timings.get(theirs), (int, float)):
                timings[ours] = round(float(self.server_timings[theirs]), 1)
        return LLMResponse(
            content="".join(self.content) if self.content else None,
            tool_arguments="".join(self.arguments) if self.tool_index is not None else None,
            refusal="".join(self.refusal) or None, usage=self.usage, model=self.served or self.model,
            finish_reason=self.finish, streamed=True, timings=timings)


def _bad(message: str, body: bytes | str = b"", model: str = "") -> ProviderError:
    text = body if isinstance(body, str) else body[:ERROR_BODY_CHARS].decode("utf-8", "replace")
    return ProviderError("bad_response", message, 200, body=text[:ERROR_BODY_CHARS] or None, model=model)


def _text_parts(content: Any) -> str | None:
    """``content`` as a string: some servers send a list of ``{"type": "text", "text": …}`` parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if len(parts) == len(content):
            return "".join(parts)
    raise TypeError("content is neither text nor text parts")


def parse_completion(body: bytes, *, model: str = "") -> LLMResponse:
    """An :class:`LLMResponse` from a chat-completion body, or a ``bad_response`` ProviderError."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        head = body[:80].decode("utf-8", "replace").strip().lower()
        what = "HTML ページ" if head.startswith(("<!doctype", "<html", "<")) else "JSON ではない本文"
        raise _bad(f"200 応答が chat completion ではありません（{what}）", body, model) from None
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise _bad("200 応答が chat completion の形ではありません（choices がありません）", body, model)
    if not data["choices"]:
        raise _bad("200 応答の choices が空でした", body, model)
    choice = data["choices"][0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise _bad("200 応答の choices[0] に message がありません", body, model)
    try:
        content = _text_parts(message.get("content"))
        tool_arguments = None
        calls = message.get("tool_calls")
        if calls:
            function = calls[0]["function"]
            arguments = function.get("arguments")
            tool_arguments = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        refusal = message.get("refusal")
        if refusal is not None and not isinstance(refusal, str):
            refusal = json.dumps(refusal, ensure_ascii=False)
    except (TypeError, KeyError, IndexError, AttributeError):
        raise _bad("200 応答の message の形が不正です", body, model) from None
    usage = data.get("usage")
    usage = {k: v for k, v in usage.items() if isinstance(v, (int, float))} if isinstance(usage, dict) else {}
    finish = choice.get("finish_reason")
    served = data.get("model")
    timings: dict[str, float] = {}
    server_timings = data.get("timings") if isinstance(data.get("timings"), dict) else {}
    for ours, theirs in (("server_prompt_ms", "prompt_ms"), ("server_predicted_ms", "predicted_ms")):
        if isinstance(server_timings.get(theirs), (int, float)):
            timings[ours] = round(float(server_timings[theirs]), 1)
    return LLMResponse(content=content, tool_arguments=tool_arguments, refusal=refusal or None, usage=usage,
                       model=served if isinstance(served, str) and served else model,
                       finish_reason=finish if isinstance(finish, str) else None, timings=timings)
