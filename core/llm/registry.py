"""Provider registry (seed 000 §12 ``get_active`` / ``set_active``): builds the active client.

An OpenAI-compatible client is checked against its server when it is built, at start and on every
provider switch (``OpenAICompatibleClient.probe``: ``GET /v1/models``, llama.cpp ``/props``): whether the
configured model is served (``model_notice``: a Japanese notice when it is not) and the context size the
server says, which then bounds every prompt unless ``KAIWA_CONTEXT_TOKENS`` is set.

Amazon Bedrock, Google Gemini and IBM watsonx.ai (``core.llm.bedrock`` / ``gemini`` / ``watsonx``) are listed
when configured (:meth:`Settings.configured`); their SDKs are optional extras, imported only when one is
built (the modules themselves import none). Selecting one whose SDK is missing raises the typed
``missing_sdk`` error (a Japanese message naming the extra); at start the registry then stays on the
offline provider and keeps the message in ``notice``.
Every key of the configuration (and the AWS secret key and session token in the environment) is added to
``KNOWN_SECRETS``, so no log, debug record or shown output carries it."""
from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Any, Callable

from core.llm.base import ProviderError
from core.llm.bedrock import BedrockClient
from core.llm.gemini import GeminiClient
from core.llm.offline import OfflineClient
from core.llm.openai_compat import OpenAICompatibleClient
from core.llm.settings import MODEL_FIELDS, PROVIDERS, Settings
from core.llm.watsonx import WatsonxClient
from core.text.pii import KNOWN_SECRETS, redact_url

logger = logging.getLogger("kaiwa.llm")

PROVIDER_LABELS = {"offline": "オフライン（ルールベース）", "openai": "OpenAI 互換 API",
                   "bedrock": "Amazon Bedrock", "gemini": "Google Gemini", "watsonx": "IBM watsonx.ai"}
AWS_SECRET_VARS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def _common(s: Settings) -> dict[str, Any]:
    return {"timeout": s.timeout, "max_output_bytes": s.max_output_bytes, "first_token_timeout": s.first_token_seconds,
            "token_gap_timeout": s.token_gap_seconds, "stream": s.stream, "context_tokens": s.context_tokens,
            "max_output_tokens": s.max_output_tokens}


def build_bedrock(s: Settings) -> Any:
    return BedrockClient(model=s.bedrock_model or "", region=s.aws_region, profile=s.aws_profile,
                         embedding_model=s.bedrock_embedding_model, **_common(s))


def build_gemini(s: Settings) -> Any:
    return GeminiClient(model=s.gemini_model, api_key=s.gemini_api_key, vertexai=s.gemini_vertexai,
                        project=s.gemini_project, location=s.gemini_location,
                        embedding_model=s.gemini_embedding_model, thinking_tokens=s.gemini_thinking_tokens,
                        **_common(s))


def build_watsonx(s: Settings) -> Any:
    return WatsonxClient(model=s.watsonx_model, url=s.watsonx_url, api_key=s.watsonx_api_key, token=s.watsonx_token,
                         project_id=s.watsonx_project_id, space_id=s.watsonx_space_id,
                         embedding_model=s.watsonx_embedding_model, **_common(s))


def build_openai(s: Settings) -> Any:
    client = OpenAICompatibleClient(
        model=s.openai_model, api_key=s.openai_api_key, base_url=s.openai_base_url, timeout=s.timeout,
        max_output_bytes=s.max_output_bytes, first_token_timeout=s.first_token_seconds,
        token_gap_timeout=s.token_gap_seconds, stream=s.stream, limit_param=s.token_limit_param,
        context_tokens=s.context_tokens, max_output_tokens=s.max_output_tokens)
    if s.openai_embedding_model:
        client.embedding_model = s.openai_embedding_model
    return client


BUILDERS: dict[str, Callable[[Settings], Any]] = {
    "offline": lambda s: OfflineClient(), "openai": build_openai, "bedrock": build_bedrock,
    "gemini": build_gemini, "watsonx": build_watsonx}


def build_client(name: str, settings: Settings) -> Any:
    """The client of provider ``name`` (``missing_sdk`` ProviderError when its extra is not installed)."""
    return BUILDERS[name](settings)


class ProviderRegistry:
    def __init__(self, settings: Settings, factories: dict[str, Callable[[Settings], Any]] | None = None):
        self.settings = settings
        self._factories = factories or {name: BUILDERS[name] for name in PROVIDERS
                                        if settings.configured(name) or name == settings.provider}
        KNOWN_SECRETS.update(settings.secrets)
        KNOWN_SECRETS.update(v for v in (os.environ.get(k) for k in AWS_SECRET_VARS) if v)
        self.active_name = settings.default_provider
        if self.active_name not in self._factories:
            self.active_name = "offline" if "offline" in self._factories else next(iter(self._factories))
        self._active: Any = None
        self.notice = ""  # Japanese: why the provider asked for at start is not the active one

    def model_of(self, name: str) -> str:
        """The configured model of provider ``name`` ("" for the offline provider)."""
        field_name = MODEL_FIELDS.get(name)
        return str(getattr(self.settings, field_name) or "") if field_name else ""

    def available(self) -> list[str]:
        return list(self._factories)

    def get_active(self) -> Any:
        if self._active is None:
            try:
                self._active = self._factories[self.active_name](self.settings)
            except ProviderError as err:
                if self.active_name == "offline" or "offline" not in self._factories:
                    raise
                self.notice = str(err)  # at start: the offline provider answers, and the page says why
                logger.warning("provider %s unavailable (%s): using the offline provider", self.active_name, err.kind)
                self.active_name = "offline"
                return self.get_active()
            self._configure(self._active)
        return self._active

    def _configure(self, client: Any) -> None:
        client.strategies = self.settings.strategies
        client.turn_deadline = self.settings.deadline_seconds
        client.max_output_bytes = self.settings.max_output_bytes
        client.max_repairs = self.settings.max_repairs
        if getattr(client, "max_output_tokens", None) is None:
            client.max_output_tokens = self.settings.max_output_tokens
        if callable(getattr(client, "probe", None)):
            info = client.probe()  # at start and on every switch: is the model served, what context
            if info.notice:
                logger.warning("model check: %s", info.notice)

    def set_active(self, name: str, *, model: str | None = None, strategies: tuple[str, ...] | None = None) -> Any:
        """Switch to provider ``name``. A provider that cannot be built (its SDK missing) raises the typed
        ProviderError and leaves the active client as it was."""
        if name not in self._factories:
            raise KeyError(f"unknown provider: {name}")
        changes: dict[str, Any] = {}
        if model and name in MODEL_FIELDS:
            changes[MODEL_FIELDS[name]] = model
        if strategies:
            changes["strategies"] = tuple(strategies)
        settings = replace(self.settings, **changes) if changes else self.settings
        client = self._factories[name](settings)  # raises before anything changes
        self.settings, self.active_name, self.notice = settings, name, ""
        self._active = client
        self._configure(client)
        return client


def model_notice(client: Any) -> str:
    """The Japanese notice when the server does not serve the configured model ("" otherwise or unknown)."""
    info = getattr(client, "server_info", None)
    return str(getattr(info, "notice", "") or "")


def describe(client: Any) -> str:
    """One line for the UI: which provider and model is answering."""
    name = getattr(client, "name", "?")
    label = PROVIDER_LABELS.get(name, name)
    model = getattr(client, "model", "")
    base_url = redact_url(getattr(client, "base_url", None))  # never show user:password@ or ?api-key=
    where = f" @ {base_url}" if base_url else ""
    return f"{label} · {model}{where}"
