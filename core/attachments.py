"""Text extraction from uploaded files, in memory only (seed 001: nothing is written to disk).

PDF through pypdf (encrypted files need a password; image-only pages yield a warning), DOCX through
python-docx (paragraphs and tables in document order), text files as UTF-8, UTF-16 (with a BOM or
ASCII-heavy) or cp932. Every failure is a Japanese message on the result, never an exception.

Uploads are hostile, so every extraction runs within a budget (the constants below): the upload
size, the DOCX zip members' declared uncompressed sizes and their paragraph / table-cell count
(checked by a streaming pass before python-docx parses anything), pypdf's decompression and
content-stream parsing limits, the text shown per PDF page, characters per page and per document,
pages, and wall-clock time. Output past a budget is cut with a warning; a file that cannot be read
within it gets an error.

:func:`extract_cached` extracts each upload once: results are kept in a small in-process LRU keyed
by the content's SHA-256 (and a hash of the password), never the file bytes, never on disk.
"""
from __future__ import annotations

import codecs
import contextlib
import dataclasses
import hashlib
import io
import re
import threading
import time
import unicodedata
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

# ---- budgets ------------------------------------------------------------------------------------
MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # per file; .streamlit/config.toml maxUploadSize sits a bit above
MAX_FILE_BYTES = MAX_UPLOAD_BYTES  # the older name
MAX_CHARS = 60_000  # passed to the model per file; the rest is cut with a warning
MAX_CHARS_PER_PAGE = 20_000  # a dense page holds 2,000-5,000
MAX_CHARS_PER_DOCUMENT = 400_000
MAX_PAGES = 500
MAX_EXTRACT_SECONDS = 20.0  # wall clock per document; pages or blocks after it are left out
MAX_DOCX_UNCOMPRESSED = 32 * 1024 * 1024  # sum of the zip members' declared sizes
MAX_DOCX_MEMBERS = 2_000
MAX_DOCX_PARAGRAPHS = 20_000  # w:p, w:tr and w:tc elements over all XML parts
MAX_DOCX_GRID_SPAN = 64  # Word allows 63 columns; python-docx repeats a cell once per spanned column
MAX_PDF_STREAM_BYTES = 8 * 1024 * 1024  # one decompressed PDF stream
MAX_PDF_STREAM_TOKENS = 300_000  # tokens parsed from one content stream (pypdf parses ~150k/s)
MAX_PDF_SHOWN_PER_PAGE = 2 * MAX_CHARS_PER_PAGE  # string operand length of Tj/TJ/'/" per page
CACHE_ENTRIES = 32
CACHE_CHARS = 4_000_000  # total text held by the extraction cache

_MB = 1024 * 1024
_HEADING = re.compile(r"^(第\s*[0-9０-９一二三四五六七八九十百]+\s*条|[0-9０-９]+[\.．]|[（(][0-9０-９一二三四五六七八九十]+[）)]|前文|附則|別紙)")
_HEADING_SPAN = 40  # _HEADING only ever looks at the start of a line
_SENTENCE_END = ("。", "」", ")", "）", ":", "：")
_SHOW_TEXT_OPERATORS = {b"Tj", b"TJ", b"'", b'"'}
_W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_W_P, _W_TR, _W_TC = (f"{{{_W_NS}}}{tag}" for tag in ("p", "tr", "tc"))
_W_GRID_SPAN, _W_VAL = f"{{{_W_NS}}}gridSpan", f"{{{_W_NS}}}val"
_TEXT_CONTROLS = set("\t\n\r\f\v\x1a")  # \x1a: the DOS end-of-file mark some editors leave


