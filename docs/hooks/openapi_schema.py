"""MkDocs hook: writes the HTTP API's OpenAPI schema, as FastAPI generates it from ``api.main.app``, to
``docs/api/openapi.json`` before every build, so the API reference page (``[OAD(...)]``, rendered by the
neoteroi-mkdocs plugin) is never written by hand and never out of date. The file is not committed."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "docs" / "api" / "openapi.json"


def on_pre_build(config, **kwargs) -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from api.main import app  # the app as it is now: importing it opens no store and starts nothing

    SCHEMA.parent.mkdir(exist_ok=True)
    SCHEMA.write_text(json.dumps(app.openapi(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
