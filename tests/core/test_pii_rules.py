"""Secrets that README says are always removed, and personal data written the ways people write it
(issue #15): each one is masked whole; look-alikes (prices, dates, part numbers, article numbers,
place names with kanji numerals) are left alone; the maintained rule set (detect-secrets) is in use."""
from __future__ import annotations

import time

import pytest

from core.text.pii import DETECT_SECRETS_PLUGINS, find_pii, mask_pii, mask_text, redact_secrets

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PEM_BODY = ("MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
            "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n")

SECRETS = {
    "PEM RSA": f"鍵です\n-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}-----END RSA PRIVATE KEY-----\n以上",
    "PEM PKCS8 in JSON": '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n'
                         '-----END PRIVATE KEY-----\\n"}',
    "PEM encrypted": f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{PEM_BODY}-----END ENCRYPTED PRIVATE KEY-----",
    "OpenSSH": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
               "-----END OPENSSH PRIVATE KEY-----",
    "PEM cut off (no end marker)": f"貼ります -----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}",
    "AWS secret, env file": f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
    "AWS secret, ini": f"aws_secret_access_key = {AWS_SECRET}",
    "AWS secret, JSON": f'{{"SecretAccessKey": "{AWS_SECRET}"}}',
    "AWS secret, quoted (detect-secrets)": f'aws_key: "{AWS_SECRET}"',
    "Slack app token": "xapp-1-A0123456789-1234567890123-" + "abcdef0123456789" * 4,
    "Slack bot token": "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "Slack webhook": "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "Slack workflow webhook": "https://hooks.slack.com/workflows/T0123ABCD/A0456EFGH/789012345/abcdefGHIJKL",
    "Stripe restricted key": "rk_live_51H8abcdefghijklmnopqrstuvwxyzABCDEF",
    "Stripe restricted test key": "鍵 rk_test_51H8abcdefghijklmnopqrstuvwxyz",
    "Azure subscription key": "Ocp-Apim-Subscription-Key: 0123456789abcdef0123456789abcdef",
    "Azure subscription key, JSON": '{"subscription_key": "0123456789abcdef0123456789abcdef"}',
    "Azure storage key": "DefaultEndpointsProtocol=https;AccountName=kaiwa;AccountKey=" + "Ab1+" * 22
                         + ";EndpointSuffix=core.windows.net",
    "Azure Service Bus key": "Endpoint=sb://kaiwa.servicebus.windows.net/;SharedAccessKeyName=root;"
                             "SharedAccessKey=abcdefghijklmnopqrstuvwxyz0123456789ABCDEF=",
    "Google API key": "GOOGLE_API_KEY=AIzaSyA1234567890abcdefghijklmnopqrstuv",
    "Google API key in prose": "キーは AIzaSyA1234567890abcdefghijklmnopqrstuv です",
    "Google OAuth client secret": "client GOCSPX-abcdefghijklmnopqrstuvwx12",
    "SendGrid (detect-secrets)": "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
    "Telegram (detect-secrets)": "bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq",
}
# what must be gone from each (the secret part; names like AccountKey= may go with it)
GONE = {"PEM RSA": "MIIEowIBAAK", "PEM PKCS8 in JSON": "MIIEvQ", "PEM encrypted": "MIIEowIBAAK",
        "OpenSSH": "b3BlbnNza", "PEM cut off (no end marker)": "VTLw7on", "Slack workflow webhook": "abcdefGHIJKL",
        "Slack webhook": "XXXXXXXX", "Azure storage key": "Ab1+Ab1+", "Azure Service Bus key": "abcdefghijklmnop"}


@pytest.mark.parametrize("name", SECRETS)
def test_secrets_are_removed_whole(name):
    text = SECRETS[name]
    masked = redact_secrets(text)
    assert "[秘匿]" in masked, masked
    gone = GONE.get(name)
    if gone:
        assert gone not in masked, masked
    else:  # the whole token: no run of 12 of its characters is left
        token = max(text.replace('"', " ").replace("=", " ").replace(":", " ").split(), key=len)
        assert all(token[i:i + 12] not in masked for i in range(0, max(1, len(token) - 11))), masked
    assert "[電話番号]" not in mask_text(text)  # never half-masked as a phone number
    assert find_pii(masked) == [] and mask_text(masked) == masked