@dataclass
class ExtractedDocument:
    name: str
    kind: str  # pdf / docx / text / unknown
    paragraphs: list[str] = field(default_factory=list)
    pages: int | None = None
    page_texts: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    needs_password: bool = False
    truncated: bool = False  # the text is longer than MAX_CHARS, so for_prompt() cuts it
    size: int = 0  # bytes uploaded
    sha256: str = ""  # of the uploaded bytes
    too_large: bool = False  # over MAX_UPLOAD_BYTES: nothing was read

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def text(self) -> str:
        return "\n".join(self.paragraphs)

    def for_prompt(self) -> str:
        """The text block sent to the model, headed by the file name."""
        text = self.text
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS]
        return f"【{self.name}】\n{text}"

    def summary(self) -> str:
        parts = [f"{len(self.paragraphs)} 段落", f"{len(self.text):,} 文字"]
        if self.pages is not None:
            parts.insert(0, f"{self.pages} ページ")
        return " / ".join(parts)

    def metadata(self) -> dict[str, object]:
        """What a store may keep about the attachment: never its text."""
        return {"name": self.name, "size": self.size, "pages": self.pages, "sha256": self.sha256}


def upload_limit_text() -> str:
    """The size limit as the UI states it."""
    return f"添付は 1 ファイル {MAX_UPLOAD_BYTES // _MB} MB まで（PDF / DOCX / TXT）"


def too_large_message(size: int) -> str:
    return f"ファイルが大きすぎます（{size / _MB:.1f} MB、上限 {MAX_UPLOAD_BYTES // _MB} MB）。"


def _kind(name: str) -> str:
    lower = name.lower()
    if lower.endswith(".pdf"):
        return "pdf"
    if lower.endswith(".docx"):
        return "docx"
    if lower.endswith((".txt", ".md", ".csv", ".text")):
        return "text"
    return "unknown"


def paragraphs_from_lines(text: str) -> list[str]:
    """Join wrapped lines into paragraphs: a line ending a sentence, a blank line, or a heading
    (第N条, 1., (1)) closes the current paragraph."""
    text = unicodedata.normalize("NFKC", text).replace("\r\n", "\n").replace("\r", "\n")
    paragraphs: list[str] = []
    current = ""
    for line in (ln.strip() for ln in text.split("\n")):
        if not line:
            if current:
                paragraphs.append(current)
                current = ""
            continue
        if current and _HEADING.match(line[:_HEADING_SPAN]):
            paragraphs.append(current)
            current = line
        else:
            joiner = " " if current and current[-1].isascii() and line[0].isascii() else ""
            current = f"{current}{joiner}{line}" if current else line
        if current.endswith(_SENTENCE_END) or len(current) > 400:
            paragraphs.append(current)
            current = ""
    if current:
        paragraphs.append(current)
    return paragraphs


class _Budget:
    """Characters and wall-clock time left for one document."""

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.deadline = clock() + MAX_EXTRACT_SECONDS
        self.chars = 0

    def out_of_time(self) -> bool:
        return self.clock() > self.deadline

    def take(self, text: str) -> tuple[str, bool]:
        """``text`` cut to what the document budget still allows, and whether it was cut."""
        room = MAX_CHARS_PER_DOCUMENT - self.chars
        cut = len(text) > room
        text = text[:max(room, 0)]
        self.chars += len(text)
        return text, cut

    @property
    def full(self) -> bool:
        return self.chars >= MAX_CHARS_PER_DOCUMENT


