"""Servers the tests start on loopback: a free port, the API under a real ``uvicorn``, and stopping a
server's whole process group (the browser tests' consoles, ``chroma run``)."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx

from core.paths import ROOT


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_group(process: subprocess.Popen, timeout: float = 15) -> None:
    """Terminate the process group ``process`` leads (started with ``start_new_session=True``: a server
    may start helpers), then kill it if it does not go."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=timeout)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout)


@contextlib.contextmanager
def uvicorn_api(db_url: str, *, start_timeout: float) -> Iterator[tuple[str, httpx.Response | None]]:
    """``uvicorn api.main:app`` on a free port with the store at ``db_url`` and the offline provider:
    ``(base URL, the first /healthz response or None if it never answered within start_timeout)``;
    the server is stopped on exit."""
    port = free_port()
    env = {**os.environ, "KAIWA_DB_URL": db_url, "KAIWA_PROVIDER": "offline"}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api.main:app", "--host", "127.0.0.1", "--port", str(port)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        health = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                health = httpx.get(f"{base}/healthz", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        yield base, health
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
