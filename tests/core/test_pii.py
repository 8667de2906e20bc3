"""Personal data and secrets are masked; ordinary numbers are not."""
import pytest

from core.text.pii import find_pii, mask_pii, redact_secrets, scrub


@pytest.mark.parametrize("text,label", [
    ("連絡先は090-1234-5678です", "[電話番号]"),
    ("固定電話 03-1234-5678", "[電話番号]"),
    ("ハイフンなし 09012345678", "[電話番号]"),
    ("国際 +81 90 1234 5678", "[電話番号]"),
    ("全角 ０９０ー１２３４ー５６７８", "[電話番号]"),
    ("mail: hanako.yamada+car@example.co.jp", "[メール]"),
    ("カード 4111 1111 1111 1111 で", "[カード番号]"),
    ("カード 4111-1111-1111-1111", "[カード番号]"),
    ("マイナンバーは 1234 5678 9012", "[マイナンバー]"),
    ("〒100-0001", "[郵便番号]"),
    ("住所は東京都千代田区千代田1-1です", "[住所]"),
    ("大阪府大阪市北区梅田3丁目1番", "[住所]"),
])
def test_masks_personal_data(text, label):
    masked = mask_pii(text)
    assert label in masked
    assert not find_pii(masked)


@pytest.mark.parametrize("text", ["走行距離は 45000km", "P0301 が出た", "価格は 1,980,000円", "2023年4月1日に購入",
                                  "タイヤ空気圧 240kPa", "第8条第2項"])
def test_leaves_ordinary_numbers(text):
    assert mask_pii(text) == text


def test_secrets_are_redacted_and_scrub_walks_structures():
    assert "sk-" not in redact_secrets("key sk-proj-abcdefghijklmnop")
    assert "abc" not in redact_secrets("Authorization: Bearer abcdefghijkl")
    assert redact_secrets("token xyz-custom-secret", extra=("xyz-custom-secret",)) == "token [秘匿]"
    out = scrub({"a": ["090-1111-2222", {"b": "x@y.jp"}], "n": 3})
    assert out == {"a": ["[電話番号]", {"b": "[メール]"}], "n": 3}


# ---- normalised detection (issue #8) ---------------------------------------------------------------

@pytest.mark.parametrize("text,label", [
    ("電話は(03)1234-5678です", "[電話番号]"),
    ("電話は03(1234)5678です", "[電話番号]"),
    ("（０３）１２３４－５６７８", "[電話番号]"),
    ("電話 090.1234.5678 まで", "[電話番号]"),
    ("電話 090 - 1234 - 5678 まで", "[電話番号]"),
    ("電話 090‐1234—5678", "[電話番号]"),  # U+2010, U+2014
    ("電話 090−1234−5678", "[電話番号]"),  # U+2212
    ("電話 0\u200b90-12\u200d34-5678", "[電話番号]"),  # zero-width characters
    ("電話 0 9 0 1 2 3 4 5 6 7 8", "[電話番号]"),
    ("+81 (0)90-1234-5678", "[電話番号]"),
    ("メール ｔａｒｏ＠ｅｘａｍｐｌｅ．ｃｏｍ です", "[メール]"),
    ("メール taro＠example.com です", "[メール]"),
    ("メール taro(at)example.com です", "[メール]"),
    ("マイナンバー 1234.5678.9012", "[マイナンバー]"),
    ("マイナンバー１２３４　５６７８　９０１２", "[マイナンバー]"),
    ("カード 4111.1111.1111.1111", "[カード番号]"),
    ("カード ４１１１ １１１１ １１１１ １１１１", "[カード番号]"),
    ("〒 1000001 に送って", "[郵便番号]"),
    ("東京都渋谷区神南六丁目十番一号に住んでいます", "[住所]"),
    ("渋谷区神南1-2-3に住んでいます", "[住所]"),
    ("住所：横浜市中区山下町１－１", "[住所]"),
    ("札幌市中央区北1条西2丁目", "[住所]"),
])
def test_masks_obfuscated_personal_data(text, label):
    masked = mask_pii(text)
    assert label in masked, masked
    assert not find_pii(masked)
    assert not any(ch.isdigit() for ch in masked.replace("4111", "")) or label == "[住所]"


