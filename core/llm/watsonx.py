"""IBM watsonx.ai through the official ``ibm-watsonx-ai`` SDK (``ModelInference.chat`` / ``chat_stream``).

The watsonx.ai chat API takes and answers OpenAI-shaped messages, so the engine's requests go as they are:

1. ``structured_output``: ``response_format`` ``{"type": "json_schema", "json_schema": {…}}``;
2. ``tool_call``: ``tools`` with one function whose parameters are the schema, forced with
   ``tool_choice: {"type": "function", "function": {"name": …}}``; the call's ``arguments`` are the answer;
3. ``prompt_extract``: the schema in the prompt, with ``response_format: {"type": "json_object"}``
   (JSON mode).

**Streaming**: ``chat_stream`` (server-sent events of OpenAI-shaped chunks), unless ``KAIWA_STREAM=0``.
**Settings** (the names IBM's samples and ``langchain-ibm`` use): ``WATSONX_APIKEY`` (IBM Cloud API key),
``WATSONX_URL`` (the region's endpoint, e.g. ``https://us-south.ml.cloud.ibm.com``), ``WATSONX_PROJECT_ID``
or ``WATSONX_SPACE_ID``; ``WATSONX_TOKEN`` instead of a key on a cluster that issues tokens. The SDK's own
retries are off (``max_retries=0``): the engine retries.

**Errors** (``ApiRequestFailure`` with the HTTP response; a streamed failure as ``WMLClientError`` text
ending in the status): 429 → ``rate_limit``; 401 or an IAM key refused → ``auth``; 403 → ``forbidden``;
404 or ``model_not_supported`` → ``not_found``; 400 on too many input tokens → ``context_overflow``;
400 on ``response_format`` / tools → ``unsupported``; 5xx → ``server_error``; a moderation (HAP/PII)
block or ``finish_reason: content_filter`` → ``content_filter``.

**Embeddings** (:meth:`WatsonxClient.embed`): ``Embeddings.embed_documents`` (``/ml/v1/text/embeddings``),
``intfloat/multilingual-e5-large`` by default (Japanese).
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from core.llm.base import OVERFLOW_MARKERS, LLMRequest, ProviderError
from core.llm.sdk_client import FILTERED, SDKChatClient, forced_tool, json_schema_format, require, status_kind, typed
from core.llm.strategies import SCHEMA_INSTRUCTION_MARKER

DEFAULT_MODEL = "ibm/granite-3-3-8b-instruct"
DEFAULT_EMBEDDING_MODEL = "intfloat/multilingual-e5-large"
DEFAULT_URL = "https://us-south.ml.cloud.ibm.com"
WATSONX_OVERFLOW = ("cannot exceed the total tokens limit", "exceeds the maximum sequence length",
                    "input tokens exceeds", "exceeds the model's context", "max sequence length")
UNSUPPORTED_MARKERS = ("response_format", "json_schema", "tool_choice", "tools", "function calling",
                       "not supported for this model", "does not support")
FILTER_MARKERS = ("moderation", "hap", "content_filter", "potentially harmful")
AUTH_MARKERS = ("api key could not be found", "provided api key", "iam", "authentication_token", "unauthorized")


class WatsonxClient(SDKChatClient):
    name = "watsonx"
    extra = "watsonx"

    def __init__(self, *, model: str = DEFAULT_MODEL, url: str | None = None, api_key: str | None = None,
                 token: str | None = None, project_id: str | None = None, space_id: str | None = None,
                 embedding_model: str | None = None, http_client: Any = None, **kwargs: Any):
        super().__init__(model=model, embedding_model=embedding_model or DEFAULT_EMBEDDING_MODEL, **kwargs)
        self.base_url = url or DEFAULT_URL
        self.project_id, self.space_id = project_id, space_id
        self._api_key, self._token = api_key, token
        self._http_client = http_client  # an httpx.Client (tests: with a MockTransport)
        self._api: Any = None
        self._inference: Any = None
        require("ibm_watsonx_ai", self.extra)  # fail at selection, in Japanese, when the extra is missing
        # The SDK logs failed responses' bodies (which may echo what was sent) at WARNING: every failure is
        # typed and logged masked by the engine instead.
        logging.getLogger("ibm_watsonx_ai").setLevel(logging.CRITICAL)

    @property
    def api(self) -> Any:
        """The SDK's APIClient (its first use asks IAM for a token and reads the project or space)."""
        if self._api is None:
            sdk = require("ibm_watsonx_ai", self.extra)
            if not (self.project_id or self.space_id):
                raise typed("config", "WATSONX_PROJECT_ID または WATSONX_SPACE_ID が未設定です")
            if not (self._api_key or self._token):
                raise typed("config", "WATSONX_APIKEY（または WATSONX_TOKEN）が未設定です")
            credentials = sdk.Credentials(url=self.base_url, api_key=self._api_key, token=self._token)
            kwargs: dict[str, Any] = {"project_id": self.project_id} if self.project_id else {
                "space_id": self.space_id}
            if self._http_client is not None:
                kwargs["httpx_client"] = self._http_client
            self._api = sdk.APIClient(credentials, **kwargs)
        return self._api

    @property
    def inference(self) -> Any:
        if self._inference is None:
            from ibm_watsonx_ai.foundation_models import ModelInference

            self._inference = ModelInference(model_id=self.model, api_client=self.api, project_id=self.project_id,
                                             space_id=self.space_id, validate=False, max_retries=0)
        return self._inference

    # ---- requests ---------------------------------------------------------------------------------
    def chat_arguments(self, request: LLMRequest, timeout: float) -> dict[str, Any]:
        """``chat`` / ``chat_stream`` keyword arguments of ``request``."""
        params: dict[str, Any] = {"temperature": request.temperature, "time_limit": int(timeout * 1000)}
        if request.max_tokens:
            params["max_tokens"] = int(request.max_tokens)
        spec = json_schema_format(request)
        if spec is not None:
            params["response_format"] = {"type": "json_schema", "json_schema": {
                "name": str(spec.get("name") or "answer"), "schema": spec["schema"], "strict": True}}
        elif any(SCHEMA_INSTRUCTION_MARKER in str(m.get("content") or "") for m in request.messages[-1:]):
            params["response_format"] = {"type": "json_object"}  # prompt_extract: JSON mode
        messages = [{"role": m.get("role"), "content": m.get("content") or " "} for m in request.messages]
        arguments: dict[str, Any] = {"messages": messages, "params": params}
        tool = forced_tool(request)
        if tool is not None:
            arguments["tools"] = [{"type": "function", "function": {
                "name": tool["name"], "description": tool.get("description") or tool["name"],
                "parameters": tool.get("parameters") or {"type": "object"}}}]
            arguments["tool_choice"] = {"type": "function", "function": {"name": tool["name"]}}
        return arguments

    def _parts(self, request: LLMRequest, stream: bool, timeout: float) -> Iterator[tuple[str, Any]]:
        arguments = self.chat_arguments(request, timeout)
        if not stream:
            yield from _chat_parts(self.inference.chat(**arguments), whole=True)
            return
        chunks = self.inference.chat_stream(**arguments)
        try:
            for chunk in chunks:
                yield from _chat_parts(chunk, whole=False)
        finally:
            close = getattr(chunks, "close", None)
            if callable(close):
                close()

    # ---- embeddings -------------------------------------------------------------------------------
    def embed(self, texts: list[str], *, query: bool = False) -> list[list[float]]:
        try:
            from ibm_watsonx_ai.foundation_models import Embeddings

            model = Embeddings(model_id=str(self.embedding_model), api_client=self.api, project_id=self.project_id,
                               space_id=self.space_id, max_retries=0)
            return [list(v) for v in model.embed_documents([t or " " for t in texts])]
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 - typed like a chat call
            raise self._typed(exc) from None

    # ---- errors -----------------------------------------------------------------------------------
    def classify(self, exc: BaseException) -> ProviderError:
        from ibm_watsonx_ai import wml_client_error as werr

        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
        text = ""
        if response is not None:
            try:
                text = str(response.text)[:2000]
            except Exception:  # noqa: BLE001 - a streamed body never read
                text = ""
        elif isinstance(exc, werr.WMLClientError):
            # chat_stream: "Request failed with: {body} ({status})"; a stream's error event: reason = body
            message = str(getattr(exc, "error_msg", "") or exc)
            reason = str(getattr(exc, "reason", "") or "")
            head, _, tail = message.rstrip().rpartition("(")
            if tail.rstrip(")").isdigit():
                status, text = int(tail.rstrip(")")), head.removeprefix("Request failed with:").strip()
            else:
                text = reason or message
        if not isinstance(exc, werr.WMLClientError) and response is None:
            names = {cls.__name__ for cls in type(exc).__mro__}
            if "TimeoutException" in names or isinstance(exc, TimeoutError):
                return typed("timeout", "")
            if names & {"ConnectError", "NetworkError", "TransportError"} or isinstance(exc, ConnectionError):
                return typed("connection", "")
            return ProviderError("unknown", "予期しないエラーが発生しました")
        said, code = _error_message(text)
        low = f"{code} {said} {text}".lower()
        kind = status_kind(status)
        if kind is None or status == 404 and "model" not in low and "not_found" not in low:
            if any(m in low for m in WATSONX_OVERFLOW + OVERFLOW_MARKERS):
                kind = "context_overflow"
            elif "model_not_supported" in low or "model_not_found" in low:
                kind = "not_found"
            elif any(m in low for m in FILTER_MARKERS):
                kind = FILTERED
            elif any(m in low for m in AUTH_MARKERS):
                kind = "auth"
            elif any(m in low for m in UNSUPPORTED_MARKERS):
                kind = "unsupported"
            else:
                kind = kind or "bad_request"
        return typed(kind, said or text[:300], status, code=code, body=text or None)