class _StopPage(Exception):
    """Raised from a pypdf visitor to abandon a page (``reason``: "time" or "dense")."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _pdf_limits():
    """pypdf's own limits, tightened for the duration of one extraction (a context variable, so
    other threads and callers keep theirs)."""
    try:
        from pypdf import apply_configuration
    except ImportError:  # pragma: no cover - pypdf < 6.x has no configuration; our budgets still apply
        return contextlib.nullcontext()
    return apply_configuration(
        zlib_maximum_output_length=MAX_PDF_STREAM_BYTES, lzw_maximum_output_length=MAX_PDF_STREAM_BYTES,
        run_length_maximum_output_length=MAX_PDF_STREAM_BYTES,
        array_based_stream_maximum_output_length=MAX_PDF_STREAM_BYTES,
        stream_parsing_work_maximum_count=MAX_PDF_STREAM_TOKENS)


def _shown_length(operator: bytes, operands: list) -> int:
    if operator not in _SHOW_TEXT_OPERATORS:
        return 0
    total = 0
    for operand in operands:
        items = operand if isinstance(operand, list) else (operand,)  # TJ takes an array
        total += sum(len(item) for item in items if isinstance(item, (str, bytes)))
    return total


def _pdf_page_text(page, budget: _Budget) -> str:
    """One page's text; raises _StopPage when the page shows too much text or time runs out
    (pypdf's text assembly is quadratic in the text of one line, so it must not see more)."""
    shown = 0

    def before(operator, operands, _cm, _tm):
        nonlocal shown
        if budget.out_of_time():
            raise _StopPage("time")
        shown += _shown_length(operator, operands)
        if shown > MAX_PDF_SHOWN_PER_PAGE:
            raise _StopPage("dense")  # sticky: pypdf swallows it inside a form, the next operator re-raises

    return page.extract_text(visitor_operand_before=before) or ""


def _page_list(numbers: list[int]) -> str:
    listed = "、".join(str(n) for n in numbers[:10])
    return listed + (f" ほか {len(numbers) - 10} ページ" if len(numbers) > 10 else "")


def _extract_pdf(doc: ExtractedDocument, data: bytes, password: str | None, budget: _Budget) -> None:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, LimitReachedError

    dense: list[int] = []
    unreadable: list[int] = []
    cut_pages: list[int] = []
    stopped: str | None = None
    try:
        with _pdf_limits():
            reader = PdfReader(io.BytesIO(data))
            if reader.is_encrypted:
                if reader.decrypt(password or "") == 0:
                    doc.needs_password = True
                    doc.error = ("パスワードで保護された PDF です。パスワードを入力してください。" if not password
                                 else "パスワードが違います。正しいパスワードを入力してください。")
                    return
            doc.pages = len(reader.pages)
            for index in range(min(doc.pages, MAX_PAGES)):
                if budget.out_of_time():
                    stopped = f"処理に時間がかかりすぎるため、{index + 1} ページ目以降は読み取りませんでした。"
                    break
                if budget.full:
                    stopped = (f"文字数が上限（{MAX_CHARS_PER_DOCUMENT:,} 文字）に達したため、"
                               f"{index + 1} ページ目以降は読み取りませんでした。")
                    break
                try:
                    text = _pdf_page_text(reader.pages[index], budget)
                except _StopPage as stop:
                    if stop.reason == "time":
                        stopped = f"処理に時間がかかりすぎるため、{index + 1} ページ目以降は読み取りませんでした。"
                        break
                    dense.append(index + 1)
                    text = ""
                except (LimitReachedError, RecursionError):
                    dense.append(index + 1)
                    text = ""
                except Exception:  # noqa: BLE001 - one broken page must not lose the others
                    unreadable.append(index + 1)
                    text = ""
                if len(text) > MAX_CHARS_PER_PAGE:
                    text = text[:MAX_CHARS_PER_PAGE]
                    cut_pages.append(index + 1)
                text, _ = budget.take(text)
                doc.page_texts.append(text)
            else:
                if doc.pages > MAX_PAGES:
                    stopped = f"ページ数が多いため、先頭 {MAX_PAGES} ページだけを読み取りました（全 {doc.pages} ページ）。"
    except DependencyError:
        doc.error = "この PDF の暗号方式を開くためのライブラリが不足しています（pypdf[crypto] を入れてください）。"
        return
    except FileNotDecryptedError:
        doc.needs_password = True
        doc.error = "パスワードで保護された PDF です。パスワードを入力してください。"
        return
    except LimitReachedError:
        doc.error = "PDF の構造が大きすぎるか複雑すぎるため、安全のため読み取りを中止しました。"
        return
    except MemoryError:
        doc.error = "PDF が大きすぎて読み取れませんでした（メモリ不足）。"
        return
    except Exception as exc:  # noqa: BLE001 - pypdf raises many kinds for broken files
        doc.error = f"PDF を読み取れませんでした（ファイルが壊れている可能性があります: {type(exc).__name__}）。"
        return
    if cut_pages:
        doc.warnings.append(f"{_page_list(cut_pages)} ページ目は文字数が多すぎるため、"
                            f"各ページ先頭 {MAX_CHARS_PER_PAGE:,} 文字だけを読み取りました。")
    if dense:
        doc.warnings.append(f"{_page_list(dense)} ページ目は内容が大きすぎるか複雑すぎるため、読み取りを省略しました。")
    if unreadable:
        doc.warnings.append(f"{_page_list(unreadable)} ページ目は壊れているため読み取れませんでした。")
    if stopped:
        doc.warnings.append(stopped)
    doc.paragraphs = paragraphs_from_lines("\n\n".join(doc.page_texts))
    if not doc.paragraphs:
        if doc.page_texts and len(dense) + len(unreadable) == len(doc.page_texts):
            doc.error = "PDF のどのページも読み取れませんでした（内容が大きすぎるか、壊れている可能性があります）。"
        else:
            doc.warnings.append("テキストが見つかりませんでした。画像だけの PDF（スキャン）の可能性があります。"
                                "文字として読み取れる PDF か、テキストを貼り付けてください。")


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
        if len(members) > MAX_DOCX_MEMBERS:
            return f"DOCX の中のファイル数が多すぎます（{len(members):,} 個、上限 {MAX_DOCX_MEMBERS:,} 個）。"
        total = sum(m.file_size for m in members)
        if total > MAX_DOCX_UNCOMPRESSED:
            return (f"DOCX の展開後のサイズが大きすぎます（{total / _MB:,.0f} MB、"
                    f"上限 {MAX_DOCX_UNCOMPRESSED // _MB} MB）。圧縮爆弾の可能性があります。")
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
                            if not span.isdigit() or int(span[:6]) > MAX_DOCX_GRID_SPAN:
                                return "DOCX の表の列の結合が不正です（ファイルが壊れている可能性があります）。"
                            continue
                        blocks += 1
                        if blocks > MAX_DOCX_PARAGRAPHS:
                            return (f"DOCX の段落・表のセルが多すぎます（上限 {MAX_DOCX_PARAGRAPHS:,} 個）。"
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
            span = min(max(tc.grid_span, 1), MAX_DOCX_GRID_SPAN)
            value = above.get(column, "") if tc.vMerge == "continue" else _cell_text(tc)
            if tc.vMerge != "continue":
                above[column] = value
            if value and (not cells or cells[-1] != value):  # merged cells repeat
                cells.append(value)
            column += span
        if cells:
            rows.append(" | ".join(cells))
    return rows


def _extract_docx(doc: ExtractedDocument, data: bytes, budget: _Budget) -> None:
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
                doc.warnings.append(f"文字数が上限（{MAX_CHARS_PER_DOCUMENT:,} 文字）に達したため、途中までを読み取りました。")
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


def _utf16_without_bom(data: bytes) -> str | None:
    """The encoding of BOM-less UTF-16 whose ASCII characters (newlines at least) leave NUL bytes
    on one side only; None otherwise."""
    sample = data[:8192]
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    if len(data) % 2 or max(even, odd) < 4 * max(min(even, odd), 1):
        return None
    return "utf-16-le" if odd > even else "utf-16-be"


def decode_text(data: bytes) -> tuple[str | None, str | None]:
    """(text, encoding): UTF-8 (with or without BOM), UTF-16 (BOM, or BOM-less with ASCII in it),
    then cp932 (Shift_JIS); (None, None) if none fits."""
    candidates: list[str] = []
    if data.startswith(codecs.BOM_UTF8):
        candidates.append("utf-8-sig")
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        candidates.append("utf-16")
    elif b"\x00" in data[:8192] and (guess := _utf16_without_bom(data)):
        candidates.append(guess)
    candidates += ["utf-8", "cp932"]
    for encoding in candidates:
        try:
            return data.decode(encoding), encoding
        except UnicodeDecodeError:
            continue
    return None, None


def looks_binary(text: str) -> bool:
    """NUL characters, or more than 1 % control characters in the first 64k: not a text file."""
    if "\x00" in text:
        return True
    sample = text[:65_536]
    controls = sum(1 for ch in sample if ch < " " and ch not in _TEXT_CONTROLS)
    return controls * 100 > len(sample)


def _extract_text_file(doc: ExtractedDocument, data: bytes, budget: _Budget) -> None:
    text, encoding = decode_text(data)
    if text is None:
        doc.error = "文字コードを判別できませんでした（UTF-8、UTF-16 または Shift_JIS で保存してください）。"
        return
    if looks_binary(text):
        doc.error = "テキストではないデータ（バイナリ）が含まれています。文字だけのテキストファイルを添付してください。"
        return
    if encoding == "cp932":
        doc.warnings.append("Shift_JIS (cp932) として読み込みました。")
    elif encoding and encoding.startswith("utf-16"):
        doc.warnings.append("UTF-16 として読み込みました。")
    text, cut = budget.take(text)
    if cut:
        doc.warnings.append(f"文字数が上限（{MAX_CHARS_PER_DOCUMENT:,} 文字）を超えたため、途中までを読み取りました。")
    doc.paragraphs = paragraphs_from_lines(text)


def extract_document(name: str, data: bytes, password: str | None = None, *,
                     clock: Callable[[], float] = time.monotonic) -> ExtractedDocument:
    """Extract the text of one uploaded file within the budgets above. Never raises; see
    ``error`` and ``warnings``."""
    doc = ExtractedDocument(name=name, kind=_kind(name), size=len(data), sha256=content_sha256(data))
    if len(data) > MAX_UPLOAD_BYTES:
        doc.too_large = True
        doc.error = too_large_message(len(data))
        return doc
    if not data:
        doc.error = "空のファイルです。"
        return doc
    budget = _Budget(clock)
    try:
        if doc.kind == "pdf":
            _extract_pdf(doc, data, password, budget)
        elif doc.kind == "docx":
            _extract_docx(doc, data, budget)
        elif doc.kind == "text":
            _extract_text_file(doc, data, budget)
        else:
            doc.error = "対応していない形式です（PDF / DOCX / テキストのみ）。"
    except Exception as exc:  # noqa: BLE001 - the last line of defence: a message, never a traceback
        doc.paragraphs, doc.page_texts = [], []
        doc.error = f"ファイルを読み取れませんでした（{type(exc).__name__}）。"
    if not doc.ok:
        return doc
    if len(doc.text) > MAX_CHARS:
        doc.truncated = True
        doc.warnings.append(f"本文が長いため、先頭 {MAX_CHARS:,} 文字だけをモデルに渡します。")
    return doc


# ---- extraction cache ---------------------------------------------------------------------------
_cache: OrderedDict[tuple[str, str], ExtractedDocument] = OrderedDict()
_cache_chars = 0
_cache_lock = threading.Lock()


def _weight(doc: ExtractedDocument) -> int:
    return len(doc.text) + sum(len(t) for t in doc.page_texts)


def _copy(doc: ExtractedDocument, name: str) -> ExtractedDocument:
    return dataclasses.replace(doc, name=name, paragraphs=list(doc.paragraphs), page_texts=list(doc.page_texts),
                               warnings=list(doc.warnings))


def content_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cache_key(data: bytes, password: str | None = None) -> tuple[str, str]:
    """(content SHA-256, password SHA-256): the password itself is not kept."""
    secret = hashlib.sha256(password.encode("utf-8", "surrogatepass")).hexdigest() if password else ""
    return content_sha256(data), secret


def extract_cached(name: str, data: bytes, password: str | None = None) -> ExtractedDocument:
    """:func:`extract_document`, once per (content, password): later calls (reruns of a page, the
    same file under another name) get a copy of the first result. Oversized files are not cached."""
    global _cache_chars
    if len(data) > MAX_UPLOAD_BYTES:
        return extract_document(name, data, password)
    key = cache_key(data, password)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return _copy(hit, name)
    doc = extract_document(name, data, password)
    stored = _copy(doc, name)
    with _cache_lock:
        if key not in _cache:
            _cache[key] = stored
            _cache_chars += _weight(stored)
        while _cache and (len(_cache) > CACHE_ENTRIES or _cache_chars > CACHE_CHARS):
            _, evicted = _cache.popitem(last=False)
            _cache_chars -= _weight(evicted)
    return doc


def clear_cache() -> None:
    global _cache_chars
    with _cache_lock:
        _cache.clear()
        _cache_chars = 0
