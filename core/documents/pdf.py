"""PDF text through pypdf, within the budgets: pypdf's own decompression and parsing limits, the
text shown per page, characters per page and document, pages, and time. Encrypted files need a
password; image-only pages yield a warning."""
from __future__ import annotations

import contextlib
import io

from core.documents import budget as limits
from core.documents.budget import Budget
from core.documents.document import ExtractedDocument, paragraphs_from_lines

_SHOW_TEXT_OPERATORS = {b"Tj", b"TJ", b"'", b'"'}


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
        zlib_maximum_output_length=limits.MAX_PDF_STREAM_BYTES, lzw_maximum_output_length=limits.MAX_PDF_STREAM_BYTES,
        run_length_maximum_output_length=limits.MAX_PDF_STREAM_BYTES,
        array_based_stream_maximum_output_length=limits.MAX_PDF_STREAM_BYTES,
        stream_parsing_work_maximum_count=limits.MAX_PDF_STREAM_TOKENS)


def _shown_length(operator: bytes, operands: list) -> int:
    if operator not in _SHOW_TEXT_OPERATORS:
        return 0
    total = 0
    for operand in operands:
        items = operand if isinstance(operand, list) else (operand,)  # TJ takes an array
        total += sum(len(item) for item in items if isinstance(item, (str, bytes)))
    return total


def _pdf_page_text(page, budget: Budget) -> str:
    """One page's text; raises _StopPage when the page shows too much text or time runs out
    (pypdf's text assembly is quadratic in the text of one line, so it must not see more)."""
    shown = 0

    def before(operator, operands, _cm, _tm):
        nonlocal shown
        if budget.out_of_time():
            raise _StopPage("time")
        shown += _shown_length(operator, operands)
        if shown > limits.MAX_PDF_SHOWN_PER_PAGE:
            raise _StopPage("dense")  # sticky: pypdf swallows it inside a form, the next operator re-raises

    return page.extract_text(visitor_operand_before=before) or ""


def _page_list(numbers: list[int]) -> str:
    listed = "、".join(str(n) for n in numbers[:10])
    return listed + (f" ほか {len(numbers) - 10} ページ" if len(numbers) > 10 else "")


def extract_pdf(doc: ExtractedDocument, data: bytes, password: str | None, budget: Budget) -> None:
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
            for index in range(min(doc.pages, limits.MAX_PAGES)):
                if budget.out_of_time():
                    stopped = f"処理に時間がかかりすぎるため、{index + 1} ページ目以降は読み取りませんでした。"
                    break
                if budget.full:
                    stopped = (f"文字数が上限（{limits.MAX_CHARS_PER_DOCUMENT:,} 文字）に達したため、"
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
                if len(text) > limits.MAX_CHARS_PER_PAGE:
                    text = text[:limits.MAX_CHARS_PER_PAGE]
                    cut_pages.append(index + 1)
                text, _ = budget.take(text)
                doc.page_texts.append(text)
            else:
                if doc.pages > limits.MAX_PAGES:
                    stopped = f"ページ数が多いため、先頭 {limits.MAX_PAGES} ページだけを読み取りました（全 {doc.pages} ページ）。"
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
                            f"各ページ先頭 {limits.MAX_CHARS_PER_PAGE:,} 文字だけを読み取りました。")
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
