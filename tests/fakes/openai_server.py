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

    def _answer(self, handler: BaseHTTPRequestHandler, fault: Fault, body: dict[str, Any]) -> None:
        kind, opt = fault.kind, fault.options
        ok_json = lambda **kw: json.dumps(self._completion(body, self._text(body), **kw),  # noqa: E731
                                          ensure_ascii=False).encode()
        if kind == "ok":
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

