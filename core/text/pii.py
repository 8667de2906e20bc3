"""Masking of personal data and secrets before text reaches a model, a trace or a debug record.

Personal data: e-mail addresses (also written ``taro(at)example(dot)com``, ``[at]``/``[dot]``,
``アットマーク``/``ドット``), card numbers, My Number (12 digits), phone numbers, postal codes and street
addresses — numbers also in kanji numerals (``〇九〇-一二三四-五六七八``, ``〒一〇〇-〇〇〇一``) and with ``/``,
``_`` or ``の`` between the groups.

Secrets: the token-shaped rules of ``detect-secrets`` (a maintained rule set: AWS access key ids and
quoted secret keys, Azure storage account keys, Slack tokens and webhooks, Stripe live keys, GitHub,
OpenAI, SendGrid, npm, PyPI, Discord, Telegram, Twilio, Mailchimp, Square tokens, JWTs), each recompiled
with re2; whole PEM / OpenSSH / PGP / PuTTY private keys (the plugin's start markers, to the end
marker); and our own rules for what it does not cover: ``sk-…``, Stripe restricted and test keys
(``rk_…``), Slack app tokens (``xapp-…``) and workflow webhooks, Google API keys and OAuth client
secrets, Azure subscription keys, GitLab tokens, ``Bearer`` / ``Basic`` credentials, ``Authorization:``
values, ``api_key=…`` / ``password: …`` / ``AWS_SECRET_ACCESS_KEY=…`` pairs (any prefix before the
name) and the ``user:password@`` part of URLs.

How it works (linear in the input, measured by ``python -m bench.mask``):

1. The text is normalised for detection (:func:`core.text.normalize.normalize_with_offsets`: NFKC,
   zero-width characters removed, hyphen look-alikes as ``-``), keeping a map back to the original;
   runs of two or more kanji digits (``〇一二…九``) are read as ASCII digits, one character for one, so
   single kanji in names (三鷹市, 四日市) stay words.
2. Detectors run over the normalised text: re2 patterns (linear-time automata) for secrets,
   e-mail and addresses; one linear ``re`` scan for runs of digits joined by short separators
   (space, ``-``, ``ー``, ``.``, ``・``, ``/``, ``_``, ``の``, brackets), each run classified in Python
   with bounded work; private keys by a forward scan for their end marker.
3. Overlapping findings are merged, mapped back to the original text and replaced by labels.

The masked text is the *original* text with only the found spans replaced (full-width letters,
line breaks and so on stay as the user typed them), so operators read what was written.
:func:`scrub` is idempotent: ``scrub(scrub(x)) == scrub(x)``.
"""
from __future__ import annotations

import base64
import binascii
import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator
from urllib.parse import urlsplit, urlunsplit

import re2
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import DENYLIST as KEYWORD_DENYLIST
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from core.text.normalize import normalize_with_offsets

MAX_MESSAGE_CHARS = 8000
# Secrets known at run time (the configured API key) are added here by the provider registry.
KNOWN_SECRETS: set[str] = set()

PII_LABELS = {"email": "[メール]", "card": "[カード番号]", "mynumber": "[マイナンバー]",
              "phone": "[電話番号]", "postal": "[郵便番号]", "address": "[住所]"}
SECRET_LABEL = "[秘匿]"
LABELS = {**PII_LABELS, "secret": SECRET_LABEL}
_ALREADY_MASKED = frozenset({SECRET_LABEL, "***"})
KINDS = ("email", "card", "mynumber", "phone", "postal", "address", "secret")

# ---- secrets -----------------------------------------------------------------------------------
# Each pattern's first non-empty group is the part that is replaced; the rest (a key name, "Bearer")
# stays readable. Patterns run on the normalised text, so ｓｋ－… and sk‐… read as sk-….
_QUOTED = r"""(?:"((?:[^"\\\r\n]|\\.)+)"|'([^'\r\n]+)')"""
_SECRET_NAMES = (r"api[_-]?key|x-api-key|apikey|access[_-]?token|refresh[_-]?token|id[_-]?token|auth[_-]?token"
                 r"|client[_-]?secret|secret[_-]?access[_-]?key|access[_-]?key[_-]?secret|secret[_-]?key"
                 r"|subscription[_-]?key|account[_-]?key|shared[_-]?access[_-]?key|private[_-]?key|secret|password"
                 r"|passwd|token|" + "|".join(KEYWORD_DENYLIST))  # detect-secrets' keyword names (pwd, db_pass, …)
