"""Identifiers the console generates: sessions, conversations, knowledge entries, chat messages.

Random lowercase base32 (a–z and 2–7; 5 bits a character, 80 bits in the default 16). URL-safe,
and with no 0, 1, 8 or 9 a generated id never reads as a phone number, a card number or a My
Number to the personal-data masker, so debug records and traces keep it exactly as made (a hex id
such as ``a09012345678`` was once masked as a phone number, and whole-record PII checks flagged a
12-digit hex run as a My Number).
"""
from __future__ import annotations

import base64
import secrets


def new_id(length: int = 16) -> str:
    """A random id of ``length`` characters from ``a–z2–7``."""
    return base64.b32encode(secrets.token_bytes(length)).decode("ascii").lower()[:length]
