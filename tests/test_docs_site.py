"""The documentation: the MkDocs site builds with ``mkdocs build --strict`` (no broken page, link or anchor
warning), its API reference is generated from the OpenAPI schema FastAPI makes of the app, and the README
stays a newcomer's page whose links all lead somewhere."""
from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from core.paths import ROOT

README_MAX_LINES = 200


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(target)],
                           cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-5000:]
    return target


def _nav_pages(items) -> list[str]:
    pages = []
    for item in items:
        for value in (item.values() if isinstance(item, dict) else [item]):
            pages += _nav_pages(value) if isinstance(value, list) else [value.removesuffix(".md")]
    return pages


def test_every_page_of_the_nav_is_built(site):
    nav_pages = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    assert "index" in nav_pages and "api-reference" in nav_pages and "getting-started" in nav_pages
    for name in nav_pages:
        page = site / ("index.html" if name == "index" else f"{name}/index.html")
        assert page.is_file(), name


def test_the_api_reference_is_the_apps_own_openapi_schema(site):
    from api.main import app

    schema = app.openapi()
    served = json.loads((site / "api" / "openapi.json").read_text(encoding="utf-8"))
    assert served == json.loads(json.dumps(schema))  # the build wrote the schema of the app as it is now
    source = (site / "api-reference" / "index.html").read_text(encoding="utf-8")
    page = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", source)))
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert f"{method.upper()} {path}" in page, (method, path)
            if operation.get("summary"):
                assert operation["summary"] in page
    for name in schema["components"]["schemas"]:
        assert name in page, name


def test_the_readme_is_short_and_its_links_lead_somewhere():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not t.startswith(("http://", "https://"))]
    assert "docs/getting-started.md" in local and "docs/img/console.png" in local
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, missing
    image = ROOT / "docs" / "img" / "console.png"
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and image.stat().st_size < 200_000
