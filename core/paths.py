"""Filesystem locations of the project's schemas, prompts and data (one place for every path)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS_DIR = ROOT / "schemas"
PROMPTS_DIR = ROOT / "prompts"
DATA_DIR = ROOT / "data"
