"""Test helpers for the retrieval tests: a hashing embedder, a tiny manual, a hand-made PDF."""
from __future__ import annotations

import hashlib

import numpy as np


class HashEmbedder:
    """Character-bigram hashing into 256 dims: same text → same vector, overlap → high cosine."""

    cosine_range = (0.0, 0.6)
    key = "hash256"

    def __init__(self):
        self.passage_calls = 0
        self.texts: list[str] = []

    @staticmethod
    def _vec(text: str) -> np.ndarray:
        v = np.zeros(256, dtype=np.float32)
        for a, b in zip(text, text[1:]):
            v[int(hashlib.md5((a + b).encode()).hexdigest()[:4], 16) % 256] += 1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    def passages(self, texts: list[str]) -> np.ndarray:
        self.passage_calls += 1
        self.texts.extend(texts)
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, 256), np.float32)

    def query_vector(self, text: str) -> np.ndarray:
        return self._vec(text)


def tiny_manual(vehicle_id: str = "test-car", extra: str = "") -> dict:
    sections = [
        ("ブレーキ", "ブレーキの効きが悪いとき", "danger", True,
         "ブレーキペダルが床まで沈む、踏みごたえがふわふわする場合は、ブレーキ液の漏れが考えられます。"
         "ただちに安全な場所に停車し、販売店に連絡してください。" + extra),
        ("警告灯", "エンジン警告灯", "warning", True,
         "エンジン警告灯が点灯したときは、故障コード（例：P0301 1番シリンダー失火）が記録されます。"),
        ("点検", "タイヤ空気圧", "specification", False,
         "タイヤ空気圧の規定値は前240kPa、後230kPaです。月に一度点検してください。"),
    ]
    return {"vehicle_id": vehicle_id, "title": "テスト車 取扱説明書", "sections": [
        {"section_id": f"{vehicle_id}:s{i:03d}", "chapter": ch, "section": sec, "page": 10 * i,
         "content_type": ct, "has_warning": hw, "keywords": [sec], "text": text}
        for i, (ch, sec, ct, hw, text) in enumerate(sections, 1)]}


def make_pdf(pages: list[list[str]]) -> bytes:
    """A minimal text PDF: each page is a list of lines (any Unicode BMP text).

    Glyphs are written as 2-byte CIDs (Identity-H) equal to the Unicode code points, and a
    ToUnicode CMap maps them back, so text extractors (pypdf) recover the text exactly.
    """
    chars = sorted({ord(c) for page in pages for line in page for c in line})
    cmap_lines = [f"<{c:04X}> <{c:04X}>" for c in chars]
    bf = []
    for i in range(0, len(cmap_lines), 100):
        part = cmap_lines[i:i + 100]
        bf.append(f"{len(part)} beginbfchar\n" + "\n".join(part) + "\nendbfchar")
    cmap = ("/CIDInit /ProcSet findresource begin\n12 dict begin\nbegincmap\n"
            "/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def\n"
            "/CMapName /Adobe-Identity-UCS def\n/CMapType 2 def\n"
            "1 begincodespacerange\n<0000> <FFFF>\nendcodespacerange\n" + "\n".join(bf) +
            "\nendcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n").encode()
    objects: list[bytes] = []
    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)
    font = add(b"")  # placeholder, filled below
    descendant = add(b"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /KaiwaGothic "
                     b"/CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> "
                     b"/FontDescriptor " + str(len(objects) + 1).encode() + b" 0 R /DW 1000 >>")
    add(b"<< /Type /FontDescriptor /FontName /KaiwaGothic /Flags 4 /FontBBox [0 -200 1000 900] "
               b"/ItalicAngle 0 /Ascent 900 /Descent -200 /CapHeight 700 /StemV 80 >>")
    tounicode = add(b"<< /Length %d >>\nstream\n" % len(cmap) + cmap + b"\nendstream")
    objects[font - 1] = (b"<< /Type /Font /Subtype /Type0 /BaseFont /KaiwaGothic /Encoding /Identity-H "
                         b"/DescendantFonts [%d 0 R] /ToUnicode %d 0 R >>" % (descendant, tounicode))
    pages_id = add(b"")
    kids = []
    for lines in pages:
        ops = ["BT", "/F1 12 Tf", "14 TL", "50 800 Td"]
        for line in lines:
            ops.append("<" + "".join(f"{ord(c):04X}" for c in line) + "> Tj T*")
        ops.append("ET")
        content = "\n".join(ops).encode()
        stream = add(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
        kids.append(add(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 595 842] "
                        b"/Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>" % (pages_id, font, stream)))
    objects[pages_id - 1] = (b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % k for k in kids) +
                             b"] /Count %d >>" % len(kids))
    catalog = add(b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id)
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, catalog, xref)
    return bytes(out)


def ingest_setup(tmp_path, monkeypatch, backend, vehicle_id: str = "car-a") -> HashEmbedder:
    """A manuals folder with one tiny manual, a fresh index on ``backend`` (a ``ChromaBackend``: a path or a
    database of the Chroma server, set in the environment) and a hash embedder, as the ingest CLI sees
    them; returns the embedder."""
    import json

    from core.rag import manual_retriever as mr

    manuals = tmp_path / "manuals"
    manuals.mkdir()
    (manuals / f"{vehicle_id}.json").write_text(json.dumps(tiny_manual(vehicle_id), ensure_ascii=False), encoding="utf-8")
    backend.use(monkeypatch)
    monkeypatch.setattr(mr, "MANUALS_DIR", manuals)
    emb = HashEmbedder()
    monkeypatch.setattr("core.rag.embeddings.get_default_embedder", lambda: emb)
    return emb
