"""A new user's install, measured: ``python -m bench.install [--test] [--keep DIR]``.

Makes an empty virtualenv in a temporary directory, brings its pip up to date (not timed), then times the
README's install of the console, ``pip install -r requirements.txt``, from wheels only and with no pip cache
(``PIP_ONLY_BINARY=:all:``, ``PIP_NO_CACHE_DIR=1``, as ``.ci/run`` installs), and weighs the virtualenv; with
``--test`` (and in a full ``python -m bench`` run) then the tests' tools on top,
``pip install -r requirements-test.txt``. The goal is the console's install in at most 120 s on the 2-core
machine. Package downloads make the figure depend on the network as well as on the machine's load; pip's
CPU time (``install_*_cpu_s``) is the part load does not stretch.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = (("console", "requirements.txt"), ("test", "requirements-test.txt"))


def venv_mb(venv: Path) -> float:
    """The virtualenv's size on disk in MB (what ``du -s`` counts: allocated blocks)."""
    total = 0
    for path in venv.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.lstat().st_blocks * 512
    return round(total / 1e6, 1)


def _children_cpu() -> float:
    """CPU seconds used by finished child processes: pip's own work, which the machine's load does not stretch
    (the wall time also waits for downloads and for the CPU)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _pip(venv: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)


def measure(work: Path, test: bool) -> dict:
    """Install into a new virtualenv under ``work``: seconds and MB after each step."""
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PIP_ONLY_BINARY": ":all:", "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    _pip(venv, "install", "--quiet", "--upgrade", "pip", env=env).check_returncode()
    figures: dict = {}
    for name, requirements in STEPS if test else STEPS[:1]:
        started, cpu = time.perf_counter(), _children_cpu()
        done = _pip(venv, "install", "--quiet", "-r", requirements, env=env)
        if done.returncode:
            raise RuntimeError(f"pip install -r {requirements} failed:\n{done.stderr[-2000:]}")
        figures[f"install_{name}_s"] = round(time.perf_counter() - started, 1)
        figures[f"install_{name}_cpu_s"] = round(_children_cpu() - cpu, 1)
        figures[f"venv_{name}_mb"] = venv_mb(venv)
    figures["install_load_average"] = round(os.getloadavg()[0], 1)
    return figures


def run(quick: bool = False) -> dict:
    """The section of ``python -m bench``: the console's install (and, unless quick, the tests' tools)."""
    with tempfile.TemporaryDirectory(prefix="kaiwa-install-") as work:
        return measure(Path(work), test=not quick)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.install", description=__doc__.splitlines()[0])
    parser.add_argument("--test", action="store_true", help="then install requirements-test.txt on top")
    parser.add_argument("--keep", type=Path, help="make the virtualenv in this (empty) directory and keep it")
    args = parser.parse_args(argv)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        figures = measure(args.keep, args.test)
    else:
        with tempfile.TemporaryDirectory(prefix="kaiwa-install-") as work:
            figures = measure(Path(work), args.test)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
