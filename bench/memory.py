"""The console's memory as sessions come and go (issue #25): ``python -m bench.memory [--sessions 30]``.

Starts ``streamlit run app.py`` as the README says (headless, a free loopback port, the offline provider, a
new SQLite store in a temporary directory, or ``--db URL``), and reads the server's resident memory (RSS,
``/proc/<pid>/status``) before any session, after ``--sessions`` browser sessions were opened and closed
(Debian's Chromium through Playwright, one after another: each opens the console, asks the FAQ one
question, visits ナレッジライブラリ, デバッグログ and 分析 through the sidebar, then closes its tab), and
``--settle`` seconds after the last one closed. The server keeps a closed tab's session for
``server.disconnectedSessionTTL`` seconds (Streamlit's default 120 s, so a reload finds its state); the
bench sets it to ``--ttl`` (default 10 s) so the wait after the sessions is short.

Figures: ``memory_rss_mb_before`` / ``_after_sessions`` / ``_settled``, ``memory_growth_mb`` (settled − before)
and ``memory_growth_per_session_kb``, and the machine's load average. ``run(quick)`` is the section of
``python -m bench`` (10 sessions when quick).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.startup import CHROMIUM_ARGS, ROOT, SCRUBBED, START_TIMEOUT, _free_port, _healthy, _stop

PAGE_TIMEOUT_MS = 120_000
VISITS = (("ナレッジライブラリ", "ナレッジライブラリ"), ("デバッグログ", "デバッグログ・プロンプト調整"), ("分析", "分析"))


def rss_mb(pid: int) -> float:
    """The resident memory of process ``pid`` in MB (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def _wait_idle(page) -> None:
    """Until the script run the last action started has finished (Streamlit's running indicator is gone)."""
    page.wait_for_timeout(200)
    page.locator("[data-testid='stStatusWidget']").wait_for(state="detached", timeout=PAGE_TIMEOUT_MS)


def one_session(browser, url: str, n: int) -> None:
    """A user's visit: the console, one FAQ question, three more pages by the sidebar, then the tab closes."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="ja-JP")
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page = context.new_page()
        page.goto(f"{url}/faq", timeout=PAGE_TIMEOUT_MS)
        page.get_by_role("heading", name="FAQ").wait_for(timeout=PAGE_TIMEOUT_MS)
        box = page.locator("[data-testid='stChatInput'] textarea")
        box.fill(f"オイル交換の目安は？（{n}）")
        box.press("Enter")
        page.locator("[data-testid='stChatMessage']").nth(1).wait_for(timeout=PAGE_TIMEOUT_MS)
        _wait_idle(page)
        for link, heading in VISITS:
            page.locator("[data-testid='stSidebarNav'] a", has_text=link).first.click()
            page.get_by_role("heading", name=heading).first.wait_for(timeout=PAGE_TIMEOUT_MS)
            _wait_idle(page)
    finally:
        context.close()


def measure(sessions: int, settle: float, ttl: int, db_url: str | None = None, log=lambda *_: None) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright  # lazy: a test tool, only when this section runs

    chromium = shutil.which("chromium")
    if chromium is None:
        raise RuntimeError("Debian's chromium is not installed (apt-get install chromium fonts-noto-cjk)")
    with tempfile.TemporaryDirectory(prefix="kaiwa-memory-") as tmp:
        work = Path(tmp)
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        env.update(KAIWA_DB_URL=db_url or f"sqlite:///{work / 'kaiwa.db'}", KAIWA_CHROMA_PATH=str(work / "chroma"))
        command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                   "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats",
                   "false", "--server.disconnectedSessionTTL", str(ttl)]
        server_log = work / "streamlit.log"
        with server_log.open("wb") as out:
            process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        started = time.monotonic()
        try:
            while not _healthy(url):
                if process.poll() is not None or time.monotonic() - started > START_TIMEOUT:
                    raise RuntimeError(server_log.read_text(errors="replace")[-2000:])
                time.sleep(0.1)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
                try:
                    one_session(browser, url, 0)  # the first visit imports and warms everything: the baseline
                    time.sleep(ttl + 5)
                    before = rss_mb(process.pid)
                    log(f"  before: {before:.0f} MB")
                    for n in range(1, sessions + 1):
                        one_session(browser, url, n)
                        if n % 5 == 0:
                            log(f"  {n} sessions: {rss_mb(process.pid):.0f} MB")
                    after = rss_mb(process.pid)
                finally:
                    browser.close()
            time.sleep(max(settle, ttl + 5))
            settled = rss_mb(process.pid)
            log(f"  after {sessions} sessions: {after:.0f} MB, {settle:.0f} s later: {settled:.0f} MB")
        finally:
            _stop(process)
    return {"memory_sessions": sessions, "memory_rss_mb_before": round(before, 1),
            "memory_rss_mb_after_sessions": round(after, 1), "memory_rss_mb_settled": round(settled, 1),
            "memory_growth_mb": round(settled - before, 1),
            "memory_growth_per_session_kb": round((settled - before) * 1024 / sessions, 1),
            "memory_settle_s": settle, "memory_session_ttl_s": ttl,
            "memory_load_average": round(os.getloadavg()[0], 1)}


def run(quick: bool = False) -> dict[str, Any]:
    """The section of ``python -m bench``: 10 sessions (quick) or 30."""
    return measure(10 if quick else 30, settle=20, ttl=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--settle", type=float, default=30, help="seconds to wait after the last session closed")
    parser.add_argument("--ttl", type=int, default=10, help="server.disconnectedSessionTTL for the run (seconds)")
    parser.add_argument("--db", metavar="URL", default=None, help="the store (default: a new SQLite file)")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.sessions, args.settle, args.ttl, args.db,
                             log=lambda *a: print(*a, file=sys.stderr, flush=True))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
