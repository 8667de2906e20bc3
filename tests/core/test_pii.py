"""Personal data and secrets are masked; ordinary numbers are not."""
import pytest

from core.pii import find_pii, mask_pii, redact_secrets, scrub


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