_SECRETS = tuple(re2.compile(p) for p in (
    # Authorization headers: the whole value (to the closing quote, or to the end of the line).
    r"""(?i)(?:^|[^a-z0-9_-])(?:proxy-)?authorization["']?\s*[:=]\s*""" + f"(?:{_QUOTED}|([^\\s\"'][^\\r\\n]*))",
    # key = value pairs (JSON, YAML, query strings, headers, env files), with any prefix before the name
    # (AWS_SECRET_ACCESS_KEY, aws.secret_key, awsSecretAccessKey, Ocp-Apim-Subscription-Key).
    rf"""(?i)(?:^|[^a-z0-9_])[a-z0-9_.\-]{{0,30}}?(?:{_SECRET_NAMES})["']?\s*[:=]\s*"""
    + f"(?:{_QUOTED}|([^\\s\"'&,;{{}}\\[\\]<>]{{4,}}))",
    r"""(?:パスワード|暗証番号)\s*(?:[:=]|は)\s*([!-~]{4,})""",
    # A password introduced in words and quoted: パスワードは「…」, 暗証番号：『…』, パス="…".
    r"""(?:パスワード|暗証番号|パスコード|パス)\s*(?:[:=]|は|を)?\s*[「『"'“‘]([^」』"'”’\r\n]{1,80})[」』"'”’]""",
    # Short names detect-secrets' keyword list does not have: PW: …, pw=…, pass=…, p/w …
    (r"""(?i)(?:^|[^a-z0-9_])(?:pass|pw|p/w|passcode)["']?\s*[:=]\s*(?:""" + _QUOTED
     + r"""|([^\s"'&,;{}\[\]<>]{4,}))"""),
    # Signed URLs: …?sig=…, …&key=… (user:password@ is _USERINFO below)
    r"""(?i)[?&](?:sig|signature|key|code)=([^\s&#"'<>]{4,})""",
    r"""(?i)(?:^|[^a-z0-9_])bearer\s+([a-z0-9\-._~+/]{8,}=*)""",
    # Tokens recognisable by their shape.
    r"""(?:^|[^A-Za-z0-9_])(sk-[A-Za-z0-9_\-]{8,}|[rs]k_(?:live|test)_[A-Za-z0-9]{8,}|AKIA[0-9A-Z]{16}"""
    r"""|hf_[A-Za-z0-9]{30,}|api_org_[A-Za-z0-9]{30,}|AIza[0-9A-Za-z_\-]{35}|GOCSPX-[A-Za-z0-9_\-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"""
    r"""|xox[abposre]-[A-Za-z0-9\-]{8,}|xapp-[0-9]+-[A-Za-z0-9\-]{8,}|gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-[A-Za-z0-9_\-]{20,}"""
    r"""|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*)""",
    # Slack webhooks of every kind (services, workflows, triggers): the path after the host.
    r"""(?i)hooks\.slack\.com/((?:services|workflows|triggers)/[A-Za-z0-9_/\-]{8,})""",
    # Azure: storage / Service Bus connection strings, subscription keys (32 hex) named as such.
    r"""(?i)(?:AccountKey|SharedAccessKey|SharedAccessSignature)=([^;\s"'<>]{8,})""",
    r"""(?i)(?:ocp-apim-subscription-key|subscription-key)["']?\s*[:=]\s*["']?([0-9a-f]{32})""",
))
# The maintained rule set: detect-secrets' token-shaped plugins, each pattern recompiled with re2 (its
# patterns use no look-around, so re2 takes them as they are: linear time on hostile text). Keyword,
# high-entropy and IP rules are left out (ours above cover key = value pairs without their false positives
# on prices and part numbers), and so is Artifactory's, which reads part numbers like 「AP1234567890」 as keys.
DETECT_SECRETS_PLUGINS = (AWSKeyDetector, AzureStorageKeyDetector, DiscordBotTokenDetector, GitHubTokenDetector,
                          JwtTokenDetector, MailchimpDetector, NpmDetector, OpenAIDetector, PypiTokenDetector,
                          SendGridDetector, SlackDetector, SquareOAuthDetector, StripeDetector,
                          TelegramBotTokenDetector, TwilioKeyDetector)


