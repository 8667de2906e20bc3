"""DOCX text through python-docx (paragraphs and tables in document order), after a streaming
pre-check of the zip within the budgets (members, declared sizes, paragraphs and cells, column spans)."""
from __future__ import annotations

import codecs
import io
import unicodedata
import zipfile

from core.documents import budget as limits
from core.documents.budget import Budget
from core.documents.document import ExtractedDocument

_MB = 1024 * 1024
_W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_W_P, _W_TR, _W_TC = (f"{{{_W_NS}}}{tag}" for tag in ("p", "tr", "tc"))
_W_GRID_SPAN, _W_VAL = f"{{{_W_NS}}}gridSpan", f"{{{_W_NS}}}val"


def _docx_precheck(data: bytes) -> str | None:
    """A Japanese error if the zip is not within the DOCX budget, before python-docx reads it:
    declared member sizes (zipfile never inflates a member past its declared size), member count,
    paragraphs / rows / cells over every XML member, whatever its name (a streaming parse that stops
    at the limit), and column spans."""
    from lxml import etree

    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError):
        return "DOCX を読み取れませんでした（ファイルが壊れているか DOCX 形式ではありません）。"
    with archive:
        members = archive.infolist()
        if len(members) > limits.MAX_DOCX_MEMBERS:
            return f"DOCX の中のファイル数が多すぎます（{len(members):,} 個、上限 {limits.MAX_DOCX_MEMBERS:,} 個）。"
        total = sum(m.file_size for m in members)
        if total > limits.MAX_DOCX_UNCOMPRESSED:
            return (f"DOCX の展開後のサイズが大きすぎます（{total / _MB:,.0f} MB、"
                    f"上限 {limits.MAX_DOCX_UNCOMPRESSED // _MB} MB）。圧縮爆弾の可能性があります。")
        blocks = 0
        for member in members:
            if member.is_dir():
                continue
            try:
                with archive.open(member) as stream:  # XML by its content: a part may have any name
                    head = stream.read(64)
                    if not (head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<")
                            or head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))):
                        continue
                with archive.open(member) as stream:
                    for _, element in etree.iterparse(stream, events=("end",), tag=(_W_P, _W_TR, _W_TC, _W_GRID_SPAN),
                                                      resolve_entities=False, no_network=True, load_dtd=False,
                                                      huge_tree=False):
                        if element.tag == _W_GRID_SPAN:
                            span = element.get(_W_VAL, "1")
                            if not span.isdigit() or int(span[:6]) > limits.MAX_DOCX_GRID_SPAN:
                                return "DOCX の表の列の結合が不正です（ファイルが壊れている可能性があります）。"
                            continue
                        blocks += 1
                        if blocks > limits.MAX_DOCX_PARAGRAPHS:
                            return (f"DOCX の段落・表のセルが多すぎます（上限 {limits.MAX_DOCX_PARAGRAPHS:,} 個）。"
                                    "ファイルを分けて添付してください。")
                        if element.tag == _W_P:
                            element.clear(keep_tail=False)
            except (etree.XMLSyntaxError, zipfile.BadZipFile, EOFError, OSError, ValueError,
                    NotImplementedError, RuntimeError):
                return "DOCX を読み取れませんでした（ファイルが壊れているか DOCX 形式ではありません）。"
    return None


def _cell_text(tc) -> str:
    return "\n".join(p.text for p in tc.iterchildren(_W_P)).strip()


def _table_rows(tbl) -> list[str]:
    """One ``a | b`` line per row; a horizontally merged cell once, a vertically merged one with
    the text of its first row (python-docx's rule, without its quadratic walk)."""
    rows: list[str] = []
    above: dict[int, str] = {}  # grid column -> text of the cell that starts a vertical merge there
    for tr in tbl.iterchildren(_W_TR):
        column, cells = 0, []
        for tc in tr.iterchildren(_W_TC):
            span = min(max(tc.grid_span, 1), limits.MAX_DOCX_GRID_SPAN)
            value = above.get(column, "") if tc.vMerge == "continue" else _cell_text(tc)
            if tc.vMerge != "continue":
                above[column] = value
            if value and (not cells or cells[-1] != value):  # merged cells repeat
                cells.append(value)
            column += span
        if cells:
            rows.append(" | ".join(cells))
    return rows


def extract_docx(doc: ExtractedDocument, data: bytes, budget: Budget) -> None:
    problem = _docx_precheck(data)
    if problem:
        doc.error = problem
        return
    try:
        from docx import Document
        from docx.oxml.table import CT_Tbl

        body = Document(io.BytesIO(data)).element.body
        for element in body.inner_content_elements:
            if budget.out_of_time():
                doc.warnings.append("処理に時間がかかりすぎるため、途中までを読み取りました。")
                break
            blocks = _table_rows(element) if isinstance(element, CT_Tbl) else [element.text.strip()]
            for block in blocks:
                if not block:
                    continue
                block, cut = budget.take(unicodedata.normalize("NFKC", block))
                if block:
                    doc.paragraphs.append(block)
                if cut:
                    break
            if budget.full:
                doc.warnings.append(f"文字数が上限（{limits.MAX_CHARS_PER_DOCUMENT:,} 文字）に達したため、途中までを読み取りました。")
                break
    except MemoryError:
        doc.error = "DOCX が大きすぎて読み取れませんでした（メモリ不足）。"
        return
    except Exception as exc:  # noqa: BLE001 - python-docx raises many kinds for broken files
        doc.paragraphs = []
        doc.error = f"DOCX を読み取れませんでした（ファイルが壊れているか DOCX 形式ではありません: {type(exc).__name__}）。"
        return
    if not doc.paragraphs:
        doc.warnings.append("DOCX に本文テキストが見つかりませんでした。")
