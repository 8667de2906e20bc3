"""A fake OpenAI-compatible server on 127.0.0.1 with switchable faults, for wire and load tests.

``FakeOpenAI`` runs a threaded stdlib ``http.server`` on a free port and answers
``POST /v1/chat/completions``. Each request takes the next queued :class:`Fault` (``queue``),
else the standing one (``set``), else a normal completion whose text comes from ``reply`` (a string,
a JSON-able object or ``fn(request_body) -> str | object``); a request carrying tools gets the text
back as tool-call arguments. Every request body is kept in ``requests``; ``count`` is thread-safe.

Faults (``Fault(kind, **options)`` or just the kind as a string)::

    ok              normal completion
    trickle         valid completion sent ``chunk`` bytes every ``interval`` seconds
    stall           headers, then nothing for ``seconds``
    rate_limit      429 with Retry-After ``retry_after`` (seconds; None for no header)
    unavailable     503 with Retry-After
    not_found       404 {"error": {"message": "The model `<model>` does not exist", ...}}
    unauthorized    401 whose message echoes the key (as OpenAI's does);  forbidden  403
    reject_format   400 when the request has response_format (other requests answer normally)
    refusal_null    content null + refusal;  refusal_empty  content "" + refusal
    length          finish_reason "length" with a cut-off JSON text
    empty_choices   200 with "choices": []
    html            200 text/html error page
    not_chat        200 JSON that is not a chat completion
    huge            content of ``size`` bytes
    server_error    500
    echo_key        the completion text includes the request's bearer key
    stream_stall    (a stream request) the first ``chunks`` chunks, then nothing for ``seconds``
    reject_stream   400 "streaming is not supported" to stream requests (others answer normally)
    overflow        400 context overflow worded as ``style`` llama.cpp / vllm / openai says it
                    (``n_ctx``, ``n_prompt``); with ``when_over`` only when the request's text is longer
    tool_text       a request with tools is answered in plain content, no tool call (a tool-less server)
    length_valid    the whole (valid) text, but finish_reason "length"
    ignore_limit    usage.completion_tokens over the request's limit (a server that ignores its name)
    reject_param    400 "Unsupported parameter: '<param>'" when the request carries ``param``

A request with ``"stream": true`` gets server-sent events (one chunk per ``stream_chunk`` characters,
``stream_interval`` seconds apart, a usage chunk when ``stream_options.include_usage``) unless
``streaming`` is False (then one JSON body, as a server without streaming). ``strict_roles`` answers
400 "Conversation roles must alternate" (Gemma's template) to a stack that does not alternate.
``GET /v1/models`` lists ``served`` (ids; default the model) with ``owned_by`` and ``n_ctx``;
``GET /props`` gives ``n_ctx`` as llama.cpp does.

Use the ``fake_openai`` pytest fixture (``tests/fakes/plugin.py``, imported by ``tests/conftest.py``) or
``with FakeOpenAI() as server:``.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_TURN = {"control": {"schema_version": "1.0", "mode": "interview"},
                "state": {"phase": "collect_case", "missing_info": []},
                "assistant_message": "どの契約書についてのご相談ですか？", "knowledge_json": None}

Reply = Any  # str | JSON-able object | Callable[[dict], str | object]


@dataclass
class Fault:
    kind: str = "ok"
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, value: "Fault | str", **options: Any) -> "Fault":
        return value if isinstance(value, Fault) else cls(value, dict(options))


def completion(content: str | None, *, model: str, tool_args: str | None = None, tool_name: str = "",
               finish_reason: str = "stop", refusal: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if tool_args is not None:
        message["tool_calls"] = [{"id": "call_1", "type": "function",
                                  "function": {"name": tool_name or "tool", "arguments": tool_args}}]
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # load tests open dozens of connections at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up (deadlines, caps) are expected here


class FakeOpenAI:
    def __init__(self, *, model: str = "fake-model", reply: Reply = None):
        self.model = model
        self.reply: Reply = DEFAULT_TURN if reply is None else reply
        self.streaming = True
        self.stream_chunk = 8
        self.stream_interval = 0.0
        self.strict_roles = False
        self.served: list[str] | None = None
        self.owned_by = "fake"
        self.n_ctx: int | None = None
        self.gets: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._standing = Fault()
        self._queue: list[Fault] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- control
    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def set(self, kind: "Fault | str", **options: Any) -> "FakeOpenAI":
        """The fault every request gets once the queue is empty."""
        self._standing = Fault.of(kind, **options)
        return self

    def queue(self, *faults: "Fault | str") -> "FakeOpenAI":
        """Faults for the next requests, in order (then the standing one)."""
        with self._lock:
            self._queue.extend(Fault.of(f) for f in faults)
        return self

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.headers.clear()
            self._queue.clear()
        self._standing = Fault()

    def client(self, **kwargs: Any):
        """An ``OpenAICompatibleClient`` (the real SDK path) pointed at this server."""
        from core.llm.openai_compat import OpenAICompatibleClient

        strategies = kwargs.pop("strategies", None)
        extra = {k: kwargs.pop(k) for k in ("turn_deadline",) if k in kwargs}
        client = OpenAICompatibleClient(model=kwargs.pop("model", self.model), base_url=self.base_url,
                                        api_key=kwargs.pop("api_key", "sk-fake-server-key-0123456789"), **kwargs)
        if strategies is not None:
            client.strategies = tuple(strategies)
        for key, value in extra.items():
            setattr(client, key, value)
        return client

    # ---- lifecycle
    def start(self) -> "FakeOpenAI":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                fake.gets.append(self.path)
                if self.path.rstrip("/").endswith("/models"):
                    entry = {"object": "model", "owned_by": fake.owned_by}
                    if fake.n_ctx:
                        entry["meta"] = {"n_ctx": fake.n_ctx}
                    data = [{"id": name, **entry} for name in (fake.served or [fake.model])]
                    fake._send(self, 200, json.dumps({"object": "list", "data": data}).encode())
                elif self.path.rstrip("/").endswith("/props") and fake.n_ctx:
                    payload = {"default_generation_settings": {"n_ctx": fake.n_ctx}, "total_slots": 1}
                    fake._send(self, 200, json.dumps(payload).encode())
                else:
                    fake._error(self, 404, "File Not Found")

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                with fake._lock:
                    fake.requests.append(body)
                    fake.headers.append({k.lower(): v for k, v in self.headers.items()})
                    fault = fake._queue.pop(0) if fake._queue else fake._standing
                try:
                    fake._answer(self, fault, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (deadline): that is the point of some faults

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---- responses
    def _text(self, body: dict[str, Any]) -> str:
        reply = self.reply(body) if callable(self.reply) else self.reply
        return reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)

    def _completion(self, body: dict[str, Any], text: str | None, **kwargs: Any) -> dict[str, Any]:
        tools = body.get("tools") or []
        if tools and text is not None and "refusal" not in kwargs:
            name = (tools[0].get("function") or {}).get("name", "")
            return completion(None, model=self.model, tool_args=text, tool_name=name, **kwargs)
        return completion(text, model=self.model, **kwargs)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: bytes, *,
              content_type: str = "application/json", headers: dict[str, str] | None = None) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(payload)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(payload)
        handler.wfile.flush()

    def _error(self, handler: BaseHTTPRequestHandler, status: int, message: str, *, code: str = "",
               headers: dict[str, str] | None = None) -> None:
        payload = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code or None}}
        self._send(handler, status, json.dumps(payload, ensure_ascii=False).encode(), headers=headers)

    def _sse(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], text: str, *, finish: str = "stop",
              stall_after: int | None = None, stall_seconds: float = 0.0) -> None:
        """``text`` as server-sent events (content deltas, or tool-call argument deltas for a tools request)."""
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.end_headers()
        tools = body.get("tools") or []
        name = (tools[0].get("function") or {}).get("name", "") if tools else ""

        def event(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> None:
            chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                     "model": self.model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                     **extra}
            handler.wfile.write(b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n")
            handler.wfile.flush()

        event({"role": "assistant", "content": None})
        pieces = [text[i:i + self.stream_chunk] for i in range(0, len(text), self.stream_chunk)] or [""]
        for i, piece in enumerate(pieces):
            if stall_after is not None and i == stall_after:
                self._stopping.wait(stall_seconds)
                return
            if self.stream_interval and self._stopping.wait(self.stream_interval):
                return
            if tools:
                call = {"index": 0, "function": {"arguments": piece}}
                if i == 0:
                    call.update({"id": "call_1", "type": "function", "function": {"name": name, "arguments": piece}})
                event({"tool_calls": [call]})
            else:
                event({"content": piece})
        event({}, "tool_calls" if tools and finish == "stop" else finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}  # as a one-body answer's
            chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": self.model, "choices": [],
                     "usage": usage}
            handler.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()

    @staticmethod
    def alternates(messages: list[dict[str, Any]]) -> bool:
        roles = [m.get("role") for m in messages]
        if roles and roles[0] == "system":
            roles = roles[1:]
        return all(role == ("user" if i % 2 == 0 else "assistant") for i, role in enumerate(roles))

    def _answer(self, handler: BaseHTTPRequestHandler, fault: Fault, body: dict[str, Any]) -> None:
        kind, opt = fault.kind, fault.options
        ok_json = lambda **kw: json.dumps(self._completion(body, self._text(body), **kw),  # noqa: E731
                                          ensure_ascii=False).encode()
        streamed = bool(body.get("stream")) and self.streaming
        if self.strict_roles and not self.alternates(body.get("messages") or []):
            self._error(handler, 400, "Unable to generate parser for this template. Automatic parser generation "
                                      "failed: Jinja Exception: Conversation roles must alternate user/assistant/"
                                      "user/assistant/...")
        elif kind == "ok" and streamed:
            self._sse(handler, body, self._text(body))
        elif kind == "ok":
            self._send(handler, 200, ok_json())
        elif kind == "stream_stall":
            self._sse(handler, body, self._text(body), stall_after=int(opt.get("chunks", 2)),
                      stall_seconds=float(opt.get("seconds", 30)))
        elif kind == "reject_stream":
            if body.get("stream"):
                self._error(handler, 400, "Invalid parameter: 'stream': streaming is not supported", code="invalid")
            else:
                self._send(handler, 200, ok_json())
        elif kind == "overflow":
            size = len(json.dumps(body.get("messages"), ensure_ascii=False))
            if opt.get("when_over") is not None and size <= int(opt["when_over"]):
                if streamed:
                    self._sse(handler, body, self._text(body))
                else:
                    self._send(handler, 200, ok_json())
                return
            n_ctx, n_prompt = int(opt.get("n_ctx", 512)), int(opt.get("n_prompt", 1981))
            style = opt.get("style", "llama.cpp")
            if style == "llama.cpp":
                payload = {"error": {"code": 400, "message": f"request ({n_prompt} tokens) exceeds the available "
                                     f"context size ({n_ctx} tokens), try increasing it",
                                     "type": "exceed_context_size_error", "n_prompt_tokens": n_prompt, "n_ctx": n_ctx}}
            elif style == "vllm":
                payload = {"object": "error", "message": f"This model's maximum context length is {n_ctx} tokens. "
                           f"However, you requested {n_prompt + 100} tokens ({n_prompt} in the messages, 100 in the "
                           "completion). Please reduce the length of the messages or completion.",
                           "type": "BadRequestError", "param": None, "code": 400}
            else:
                payload = {"error": {"message": f"This model's maximum context length is {n_ctx} tokens. However, "
                                     f"your messages resulted in {n_prompt} tokens. Please reduce the length of the "
                                     "messages.", "type": "invalid_request_error", "param": "messages",
                                     "code": "context_length_exceeded"}}
            self._send(handler, 400, json.dumps(payload).encode())
        elif kind == "tool_text":
            text = "I will just answer in plain text without calling any tool."
            if streamed and not body.get("tools"):
                self._sse(handler, body, self._text(body))
            elif body.get("tools"):
                self._send(handler, 200, json.dumps(completion(text, model=self.model)).encode())
            else:
                self._send(handler, 200, ok_json())
        elif kind == "length_valid":
            if streamed:
                self._sse(handler, body, self._text(body), finish="length")
            else:
                self._send(handler, 200, ok_json(finish_reason="length"))
        elif kind == "ignore_limit":
            payload = self._completion(body, self._text(body))
            payload["usage"] = {"prompt_tokens": 10, "completion_tokens": 5000, "total_tokens": 5010}
            self._send(handler, 200, json.dumps(payload, ensure_ascii=False).encode())
        elif kind == "reject_param":
            param = opt.get("param", "max_completion_tokens")
            if param in body:
                self._error(handler, 400, f"Unsupported parameter: '{param}' is not supported with this model.",
                            code="unsupported_parameter")
            else:
                self._send(handler, 200, ok_json())
        elif kind == "trickle":
            payload, interval, chunk = ok_json(), float(opt.get("interval", 0.5)), int(opt.get("chunk", 1))
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            for start in range(0, len(payload), chunk):
                if self._stopping.wait(interval):
                    return
                handler.wfile.write(payload[start:start + chunk])
                handler.wfile.flush()
        elif kind == "stall":
            self._stopping.wait(float(opt.get("seconds", 30)))
        elif kind in ("rate_limit", "unavailable"):
            status = 429 if kind == "rate_limit" else 503
            retry_after = opt.get("retry_after", 1)
            headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
            self._error(handler, status, "Rate limit reached" if status == 429 else "Service unavailable",
                        headers=headers)
        elif kind == "not_found":
            self._error(handler, 404, f"The model `{body.get('model', self.model)}` does not exist",
                        code="model_not_found")
        elif kind == "unauthorized":
            key = handler.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            self._error(handler, 401, f"Incorrect API key provided: {key}", code="invalid_api_key")
        elif kind == "forbidden":
            self._error(handler, 403, "You are not allowed to use this deployment", code="forbidden")
        elif kind == "reject_format":
            if body.get("response_format"):
                self._error(handler, 400, "Invalid parameter: 'response_format' of type 'json_schema' is not "
                                          "supported with this model", code="invalid_parameter")
            else:
                self._send(handler, 200, ok_json())
        elif kind in ("refusal_null", "refusal_empty"):
            content = None if kind == "refusal_null" else ""
            payload = completion(content, model=self.model, refusal=opt.get("refusal", "I can't help with that."))
            self._send(handler, 200, json.dumps(payload).encode())
        elif kind == "length":
            text = self._text(body)
            self._send(handler, 200, json.dumps(self._completion(body, text[: max(1, len(text) // 2)],
                                                                 finish_reason="length")).encode())
        elif kind == "empty_choices":
            payload = completion("x", model=self.model)
            payload["choices"] = []
            self._send(handler, 200, json.dumps(payload).encode())
        elif kind == "html":
            page = b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>"
            self._send(handler, 200, page, content_type="text/html")
        elif kind == "not_chat":
            self._send(handler, 200, json.dumps({"object": "list", "data": [{"id": "fake-model"}]}).encode())
        elif kind == "huge":
            size = int(opt.get("size", 1024 * 1024))
            text = '{"assistant_message": "' + "あ" * (size // 3) + '"}'
            self._send(handler, 200, json.dumps(self._completion(body, text), ensure_ascii=False).encode())
        elif kind == "server_error":
            self._error(handler, 500, "The server had an error while processing your request")
        elif kind == "echo_key":
            key = handler.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            text = self._text(body).replace("どの契約書", f"キー {key} の契約書")
            self._send(handler, 200, json.dumps(self._completion(body, text), ensure_ascii=False).encode())
        else:  # pragma: no cover - a typo in a test
            self._error(handler, 500, f"unknown fault {kind}")

