"""A throwaway PostgreSQL cluster a test may stop and start (a database outage), never the shared one of
``KAIWA_TEST_PG_URL``: made with ``.ci/pg-start`` in a temporary folder, removed at the end. Needs the
Debian ``postgresql`` server binaries, which a configured ``KAIWA_TEST_PG_URL`` implies; without them
the test is skipped locally and fails under ``CI``."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]


def _bindir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: [int(x) for x in p.split("/")[4].split(".")
                                                                          if x.isdigit()])
    return found[-1] if found and os.path.exists(f"{found[-1]}/pg_ctl") else None


def shared_pg_url() -> str:
    """The shared test cluster's URL (``KAIWA_TEST_PG_URL``, which ``.ci/run`` sets): a test that needs it
    is skipped locally when it is not set, and fails under ``CI``."""
    url = os.environ.get("KAIWA_TEST_PG_URL", "").strip()
    if not url:
        if os.environ.get("CI"):
            pytest.fail("KAIWA_TEST_PG_URL is not set: .ci/run must start PostgreSQL (.ci/pg-start)", pytrace=False)
        pytest.skip("PostgreSQL not configured: set KAIWA_TEST_PG_URL (see docs/testing.md)")
    return url


CREATED: list[tuple[str, str]] = []  # (cluster URL, database URL) of each scratch database this process made


def track_scratch_databases() -> None:
    """Record every database ``core.store.db.create_scratch_database`` makes in this process (called by the
    tests' conftest before any test module imports it), so that the tests drop theirs and nobody else's: a
    benchmark's databases in the same cluster are left alone."""
    from core.store import db

    if getattr(db.create_scratch_database, "tracked", False):
        return
    create = db.create_scratch_database

    def tracked(admin_url: str, prefix: str = "kaiwa") -> str:
        url = create(admin_url, prefix)
        CREATED.append((admin_url, url))
        return url

    tracked.tracked = True  # type: ignore[attr-defined]
    db.create_scratch_database = tracked


def drop_created_since(mark: int) -> None:
    """Drop the scratch databases made since ``len(CREATED)`` was ``mark`` (``core.store.db.drop_database``:
    whatever connections a test's engines still hold to them are closed)."""
    from core.store.db import drop_database

    made, CREATED[mark:] = CREATED[mark:], []
    for admin_url, url in made:
        try:
            drop_database(admin_url, url)
        except Exception:  # noqa: BLE001, S110 - a cluster a test stopped or removed: nothing left to drop
            pass


def require_postgres() -> str:
    bindir = _bindir()
    if bindir is None or not os.environ.get("KAIWA_TEST_PG_URL", "").strip():
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not available: .ci/run must install it and set KAIWA_TEST_PG_URL")
        pytest.skip("PostgreSQL not configured: set KAIWA_TEST_PG_URL (see docs/testing.md)")
    return bindir


class ThrowawayPostgres:
    def __init__(self, folder: Path):
        self.bindir = require_postgres()
        self.folder = folder
        self.url = subprocess.run(["bash", str(ROOT / ".ci" / "pg-start"), str(folder)], check=True,
                                  capture_output=True, text=True, timeout=120).stdout.strip()
        self.port = make_url(self.url).port

    def _pg_ctl(self, *args: str) -> None:
        command = [f"{self.bindir}/pg_ctl", "-D", str(self.folder / "data"), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def stop(self) -> None:
        self._pg_ctl("-m", "immediate", "-w", "stop")

    def start(self) -> None:
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off "
                   "-c max_connections=200")
        self._pg_ctl("-l", str(self.folder / "server.log"), "-w", "-o", options, "start")

    def running(self) -> bool:
        return (self.folder / "data" / "postmaster.pid").exists()

    def destroy(self) -> None:
        if self.running():
            self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
