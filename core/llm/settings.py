"""Settings from environment variables, optionally overlaid with ``.streamlit/secrets.toml`` values.

| variable | meaning | default |
|---|---|---|
| OPENAI_API_KEY | key for OpenAI / Azure OpenAI | unset → offline provider |
| OPENAI_BASE_URL | any OpenAI-compatible endpoint (Azure v1, Ollama, vLLM, llama.cpp) | unset |
| OPENAI_MODEL | model / deployment name | gpt-4o-mini |
| KAIWA_PROVIDER | force ``offline``, ``openai``, ``bedrock``, ``gemini`` or ``watsonx`` | auto |
| KAIWA_STRATEGIES | fallback chain, comma separated | structured_output,tool_call,prompt_extract |
| KAIWA_TIMEOUT | seconds one response may take when it is not streamed; default of the first-token timeout | 60 |
| KAIWA_FIRST_TOKEN_TIMEOUT | seconds from sending to the first token, a busy server's queue included | KAIWA_TIMEOUT |
| KAIWA_TOKEN_GAP_TIMEOUT | seconds of silence allowed between two chunks of a streamed answer | min(KAIWA_TIMEOUT, 30) |
| KAIWA_TURN_DEADLINE | seconds one user turn may take over all its calls, retries, waits and repairs | 3 × KAIWA_TIMEOUT |
| KAIWA_STREAM | stream answers (1/0) | 1 |
| KAIWA_MAX_OUTPUT_TOKENS | cap on every request's output limit (each is fitted to its schema below this) | 2048 |
| KAIWA_CONTEXT_TOKENS | the model's context size in tokens | read from the server (llama.cpp, vLLM) |
| KAIWA_TOKEN_LIMIT_PARAM | auto, max_completion_tokens or max_tokens | auto |
| KAIWA_MAX_REPAIRS | repair requests after an invalid answer, at most (a slow local model may want 0 or 1) | 2 |
| KAIWA_MAX_OUTPUT_BYTES | cap on a model's output before parsing, masking and logging | 262144 (256 KB) |
| KAIWA_DEBUG | debug log on at start (1/0) | 1 |

The other providers (docs/providers.md) read the variables their SDKs document; a provider is listed once it
is configured:

| variable | provider | meaning |
|---|---|---|
| KAIWA_BEDROCK_MODEL | Bedrock | model or inference-profile id (listed when set) |
| AWS_REGION / AWS_DEFAULT_REGION, AWS_PROFILE | Bedrock | region and profile; credentials from the AWS chain |
| KAIWA_BEDROCK_EMBEDDING_MODEL | Bedrock | amazon.titan-embed-text-v2:0 or a cohere.embed-… id |
| GEMINI_API_KEY / GOOGLE_API_KEY | Gemini | Gemini API key (listed when set) |
| GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION | Gemini | Vertex AI (listed when true) |
| KAIWA_GEMINI_MODEL, KAIWA_GEMINI_EMBEDDING_MODEL | Gemini | gemini-2.5-flash, gemini-embedding-001 |
| KAIWA_GEMINI_THINKING_TOKENS | Gemini | room for thought tokens on top of each output limit (0: thinking off); 1024 |
| WATSONX_APIKEY (or WATSONX_TOKEN), WATSONX_URL | watsonx | IBM Cloud API key and endpoint (listed with a project or space) |
| WATSONX_PROJECT_ID / WATSONX_SPACE_ID | watsonx | where inference is billed |
| KAIWA_WATSONX_MODEL, KAIWA_WATSONX_EMBEDDING_MODEL | watsonx | ibm/granite-3-3-8b-instruct, intfloat/multilingual-e5-large |
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

from core.llm.base import DEFAULT_MAX_OUTPUT_BYTES
from core.llm.limits import DEFAULT_MAX_OUTPUT_TOKENS
from core.llm.strategies import ALL_STRATEGIES, DEFAULT_CHAIN

DEADLINE_FACTOR = 3.0
PROVIDERS = ("offline", "openai", "bedrock", "gemini", "watsonx")
MODEL_FIELDS = {"openai": "openai_model", "bedrock": "bedrock_model", "gemini": "gemini_model",
                "watsonx": "watsonx_model"}
TRUE = ("1", "true", "yes", "on")  # default KAIWA_TURN_DEADLINE in request timeouts


@dataclass(frozen=True)
class Settings:
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    openai_model: str = "gpt-4o-mini"
    provider: str | None = None
    strategies: tuple[str, ...] = DEFAULT_CHAIN
    timeout: float = 60.0
    debug: bool = True
    turn_deadline: float | None = None  # None: DEADLINE_FACTOR × timeout
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    first_token_timeout: float | None = None  # None: timeout
    token_gap_timeout: float | None = None  # None: min(timeout, 30)
    stream: bool = True
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    context_tokens: int | None = None  # None: read from the server
    token_limit_param: str = "auto"
    max_repairs: int = 2
    openai_embedding_model: str | None = None
    # Amazon Bedrock (credentials: the AWS chain, never read here)
    bedrock_model: str | None = None
    aws_region: str | None = None
    aws_profile: str | None = None
    bedrock_embedding_model: str | None = None
    # Google Gemini (API key) or Vertex AI
    gemini_api_key: str | None = None
    gemini_vertexai: bool = False
    gemini_project: str | None = None
    gemini_location: str | None = None
    gemini_model: str = "gemini-2.5-flash"
    gemini_embedding_model: str | None = None
    gemini_thinking_tokens: int = 1024
    # IBM watsonx.ai
    watsonx_api_key: str | None = None
    watsonx_token: str | None = None
    watsonx_url: str | None = None
    watsonx_project_id: str | None = None
    watsonx_space_id: str | None = None
    watsonx_model: str = "ibm/granite-3-3-8b-instruct"
    watsonx_embedding_model: str | None = None

    @property
    def first_token_seconds(self) -> float:
        return self.first_token_timeout or self.timeout

    @property
    def token_gap_seconds(self) -> float:
        return self.token_gap_timeout or min(self.timeout, 30.0)

    @property
    def deadline_seconds(self) -> float:
        return self.turn_deadline or DEADLINE_FACTOR * self.timeout

    @property
    def online_configured(self) -> bool:
        return bool(self.openai_api_key or self.openai_base_url)

    def configured(self, name: str) -> bool:
        """Whether provider ``name`` has what it needs to be listed (its SDK may still be missing)."""
        if name in ("offline", "openai"):
            return True
        if name == "bedrock":
            return bool(self.bedrock_model)
        if name == "gemini":
            return bool(self.gemini_api_key or self.gemini_vertexai)
        if name == "watsonx":
            return bool((self.watsonx_api_key or self.watsonx_token) and (self.watsonx_project_id or
                                                                           self.watsonx_space_id))
        return False

    @property
    def default_provider(self) -> str:
        if self.provider in PROVIDERS:
            return self.provider
        return "openai" if self.online_configured else "offline"

    @property
    def secrets(self) -> tuple[str, ...]:
        """Every key this configuration holds (kept out of logs, debug records and model output)."""
        return tuple(s for s in (self.openai_api_key, self.gemini_api_key, self.watsonx_api_key, self.watsonx_token)
                     if s)


def _parse_strategies(value: str | None) -> tuple[str, ...]:
    if not value:
        return DEFAULT_CHAIN
    chosen = tuple(s.strip() for s in value.split(",") if s.strip() in ALL_STRATEGIES)
    return chosen or DEFAULT_CHAIN


def load_settings(environ: Mapping[str, str] | None = None, secrets: Mapping[str, Any] | None = None) -> Settings:
    """Settings from ``environ`` (default ``os.environ``); ``secrets`` values win where given."""
    source: dict[str, Any] = dict(os.environ if environ is None else environ)
    for key, value in (secrets or {}).items():
        if isinstance(value, (str, int, float, bool)):
            source[key] = str(value)

    def get(key: str) -> str | None:
        value = source.get(key)
        return value.strip() if isinstance(value, str) and value.strip() else None

    def number(key: str, default: float | None) -> float | None:
        try:
            value = float(get(key) or "nan")
        except ValueError:
            return default
        return value if value > 0 and value != float("inf") else default  # NaN, 0, negative: default

    timeout = number("KAIWA_TIMEOUT", 60.0) or 60.0
    context = number("KAIWA_CONTEXT_TOKENS", None)
    limit_param = (get("KAIWA_TOKEN_LIMIT_PARAM") or "auto").lower()
    return Settings(
        openai_api_key=get("OPENAI_API_KEY"),
        openai_base_url=get("OPENAI_BASE_URL"),
        openai_model=get("OPENAI_MODEL") or "gpt-4o-mini",
        provider=(get("KAIWA_PROVIDER") or "").lower() or None,
        strategies=_parse_strategies(get("KAIWA_STRATEGIES")),
        timeout=timeout,
        debug=(get("KAIWA_DEBUG") or "1") not in ("0", "false", "no", "off"),
        turn_deadline=number("KAIWA_TURN_DEADLINE", None),
        max_output_bytes=int(number("KAIWA_MAX_OUTPUT_BYTES", DEFAULT_MAX_OUTPUT_BYTES) or DEFAULT_MAX_OUTPUT_BYTES),
        first_token_timeout=number("KAIWA_FIRST_TOKEN_TIMEOUT", None),
        token_gap_timeout=number("KAIWA_TOKEN_GAP_TIMEOUT", None),
        stream=(get("KAIWA_STREAM") or "1") not in ("0", "false", "no", "off"),
        max_output_tokens=int(number("KAIWA_MAX_OUTPUT_TOKENS", DEFAULT_MAX_OUTPUT_TOKENS) or DEFAULT_MAX_OUTPUT_TOKENS),
        context_tokens=int(context) if context else None,
        token_limit_param=limit_param if limit_param in ("max_completion_tokens", "max_tokens") else "auto",
        max_repairs=_repairs(get("KAIWA_MAX_REPAIRS")),
        openai_embedding_model=get("OPENAI_EMBEDDING_MODEL"),
        bedrock_model=get("KAIWA_BEDROCK_MODEL"),
        aws_region=get("AWS_REGION") or get("AWS_DEFAULT_REGION"),
        aws_profile=get("AWS_PROFILE"),
        bedrock_embedding_model=get("KAIWA_BEDROCK_EMBEDDING_MODEL"),
        gemini_api_key=get("GEMINI_API_KEY") or get("GOOGLE_API_KEY"),
        gemini_vertexai=(get("GOOGLE_GENAI_USE_VERTEXAI") or "").lower() in TRUE,
        gemini_project=get("GOOGLE_CLOUD_PROJECT"),
        gemini_location=get("GOOGLE_CLOUD_LOCATION"),
        gemini_model=get("KAIWA_GEMINI_MODEL") or "gemini-2.5-flash",
        gemini_embedding_model=get("KAIWA_GEMINI_EMBEDDING_MODEL"),
        gemini_thinking_tokens=_count(get("KAIWA_GEMINI_THINKING_TOKENS"), 1024),
        watsonx_api_key=get("WATSONX_APIKEY"),
        watsonx_token=get("WATSONX_TOKEN"),
        watsonx_url=get("WATSONX_URL"),
        watsonx_project_id=get("WATSONX_PROJECT_ID"),
        watsonx_space_id=get("WATSONX_SPACE_ID"),
        watsonx_model=get("KAIWA_WATSONX_MODEL") or "ibm/granite-3-3-8b-instruct",
        watsonx_embedding_model=get("KAIWA_WATSONX_EMBEDDING_MODEL"),
    )


def _count(value: str | None, default: int) -> int:
    try:
        return max(0, int(value)) if value is not None else default
    except ValueError:
        return default


def _repairs(value: str | None) -> int:
    try:
        return min(5, max(0, int(value))) if value is not None else 2
    except ValueError:
        return 2