def _error_message(text: str) -> tuple[str, str]:
    """``(message, code)`` of a watsonx error body ``{"errors": [{"code", "message"}], …}``."""
    try:
        body = json.loads(text)
    except ValueError:
        return text[:300], ""
    errors = body.get("errors") if isinstance(body, dict) else None
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    if not first and isinstance(body, dict) and isinstance(body.get("error"), dict):
        first = body["error"]
    return str(first.get("message") or "")[:300], str(first.get("code") or "")


def _chat_parts(data: Any, *, whole: bool) -> Iterator[tuple[str, Any]]:
    """The parts of a chat response (``whole``) or of one streamed chunk (OpenAI-shaped)."""
    if not isinstance(data, dict):
        raise ProviderError("bad_response", "watsonx.ai の応答が JSON オブジェクトではありません", 200)
    if data.get("model_id") or data.get("model"):
        yield "model", data.get("model_id") or data.get("model")
    choices = data.get("choices")
    if whole and not (isinstance(choices, list) and choices):
        raise ProviderError("bad_response", "watsonx.ai の応答に choices がありません", 200,
                            body=json.dumps(data, ensure_ascii=False)[:2000])
    for choice in (choices or [])[:1]:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message" if whole else "delta") or {}
        if isinstance(message.get("content"), str) and message["content"]:
            yield "text", message["content"]
        for call in (message.get("tool_calls") or [])[:1]:
            arguments = (call.get("function") or {}).get("arguments") if isinstance(call, dict) else None
            yield "tool", arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)
        if isinstance(choice.get("finish_reason"), str):
            yield "finish", choice["finish_reason"]
    if isinstance(data.get("usage"), dict):
        yield "usage", data["usage"]
