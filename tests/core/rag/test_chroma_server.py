"""The real Chroma server the retrieval tests run against: ``chroma run`` in its own process, reached
over HTTP by the console's own client settings (``CHROMA_HOST``/``CHROMA_PORT``/``CHROMA_DATABASE``),
databases kept apart; and under ``CI=1`` a server that cannot start fails the run instead of skipping."""
from __future__ import annotations

import numpy as np
import pytest
from _pytest.outcomes import Failed, Skipped

from core.rag import store
from tests.helpers import chroma_server


def test_the_console_reaches_the_server_through_its_environment(chroma_server, monkeypatch):
    assert chroma_server.heartbeat()
    first, second = chroma_server.new_database(), chroma_server.new_database()
    for name, value in chroma_server.environ(first).items():
        monkeypatch.setenv(name, value)
    client = store.make_client()
    assert type(client).__name__ == "Client" and client.get_settings().chroma_api_impl.endswith("FastAPI")
    collection = client.get_or_create_collection("kaiwa_probe", embedding_function=None)
    collection.add(ids=["a"], documents=["ブレーキ"], embeddings=[np.ones(4, dtype=np.float32)])
    assert chroma_server.client(first).get_collection("kaiwa_probe").count() == 1  # another client, same data
    assert chroma_server.client(second).list_collections() == []  # another database: nothing of it


def test_a_missing_server_fails_under_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setenv("CI", "1")
    with pytest.raises(Failed):
        chroma_server.unavailable("chroma run exited with 1")
    monkeypatch.delenv("CI")
    with pytest.raises(Skipped):
        chroma_server.unavailable("chroma run exited with 1")
