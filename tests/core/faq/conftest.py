"""FAQ test fixtures: a small fake KB (deterministic scores), a recording offline client, fast config."""
from __future__ import annotations

import pytest
from faq_fakes import ARTICLES, FakeRetriever, RecordingClient

from core.faq.config import FAQConfig
from core.faq.kb import KnowledgeBase


@pytest.fixture
def fake_kb():
    return KnowledgeBase(ARTICLES, retriever=FakeRetriever())


@pytest.fixture
def client():
    return RecordingClient()


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def config(sleeps):
    return FAQConfig(strict=True, sleep=sleeps.append)
