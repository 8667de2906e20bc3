"""A real Chroma server for the tests: ``chroma run`` (the chromadb package's own server) on a free
loopback port, telemetry off, data in a temp dir; ready when ``GET /api/v2/heartbeat`` answers 200.

``chroma_server`` is one server for the whole test session (``tests/conftest.py`` loads it). Tests keep
apart by database: :meth:`ChromaServer.new_database` makes an empty one, which a client reaches with
``client(database)`` or, through the environment the console reads, ``CHROMA_HOST`` / ``CHROMA_PORT`` /
``CHROMA_DATABASE`` (:meth:`ChromaServer.environ`). Under ``CI=1`` a server that cannot start is a
failure; elsewhere the tests that need it are skipped with the reason.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.processes import free_port, stop_group

START_TIMEOUT = 90.0  # seconds: `import chromadb` alone takes ~2.5 s on a busy 2-core machine
LAUNCH = "import sys; from chromadb.cli.cli import app; sys.argv[0] = 'chroma'; app()"
_databases = itertools.count(1)


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-limit:]
    except OSError:
        return ""


@dataclass(frozen=True)
class ChromaServer:
    host: str
    port: int
    path: Path
    log: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def heartbeat(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def new_database(self, prefix: str = "t") -> str:
        """A new, empty database on the server (in the default tenant); returns its name."""
        import chromadb

        from core.rag.store import chroma_settings

        name = f"{prefix}_{os.getpid()}_{next(_databases)}"
        admin = chromadb.AdminClient(chroma_settings_for(self, chroma_settings()))
        admin.create_database(name)
        return name

    def client(self, database: str = "default_database"):
        import chromadb

        from core.rag.store import chroma_settings

        return chromadb.HttpClient(host=self.host, port=self.port, database=database, settings=chroma_settings())

    def environ(self, database: str) -> dict[str, str]:
        """The variables that point the console (``core.rag.store.make_client``) at ``database``."""
        return {"CHROMA_HOST": self.host, "CHROMA_PORT": str(self.port), "CHROMA_DATABASE": database}


def chroma_settings_for(server: ChromaServer, settings):
    settings.chroma_api_impl = "chromadb.api.fastapi.FastAPI"
    settings.chroma_server_host = server.host
    settings.chroma_server_http_port = server.port
    return settings


@contextlib.contextmanager
def run_chroma(work: Path):
    """``chroma run`` with its data in ``work``; yields a ready :class:`ChromaServer`, stops its process
    group on exit. Raises RuntimeError (with the server's log) when it does not come up."""
    work.mkdir(parents=True, exist_ok=True)
    server = ChromaServer(host="127.0.0.1", port=free_port(), path=work / "data", log=work / "chroma.log")
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-c", LAUNCH, "run", "--path", str(server.path), "--host", server.host,
               "--port", str(server.port)]
    with server.log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not server.heartbeat():
            if process.poll() is not None:
                raise RuntimeError(f"chroma run exited with {process.returncode}:\n{_tail(server.log)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"chroma run did not answer {server.url}/api/v2/heartbeat within "
                                   f"{START_TIMEOUT:.0f} s:\n{_tail(server.log)}")
            time.sleep(0.1)
        yield server
    finally:
        stop_group(process)


def unavailable(reason: str):
    """Fail under CI (the server is a required part of the suite there), skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"Chroma server unavailable: {reason}", pytrace=False)
    pytest.skip(f"Chroma server unavailable: {reason}")


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """One ``chroma run`` for the test session (see module docstring)."""
    try:
        context = run_chroma(tmp_path_factory.mktemp("chroma-server"))
        server = context.__enter__()
    except Exception as exc:  # noqa: BLE001 - ImportError, OSError, RuntimeError: reported as one reason
        unavailable(str(exc)[:3000])
    try:
        yield server
    finally:
        context.__exit__(None, None, None)


class ChromaBackend:
    """Where a test's Chroma data lives, on one of the two backends the console supports: ``persistent``
    (``PersistentClient`` in a temp dir, ``KAIWA_CHROMA_PATH``) or ``server`` (``HttpClient`` on the
    session's ``chroma run``, ``CHROMA_HOST``/``CHROMA_PORT``/``CHROMA_DATABASE``). ``place`` names one
    index: clients for the same place see the same data (two replicas), other places are empty."""

    def __init__(self, kind: str, root: Path, server: ChromaServer | None = None):
        self.kind = kind
        self.root = root
        self.server = server
        self._databases: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"ChromaBackend({self.kind})"

    def _database(self, place: str) -> str:
        if place not in self._databases:
            assert self.server is not None
            self._databases[place] = self.server.new_database()
        return self._databases[place]

    def client(self, place: str = "index"):
        import chromadb

        from core.rag.store import chroma_settings

        if self.server is None:
            return chromadb.PersistentClient(path=str(self.root / place), settings=chroma_settings())
        return self.server.client(self._database(place))

    def environ(self, place: str = "index") -> dict[str, str]:
        """The variables that point ``core.rag.store.make_client`` (the console, the ingest CLI) at ``place``."""
        if self.server is None:
            return {"KAIWA_CHROMA_PATH": str(self.root / place)}
        return self.server.environ(self._database(place))

    def use(self, monkeypatch, place: str = "index") -> None:
        for name in ("KAIWA_CHROMA_PATH", "CHROMA_HOST", "CHROMA_PORT", "CHROMA_DATABASE"):
            monkeypatch.delenv(name, raising=False)
        for name, value in self.environ(place).items():
            monkeypatch.setenv(name, value)

    def client_source(self, place: str = "index") -> str:
        """Python source that binds ``client`` to ``place`` (for a test's second process)."""
        head = "import chromadb\nfrom chromadb.config import Settings\nsettings = Settings(anonymized_telemetry=False)\n"
        if self.server is None:
            return head + f"client = chromadb.PersistentClient(path={str(self.root / place)!r}, settings=settings)\n"
        return head + (f"client = chromadb.HttpClient(host={self.server.host!r}, port={self.server.port}, "
                       f"database={self._database(place)!r}, settings=settings)\n")


CHROMA_BACKENDS = ("persistent", "server")


def make_backend(request, kind: str, root: Path) -> ChromaBackend:
    server = request.getfixturevalue("chroma_server") if kind == "server" else None
    return ChromaBackend(kind, root, server)


@pytest.fixture(params=CHROMA_BACKENDS)
def chroma_backend(request, tmp_path) -> ChromaBackend:
    """One test, run once per backend (see :class:`ChromaBackend`)."""
    return make_backend(request, request.param, tmp_path / "chroma-backend")
