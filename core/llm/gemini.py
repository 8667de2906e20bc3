"""Google Gemini through the official ``google-genai`` SDK (the Gemini API with an API key, or Vertex AI).

**Structured output**, by the engine's strategy (:mod:`core.llm.strategies`):

1. ``structured_output``: ``response_mime_type="application/json"`` with ``response_json_schema`` (the
   schema as JSON Schema);
2. ``tool_call``: one function declaration whose ``parameters_json_schema`` is the schema, forced with
   ``function_calling_config`` mode ``ANY`` and ``allowed_function_names``; the call's ``args`` are the answer;
3. ``prompt_extract``: the schema in the prompt, in JSON mode (``response_mime_type="application/json"``).

**Thinking**: Gemini 2.5 and later count thought tokens against ``max_output_tokens``, so the request's limit
(fitted to the schema by the engine) gets ``thinking_tokens`` on top (``KAIWA_GEMINI_THINKING_TOKENS``,
default 1024); 0 sends ``thinking_budget: 0`` (thinking off, on the models that allow it).

**Streaming**: ``generate_content_stream`` (server-sent events; a function call arrives whole in one
chunk), unless ``KAIWA_STREAM=0`` (then ``generate_content``). **Settings** are the SDK's own:
``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` for the Gemini API; ``GOOGLE_GENAI_USE_VERTEXAI=true`` with
``GOOGLE_CLOUD_PROJECT`` / ``GOOGLE_CLOUD_LOCATION`` and Application Default Credentials
(``GOOGLE_APPLICATION_CREDENTIALS`` or ``gcloud auth application-default login``) for Vertex AI. The SDK's
own retries are off: the engine retries.

**Errors** (``google.genai.errors.APIError``: HTTP code and Google status): 429 ``RESOURCE_EXHAUSTED`` →
``rate_limit``; 403 ``PERMISSION_DENIED`` → ``forbidden``; 401, or 400 ``API key not valid`` → ``auth``;
404 ``NOT_FOUND`` → ``not_found``; 400 "input token count … exceeds the maximum number of tokens" →
``context_overflow``; 400 on the schema / function calling → ``unsupported``; 504 ``DEADLINE_EXCEEDED`` →
``timeout``; other 5xx → ``server_error``; a prompt blocked (``promptFeedback.blockReason``) or an answer
stopped by ``SAFETY`` / ``PROHIBITED_CONTENT`` / ``BLOCKLIST`` / ``SPII`` / ``RECITATION`` → ``content_filter``.

**Embeddings** (:meth:`GeminiClient.embed`): ``embed_content`` (``gemini-embedding-001`` by default,
``RETRIEVAL_DOCUMENT`` / ``RETRIEVAL_QUERY``), 100 texts a call.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from core.llm.base import OVERFLOW_MARKERS, LLMRequest, ProviderError
from core.llm.sdk_client import FILTERED, SDKChatClient, forced_tool, json_schema_format, require, split_system, typed
from core.llm.strategies import SCHEMA_INSTRUCTION_MARKER

DEFAULT_MODEL = "gemini-2.5-flash"
DEFAULT_EMBEDDING_MODEL = "gemini-embedding-001"
EMBED_BATCH = 100
DEFAULT_THINKING_TOKENS = 1024  # KAIWA_GEMINI_THINKING_TOKENS: room added to maxOutputTokens for thinking
FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": FILTERED, "RECITATION": FILTERED, "BLOCKLIST": FILTERED,
          "PROHIBITED_CONTENT": FILTERED, "SPII": FILTERED, "IMAGE_SAFETY": FILTERED, "LANGUAGE": FILTERED,
          "MALFORMED_FUNCTION_CALL": "stop", "UNEXPECTED_TOOL_CALL": "stop"}
STATUS_KINDS = {"RESOURCE_EXHAUSTED": "rate_limit", "PERMISSION_DENIED": "forbidden", "UNAUTHENTICATED": "auth",
                "NOT_FOUND": "not_found", "DEADLINE_EXCEEDED": "timeout", "UNAVAILABLE": "server_error",
                "INTERNAL": "server_error"}
# "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
_COUNTS = re.compile(r"input token count \(?(\d{1,9})\)? exceeds the maximum number of tokens allowed \(?(\d{1,9})")
UNSUPPORTED_MARKERS = ("response_schema", "responseschema", "response_json_schema", "responsejsonschema",
                       "response_mime_type", "responsemimetype", "function calling", "function_declarations",
                       "functiondeclarations", "tool_config", "toolconfig", "json mode", "is not supported")


class GeminiClient(SDKChatClient):
    name = "gemini"
    extra = "gemini"

    def __init__(self, *, model: str = DEFAULT_MODEL, api_key: str | None = None, vertexai: bool = False,
                 project: str | None = None, location: str | None = None, embedding_model: str | None = None,
                 http_client: Any = None, thinking_tokens: int = DEFAULT_THINKING_TOKENS, **kwargs: Any):
        super().__init__(model=model, embedding_model=embedding_model or DEFAULT_EMBEDDING_MODEL, **kwargs)
        self.thinking_tokens = max(0, int(thinking_tokens))
        self.vertexai = vertexai
        self.project, self.location = project, location
        self._api_key = api_key
        self._http_client = http_client  # an httpx.Client (tests: with a MockTransport)
        self._sdk: Any = None
        require("google.genai", self.extra)  # fail at selection, in Japanese, when the extra is missing

    @property
    def sdk(self) -> Any:
        if self._sdk is None:
            genai = require("google.genai", self.extra)
            from google.genai import types

            options = types.HttpOptions(timeout=int(max(self.timeout, self.first_token_timeout) * 1000) + 5000,
                                        retry_options=types.HttpRetryOptions(attempts=1),
                                        httpx_client=self._http_client)
            if self.vertexai:
                self._sdk = genai.Client(vertexai=True, project=self.project, location=self.location,
                                         http_options=options)
            else:
                self._sdk = genai.Client(api_key=self._api_key, http_options=options)
        return self._sdk

    # ---- requests ---------------------------------------------------------------------------------
    def request_parts(self, request: LLMRequest) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """``(contents, config)`` of ``request`` for ``generate_content``."""
        system, turns = split_system(request.messages)
        contents = [{"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
                    for role, text in turns]
        config: dict[str, Any] = {"temperature": request.temperature}
        if system:
            config["system_instruction"] = system
        if request.max_tokens:  # thought tokens count against the limit: room for them on top of the answer's
            config["max_output_tokens"] = int(request.max_tokens) + self.thinking_tokens
        if self.thinking_tokens == 0:
            config["thinking_config"] = {"thinking_budget": 0}  # thinking off (models that allow it)
        spec = json_schema_format(request)
        tool = forced_tool(request)
        if spec is not None:
            config.update(response_mime_type="application/json", response_json_schema=spec["schema"])
        elif tool is not None:
            config["tools"] = [{"function_declarations": [{
                "name": tool["name"], "description": tool.get("description") or tool["name"],
                "parameters_json_schema": tool.get("parameters") or {"type": "object"}}]}]
            config["tool_config"] = {"function_calling_config": {"mode": "ANY",
                                                                 "allowed_function_names": [tool["name"]]}}
        elif any(SCHEMA_INSTRUCTION_MARKER in str(m.get("content") or "") for m in request.messages[-1:]):
            config["response_mime_type"] = "application/json"  # prompt_extract: JSON mode
        return contents, config

    def _parts(self, request: LLMRequest, stream: bool, timeout: float) -> Iterator[tuple[str, Any]]:
        from google.genai import types

        contents, fields = self.request_parts(request)
        fields["http_options"] = {"timeout": int(timeout * 1000)}
        config = types.GenerateContentConfig(**fields)  # typed: the SDK writes each field's wire name
        models = self.sdk.models
        if not stream:
            yield from _response_parts(models.generate_content(model=self.model, contents=contents, config=config))
            return
        chunks = models.generate_content_stream(model=self.model, contents=contents, config=config)
        try:
            for chunk in chunks:
                yield from _response_parts(chunk)
        finally:
            close = getattr(chunks, "close", None)
            if callable(close):
                close()

    # ---- embeddings -------------------------------------------------------------------------------
    def embed(self, texts: list[str], *, query: bool = False) -> list[list[float]]:
        from google.genai import types

        vectors: list[list[float]] = []
        try:
            for start in range(0, len(texts), EMBED_BATCH):
                response = self.sdk.models.embed_content(
                    model=str(self.embedding_model), contents=[t or " " for t in texts[start:start + EMBED_BATCH]],
                    config=types.EmbedContentConfig(task_type="RETRIEVAL_QUERY" if query else "RETRIEVAL_DOCUMENT"))
                vectors.extend(list(e.values or []) for e in response.embeddings or [])
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 - typed like a chat call
            raise self._typed(exc) from None
        return vectors

    # ---- errors -----------------------------------------------------------------------------------
    def classify(self, exc: BaseException) -> ProviderError:
        from google.genai import errors

        if isinstance(exc, errors.APIError):
            code = exc.code if isinstance(exc.code, int) else None
            status = str(exc.status or "")
            said = str(exc.message or "")
            low = said.lower()
            body = json.dumps(exc.details, ensure_ascii=False)[:2000] if exc.details else None
            counts = _COUNTS.search(low)
            if counts or any(m in low for m in OVERFLOW_MARKERS):
                return typed("context_overflow", said, code, code=status, body=body,
                             n_prompt_tokens=int(counts.group(1)) if counts else None,
                             n_ctx=int(counts.group(2)) if counts else None)
            if "api key not valid" in low or "api_key_invalid" in (body or "").lower() or code == 401:
                kind = "auth"
            elif status in STATUS_KINDS:
                kind = STATUS_KINDS[status]
            elif code in (403, 404, 429):
                kind = {403: "forbidden", 404: "not_found", 429: "rate_limit"}[code]
            elif code is not None and code >= 500:
                kind = "timeout" if code == 504 else "server_error"
            elif "safety" in low or "blocked" in low or "prohibited" in low:
                kind = FILTERED
            elif any(m in low for m in UNSUPPORTED_MARKERS):
                kind = "unsupported"
            else:
                kind = "bad_request"
            return typed(kind, said, code, code=status, body=body)
        names = {cls.__name__ for cls in type(exc).__mro__}
        if "TimeoutException" in names or isinstance(exc, TimeoutError):
            return typed("timeout", "")
        if names & {"ConnectError", "NetworkError", "TransportError"} or isinstance(exc, ConnectionError):
            return typed("connection", "")
        if "DefaultCredentialsError" in names or "RefreshError" in names:
            return typed("auth", "Google Cloud の認証情報 (Application Default Credentials) が見つからないか無効です")
        if isinstance(exc, ValueError) and "api key" in str(exc).lower():
            return typed("config", "GEMINI_API_KEY（または Vertex AI の設定）が未設定です")
        return ProviderError("unknown", "予期しないエラーが発生しました")


def _response_parts(response: Any) -> Iterator[tuple[str, Any]]:
    """The parts of one ``GenerateContentResponse`` (a whole answer or one streamed chunk)."""
    if getattr(response, "model_version", None):
        yield "model", response.model_version
    feedback = getattr(response, "prompt_feedback", None)
    if feedback is not None and getattr(feedback, "block_reason", None):
        yield "finish", FILTERED
    for candidate in (getattr(response, "candidates", None) or [])[:1]:
        content = getattr(candidate, "content", None)
        for part in (getattr(content, "parts", None) or []):
            if getattr(part, "thought", False):
                continue
            call = getattr(part, "function_call", None)
            if call is not None:
                yield "tool", json.dumps(call.args or {}, ensure_ascii=False)
            elif isinstance(getattr(part, "text", None), str):
                yield "text", part.text
        reason = getattr(candidate, "finish_reason", None)
        if reason is not None:
            name = getattr(reason, "value", None) or str(reason)
            yield "finish", FINISH.get(str(name), str(name).lower())
    usage = getattr(response, "usage_metadata", None)
    if usage is not None:
        yield "usage", {"prompt_tokens": getattr(usage, "prompt_token_count", None),
                        "completion_tokens": getattr(usage, "candidates_token_count", None),
                        "total_tokens": getattr(usage, "total_token_count", None)}
