"""Flow adapter registry: which ``run_scenario(scenario, client, log) -> dict`` plays each flow."""
from __future__ import annotations

import importlib
from typing import Any, Callable

FLOW_ADAPTERS = {
    "faq": "core.faq.scenario:run_scenario",
    "diagnosis": "core.diagnosis.scenario:run_scenario",
    "knowledge": "core.knowledge.scenario:run_scenario",
    "ask": "core.knowledge.ask_scenario:run_scenario",  # ナレッジに質問 against the store's library
}

Adapter = Callable[[dict[str, Any], Any, list], dict[str, Any]]


class AdapterUnavailable(RuntimeError):
    """The flow is unknown or its adapter module cannot be imported."""


def load_adapter(flow: str) -> Adapter:
    target = FLOW_ADAPTERS.get(flow)
    if target is None:
        raise AdapterUnavailable(f"unknown flow '{flow}' (known: {', '.join(sorted(FLOW_ADAPTERS))})")
    module_name, func_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AdapterUnavailable(f"flow '{flow}': adapter {target} is not available ({exc})") from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise AdapterUnavailable(f"flow '{flow}': {module_name} has no function {func_name}")
    return func
