"""``from core import ...``: the engine's documented entry points (docs/python-api.md), each the very object of
the module it lives in, loaded only when asked for, and used as the documentation shows."""
from __future__ import annotations

import importlib
import subprocess
import sys

import core
from core.paths import ROOT


def test_every_public_name_is_its_modules_own_object():
    assert sorted(core.PUBLIC) == core.__all__
    for name, module in core.PUBLIC.items():
        assert getattr(core, name) is getattr(importlib.import_module(module), name), name
    assert set(core.__all__) <= set(dir(core))


def test_the_engine_loads_only_when_a_public_name_is_used():
    code = ("import sys, core.text.normalize; assert 'core.engine' not in sys.modules; "
            "from core import structured_call; assert 'core.engine' in sys.modules; "
            "from core import workbench; print(workbench.__name__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "core.workbench", done.stderr[-2000:]


def test_an_unknown_name_is_an_attribute_error():
    try:
        core.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("core.no_such_name resolved")


def test_the_documented_example_runs():
    from core import ScriptedClient, structured_call

    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
              "additionalProperties": False}
    client = ScriptedClient(['{"answer": "はい"}'])
    result = structured_call(client, [{"role": "user", "content": "質問"}], schema=schema, name="answer")
    assert result.ok and result.data == {"answer": "はい"} and result.attempts == 1
