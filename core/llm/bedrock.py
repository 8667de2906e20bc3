"""Amazon Bedrock through the official ``boto3`` ``bedrock-runtime`` client (the Converse API).

**Structured output**, by the engine's strategy (:mod:`core.llm.strategies`):

1. ``structured_output``: ``outputConfig.textFormat`` of type ``json_schema`` (the schema as a JSON string),
   on the models that support it; a model that does not answers ``ValidationException``, typed
   ``unsupported``, and the engine moves on;
2. ``tool_call``: one tool in ``toolConfig`` whose ``inputSchema.json`` is the schema, forced with
   ``toolChoice: {"tool": {"name": …}}``; the reply's ``toolUse.input`` is the answer;
3. ``prompt_extract``: the schema in the prompt, the reply's text parsed.

**Streaming**: ``ConverseStream`` (text deltas and a tool call's ``toolUse.input`` deltas), unless
``KAIWA_STREAM=0`` (then ``Converse``); a model that refuses a method only while streaming ("doesn't support
tool use in streaming mode") gets ``Converse`` from then on. **Credentials and region** come from the standard AWS chain
(``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and
``~/.aws/config`` / ``credentials``, SSO, instance and container roles; ``AWS_REGION`` /
``AWS_DEFAULT_REGION``): nothing here reads a key. botocore's own retries are off: the engine retries.

**Errors**: ``ThrottlingException`` / ``ServiceQuotaExceededException`` → ``rate_limit``;
``AccessDeniedException`` → ``forbidden``; ``UnrecognizedClientException`` / ``ExpiredToken…`` /
``InvalidSignatureException`` / no credentials → ``auth``; ``ResourceNotFoundException`` or an invalid
model identifier → ``not_found``; ``ValidationException`` saying the input is too long →
``context_overflow``, saying the model does not support tools / structured output → ``unsupported``,
else ``bad_request``; ``ModelTimeoutException`` → ``timeout``; ``InternalServer…`` /
``ServiceUnavailable…`` / ``ModelNotReady…`` / ``ModelError…`` / ``ModelStreamError…`` → ``server_error``;
stop reason ``guardrail_intervened`` / ``content_filtered`` → ``content_filter``.

**Embeddings** (:meth:`BedrockClient.embed`): ``InvokeModel`` on Amazon Titan Text Embeddings
(``amazon.titan-embed-text-v2:0``, one text a call) or Cohere Embed (``cohere.embed-…``, 96 texts a call).
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from core.llm.base import OVERFLOW_MARKERS, LLMRequest, LLMResponse, ProviderError
from core.llm.sdk_client import FILTERED, SDKChatClient, forced_tool, json_schema_format, require, split_system, typed

logger = logging.getLogger("kaiwa.llm")

DEFAULT_EMBEDDING_MODEL = "amazon.titan-embed-text-v2:0"
COHERE_BATCH = 96
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
                "model_context_window_exceeded": "length", "guardrail_intervened": FILTERED,
                "content_filtered": FILTERED}
# ValidationException wordings (lower-cased): Bedrock's own and the model providers' it passes on
BEDROCK_OVERFLOW = ("input is too long", "too many input tokens", "too many total text bytes",
                    "prompt is too long", "input length exceeds")
UNSUPPORTED_MARKERS = ("doesn't support tool", "does not support tool", "toolchoice", "tool use",
                       "outputconfig", "structured output", "json_schema", "textformat", "doesn't support the")
NOT_FOUND_MARKERS = ("model identifier is invalid", "model not found", "end of its life", "model id is invalid")
CODES = {"throttlingexception": "rate_limit", "servicequotaexceededexception": "rate_limit",
         "toomanyrequestsexception": "rate_limit", "accessdeniedexception": "forbidden",
         "unrecognizedclientexception": "auth", "invalidsignatureexception": "auth", "expiredtokenexception": "auth",
         "expiredtoken": "auth", "incompletesignature": "auth", "missingauthenticationtokenexception": "auth",
         "resourcenotfoundexception": "not_found", "modeltimeoutexception": "timeout",
         "internalserverexception": "server_error", "serviceunavailableexception": "server_error",
         "modelnotreadyexception": "server_error", "modelerrorexception": "server_error",
         "modelstreamerrorexception": "server_error"}


class BedrockClient(SDKChatClient):
    name = "bedrock"
    extra = "bedrock"

    def __init__(self, *, model: str, region: str | None = None, profile: str | None = None,
                 embedding_model: str | None = None, client: Any = None, **kwargs: Any):
        super().__init__(model=model, embedding_model=embedding_model or DEFAULT_EMBEDDING_MODEL, **kwargs)
        self.region = region
        self.profile = profile
        self._client = client  # a botocore client (tests give one with a Stubber on it)
        if client is None:
            require("boto3", self.extra)  # fail at selection, in Japanese, when the extra is missing

    @property
    def client(self) -> Any:
        if self._client is None:
            boto3 = require("boto3", self.extra)
            from botocore.config import Config

            session = boto3.Session(profile_name=self.profile or None, region_name=self.region or None)
            self._client = session.client("bedrock-runtime", config=Config(
                retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=10,
                read_timeout=max(self.timeout, self.first_token_timeout) + 5))
        return self._client

    def complete(self, request: LLMRequest) -> LLMResponse:
        """As the base; a model that refuses tools (or structured output) *while streaming* gets whole
        responses from then on, and this request is sent again unstreamed."""
        try:
            return super().complete(request)
        except ProviderError as err:
            if not (self.stream and err.kind == "unsupported" and "stream" in str(err).lower()):
                raise
            self.stream = False
            logger.warning("bedrock model %s refused this method while streaming: Converse from now on", self.model)
            return super().complete(request)

    # ---- requests ---------------------------------------------------------------------------------
    def converse_kwargs(self, request: LLMRequest) -> dict[str, Any]:
        """The Converse / ConverseStream parameters of ``request``."""
        system, turns = split_system(request.messages)
        kwargs: dict[str, Any] = {"modelId": self.model,
                                  "messages": [{"role": role, "content": [{"text": text}]} for role, text in turns]}
        if system:
            kwargs["system"] = [{"text": system}]
        config: dict[str, Any] = {"temperature": request.temperature}
        if request.max_tokens:
            config["maxTokens"] = int(request.max_tokens)
        kwargs["inferenceConfig"] = config
        spec = json_schema_format(request)
        if spec is not None:
            kwargs["outputConfig"] = {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": {
                "schema": json.dumps(spec["schema"], ensure_ascii=False), "name": str(spec.get("name") or "answer")}}}}
        tool = forced_tool(request)
        if tool is not None:
            kwargs["toolConfig"] = {"tools": [{"toolSpec": {
                "name": tool["name"], "description": tool.get("description") or tool["name"],
                "inputSchema": {"json": tool.get("parameters") or {"type": "object"}}}}],
                "toolChoice": {"tool": {"name": tool["name"]}}}
        return kwargs

    def _parts(self, request: LLMRequest, stream: bool, timeout: float) -> Iterator[tuple[str, Any]]:
        kwargs = self.converse_kwargs(request)
        if not stream:
            response = self.client.converse(**kwargs)
            for block in ((response.get("output") or {}).get("message") or {}).get("content") or []:
                if "text" in block:
                    yield "text", block["text"]
                elif "toolUse" in block:
                    yield "tool", json.dumps(block["toolUse"].get("input") or {}, ensure_ascii=False)
            yield "finish", STOP_REASONS.get(response.get("stopReason") or "", response.get("stopReason"))
            yield "usage", _usage(response.get("usage"))
            return
        events = self.client.converse_stream(**kwargs)["stream"]
        try:
            for event in events:
                if "contentBlockStart" in event:
                    if "toolUse" in (event["contentBlockStart"].get("start") or {}):
                        yield "tool", ""
                elif "contentBlockDelta" in event:
                    delta = event["contentBlockDelta"].get("delta") or {}
                    if "text" in delta:
                        yield "text", delta["text"]
                    elif "toolUse" in delta:
                        yield "tool", delta["toolUse"].get("input") or ""
                elif "messageStop" in event:
                    reason = event["messageStop"].get("stopReason") or ""
                    yield "finish", STOP_REASONS.get(reason, reason)
                elif "metadata" in event:
                    yield "usage", _usage(event["metadata"].get("usage"))
        finally:
            close = getattr(events, "close", None)
            if callable(close):
                close()

    # ---- embeddings -------------------------------------------------------------------------------
    def embed(self, texts: list[str], *, query: bool = False) -> list[list[float]]:
        """Vectors of ``texts`` from the embedding model (Titan: one call a text; Cohere: 96 a call)."""
        model = str(self.embedding_model)
        vectors: list[list[float]] = []
        try:
            if model.startswith("cohere.") or ".cohere." in model:
                for start in range(0, len(texts), COHERE_BATCH):
                    body = {"texts": [t or " " for t in texts[start:start + COHERE_BATCH]],
                            "input_type": "search_query" if query else "search_document"}
                    vectors.extend(self._invoke(model, body)["embeddings"])
            else:
                for text in texts:
                    vectors.append(self._invoke(model, {"inputText": text or " "})["embedding"])
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 - typed like a chat call
            raise self._typed(exc) from None
        return vectors

    def _invoke(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.client.invoke_model(modelId=model, body=json.dumps(body, ensure_ascii=False),
                                            contentType="application/json", accept="application/json")
        data = json.loads(response["body"].read())
        if not isinstance(data, dict):
            raise ProviderError("bad_response", "埋め込みの応答が JSON オブジェクトではありません", 200)
        return data

    # ---- errors -----------------------------------------------------------------------------------
    def classify(self, exc: BaseException) -> ProviderError:
        from botocore import exceptions as bex

        if isinstance(exc, bex.ClientError):
            error = exc.response.get("Error") or {}
            code = str(error.get("Code") or "")
            said = str(error.get("Message") or "")
            status = (exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            low = said.lower()
            kind = CODES.get(code.lower())
            if kind is None and code.lower() in ("validationexception", "badrequestexception"):
                if any(m in low for m in BEDROCK_OVERFLOW + OVERFLOW_MARKERS):
                    kind = "context_overflow"
                elif any(m in low for m in NOT_FOUND_MARKERS):
                    kind = "not_found"
                elif any(m in low for m in UNSUPPORTED_MARKERS):
                    kind = "unsupported"
                elif "guardrail" in low or "content filter" in low or "blocked" in low:
                    kind = FILTERED
                else:
                    kind = "bad_request"
            if kind is None:
                kind = "server_error" if isinstance(status, int) and status >= 500 else "bad_request"
            return typed(kind, said, status if isinstance(status, int) else None, code=code, body=said or None)
        if isinstance(exc, (bex.NoCredentialsError, bex.PartialCredentialsError, bex.CredentialRetrievalError,
                            bex.ProfileNotFound, bex.SSOTokenLoadError, bex.TokenRetrievalError)):
            return typed("auth", "AWS の認証情報が見つからないか不完全です（環境変数 AWS_ACCESS_KEY_ID など、"
                         "AWS_PROFILE と ~/.aws、SSO、インスタンスロールを確認してください）")
        if isinstance(exc, bex.NoRegionError):
            return typed("config", "AWS のリージョンが未設定です（AWS_REGION または ~/.aws/config の region）")
        if isinstance(exc, (bex.ReadTimeoutError, bex.ConnectTimeoutError)):
            return typed("timeout", "")
        if isinstance(exc, (bex.EndpointConnectionError, bex.ConnectionError)):
            return typed("connection", "")
        if isinstance(exc, bex.ParamValidationError):
            return typed("bad_request", "リクエストの形式が不正です")
        return ProviderError("unknown", "予期しないエラーが発生しました")


def _usage(usage: Any) -> dict[str, Any]:
    usage = usage if isinstance(usage, dict) else {}
    return {"prompt_tokens": usage.get("inputTokens"), "completion_tokens": usage.get("outputTokens"),
            "total_tokens": usage.get("totalTokens")}
