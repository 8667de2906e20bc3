"""Kaiwa Console core: the structured-turn engine and every flow, usable without Streamlit."""
from core.engine import RetryPolicy, structured_call
from core.knowledge.turn import build_messages, call_llm
from core.llm.base import LLMRequest, LLMResponse, ProviderError
from core.llm.scripted import ScriptedClient
from core.parsing import parse_structured_output
from core.results import StructuredResult, TurnResult
from core.validation import parse_and_validate_turn

__all__ = [
    "LLMRequest", "LLMResponse", "ProviderError", "RetryPolicy", "ScriptedClient", "StructuredResult",
    "TurnResult", "build_messages", "call_llm", "parse_and_validate_turn", "parse_structured_output",
    "structured_call",
]
