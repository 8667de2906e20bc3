"""``python -m bench --json``: stdout is one JSON object, whatever a section prints (its progress, a server it
starts) goes to stderr (issue #25)."""
from __future__ import annotations

import json
import subprocess
import sys
import types

import bench.__main__ as bench_main


def test_json_output_is_one_object_and_progress_goes_to_stderr(monkeypatch, capfd):
    probe = types.ModuleType("bench._probe")

    def run(quick: bool) -> dict:
        print("  built the 10000-chunk index in 1.0 s (persisted)")  # what bench.scale's first run prints
        subprocess.run([sys.executable, "-c", "print('a server started by the section')"], check=True)
        return {"probe_figure": 1.5, "quick": quick}

    probe.run = run
    monkeypatch.setitem(sys.modules, "bench._probe", probe)
    monkeypatch.setattr(bench_main, "SECTIONS", ("_probe",))
    assert bench_main.main(["--quick", "--json", "--only", "_probe"]) == 0
    out, err = capfd.readouterr()
    result = json.loads(out)  # the whole of stdout parses
    assert result["probe_figure"] == 1.5 and result["errors"] == {}
    assert "built the 10000-chunk index" in err and "a server started by the section" in err
