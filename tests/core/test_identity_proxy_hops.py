"""The trusted proxy's headers (issue 23): with several ``X-Forwarded-Email`` / ``X-Forwarded-User``
headers, or a comma-joined value, only the last value — the one the trusted proxy set or appended — counts;
what the client sent itself never does (a caller cannot read another user's session)."""
from __future__ import annotations

from starlette.datastructures import Headers
from streamlit.runtime.context import StreamlitHeaders

from core.identity import AuthSettings, proxy_value, resolve_identity

TRUSTED = AuthSettings(trust_proxy=True)
CLIENT, PROXY = "victim@example.jp", "mallory@example.jp"


def starlette(*pairs):
    return Headers(raw=[(k.lower().encode(), v.encode()) for k, v in pairs])


def test_two_email_headers_take_the_one_the_proxy_appended():
    for headers in (starlette(("X-Forwarded-Email", CLIENT), ("X-Forwarded-Email", PROXY)),
                    StreamlitHeaders([("X-Forwarded-Email", CLIENT), ("X-Forwarded-Email", PROXY)]),
                    [("X-Forwarded-Email", CLIENT), ("x-forwarded-email", PROXY)]):
        assert resolve_identity(TRUSTED, headers=headers).user_id == PROXY


def test_a_comma_joined_value_takes_its_last_item():
    assert resolve_identity(TRUSTED, headers={"X-Forwarded-Email": f"{CLIENT}, {PROXY}"}).user_id == PROXY
    headers = starlette(("X-Forwarded-User", "victim"), ("X-Forwarded-User", "mallory"),
                        ("X-Forwarded-Email", f"{CLIENT},{PROXY}"))
    who = resolve_identity(TRUSTED, headers=headers)
    assert (who.name, who.email) == ("mallory", PROXY)


def test_one_header_is_taken_as_it_is():
    assert proxy_value({"X-Forwarded-Email": PROXY}, "x-forwarded-email") == PROXY
    assert proxy_value({}, "X-Forwarded-Email") == ""
