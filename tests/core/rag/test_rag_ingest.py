"""The ingestion command line over a temporary index, on both Chroma backends (a path, a `chroma run` server)."""
from __future__ import annotations

from rag_helpers import ingest_setup, make_pdf

from core.rag import ingest


def test_ingest_cli_builds_updates_and_adds_a_pdf(tmp_path, monkeypatch, capsys, chroma_backend):
    ingest_setup(tmp_path, monkeypatch, chroma_backend)

    assert ingest.main([]) == 0
    out = capsys.readouterr().out
    assert "car-a: 3 manual chunks indexed" in out and "total 3 chunks" in out

    assert ingest.main([]) == 0
    assert "manuals up to date" in capsys.readouterr().out

    pdf = tmp_path / "extra.pdf"
    pdf.write_bytes(make_pdf([["追加資料", "ルーフキャリアの取り付け方法"]]))
    assert ingest.main(["--pdf", str(pdf), "--vehicle", "car-a"]) == 0
    out = capsys.readouterr().out
    assert "extra.pdf: 1 chunks from 1 pages -> car-a" in out and "total 4 chunks" in out

    assert ingest.main(["--reset"]) == 0
    out = capsys.readouterr().out
    assert "collection reset" in out and "total 3 chunks" in out

    assert ingest.main(["--vehicle", "car-a"]) == 0
    assert "car-a: 3 manual chunks indexed" in capsys.readouterr().out
    assert ingest.main(["--vehicle", "nope"]) == 2
