"""Document extraction overhead: ``core.documents.extract_document`` vs plain pypdf text extraction.

Both read the same real-world PDFs (``../shared/testdata/pdf-samples``, made by pdfTeX,
LibreOffice, Google Docs, ImageMagick; the encrypted one with its password). Plain pypdf is
``PdfReader(...).pages[i].extract_text()`` for every page; ours adds the budgets (pages, characters,
time), paragraph rebuilding, encryption and error handling. ``extract_overhead_vs_pypdf`` is
total time ours / pypdf over all files, median of a few rounds with the two alternating.
"""
from __future__ import annotations

import io
import statistics
import time
from pathlib import Path

from core.paths import ROOT

SAMPLES = ROOT.parent / "shared" / "testdata" / "pdf-samples"
PASSWORDS = {"libreoffice-writer-password.pdf": "openpassword"}


def _plain(name: str, data: bytes) -> str:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        reader.decrypt(PASSWORDS.get(name, ""))
    return "\n".join(page.extract_text() or "" for page in reader.pages)


def run(quick: bool = False, samples: Path = SAMPLES) -> dict:
    from core.documents import extract_document

    files = [(p.name, p.read_bytes()) for p in sorted(Path(samples).glob("*.pdf"))]
    if not files:
        return {}
    rounds = 3 if quick else 7
    ours, plain = [], []
    for _ in range(rounds + 1):
        t0 = time.perf_counter()
        for name, data in files:
            extract_document(name, data, password=PASSWORDS.get(name))
        ours.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for name, data in files:
            _plain(name, data)
        plain.append(time.perf_counter() - t0)
    ours, plain = ours[1:], plain[1:]  # the first round warms imports and caches
    return {"extract_overhead_vs_pypdf": round(statistics.median(ours) / statistics.median(plain), 2),
            "extract_ms": round(statistics.median(ours) * 1000, 1), "pypdf_ms": round(statistics.median(plain) * 1000, 1),
            "extract_files": len(files)}


if __name__ == "__main__":
    print(run(quick=True))
