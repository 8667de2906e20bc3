"""Masking of personal data and secrets before text reaches a model, a trace or a debug record.

Personal data: e-mail addresses, card numbers, My Number (12 digits), phone numbers, postal codes
and street addresses. Secrets: API keys (``sk-…``), ``Bearer`` tokens, ``api_key=…`` pairs.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Any

_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<!\d)(?:\d[ \-]?){12,18}\d(?!\d)")
_MYNUMBER = re.compile(r"(?<!\d)\d{4}[ \-]?\d{4}[ \-]?\d{4}(?!\d)")
_PHONE = re.compile(r"(?<![\d\-])(?:\+81[ \-]?\d{1,4}|0\d{1,4})[ \-]?\d{1,4}[ \-]?\d{3,4}(?![\d\-])")
_POSTAL = re.compile(r"〒\s?\d{3}-?\d{4}|(?<![\d\-])\d{3}-\d{4}(?![\d\-])")
_ADDRESS = re.compile(
    r"(?:北海道|東京都|(?:京都|大阪)府|[一-龥]{2,3}県)"
    r"[一-龥ぁ-んァ-ヶー]{1,12}?[市区町村郡]"
    r"[一-龥ぁ-んァ-ヶー０-９0-9\-－ー丁目番地号のケヶ]*?\d+(?:[\-－ー丁目番地号の]+\d+)*(?:号|番地)?"
)
_SECRETS = (
    re.compile(r"sk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)bearer\s+[A-Za-z0-9._\-]{8,}"),
    re.compile(r"(?i)(api[_-]?key|authorization)[\"']?\s*[:=]\s*[\"']?[^\s\"',}]{6,}"),
)

# Dash look-alikes typed between digits (ー－‐―−–—) count as hyphens.
_DIGIT_DASH = re.compile(r"(?<=\d)[ー－‐―−–—](?=\d)")

PII_LABELS = {"email": "[メール]", "card": "[カード番号]", "mynumber": "[マイナンバー]",
              "phone": "[電話番号]", "postal": "[郵便番号]", "address": "[住所]"}


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _mask_card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    if 13 <= len(digits) <= 19 and (_luhn_ok(digits) or len(digits) == 16):
        return PII_LABELS["card"]
    return match.group(0)


def mask_pii(text: str) -> str:
    """``text`` with personal data replaced by labels such as ``[電話番号]``."""
    if not text:
        return text
    text = unicodedata.normalize("NFKC", text) if any("０" <= c <= "９" for c in text) else text
    text = _DIGIT_DASH.sub("-", text)
    text = _EMAIL.sub(PII_LABELS["email"], text)
    text = _CARD.sub(_mask_card, text)
    text = _MYNUMBER.sub(PII_LABELS["mynumber"], text)
    text = _ADDRESS.sub(PII_LABELS["address"], text)
    text = _PHONE.sub(PII_LABELS["phone"], text)
    text = _POSTAL.sub(PII_LABELS["postal"], text)
    return text


def find_pii(text: str) -> list[str]:
    """Kinds of personal data still present in ``text`` (phone, email, card, mynumber)."""
    found = []
    if _EMAIL.search(text):
        found.append("email")
    if any(_mask_card(m) != m.group(0) for m in _CARD.finditer(text)):
        found.append("card")
    if _PHONE.search(text):
        found.append("phone")
    return found


def redact_secrets(text: str, extra: tuple[str, ...] = ()) -> str:
    for secret in extra:
        if secret and len(secret) >= 6:
            text = text.replace(secret, "[秘匿]")
    for pattern in _SECRETS:
        text = pattern.sub("[秘匿]", text)
    return text


def scrub(value: Any, extra_secrets: tuple[str, ...] = ()) -> Any:
    """Recursively mask personal data and secrets in every string of a JSON-like value."""
    if isinstance(value, str):
        return redact_secrets(mask_pii(value), extra_secrets)
    if isinstance(value, dict):
        return {k: scrub(v, extra_secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, extra_secrets) for v in value]
    return value
