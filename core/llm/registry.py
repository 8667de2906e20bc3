"""Provider registry (seed 000 §12 ``get_active`` / ``set_active``): builds the active client.

An OpenAI-compatible client is checked against its server when it is built, at start and on every
provider switch (``OpenAICompatibleClient.probe``: ``GET /v1/models``, llama.cpp ``/props``): whether the
configured model is served (``model_notice``: a Japanese notice when it is not) and the context size the
server says, which then bounds every prompt unless ``KAIWA_CONTEXT_TOKENS`` is set."""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Callable

from core.llm.offline import OfflineClient
from core.llm.openai_compat import OpenAICompatibleClient
from core.llm.settings import Settings
from core.text.pii import KNOWN_SECRETS, redact_url

logger = logging.getLogger("kaiwa.llm")

PROVIDER_LABELS = {"offline": "オフライン（ルールベース）", "openai": "OpenAI 互換 API"}


class ProviderRegistry:
    def __init__(self, settings: Settings, factories: dict[str, Callable[[Settings], Any]] | None = None):
        self.settings = settings
        self._factories = factories or {
            "offline": lambda s: OfflineClient(),
            "openai": lambda s: OpenAICompatibleClient(
                model=s.openai_model, api_key=s.openai_api_key, base_url=s.openai_base_url, timeout=s.timeout,
                max_output_bytes=s.max_output_bytes, first_token_timeout=s.first_token_seconds,
                token_gap_timeout=s.token_gap_seconds, stream=s.stream, limit_param=s.token_limit_param,
                context_tokens=s.context_tokens, max_output_tokens=s.max_output_tokens),
        }
        if settings.openai_api_key:
            KNOWN_SECRETS.add(settings.openai_api_key)
        self.active_name = settings.default_provider
        self._active: Any = None

    def available(self) -> list[str]:
        return list(self._factories)

    def get_active(self) -> Any:
        if self._active is None:
            self._active = self._factories[self.active_name](self.settings)
            self._active.strategies = self.settings.strategies
            self._active.turn_deadline = self.settings.deadline_seconds
            self._active.max_output_bytes = self.settings.max_output_bytes
            self._active.max_repairs = self.settings.max_repairs
            if getattr(self._active, "max_output_tokens", None) is None:
                self._active.max_output_tokens = self.settings.max_output_tokens
            if callable(getattr(self._active, "probe", None)):
                info = self._active.probe()  # at start and on every switch: is the model served, what context
                if info.notice:
                    logger.warning("model check: %s", info.notice)
        return self._active

    def set_active(self, name: str, *, model: str | None = None, strategies: tuple[str, ...] | None = None) -> Any:
        if name not in self._factories:
            raise KeyError(f"unknown provider: {name}")
        changes: dict[str, Any] = {}
        if model:
            changes["openai_model"] = model
        if strategies:
            changes["strategies"] = tuple(strategies)
        if changes:
            self.settings = replace(self.settings, **changes)
        self.active_name = name
        self._active = None
        return self.get_active()


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
