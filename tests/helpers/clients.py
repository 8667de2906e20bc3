"""Test clients shared by several test packages."""
from __future__ import annotations

from core.llm.offline import OfflineClient


class RecordingClient(OfflineClient):
    """The offline provider, keeping every request it was sent."""

    def __init__(self):
        super().__init__()
        self.requests = []

    def complete(self, request):
        self.requests.append(request)
        return super().complete(request)


class PromptFollowingAskClient:
    """A scripted model for ナレッジに質問 that reads its system prompt: with ``marker`` in it, it answers from
    the second entry it was shown, else from the first (quoted as the offline policy quotes, so the answer
    guards pass). For tests of a prompt draft that changes which entry an answer cites."""

    name = "scripted"
    model = "prompt-follower"
    MARKER = "【下書き】二番目に関連するナレッジだけを根拠にする"

    def __init__(self, marker: str = MARKER):
        self.marker = marker
        self.systems: list[str] = []

    def complete(self, request):
        import json
        from types import SimpleNamespace

        from core.knowledge.ask import offline_answer
        from core.llm.base import LLMResponse

        system = next((m["content"] for m in request.messages if m["role"] == "system"), "")
        self.systems.append(system)
        entries = sorted((request.context or {}).get("entries") or [], key=lambda e: -float(e.get("score") or 0))
        chosen = entries[1:2] if self.marker in system and len(entries) > 1 else entries[:1]
        text = json.dumps(offline_answer(SimpleNamespace(context={"entries": chosen})), ensure_ascii=False)
        if request.tools:
            return LLMResponse(tool_arguments=text, model=self.model, usage={"total_tokens": 0})
        return LLMResponse(content=text, model=self.model, usage={"total_tokens": 0})
