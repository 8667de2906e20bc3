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
