"""Generated ids: URL-safe, unique, and never read as personal data by the masker."""
from __future__ import annotations

import re

from core.ids import new_id
from core.text.pii import find_pii, mask_pii


def test_ids_have_the_asked_length_and_a_url_safe_alphabet():
    for length in (8, 12, 16, 24):
        assert re.fullmatch(rf"[a-z2-7]{{{length}}}", new_id(length))


def test_ten_thousand_ids_are_unique_and_none_looks_like_a_phone_card_or_my_number():
    ids = [new_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    blob = " ".join(ids)
    # 16-character hex ids put a 10–16 digit run in about one id in a hundred: phone / My Number / card
    assert find_pii(blob) == []
    assert mask_pii(blob) == blob
