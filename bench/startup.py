"""How soon a new user sees the console: ``python -m bench.startup [--rounds N] [--screenshot PNG]``.

Starts ``streamlit run app.py`` as the README says (headless, a free loopback port, the offline provider, a
new SQLite store in a temporary directory), opens it in Debian's Chromium (Playwright, headless) and times,
from the start of the process: the server's health check answering 200, and the first page rendered (its
title and chat input on screen), and the server's CPU time until then. Goal: the first page within 5 s. Also
the ratio of the two waits, how much of it is the page's own first run (imports, store, first render) rather
than the server starting. On a loaded machine the wall time stretches; the CPU time much less. ``--screenshot`` saves the rendered page
(docs/img/console.png is made with it).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT = 120.0
FIRST_PAGE_TITLE = "契約ナレッジ作成"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
# a developer's provider, store or admin settings would change what starts
SCRUBBED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "KAIWA_PROVIDER", "KAIWA_DB_URL", "CHROMA_HOST",
            "KAIWA_ADMINS", "KAIWA_ADMIN_PASSWORD", "KAIWA_TRUST_PROXY_HEADERS")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=1) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait(timeout=15)


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system) the server process has used so far: on a quiet machine the first page's wait
    is about this, since the first run imports and renders on one thread; load stretches the wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _render(browser, url: str):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="ja-JP")
    page = context.new_page()
    page.goto(url, timeout=START_TIMEOUT * 1000)
    page.get_by_role("heading", name=FIRST_PAGE_TITLE).wait_for(timeout=START_TIMEOUT * 1000)
    page.locator("[data-testid='stChatInput'] textarea").wait_for(timeout=START_TIMEOUT * 1000)
    return context, page


def _warm_page(browser, url: str) -> float:
    """Seconds a second visitor waits for the same page: the browser's and the page's own share, with the
    server's imports and caches already warm."""
    started = time.perf_counter()
    context, _ = _render(browser, url)
    took = time.perf_counter() - started
    context.close()
    return took


def first_page(browser, work: Path, screenshot: Path | None = None) -> dict:
    """One cold start: seconds from ``streamlit run`` to health 200 and to the first page rendered."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(KAIWA_DB_URL=f"sqlite:///{work / 'kaiwa.db'}", KAIWA_CHROMA_PATH=str(work / "chroma"))
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port",
               str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    with (work / "streamlit.log").open("wb") as log:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        while not _healthy(url):
            if process.poll() is not None or time.perf_counter() - started > START_TIMEOUT:
                raise RuntimeError((work / "streamlit.log").read_text(errors="replace")[-2000:])
            time.sleep(0.05)
        health = time.perf_counter() - started
        context, page = _render(browser, url)
        rendered = time.perf_counter() - started
        cpu = _cpu_seconds(process.pid)
        if screenshot:
            page.wait_for_timeout(1500)  # let the sidebar and fonts settle for the picture
            page.screenshot(path=str(screenshot))
        context.close()
        return {"health_s": health, "first_page_s": rendered, "cpu_s": cpu, "warm_s": _warm_page(browser, url)}
    finally:
        _stop(process)


def measure(rounds: int, screenshot: Path | None = None) -> dict:
    from playwright.sync_api import sync_playwright  # lazy: a test tool, only when this section runs

    chromium = shutil.which("chromium")
    if chromium is None:
        raise RuntimeError("Debian's chromium is not installed (apt-get install chromium fonts-noto-cjk)")
    runs = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            for index in range(rounds):
                with tempfile.TemporaryDirectory(prefix="kaiwa-startup-") as work:
                    runs.append(first_page(browser, Path(work), screenshot if index == rounds - 1 else None))
        finally:
            browser.close()
    first = statistics.median(run["first_page_s"] for run in runs)
    health = statistics.median(run["health_s"] for run in runs)
    cpu = statistics.median(run["cpu_s"] for run in runs)
    warm = statistics.median(run["warm_s"] for run in runs)
    return {"first_page_s": round(first, 2), "first_page_server_cpu_s": round(cpu, 2), "server_health_s": round(health, 2),
            "second_visit_s": round(warm, 2),
            "first_page_vs_health": round(first / health, 2), "startup_rounds": rounds,
            "startup_load_average": round(os.getloadavg()[0], 1)}


def run(quick: bool = False) -> dict:
    """The section of ``python -m bench``: median of 1 (quick) or 3 cold starts."""
    return measure(1 if quick else 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--screenshot", type=Path, help="save the last round's rendered first page (PNG)")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.rounds, args.screenshot)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