def test_the_private_key_block_keeps_the_text_around_it():
    assert redact_secrets(SECRETS["PEM RSA"]) == "鍵です\n[秘匿]\n以上"
    assert redact_secrets("a\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\nb\n"
                          "-----BEGIN PRIVATE KEY-----\nBBBB\n-----END PRIVATE KEY-----\nc") == "a\n[秘匿]\nb\n[秘匿]\nc"


def test_the_maintained_rule_set_is_detect_secrets():
    names = {p.__name__ for p in DETECT_SECRETS_PLUGINS}
    assert {"AWSKeyDetector", "SlackDetector", "StripeDetector", "AzureStorageKeyDetector"} <= names
    assert all(p.__module__.startswith("detect_secrets.plugins.") for p in DETECT_SECRETS_PLUGINS)


PERSONAL = [
    ("電話は〇九〇-一二三四-五六七八です", "[電話番号]"), ("電話は〇九〇一二三四五六七八です", "[電話番号]"),
    ("固定 〇三（一二三四）五六七八", "[電話番号]"), ("電話 090/1234/5678", "[電話番号]"),
    ("電話 090_1234_5678", "[電話番号]"), ("電話 090の1234の5678", "[電話番号]"),
    ("taro アットマーク example.com", "[メール]"), ("taro(at)example(dot)com", "[メール]"),
    ("taro[at]example[dot]co[dot]jp", "[メール]"), ("taro (at) example (dot) com まで", "[メール]"),
    ("hanako.y＠example．co．jp", "[メール]"), ("ｔａｒｏ あっとまーく example どっと com", "[メール]"),
    ("〒一〇〇-〇〇〇一 に送付", "[郵便番号]"), ("〒一〇〇〇〇〇一", "[郵便番号]"),
    ("カード 4111/1111/1111/1111", "[カード番号]"), ("カード 4111_1111_1111_1111", "[カード番号]"),
]


@pytest.mark.parametrize("text,label", PERSONAL)
def test_personal_data_written_other_ways_is_masked(text, label):
    masked = mask_pii(text)
    assert label in masked, masked
    assert not any(c.isdigit() for c in masked) and not any(c in "〇一二三四五六七八九" for c in masked
                                                            if label != "[メール]")
    assert find_pii(masked) == []


@pytest.mark.parametrize("text", [
    "価格は1,980,000円（税込 ¥2,178,000）", "2024/06/01 に納車、2024/06/01/10:00 に点検", "令和6年6月1日",
    "部品番号 90915-YZZE1 と 12345-67890", "記事 kb:030 と第8条第2項", "ISBN 978-4-7981-6204-9",
    "三鷹市の店舗と四日市の工場、一宮の営業所", "七五三の写真", "max_tokens: 4096, prompt_tokens: 1200",
    "一二三の順に", "型式 ZVW50-AHXEB", "走行距離 45,000km、燃費 25.4km/L", "AP1234567890 は品番です",
    "東京都のアットホームな店", "token の数は 1200 です",
])
def test_look_alikes_stay(text):
    assert mask_pii(text) == text
    assert find_pii(text) == []


def test_addresses_with_kanji_numerals_still_read_as_addresses():
    assert mask_pii("東京都渋谷区神南六丁目十番一号") == "[住所]"
    assert mask_pii("三重県四日市市諏訪町1-5") == "[住所]"


def test_the_new_rules_stay_linear_on_hostile_input():
    hostile = ["-----BEGIN PRIVATE KEY-----" * 20_000, "a(at)" * 100_000, "〇一" * 200_000, "1/" * 250_000,
               "AccountKey=" * 40_000, "xapp-1-" * 60_000, "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n" * 10_000]
    start = time.perf_counter()
    for text in hostile:
        mask_text(text)
    assert time.perf_counter() - start < 60  # quadratic rules take hours on these; linear ones about a second