def _recompiled(plugins: tuple[type, ...]) -> tuple[Any, ...]:
    rules = []
    for plugin in plugins:
        for pattern in plugin.denylist:
            flags = "(?i)" if pattern.flags & re.IGNORECASE else ""
            rules.append(re2.compile(flags + pattern.pattern))
    return tuple(rules)


_PLUGIN_SECRETS = _recompiled(DETECT_SECRETS_PLUGINS)
# Private keys: the plugin's start markers (and any other "BEGIN … PRIVATE KEY"), up to the end marker.
_KEY_START = re2.compile("(?:-----)?(?:" + "|".join(p.pattern for p in PrivateKeyDetector.denylist)
                         + r"|BEGIN [A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?)(?:-----)?")
# A key without its end marker: the key-like characters that follow (one character class, no nesting: a
# linear ``re`` scan from a position, which re2's Python binding would re-encode the whole text for).
_KEY_BODY = re.compile(r"[A-Za-z0-9+/=:,.\- \t\r\n]*")
MAX_KEY_CHARS = 16_384  # an end marker further away than this does not belong to the key
_KANJI_DIGITS = re.compile("[〇一二三四五六七八九]{2,}")
_KANJI_TO_ASCII = str.maketrans("〇一二三四五六七八九", "0123456789")
_USERINFO = re2.compile(r"""(?i)[a-z][a-z0-9+.\-]*://([^\s/@?#\[\]"'<>]+)@""")
# "Basic <base64>" is a secret only when the token decodes to user:password ("Basic plan" is not).
_BASIC = re2.compile(r"(?:^|[^A-Za-z0-9_])[Bb](?:asic|ASIC)\s+([A-Za-z0-9+/]{4,}={0,2})")

# ---- e-mail and addresses ------------------------------------------------------------------------
_AT = r"(?:\s{0,2}@\s{0,2}|\s?[(\[{<]\s?(?i:at)\s?[)\]}>]\s?|\s?(?:アット(?:マーク)?|あっと(?:まーく)?)\s?)"
_DOT = r"(?:\.|\s?[(\[{<]\s?(?i:dot)\s?[)\]}>]\s?|\s?(?:ドット|どっと)\s?)"
_EMAIL = re2.compile(rf"[A-Za-z0-9._%+\-]+{_AT}[A-Za-z0-9\-]+(?:{_DOT}[A-Za-z0-9\-]+)*{_DOT}[A-Za-z]{{2,}}")
_PREF = r"(?:北海道|東京都|(?:京都|大阪)府|[一-龥]{2,3}県)"
_CITY = r"[一-龥々ヶケ]{1,6}[市区町村郡]"
# Town: kanji, katakana, の/ヶ and digits (北1条西2丁目); no other hiragana, so 「横浜市内で3-4回」 is no address.
_TOWN = r"[一-龥々ァ-ヶーケの0-9]{0,12}?"
_NUM = r"(?:[0-9]{1,5}|[一二三四五六七八九十百〇]{1,4})"
_DASH = r"(?:-|ー|の)"
# 六丁目十番一号, 3丁目1番, 1-2-3, 5番地2, 1-1 …
_BLOCK = (rf"(?:{_NUM}丁目(?:{_DASH}?{_NUM}(?:番地?|{_DASH})?(?:{_NUM}号?)?)?"
          rf"|{_NUM}番地?(?:{_DASH}?{_NUM}号?)?"
          rf"|{_NUM}{_DASH}{_NUM}(?:{_DASH}{_NUM})?)")
