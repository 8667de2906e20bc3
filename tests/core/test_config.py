"""Settings and provider registry: offline without a key, OpenAI-compatible with one."""
from core.llm.offline import OfflineClient
from core.llm.openai_compat import OpenAICompatibleClient
from core.llm.registry import ProviderRegistry, describe
from core.llm.settings import load_settings


def test_no_key_means_offline():
    registry = ProviderRegistry(load_settings({}))
    client = registry.get_active()
    assert isinstance(client, OfflineClient) and registry.active_name == "offline"
    assert "オフライン" in describe(client)


def test_key_or_base_url_selects_openai_compatible():
    for env in ({"OPENAI_API_KEY": "sk-x"}, {"OPENAI_BASE_URL": "http://localhost:11434/v1", "OPENAI_MODEL": "qwen2.5"}):
        registry = ProviderRegistry(load_settings(env))
        client = registry.get_active()
        assert isinstance(client, OpenAICompatibleClient)
    assert client.model == "qwen2.5" and "localhost:11434" in describe(client)


def test_secrets_override_env_and_strategies_parse():
    settings = load_settings({"OPENAI_MODEL": "a", "KAIWA_STRATEGIES": "prompt_extract, bogus ,tool_call"},
                             secrets={"OPENAI_MODEL": "b", "KAIWA_DEBUG": "0"})
    assert settings.openai_model == "b" and not settings.debug
    assert settings.strategies == ("prompt_extract", "tool_call")
    assert load_settings({"KAIWA_PROVIDER": "offline", "OPENAI_API_KEY": "k"}).default_provider == "offline"


def test_set_active_switches_provider_model_and_strategy():
    registry = ProviderRegistry(load_settings({}))
    client = registry.set_active("openai", model="gpt-4.1-mini", strategies=("tool_call",))
    assert isinstance(client, OpenAICompatibleClient) and client.model == "gpt-4.1-mini"
    assert client.strategies == ("tool_call",)
    assert isinstance(registry.set_active("offline"), OfflineClient)
