"""Browser test fixtures: one ``streamlit run app.py`` on a free loopback port for the whole session
(its own SQLite store, offline provider), Debian's Chromium driven by Playwright, a new context per
"browser", and a screenshot of every open page when a test fails."""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pytest

from tests.helpers.processes import free_port, stop_group

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 90  # seconds for the server to answer /_stcore/health
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
# The server never sees a real provider, an admin list or proxy trust from the developer's shell.
SCRUBBED_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "KAIWA_PROVIDER", "KAIWA_STRATEGIES",
                "CHROMA_HOST", "CHROMA_PORT", "CHROMA_DATABASE", "KAIWA_ADMINS", "KAIWA_ADMIN_PASSWORD",
                "KAIWA_TRUST_PROXY_HEADERS", "KAIWA_DB_URL", "KAIWA_PROMPT_REFRESH", "KAIWA_REVIEWERS", "KAIWA_REVIEW_SAMPLE")


@dataclass(frozen=True)
class Server:
    url: str  # http://127.0.0.1:<port>
    db_url: str  # the store the server writes to (open it with core.store.store.Store(db_url))
    log: Path
    health: str = "/_stcore/health"  # the path that answers 200 once it is ready


def _healthy(url: str, path: str = "/_stcore/health") -> bool:
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-limit:]
    except OSError:
        return ""


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        message = "Debian's chromium is not installed (apt-get install chromium fonts-noto-cjk); browser tests need it"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return path


def spawn(command: list[str], work: Path, name: str, env_overrides: Mapping[str, str] | None = None,
          health: str = "/_stcore/health") -> tuple[subprocess.Popen, Server]:
    """Start ``command`` (with ``{port}`` filled in by a free loopback port) in its own process group,
    with the developer's provider / admin / proxy / store settings scrubbed and ``env_overrides`` set;
    its own SQLite store and Chroma path in ``work`` unless overridden. Does not wait: see :func:`wait_healthy`."""
    overrides = dict(env_overrides or {})
    db_url = overrides.get("KAIWA_DB_URL") or f"sqlite:///{work / 'e2e.db'}"
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["KAIWA_DB_URL"] = db_url
    env["KAIWA_CHROMA_PATH"] = os.environ.get("KAIWA_CHROMA_PATH") or str(work / "chroma")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    port = free_port()
    log = work / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen([part.format(port=port) for part in command], cwd=ROOT, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    return process, Server(url=f"http://127.0.0.1:{port}", db_url=db_url, log=log, health=health)


def wait_healthy(process: subprocess.Popen, server: Server) -> None:
    """Wait until ``server`` answers its health URL with 200 (a test failure, with its log, otherwise)."""
    deadline = time.monotonic() + START_TIMEOUT
    while not _healthy(server.url, server.health):
        if process.poll() is not None:
            pytest.fail(f"{server.log.stem} exited with {process.returncode}:\n{_tail(server.log)}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"{server.log.stem} did not answer {server.url}{server.health} within {START_TIMEOUT} s:\n"
                        f"{_tail(server.log)}", pytrace=False)
        time.sleep(0.25)


STREAMLIT = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", "{port}",
             "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
API = [sys.executable, "-m", "uvicorn", "api.main:app", "--host", "127.0.0.1", "--port", "{port}"]


@contextlib.contextmanager
def run_server(work: Path, env_overrides: Mapping[str, str] | None = None):
    """``streamlit run app.py`` on a free port with its own store in ``work`` (unless ``env_overrides``
    says otherwise); the process group is killed on exit."""
    process, server = spawn(STREAMLIT, work, "streamlit", env_overrides)
    try:
        wait_healthy(process, server)
        yield server
    finally:
        stop_group(process)


@pytest.fixture(scope="session")
def server(tmp_path_factory, chromium_path) -> Server:
    """The server every browser test shares."""
    with run_server(tmp_path_factory.mktemp("e2e-server")) as running:
        yield running


@pytest.fixture
def fresh_server(tmp_path_factory, chromium_path) -> Server:
    """A server of its own that no browser has visited yet (for first-visit behaviour)."""
    with run_server(tmp_path_factory.mktemp("e2e-fresh-server")) as running:
        yield running


@pytest.fixture(scope="session")
def chromium(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def new_browser(chromium, request, tmp_path):
    """``new_browser()`` opens a fresh browser (its own context: cookies, tabs, Streamlit session) on the
    app; on failure every page is screenshotted into the test's tmp dir and the server log is shown."""
    contexts = []
    servers = []
    for name in ("server", "fresh_server", "replicas"):  # whose logs to show on failure
        if name in request.fixturenames:
            value = request.getfixturevalue(name)
            servers.extend(getattr(value, "servers", None) or [value])

    def open_browser():
        context = chromium.new_context(viewport={"width": 1400, "height": 1000}, locale="ja-JP",
                                       timezone_id="Asia/Tokyo")
        context.set_default_timeout(60_000)
        contexts.append(context)
        return context.new_page()

    yield open_browser
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for c, context in enumerate(contexts):
        if failed:
            for p, page in enumerate(context.pages):
                shot = tmp_path / f"failure-browser{c}-page{p}.png"
                try:
                    page.screenshot(path=str(shot), full_page=True)
                    print(f"screenshot: {shot}")
                except Exception as exc:  # noqa: BLE001 - a failed screenshot must not hide the failure
                    print(f"screenshot failed: {exc}")
        context.close()
    if failed:
        for running in servers:
            print(f"--- {running.log.stem} log ({running.log}) ---\n{_tail(running.log)}")


@pytest.fixture(scope="session")
def server_store(server):
    """The server's own store, read directly to check what the browser did."""
    from core.store.store import Store

    store = Store(server.db_url)
    yield store
    store.engine.dispose()