# Without a prefecture the number must look like an address (丁目, 番地 or 1-2), not 「地区1番」.
_STRONG_BLOCK = (rf"(?:{_NUM}丁目(?:{_DASH}?{_NUM}(?:番地?|{_DASH})?(?:{_NUM}号?)?)?"
                 rf"|{_NUM}番地(?:{_DASH}?{_NUM}号?)?"
                 rf"|{_NUM}番{_NUM}号"
                 rf"|[0-9]{{1,5}}{_DASH}[0-9]{{1,5}}(?:{_DASH}[0-9]{{1,5}})?)")
_ADDRESS = re2.compile(rf"{_PREF}{_CITY}(?:[一-龥々]{{1,6}}[市区町村])?{_TOWN}{_BLOCK}"
                       rf"|{_CITY}(?:[一-龥々]{{1,6}}[市区町村])?{_TOWN}{_STRONG_BLOCK}")

# ---- numbers -------------------------------------------------------------------------------------
# A run of digit groups joined by 1–3 separator characters. Digits and separators are disjoint
# classes and nothing is nested, so this ``re`` scan is linear.
_SEP = " \t\\-.()・ー/_の~〜"  # ~: the full-width wave dash ～ after NFKC; 〜: the wave dash
_RUN = re.compile(rf"\(?[0-9]+(?:[{_SEP}]{{1,3}}[0-9]+)*")
_GROUP = re.compile(r"[0-9]+")
_UUID = re2.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
MAX_GROUPS = 20  # a number is never spread over more groups than this
MAX_DIGITS = 19


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int  # in the original text
    end: int


_LUHN_DOUBLE = str.maketrans("0123456789", "0246813579")


def _digit_sum(digits: str) -> int:
    return sum(digits.encode("ascii")) - 48 * len(digits)


def _luhn_ok(digits: str) -> bool:
    rev = digits[::-1]
    return (_digit_sum(rev[0::2]) + _digit_sum(rev[1::2].translate(_LUHN_DOUBLE))) % 10 == 0


def _classify(digits: str, sizes: list[int], first_sep: str, *, plus: bool, postal_mark: bool) -> str | None:
    """What a window of digit groups is (``sizes``: digits per group; ``first_sep``: the separator
    after the first group), if anything."""
    n = len(digits)
    single, spaced = len(sizes) == 1, max(sizes) == 1
    if plus and digits.startswith("81") and 11 <= n <= 13:
        national = digits[2:] if digits[2] == "0" else "0" + digits[2:]
        if len(national) in (10, 11) and national[1] != "0":
            return "phone"
    if 13 <= n <= 19:
        if single or spaced or (sizes[0] == 4 and 3 <= min(sizes) and max(sizes) <= 6):
            return "card" if n == 16 or _luhn_ok(digits) else None
        return None
    if n == 12:
        return "mynumber" if single or spaced or sizes == [4, 4, 4] else None
    if n in (10, 11):
        ok = single or spaced or (len(sizes) <= 4 and 2 <= sizes[0] <= 5 and sizes[-1] >= 3)
        return "phone" if ok and digits[0] == "0" and digits[1] != "0" else None
    if n == 7 and ((sizes == [3, 4] and first_sep in ("-", "ー")) or (postal_mark and (single or sizes == [3, 4]))):
        return "postal"
    return None


_WANTED_LENGTHS = tuple(sorted({7, *range(10, MAX_DIGITS + 1)}, reverse=True))


