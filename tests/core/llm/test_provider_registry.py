"""The registry lists every configured provider, builds each from its SDK's settings, keeps every key out of
logs, and says in Japanese which extra to install when a provider's SDK is missing."""
from __future__ import annotations

import sys

import pytest

from core.llm.base import ProviderError
from core.llm.bedrock import BedrockClient
from core.llm.gemini import GeminiClient
from core.llm.offline import OfflineClient
from core.llm.registry import ProviderRegistry, describe
from core.llm.settings import load_settings
from core.llm.watsonx import WatsonxClient
from core.text.pii import KNOWN_SECRETS

ALL = {"KAIWA_BEDROCK_MODEL": "anthropic.claude-3-5-sonnet-20240620-v1:0", "AWS_REGION": "ap-northeast-1",
       "GEMINI_API_KEY": "AIza-registry-test-key-0123456789", "WATSONX_APIKEY": "wx-registry-test-key-0123456789",
       "WATSONX_PROJECT_ID": "proj-9", "WATSONX_URL": "https://jp-tok.ml.cloud.ibm.com"}


def test_only_configured_providers_are_listed():
    assert ProviderRegistry(load_settings({})).available() == ["offline", "openai"]
    assert ProviderRegistry(load_settings(ALL)).available() == ["offline", "openai", "bedrock", "gemini", "watsonx"]
    only_gemini = ProviderRegistry(load_settings({"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_CLOUD_PROJECT": "p"}))
    assert only_gemini.available() == ["offline", "openai", "gemini"]
    no_project = {"WATSONX_APIKEY": "k"}  # a key without a project or space cannot run inference
    assert "watsonx" not in ProviderRegistry(load_settings(no_project)).available()


def test_each_provider_is_built_from_its_settings_and_switching_keeps_the_chain():
    registry = ProviderRegistry(load_settings({**ALL, "KAIWA_STRATEGIES": "tool_call,prompt_extract"}))
    assert isinstance(registry.get_active(), OfflineClient)  # no OpenAI key: offline answers first
    bedrock = registry.set_active("bedrock")
    assert isinstance(bedrock, BedrockClient) and bedrock.region == "ap-northeast-1"
    assert bedrock.strategies == ("tool_call", "prompt_extract") and bedrock.turn_deadline > 0
    gemini = registry.set_active("gemini", model="gemini-2.5-pro")
    assert isinstance(gemini, GeminiClient) and gemini.model == "gemini-2.5-pro" and not gemini.vertexai
    assert registry.model_of("gemini") == "gemini-2.5-pro"
    watsonx = registry.set_active("watsonx")
    assert isinstance(watsonx, WatsonxClient) and watsonx.project_id == "proj-9"
    assert describe(watsonx) == "IBM watsonx.ai · ibm/granite-3-3-8b-instruct @ https://jp-tok.ml.cloud.ibm.com"
    assert "Amazon Bedrock" in describe(bedrock)


def test_every_key_is_a_known_secret(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-registry-test-0123456789")
    ProviderRegistry(load_settings(ALL))
    assert {ALL["GEMINI_API_KEY"], ALL["WATSONX_APIKEY"], "aws-secret-registry-test-0123456789"} <= KNOWN_SECRETS


@pytest.mark.parametrize("provider,module,extra", [
    ("bedrock", "boto3", "bedrock"), ("gemini", "google.genai", "gemini"), ("watsonx", "ibm_watsonx_ai", "watsonx")])
def test_a_missing_sdk_names_the_extra_and_changes_nothing(monkeypatch, provider, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError, as when the extra is not installed
    registry = ProviderRegistry(load_settings(ALL))
    before = registry.get_active()
    with pytest.raises(ProviderError) as caught:
        registry.set_active(provider)
    assert caught.value.kind == "missing_sdk"
    assert f"requirements-{extra}.txt" in str(caught.value) and f".[{extra}]" in str(caught.value)
    assert registry.get_active() is before and registry.active_name == "offline"


def test_a_provider_asked_for_at_start_without_its_sdk_leaves_the_offline_provider_and_a_notice(monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)
    registry = ProviderRegistry(load_settings({**ALL, "KAIWA_PROVIDER": "bedrock"}))
    assert isinstance(registry.get_active(), OfflineClient)
    assert "requirements-bedrock.txt" in registry.notice and "インストール" in registry.notice
