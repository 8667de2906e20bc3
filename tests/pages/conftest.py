"""AppTest helpers for page tests."""
from pathlib import Path

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture
def app():
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    assert not at.exception
    return at


@pytest.fixture
def deferred(monkeypatch):
    """The download buttons' callables, by file name (what runs when the user clicks)."""
    made: dict[str, object] = {}
    original = MediaFileManager.add_deferred

    def capture(self, callable_, mimetype, coordinates, file_name=None, **kwargs):
        made[file_name] = callable_
        return original(self, callable_, mimetype, coordinates, file_name=file_name, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", capture)
    return made