def _number_findings(text: str) -> Iterator[tuple[int, int, str]]:
    """Phone, card, My Number and postal numbers: for each run of digit groups, from the left, the
    longest window of at most ``MAX_GROUPS`` groups and ``MAX_DIGITS`` digits that classifies."""
    for run in _RUN.finditer(text):
        if run.end() - run.start() < 7:
            continue  # fewer than 7 digits: nothing to mask
        groups = [(m.start(), m.end()) for m in _GROUP.finditer(text, run.start(), run.end())]
        sizes = [e - s for s, e in groups]
        digits = "".join(text[s:e] for s, e in groups)
        ends: dict[int, int] = {}  # digits before the end of group j → j
        total = 0
        for j, size in enumerate(sizes):
            total += size
            ends[total] = j
        lead = text[max(0, run.start() - 2):run.start()]
        i = before = 0  # before: digits in groups[:i]
        while i < len(groups):
            found = None
            for length in _WANTED_LENGTHS:  # longest window first
                j = ends.get(before + length)
                if j is None or j - i >= MAX_GROUPS:
                    continue
                if (i and text[groups[i - 1][1]:groups[i][0]] == ".") or \
                        (j + 1 < len(groups) and text[groups[j][1]:groups[j + 1][0]] == "."):
                    continue  # a window never starts or ends at a decimal point ("0.12345678901")
                first_sep = text[groups[i][1]:groups[i + 1][0]] if j > i else ""
                kind = _classify(digits[before:before + length], sizes[i:j + 1], first_sep,
                                 plus=i == 0 and lead.endswith("+"), postal_mark=i == 0 and "〒" in lead)
                if kind:
                    found = (j, kind, length)
                    break
            if found is None:
                before += sizes[i]
                i += 1
                continue
            j, kind, length = found
            start, end = groups[i][0], groups[j][1]
            if i == 0 and text[run.start()] == "(" and ")" in text[start:end]:
                start = run.start()  # (03)1234-5678
            if i == 0 and kind == "postal" and "〒" in lead:
                start = run.start() - len(lead) + lead.index("〒")
            if i == 0 and kind == "phone" and lead.endswith("+"):
                start -= 1
            yield start, end, kind
            before += length
            i = j + 1


def _basic_ok(token: str) -> bool:
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


def _group_span(m: Any) -> tuple[int, int] | None:
    """The span of the first group that took part in the match."""
    for g, value in enumerate(m.groups(), start=1):
        if value:
            return m.span(g)
    return None


def _key_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """Private keys: from each start marker to its end marker (``-----END …-----``, at most
    :data:`MAX_KEY_CHARS` on), else over the key-like lines that follow. Linear: the next end marker is
    searched once and reused until the scan passes it."""
    pos, end_marker = 0, -2
    for m in _KEY_START.finditer(text):  # one pass of re2 over the text
        if m.start() < pos:
            continue  # inside the key block just found
        if end_marker != -1 and end_marker < m.end():
            end_marker = text.find("-----END", m.end())
        if end_marker != -1 and end_marker - m.end() <= MAX_KEY_CHARS:
            close = text.find("-----", end_marker + 8, end_marker + 100)
            end = close + 5 if close != -1 else end_marker + 8
        else:
            body = _KEY_BODY.match(text, m.end(), m.end() + MAX_KEY_CHARS)
            end = body.end() if body else m.end()
        yield m.start(), end, "secret"
        pos = max(end, m.end())


def _whole_token(text: str, m: Any) -> tuple[int, int]:
    """A plugin match without the boundary characters some patterns include (quotes, ``=``, spaces)."""
    span = _group_span(m)
    if span:
        return span
    start, end = m.span()
    while start < end and text[start] in " \t\r\n\"'=:(,":
        start += 1
    while end > start and text[end - 1] in " \t\r\n\"')":
        end -= 1
    return start, end


# Every secret rule's pattern in one automaton (each in its own group: its flags stay its own). It matches
# somewhere exactly when one of them does, so a text in which it finds nothing skips ~30 scans that would
# each find nothing (and each re-encode the text for re2): most texts hold no secret.
_ANY_SECRET = re2.compile("|".join(f"(?:{p.pattern})" for p in (_KEY_START, *_PLUGIN_SECRETS, *_SECRETS, _BASIC,
                                                                  _USERINFO)))