@pytest.mark.parametrize("text", [
    "score 0.87654321098765432 と 0.12345678901",  # floats are not cards or phones
    "192.168.100.200 に接続",  # IP addresses are not My Numbers
    "request 123e4567-e89b-12d3-a456-426614174000",  # nor are UUIDs
    "この地区1番人気の車種", "渋谷区の店舗", "横浜市内で3-4回エンストした", "2024-06-01T12:00:00.123456+09:00",
    "Basic プランは dXNlcjp と Basic information", "パスワードはどこで変更できますか", "task-management-system",
])
def test_leaves_numbers_and_words_that_only_look_sensitive(text):
    assert mask_pii(text) == text
    assert find_pii(text) == []


def test_masking_keeps_the_rest_of_the_original_text():
    text = "ＡＢＣ商事の山田です。電話は０９０ー１２３４ー５６７８、ｶﾞｿﾘﾝ車です。"
    assert mask_pii(text) == "ＡＢＣ商事の山田です。電話は[電話番号]、ｶﾞｿﾘﾝ車です。"


@pytest.mark.parametrize("text,expected", [
    ("Authorization: Bearer eyJhbGciOi.abc.def and more", "Authorization: [秘匿]"),
    ('{"Authorization": "Basic dXNlcjpwYXNz", "x": 1}', '{"Authorization": "[秘匿]", "x": 1}'),
    ("header Basic dXNlcjpwYXNzd29yZA==", "header Basic [秘匿]"),
    ("token Bearer abc.def-ghi_jkl~mno+p/q== end", "token Bearer [秘匿] end"),
    ("api_key=ｓｋ－ｐｒｏｊ－ａｂｃｄｅｆｇｈｉｊｋｌ", "api_key=[秘匿]"),
    ("key: sk‐proj‐abcdefghijklmnop", "key: [秘匿]"),
    ('{"password": "my secret pass"}', '{"password": "[秘匿]"}'),
    ("パスワードは abc12345 です", "パスワードは [秘匿] です"),
    ("https://user:pass@example.com/v1?api-key=secret123", "https://[秘匿]@example.com/v1?api-key=[秘匿]"),
    ("aws AKIAABCDEFGHIJKLMNOP", "aws [秘匿]"),
])
def test_secrets_are_redacted_whole(text, expected):
    assert scrub(text) == expected
    assert find_pii(text) == ["secret"] and find_pii(expected) == []


def test_scrub_is_idempotent_and_redact_secrets_leaves_personal_data():
    text = "電話 090-1234-5678 key sk-abcdefghijkl https://u:p@h.example/x"
    once = scrub(text)
    assert scrub(once) == once
    assert redact_secrets(text) == "電話 090-1234-5678 key [秘匿] https://[秘匿]@h.example/x"


def test_redact_url_hides_credentials():
    from core.text.pii import redact_url

    assert redact_url("https://user:pa%40ss@api.example.com/v1?api-key=abc&x=1") == \
        "https://***@api.example.com/v1?api-key=***&x=1"
    assert redact_url("https://gw.example.com/openai?code=zzz&sig=abcd1234") == \
        "https://gw.example.com/openai?code=***&sig=***"
    assert redact_url("http://localhost:8000/v1") == "http://localhost:8000/v1"
    assert redact_url(None) == "" and redact_url("http://[::1") == "http://[::1"


def test_message_length_check():
    from core.text.pii import MAX_MESSAGE_CHARS, check_message_length

    assert check_message_length("あ" * MAX_MESSAGE_CHARS) is None and check_message_length(None) is None
    message = check_message_length("あ" * 30000)
    assert message and "長すぎます" in message and "8,000" in message and "30,000" in message


def test_masking_is_linear_on_inputs_that_were_quadratic():
    import time

    start = time.perf_counter()
    for text in ("x" * 200_000, "1-" * 100_000, "a@" * 100_000, "東京都千代田区" * 30_000, "0 " * 100_000):
        mask_pii(text)
    assert time.perf_counter() - start < 10  # the old patterns took minutes on these


def test_the_ui_line_never_shows_base_url_credentials():
    from types import SimpleNamespace

    from core.llm.registry import describe

    client = SimpleNamespace(name="openai", model="gpt-x",
                             base_url="https://me:hunter2@gw.example.com/v1?api-key=abc123")
    line = describe(client)
    assert "hunter2" not in line and "abc123" not in line and "me:" not in line
    assert "gw.example.com/v1" in line


