"""Browser test fixtures: one ``streamlit run app.py`` on a free loopback port for the whole session
(its own SQLite store, offline provider), Debian's Chromium driven by Playwright, a new context per
"browser", and a screenshot of every open page when a test fails."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 90  # seconds for the server to answer /_stcore/health
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
# The server never sees a real provider, an admin list or proxy trust from the developer's shell.
SCRUBBED_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "KAIWA_PROVIDER", "KAIWA_STRATEGIES",
                "CHROMA_HOST", "KAIWA_ADMINS", "KAIWA_ADMIN_PASSWORD", "KAIWA_TRUST_PROXY_HEADERS", "KAIWA_DB_URL")


@dataclass(frozen=True)
class Server:
    url: str  # http://127.0.0.1:<port>
    db_url: str  # the store the server writes to (open it with core.store.store.Store(db_url))
    log: Path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-limit:]
    except OSError:
        return ""


def _stop(process: subprocess.Popen) -> None:
    """Terminate the server's whole process group (Streamlit may start helpers), then make sure."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=15)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        message = "Debian's chromium is not installed (apt-get install chromium fonts-noto-cjk); browser tests need it"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return path


@contextlib.contextmanager
def run_server(work: Path, db_url: str | None = None):
    """``streamlit run app.py`` on a free port with its own store in ``work`` (or ``db_url``); the process
    group is killed on exit."""
    db_url = db_url or f"sqlite:///{work / 'e2e.db'}"
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["KAIWA_DB_URL"] = db_url
    env["KAIWA_CHROMA_PATH"] = os.environ.get("KAIWA_CHROMA_PATH") or str(work / "chroma")
    env["PYTHONUNBUFFERED"] = "1"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = work / "streamlit.log"
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
               "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _healthy(url):
            if process.poll() is not None:
                pytest.fail(f"streamlit exited with {process.returncode}:\n{_tail(log)}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit did not answer {url}/_stcore/health within {START_TIMEOUT} s:\n{_tail(log)}",
                            pytrace=False)
            time.sleep(0.25)
        yield Server(url=url, db_url=db_url, log=log)
    finally:
        _stop(process)


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
    servers = [request.getfixturevalue(name) for name in ("server", "fresh_server") if name in request.fixturenames]

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
            print(f"--- streamlit log ({running.log}) ---\n{_tail(running.log)}")


@pytest.fixture(scope="session")
def server_store(server):
    """The server's own store, read directly to check what the browser did."""
    from core.store.store import Store

    store = Store(server.db_url)
    yield store
    store.engine.dispose()