def _raw_findings(text: str, extra_secrets: tuple[str, ...]) -> Iterator[tuple[int, int, str]]:
    secrets = _ANY_SECRET.search(text) is not None  # else the secret rules below would yield nothing
    if secrets:
        yield from _key_spans(text)
        for pattern in _PLUGIN_SECRETS:
            for m in pattern.finditer(text):
                start, end = _whole_token(text, m)
                if end > start and text[start:end] not in _ALREADY_MASKED:
                    yield start, end, "secret"
    for secret in extra_secrets:
        if secret and len(secret) >= 6:
            pos = text.find(secret)
            while pos >= 0:
                yield pos, pos + len(secret), "secret"
                pos = text.find(secret, pos + len(secret))
    userinfo_ends = set()
    if secrets:
        for pattern in _SECRETS:
            for m in pattern.finditer(text):
                span = _group_span(m)
                if span and text[span[0]:span[1]] not in _ALREADY_MASKED:
                    yield span[0], span[1], "secret"
        for m in _BASIC.finditer(text):
            if _basic_ok(m.group(1)):
                yield m.start(1), m.end(1), "secret"
        for m in _USERINFO.finditer(text):
            userinfo_ends.add(m.end(1))
            yield m.start(1), m.end(1), "secret"
    for m in _EMAIL.finditer(text):
        if m.start() + m.group().find("@") not in userinfo_ends:  # https://user:pass@host is no e-mail
            yield m.start(), m.end(), "email"
    for m in _ADDRESS.finditer(text):
        yield m.start(), m.end(), "address"
    uuids = [m.span() for m in _UUID.finditer(text)]  # sorted, non-overlapping
    uuid_starts = [a for a, _ in uuids]
    for start, end, kind in _number_findings(text):
        k = bisect_right(uuid_starts, start) - 1
        if k < 0 or end > uuids[k][1]:  # a number inside a request id is no My Number
            yield start, end, kind


def find_spans(text: str, extra_secrets: tuple[str, ...] = ()) -> list[Finding]:
    """Personal data and secrets in ``text``, as non-overlapping spans of the original text.

    Overlapping findings merge into one span labelled by the one that starts first (the longest
    of those), so nothing that was found is left half visible.
    """
    if not text:
        return []
    normalized, offsets = normalize_with_offsets(text)
    if _KANJI_DIGITS.search(normalized):  # 〇九〇 → 090, one character for one: offsets stay valid
        normalized = _KANJI_DIGITS.sub(lambda m: m.group().translate(_KANJI_TO_ASCII), normalized)
    raw = sorted(_raw_findings(normalized, extra_secrets), key=lambda f: (f[0], -f[1]))
    merged: list[list[Any]] = []
    for start, end, kind in raw:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, kind])
    out = []
    for start, end, kind in merged:
        a, b = offsets.span(start, end)
        if out and a < out[-1].end:  # two findings inside one changed run of the original
            out[-1] = Finding(out[-1].kind, out[-1].start, max(out[-1].end, b))
        else:
            out.append(Finding(kind, a, b))
    return out


def _apply(text: str, spans: list[Finding], kinds: frozenset[str]) -> str:
    pieces, last = [], 0
    for f in spans:
        if f.kind in kinds:
            pieces += [text[last:f.start], LABELS[f.kind]]
            last = f.end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


_ALL = frozenset(KINDS)


MAX_PASSES = 4


def _mask(text: str, extra_secrets: tuple[str, ...], kinds: frozenset[str]) -> str:
    """Mask until nothing more is found. A label can give a neighbour the boundary it lacked
    (``0901234567Authorization: x`` → ``[電話番号]Authorization: x``), so a text that changed is
    scanned again; each pass is linear and a second pass almost never finds anything."""
    for _ in range(MAX_PASSES):
        if not text:
            return text
        masked = _apply(text, find_spans(text, extra_secrets), kinds)
        if masked == text:
            return text
        text = masked
    return text


MASK_MEMO_STRINGS = 512  # mask_text's memo: distinct short strings remembered (least recently used dropped)
MASK_MEMO_MAX_CHARS = 2000  # a longer string is masked every time (the memo stays ≤ ~4 MB)


@lru_cache(maxsize=MASK_MEMO_STRINGS)
def _masked(text: str, extra_secrets: tuple[str, ...]) -> str:
    return _mask(text, extra_secrets, _ALL)


