"""IBM's watsonx.ai SDK for the provider's wire tests, from its wheel alone.

``ibm-watsonx-ai`` requires ``ibm-cos-sdk``, which PyPI has as source only, so no requirements file can
install it wheels-only. The chat and embedding calls the console makes need neither that package nor the
older pandas the SDK pins: when the SDK is not installed, ``ensure()`` fetches the pinned wheel (hash-checked)
without its dependency list into ``var/test-sdk/`` once and puts it on ``sys.path``. Its other dependencies
(lomond, tabulate, cachetools, requests, httpx, pandas) come with ``requirements-test.txt``."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "var" / "test-sdk"
WHEEL = ("ibm-watsonx-ai==1.8.1 "
         "--hash=sha256:d8e1a06e58455a7515bc1c3fe585bd3f115ed15e648d1e5325aee06765e646ef")


def ensure(target: Path = TARGET) -> None:
    """Make ``import ibm_watsonx_ai`` work: the installed SDK if there is one, else the pinned wheel."""
    if importlib.util.find_spec("ibm_watsonx_ai") is not None:
        return
    if not (target / "ibm_watsonx_ai").is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as work:
            requirement = Path(work) / "requirement.txt"
            requirement.write_text(WHEEL + "\n", encoding="utf-8")
            staged = Path(work) / "sdk"
            done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary",
                                   ":all:", "--require-hashes", "--no-compile", "--target", str(staged),
                                   "-r", str(requirement)], capture_output=True, text=True, timeout=600)
            if done.returncode:
                raise RuntimeError(f"could not fetch {WHEEL.split()[0]} from PyPI: {done.stderr.strip()[-500:]}")
            if target.exists():  # another run got there first
                return _on_path(target)
            staged.replace(target)
    _on_path(target)


def _on_path(target: Path) -> None:
    if str(target) not in sys.path:
        sys.path.append(str(target))
    importlib.invalidate_caches()
