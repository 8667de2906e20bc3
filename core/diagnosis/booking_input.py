"""Checks of what a customer types into the booking form: a phone number that can exist, and a
requested date that is not in the past (seed 000 §7 BOOKING_INFO), with the reason in Japanese.

Phone numbers: a mobile / IP number (070, 080, 090, 050, 020, 060) has 11 digits, any other number
starting with 0 has 10 (0120 and 0800 free dial included); ``+81`` stands for the leading 0.
Dates: 「2026年6月10日」「2026/6/10」「6月10日」「6/10」「今日」「明日」「明後日」「昨日」「一昨日」 (and
weekday-free forms of these). A month and day without a year means the next such day, unless that day
fell within the last :data:`RECENT_PAST_DAYS` days (「11月20日」 typed on 26 November is a slip for a
past day, not next year's). Text that names no date is left to the desk (「なるべく早く」).
"""
from __future__ import annotations

import re
import unicodedata
from datetime import date, datetime, timedelta, timezone

JST = timezone(timedelta(hours=9))
MAX_CHARS = 200  # the field is read up to this many characters (bounded patterns, no backtracking blow-up)
RECENT_PAST_DAYS = 60
MOBILE_PREFIXES = ("070", "080", "090", "050", "020", "060")
PHONE_ERROR = ("電話番号の桁数が正しくありません。携帯電話（090・080・070 など）は 11 桁、固定電話は市外局番から 10 桁で"
               "入力してください。")
PHONE_FORMAT_ERROR = "電話番号は 0 から始まる 10〜11 桁の番号で入力してください。"
PAST_DATE_ERROR = "希望日時が過去の日付（{day}）になっています。本日以降の日付を入力してください。"
BAD_DATE_ERROR = "希望日時の日付（{text}）は存在しない日付です。正しい日付を入力してください。"

_SEPARATORS = re.compile(r"[\s\-‐－ー−()（）.]")
_FULL = re.compile(r"(\d{4})\s*[年/.\-]\s*(\d{1,2})\s*[月/.\-]\s*(\d{1,2})")
_MONTH_DAY = re.compile(r"(?<!\d)(\d{1,2})\s*(?:月|/)\s*(\d{1,2})(?!\d)")
_RELATIVE = {"一昨日": -2, "おととい": -2, "昨日": -1, "きのう": -1, "今日": 0, "きょう": 0, "本日": 0,
             "明日": 1, "あした": 1, "あす": 1, "明後日": 2, "あさって": 2}


def phone_error(raw: str | None) -> str | None:
    """The reason ``raw`` cannot be a Japanese phone number, or None (empty is the form's own check)."""
    phone = _SEPARATORS.sub("", unicodedata.normalize("NFKC", raw or ""))[:40]
    if not phone:
        return None
    if phone.startswith("+81"):
        phone = "0" + phone[3:].lstrip("0")
    if not re.fullmatch(r"0\d{9,10}", phone):
        return PHONE_FORMAT_ERROR
    expected = 11 if phone.startswith(MOBILE_PREFIXES) else 10
    return None if len(phone) == expected else PHONE_ERROR


def today_jst() -> date:
    return datetime.now(JST).date()


def requested_day(text: str | None, today: date | None = None) -> date | str | None:
    """The day ``text`` names (a :class:`date`), the matched text when it names a day that does not
    exist (「2月30日」), or None when it names no day."""
    today = today or today_jst()
    text = unicodedata.normalize("NFKC", text or "")[:MAX_CHARS]
    if m := _FULL.search(text):
        try:
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            return m.group(0)
    if m := _MONTH_DAY.search(text):
        month, day = int(m.group(1)), int(m.group(2))
        try:
            this_year = date(today.year, month, day)
        except ValueError:
            return m.group(0)
        if this_year >= today or (today - this_year).days <= RECENT_PAST_DAYS:
            return this_year
        try:
            return date(today.year + 1, month, day)
        except ValueError:  # 29 February
            return this_year
    for word in sorted(_RELATIVE, key=len, reverse=True):
        if word in text:
            return today + timedelta(days=_RELATIVE[word])
    return None


def date_error(text: str | None, today: date | None = None) -> str | None:
    """The reason the requested date cannot be booked (in the past, or no such day), or None."""
    today = today or today_jst()
    day = requested_day(text, today)
    if isinstance(day, str):
        return BAD_DATE_ERROR.format(text=day)
    if isinstance(day, date) and day < today:
        return PAST_DATE_ERROR.format(day=f"{day.year}年{day.month}月{day.day}日")
    return None