def mask_text(text: str, extra_secrets: tuple[str, ...] = ()) -> str:
    """``text`` with personal data and secrets replaced by labels such as ``[電話番号]`` / ``[秘匿]``. A short
    string is masked once and remembered (:data:`MASK_MEMO_STRINGS`): a diagnosis turn masks the
    conversation so far for its prompt again on every call."""
    if isinstance(text, str) and len(text) <= MASK_MEMO_MAX_CHARS:
        return _masked(text, tuple(extra_secrets))
    return _mask(text, extra_secrets, _ALL)


def mask_pii(text: str) -> str:
    """``text`` with personal data (and any secret in it) replaced by labels such as ``[電話番号]``."""
    return mask_text(text)


def find_pii(text: str) -> list[str]:
    """Kinds of personal data and secrets still present in ``text`` (email, card, mynumber, phone,
    postal, address, secret), in that order; empty when the text is clean."""
    found = {f.kind for f in find_spans(text or "")}
    return [k for k in KINDS if k in found]


def redact_secrets(text: str, extra: tuple[str, ...] = ()) -> str:
    """``text`` with secrets (and the ``extra`` literal values) replaced by ``[秘匿]``."""
    return _mask(text, extra, frozenset({"secret"}))


SCRUB_MEMO_STRINGS = 1024  # scrub's memo: the distinct strings it remembers (least recently used dropped)
SCRUB_MEMO_MAX_CHARS = 8000  # a longer string is masked every time (the memo stays ≤ ~32 MB)


@lru_cache(maxsize=SCRUB_MEMO_STRINGS)
def _scrub_text(text: str, extra_secrets: tuple[str, ...]) -> str:
    return mask_text(text, extra_secrets)


def scrub(value: Any, extra_secrets: tuple[str, ...] = ()) -> Any:
    """Recursively mask personal data and secrets in every string of a JSON-like value. A debug record
    repeats most of its strings on every call of a turn and every turn (the system prompt, the schema, the
    tools, the history so far): each distinct string is masked once and remembered (``_scrub_text``)."""
    if isinstance(value, str):
        if len(value) <= SCRUB_MEMO_MAX_CHARS:
            return _scrub_text(value, tuple(extra_secrets))
        return mask_text(value, extra_secrets)
    if isinstance(value, dict):
        return {k: scrub(v, extra_secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, extra_secrets) for v in value]
    return value


# ---- URLs and message length ---------------------------------------------------------------------

_SECRET_PARAM = re.compile(r"(?i)key|token|secret|password|passwd|pwd|sig|signature|auth|credential|code")


def redact_url(url: str | None) -> str:
    """``url`` without credentials: ``https://***@host/v1?api-key=***`` (user:password@, secret-looking
    query parameters); safe to show in the UI or a log."""
    if not url:
        return url or ""
    try:
        parts = urlsplit(url.strip())
        netloc = parts.netloc
        if "@" in netloc:
            netloc = "***@" + netloc.rsplit("@", 1)[1]
        query = "&".join(_redact_param(p) for p in parts.query.split("&")) if parts.query else ""
        fragment = "&".join(_redact_param(p) for p in parts.fragment.split("&")) if parts.fragment else ""
        url = urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
    except ValueError:  # not a URL urllib can split: fall back to the text patterns
        pass
    return redact_secrets(url).replace(SECRET_LABEL, "***")


def _redact_param(param: str) -> str:
    name, sep, value = param.partition("=")
    return f"{name}=***" if sep and value and _SECRET_PARAM.search(name) else param


def check_message_length(text: str | None, limit: int = MAX_MESSAGE_CHARS) -> str | None:
    """A Japanese error message when ``text`` is longer than ``limit`` characters, else None."""
    length = len(text or "")
    if length <= limit:
        return None
    return (f"入力が長すぎます（{length:,} 文字。最大 {limit:,} 文字）。"
            "お手数ですが、内容を短くするか、いくつかに分けて送信してください。")


def clean_text(text: Any, *, keep_personal_data: bool = False) -> str:
    """Secrets (and :data:`KNOWN_SECRETS`) always removed; personal data masked unless ``keep_personal_data``."""
    value = redact_secrets(str(text or ""), tuple(KNOWN_SECRETS))
    return value if keep_personal_data else mask_pii(value)