def test_scrub_masks_each_distinct_string_once(monkeypatch):
    """A debug record repeats its system prompt, schema and history on every call: scrubbing the same
    strings again reuses the masked text (counted, not timed), and the result is the same."""
    from core.text import pii

    pii._scrub_text.cache_clear()
    masked: list[str] = []
    real = pii.mask_text
    monkeypatch.setattr(pii, "mask_text", lambda text, extra=(): masked.append(text) or real(text, extra))
    record = {"messages": [{"role": "system", "content": "あなたは整備士です。"},
                           {"role": "user", "content": "電話は090-1234-5678です"}],
              "schema": {"type": "object", "description": "回答"}}
    first = scrub(record)
    assert first["messages"][1]["content"] == "電話は[電話番号]です"
    count = len(masked)
    assert scrub(record) == first and len(masked) == count  # nothing masked again
    longer = "x" * (pii.SCRUB_MEMO_MAX_CHARS + 1)
    scrub([longer, longer])
    assert masked[count:] == [longer, longer]  # a very long string is not remembered


def test_mask_text_masks_a_short_string_once(monkeypatch):
    """Issue #25: the prompt builder masks the conversation so far on every call; a short string is scanned
    once and remembered, a long one every time (counted, not timed)."""
    from core.text import pii

    pii._masked.cache_clear()
    scanned: list[str] = []
    real = pii.find_spans
    monkeypatch.setattr(pii, "find_spans", lambda text, extra=(): scanned.append(text) or real(text, extra))
    assert pii.mask_text("電話は090-1234-5678です") == pii.mask_text("電話は090-1234-5678です") == "電話は[電話番号]です"
    assert scanned.count("電話は090-1234-5678です") == 1
    longer = "y" * (pii.MASK_MEMO_MAX_CHARS + 1)
    pii.mask_text(longer)
    pii.mask_text(longer)
    assert scanned.count(longer) == 2


def _test_strings() -> list[str]:
    """Every string literal of the masking tests (their secrets, personal data and ordinary text), with the
    manual's texts: a corpus of what the rules must find and must leave."""
    import ast
    import json
    from pathlib import Path

    here = Path(__file__).parent
    found: set[str] = set()
    for name in ("test_pii.py", "test_pii_rules.py", "test_pii_spellings.py", "test_fuzz.py", "test_untrusted.py"):
        for node in ast.walk(ast.parse((here / name).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip():
                found.add(node.value)
    manual = json.loads((here.parents[1] / "data/manuals/kaiwa-mirai-hv-2022.json").read_text(encoding="utf-8"))
    found.update(s["text"] for s in manual["sections"][:40])
    return sorted(found)


def test_one_scan_for_every_secret_rule_finds_what_the_rules_find(monkeypatch):
    """Issue #25: the secret rules are tried only when their one combined pattern matches the text. It
    matches whenever one of them does, and the findings are those of running every rule (on the masking
    tests' strings, each also embedded in a longer text, and the manual's). Most texts hold no secret:
    the ~30 scans are then one. Counted."""
    from core.text import pii

    gated_rules = (pii._KEY_START, *pii._PLUGIN_SECRETS, *pii._SECRETS, pii._BASIC, pii._USERINFO)
    texts = _test_strings()
    texts += [f"お問い合わせ: {t}\n以上、よろしくお願いします。" for t in texts]
    gated = {t: pii.find_spans(t) for t in texts}
    gate = pii._ANY_SECRET

    class Always:
        def search(self, text):
            return True

    monkeypatch.setattr(pii, "_ANY_SECRET", Always())  # every rule run on every text, as before
    hits = 0
    for text in texts:
        normalized, _ = pii.normalize_with_offsets(text)
        if any(rule.search(normalized) for rule in gated_rules):
            hits += 1
            assert gate.search(normalized), text
        assert pii.find_spans(text) == gated[text], text
    assert hits > 50  # the corpus does exercise the secret rules
    monkeypatch.undo()

    scans: list[str] = []

    class Counting:
        def __init__(self, rule):
            self.rule = rule

        def finditer(self, text):
            scans.append(self.rule.pattern)
            return self.rule.finditer(text)

    monkeypatch.setattr(pii, "_PLUGIN_SECRETS", tuple(Counting(r) for r in pii._PLUGIN_SECRETS))
    monkeypatch.setattr(pii, "_SECRETS", tuple(Counting(r) for r in pii._SECRETS))
    pii.find_spans("ブレーキを踏むとキーキー音がする。取扱説明書 p.120 を参照してください。")
    assert scans == []
    assert pii.find_spans("api_key=sk-abcdefghijklmnop1234") and len(scans) == len(pii._PLUGIN_SECRETS) + len(pii._SECRETS)
