"""Prompt versions served from the store to every process on the same database (SQLite and PostgreSQL):
a running second process picks a saved version up without a restart, renders read memory (one stamp
query per refresh interval, a reload only when the stamp moved), a prompt file changed by a deploy is
never hidden by an older saved version, a debug record names the version its call actually used, and a
store that cannot be read leaves the prompts working."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import core.prompts as prompts
from core.debuglog import CallTags
from core.knowledge.turn import call_llm
from core.llm.offline import OfflineClient
from core.schemas import load_schema
from core.store.prompt_versions import StoredPrompts, list_prompt_versions, serve_prompts
from core.store.store import Store
from core.workbench import content_version, prompt_files, save_prompt_version

ROOT = Path(__file__).resolve().parents[3]

CHILD = r"""
import json, sys, time
from core.store import get_store
from core.prompts import prompt_version, render
get_store()  # the process's own store: KAIWA_DB_URL
first = prompt_version(sys.argv[1])
print(json.dumps([first, render(sys.argv[1])[:40]]), flush=True)
sys.stdin.readline()  # the parent saved a version meanwhile
deadline = time.monotonic() + 30
while prompt_version(sys.argv[1]) == first and time.monotonic() < deadline:
    time.sleep(0.05)
print(json.dumps([prompt_version(sys.argv[1]), render(sys.argv[1])[:40]]), flush=True)
"""


def test_a_version_saved_in_one_process_is_used_by_another_running_one(store_url, admin):
    name = "faq_intent_system"
    file_version = prompts.version_of((ROOT / "prompts" / f"{name}.md").read_text(encoding="utf-8"))
    env = {**os.environ, "KAIWA_DB_URL": store_url, "KAIWA_PROMPT_REFRESH": "0.2", "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, name], cwd=ROOT, env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        before = json.loads(child.stdout.readline() or "null")
        assert before is not None, child.stderr.read()
        assert before[0] == file_version  # nothing saved yet: the file
        store = Store(store_url)  # this process: another replica on the same database
        content = "【別ホストで保存した版】意図を分類して JSON だけを返してください。"
        saved = save_prompt_version(name, content, admin, store, note="レプリカ間")
        child.stdin.write("saved\n")
        child.stdin.flush()
        after = json.loads(child.stdout.readline() or "null")
        assert after is not None, child.stderr.read()
        assert after == [saved["version"], content[:40]]
        assert saved["previous_version"] == file_version  # the file it replaced is kept as a version
        assert [v["version"] for v in list_prompt_versions(store, name)] == [saved["version"], file_version]
        store.engine.dispose()
    finally:
        child.kill()
        child.wait(timeout=30)


@pytest.fixture
def prompt_dir(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "prompts"
    directory.mkdir()
    (directory / "greeting.md").write_text("こんにちは {{who}} さん\n", encoding="utf-8")
    monkeypatch.setattr(prompts, "PROMPTS_DIR", directory)
    return directory


def test_renders_read_memory_and_the_stamp_is_checked_once_per_interval(store, store_url, admin, prompt_dir,
                                                                        monkeypatch):
    now = [100.0]
    source = StoredPrompts(store, refresh=2.0, clock=lambda: now[0])
    prompts.set_prompt_source(source)
    for _ in range(200):
        assert prompts.render("greeting", who="佐藤") == "こんにちは 佐藤 さん"
    assert (source.stamp_checks, source.loads) == (1, 1)

    other = Store(store_url)  # another replica saves a version (its own reload never reaches this process)
    monkeypatch.setattr(prompt_files, "reload_prompts", lambda: None)
    saved = save_prompt_version("greeting", "ようこそ {{who}} 様", admin, other, prompts_dir=prompt_dir)
    now[0] += 1.9  # within the interval: still what this process had
    assert prompts.render("greeting", who="佐藤") == "こんにちは 佐藤 さん"
    now[0] += 0.2
    assert prompts.render("greeting", who="佐藤") == "ようこそ 佐藤 様"
    assert prompts.prompt_version("greeting") == saved["version"] == content_version("ようこそ {{who}} 様")
    assert (source.stamp_checks, source.loads) == (2, 2)
    now[0] += 5  # nothing changed: one stamp query, no reload
    assert prompts.render("greeting", who="佐藤") == "ようこそ 佐藤 様"
    assert (source.stamp_checks, source.loads) == (3, 2)
    other.engine.dispose()


def test_a_save_in_this_process_is_used_at_once(store, admin, prompt_dir):
    source = StoredPrompts(store, refresh=3600.0)
    prompts.set_prompt_source(source)
    assert prompts.load_prompt("greeting") == "こんにちは {{who}} さん"
    save_prompt_version("greeting", "はじめまして {{who}} さん", admin, store, prompts_dir=prompt_dir)
    assert prompts.load_prompt("greeting") == "はじめまして {{who}} さん"


def test_a_prompt_file_changed_by_a_deploy_wins_over_older_saved_versions(store, admin, prompt_dir):
    serve_prompts(store, refresh=0)
    path = prompt_dir / "greeting.md"
    first = save_prompt_version("greeting", "版A {{who}}", admin, store, prompts_dir=prompt_dir)
    assert prompts.load_prompt("greeting") == "版A {{who}}"
    path.write_text("デプロイで変わった文面 {{who}}\n", encoding="utf-8")  # never saved: newer than the store
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert prompts.load_prompt("greeting") == "デプロイで変わった文面 {{who}}"
    second = save_prompt_version("greeting", "版B {{who}}", admin, store, prompts_dir=prompt_dir)
    assert second["previous_version"] == prompts.version_of("デプロイで変わった文面 {{who}}")
    assert prompts.load_prompt("greeting") == "版B {{who}}"
    path.write_text("こんにちは {{who}} さん\n", encoding="utf-8")  # a host still on the old deploy
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 2_000_000))
    assert prompts.load_prompt("greeting") == "版B {{who}}"  # its file is a known, older version
    assert first["previous_version"] == prompts.version_of("こんにちは {{who}} さん")


class SavingDuringTheCall(OfflineClient):
    """The offline model, while another replica saves a new version of the prompt in flight."""

    def __init__(self, save):
        super().__init__()
        self.save = save

    def complete(self, request):
        self.save()
        return super().complete(request)


def test_a_debug_record_names_the_version_its_call_used(store, store_url, admin):
    serve_prompts(store, refresh=0)  # every load looks at the stamp: the save below is seen at once
    used = prompts.load_prompt("knowledge_system")
    used_version = prompts.prompt_version("knowledge_system")
    other = Store(store_url)
    newer = "新しい版のシステムプロンプト"
    client = SavingDuringTheCall(lambda: save_prompt_version("knowledge_system", newer, admin, other))
    log: list[dict] = []
    result = call_llm("契約の事例です。", None, used, [], client, load_schema("knowledge_llm_turn"),
                      load_schema("knowledge_llm_entry"), log=log,
                      tags=CallTags(session_id="c1", flow="knowledge", step="turn", prompt="knowledge_system"))
    assert result.ok
    [record] = log
    assert prompts.prompt_version("knowledge_system") == content_version(newer) != used_version
    assert record["prompt_version"] == used_version == record["prompt_versions"]["knowledge_system"]
    assert record["messages"][0]["content"] == used
    other.engine.dispose()


def test_a_store_that_cannot_be_read_leaves_the_prompts_working(store, admin, prompt_dir, monkeypatch):
    save_prompt_version("greeting", "保存版 {{who}}", admin, store, prompts_dir=prompt_dir)
    source = StoredPrompts(store, refresh=0)
    prompts.set_prompt_source(source)
    assert prompts.load_prompt("greeting") == "保存版 {{who}}"

    def unreachable():
        raise ConnectionError("database is down")

    monkeypatch.setattr(store, "_read", unreachable)
    assert prompts.load_prompt("greeting") == "保存版 {{who}}"  # the last versions it read
    prompts.set_prompt_source(StoredPrompts(store, refresh=0))  # a process that never reached it
    assert prompts.load_prompt("greeting") == "こんにちは {{who}} さん"  # the file
