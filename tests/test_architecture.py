"""The floor plan holds: layers import only downwards, the three flows are independent, no import
cycles, every module of core in a layer (``[tool.importlinter]`` in pyproject.toml, checked by import-linter); no
function-local import of our own code without a stated reason; pages hold layout only; every module says what
it holds."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "ui", "api", "pages")
MAX_PAGE_LINES = 200


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def _modules():
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def test_import_contracts_are_kept():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "4 kept, 0 broken" in result.stdout


@pytest.mark.parametrize("module, line, broken", [
    ("core/text/pii.py", "import core.faq.policy", "Inside core"),  # a text utility importing a flow
    ("core/rag/hybrid.py", "import core.diagnosis.models", "Inside core"),  # retrieval importing a flow
    ("core/faq/nodes.py", "import core.diagnosis.models", "independent"),  # one flow importing another
    ("core/engine.py", "import ui.safe", "Top level"),  # core importing the UI
    ("core/unlisted.py", '"""A module under core that no layer names."""', "not listed as layers"),  # exhaustive
])
def test_an_upward_import_breaks_a_contract(tmp_path, module, line, broken):
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    before = target.read_text(encoding="utf-8") if target.exists() else ""
    target.write_text(before + f"\n{line}\n", encoding="utf-8")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert broken in result.stdout.split("Broken contracts")[-1], result.stdout[-3000:]


def _function_local_imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lines = path.read_text(encoding="utf-8").splitlines()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom) and inner.module:
                names = [inner.module]
            elif isinstance(inner, ast.Import):
                names = [alias.name for alias in inner.names]
            else:
                continue
            if any(name.split(".")[0] in PACKAGES for name in names):
                yield inner.lineno, lines[inner.lineno - 1].strip()


def test_no_function_local_import_of_our_code_without_a_reason():
    """An import of our own code inside a function hides a dependency (or dodges a cycle); the few
    that keep a heavy dependency off the import path say so with ``# lazy: <why>``."""
    offenders = [f"{path.relative_to(ROOT)}:{lineno}: {text}" for path in _modules()
                 for lineno, text in _function_local_imports(path) if "# lazy:" not in text]
    assert not offenders, "\n".join(offenders)


def test_pages_hold_layout_only():
    long = {p.name: n for p in (ROOT / "pages").glob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_PAGE_LINES}
    assert not long, f"pages over {MAX_PAGE_LINES} lines (move widgets to ui/): {long}"


def test_every_module_says_what_it_holds():
    missing = [str(p.relative_to(ROOT)) for p in _modules()
               if p.stat().st_size and not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))]
    assert not missing, missing
