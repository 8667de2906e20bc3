"""Fixtures the knowledge tests share."""
from __future__ import annotations

import pytest

from bench.knowledge_recall import load_library
from core.store.store import Store


@pytest.fixture
def library(tmp_path):
    """A store holding the recall set's confirmed library: ``(store, ids)`` (ids by the set's keys). Modules
    that need it once per module, with its index, define their own ``library``."""
    store = Store(f"sqlite:///{tmp_path / 'library.db'}")
    ids = load_library(store)
    yield store, ids
    store.engine.dispose()
