"""Personal-data spellings that were left unmasked (issue 23): e-mail with spaces around ``@``, phone
numbers with wave dashes (``～`` / ``〜``), Hugging Face tokens (``hf_…``) and passwords introduced in words
(パスワードは「…」, PW:, pass=, and detect-secrets' keyword names such as ``pwd``), still linear (re2)."""
from __future__ import annotations

import pytest

from core.text.pii import find_pii, mask_pii

HF_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
SPELLINGS = [
    ("連絡は taro @ example.com まで", "taro", "[メール]"),
    ("taro@ example.co.jp", "example.co.jp", "[メール]"),
    ("taro ＠ example.com", "example.com", "[メール]"),
    ("担当 hanako　@　kaiwa.example.jp", "hanako", "[メール]"),
    ("電話 090～1234～5678", "1234", "[電話番号]"),
    ("電話 090〜1234〜5678", "1234", "[電話番号]"),
    ("代表 03〜1234〜5678", "1234", "[電話番号]"),
    ("携帯 ０９０～１２３４～５６７８", "１２３４", "[電話番号]"),
    (f"HF_TOKEN を {HF_TOKEN} にした", HF_TOKEN, "[秘匿]"),
    (f"token は {HF_TOKEN}", HF_TOKEN, "[秘匿]"),
    ("パスワードは「Tanaka2024!」です", "Tanaka2024!", "[秘匿]"),
    ("パスワード：「abc 123」", "abc 123", "[秘匿]"),
    ("パスワードは『secret99』", "secret99", "[秘匿]"),
    ("PW: Sakura#88", "Sakura#88", "[秘匿]"),
    ("pw=hunter22 で入れます", "hunter22", "[秘匿]"),
    ("pass=opensesame9", "opensesame9", "[秘匿]"),
    ("PASS：kaiwa2025", "kaiwa2025", "[秘匿]"),
    ("db_pwd: Mur4sak1", "Mur4sak1", "[秘匿]"),  # detect-secrets' keyword list (pwd)
]


@pytest.mark.parametrize("text,secret,label", SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_spelling_is_masked(text, secret, label):
    masked = mask_pii(text)
    assert secret not in masked and label in masked, masked
    assert find_pii(masked) == []


@pytest.mark.parametrize("text", ["10〜20件の契約", "価格は1,000〜2,000円", "会議 @ 本社", "2024〜2025年度",
                                  "パスタは「ペペロンチーノ」", "compass heading 北"])
def test_ordinary_text_stays(text):
    assert mask_pii(text) == text


def test_hostile_input_stays_linear():
    # wave dashes, spaces around @ and quotes repeated: each pattern is re2 or a single linear scan
    for text in ("0〜" * 20_000, "a @ " * 20_000, "パスワードは「" * 10_000, "hf_" * 20_000):
        assert isinstance(mask_pii(text), str)
