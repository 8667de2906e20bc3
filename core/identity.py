"""Who is using the console and what they may do: identity resolution and role permissions.

An :class:`Identity` comes from (first that applies, see :func:`resolve_identity`):

1. OIDC (``st.login``) when an ``[auth]`` section exists in ``.streamlit/secrets.toml``;
2. a trusted reverse-proxy header (``X-Forwarded-User`` / ``X-Forwarded-Email`` from oauth2-proxy,
   names configurable) when ``KAIWA_TRUST_PROXY_HEADERS=1``;
3. a display name the user typed (``source="local"``, shown as unverified);
4. otherwise :data:`ANONYMOUS`.

Everyone is an ``operator``. ``admin`` comes from ``KAIWA_ADMINS`` (names or e-mails; matched only
for verified identities, since anyone can type a local name) or from unlocking the session with
the admin password (``admin_password`` in ``secrets.toml`` or ``KAIWA_ADMIN_PASSWORD``).
:data:`PERMISSIONS` maps each permission to the roles holding it. No Streamlit import here:
the page layer reads ``st.user`` / ``st.context.headers`` and passes plain mappings in.
"""
from __future__ import annotations

import hmac
import os
import unicodedata
from dataclasses import dataclass
from typing import Any, Mapping

OPERATOR = "operator"
ADMIN = "admin"
MAX_VALUE_CHARS = 200  # header values and typed names are cut to this many characters
_RAW_CAP = 4 * MAX_VALUE_CHARS  # never look at more than this of an untrusted value

_BOTH = frozenset({OPERATOR, ADMIN})
_ADMIN_ONLY = frozenset({ADMIN})
PERMISSIONS: dict[str, frozenset[str]] = {
    "manual.write": _ADMIN_ONLY,  # upload, replace, delete manuals; rebuild the index
    "prompt.write": _ADMIN_ONLY,
    "entry.archive": _ADMIN_ONLY,
    "debug.clear": _ADMIN_ONLY,
    "entry.edit": _BOTH,
    "entry.confirm": _BOTH,
    "booking.update": _BOTH,
}


@dataclass(frozen=True)
class Identity:
    name: str  # display name
    email: str | None = None
    source: str = "local"  # "oidc" | "proxy" | "local" | "anonymous"
    roles: frozenset[str] = frozenset({OPERATOR})

    @property
    def verified(self) -> bool:
        return self.source in ("oidc", "proxy")

    @property
    def user_id(self) -> str:
        """Stable owner key: the e-mail, else ``<source>:<name>``."""
        return self.email or f"{self.source}:{self.name}"

    @property
    def label(self) -> str:
        """For the UI: the name, marked 「未確認」 when the user only typed it."""
        if self.source == "local":
            return f"{self.name}（未確認）"
        return self.name

    @property
    def is_admin(self) -> bool:
        return ADMIN in self.roles

    def can(self, permission: str) -> bool:
        return bool(self.roles & PERMISSIONS.get(permission, frozenset()))


ANONYMOUS = Identity(name="匿名", source="anonymous")


@dataclass(frozen=True)
class AuthSettings:
    user_header: str = "X-Forwarded-User"
    email_header: str = "X-Forwarded-Email"
    trust_proxy: bool = False
    admins: frozenset[str] = frozenset()  # casefolded names / e-mails
    admin_password: str | None = None
    oidc_configured: bool = False

    @property
    def admin_configured(self) -> bool:
        """Whether anyone can become admin at all (an admin list with a verified identity
        source, or a password)."""
        return bool(self.admin_password) or bool(self.admins and (self.trust_proxy or self.oidc_configured))


_TRUE = ("1", "true", "yes", "on")


def load_auth_settings(environ: Mapping[str, str] | None = None, secrets: Mapping[str, Any] | None = None) -> AuthSettings:
    """Settings from ``environ`` (default ``os.environ``); top-level ``secrets`` keys of the same
    names (and ``admin_password``) win where given; an ``auth`` section means OIDC is configured."""
    source: dict[str, Any] = dict(os.environ if environ is None else environ)
    secrets = secrets or {}
    for key, value in secrets.items():
        if isinstance(value, (str, int, float, bool)):
            source[key] = str(value)

    def get(key: str) -> str | None:
        value = source.get(key)
        return value.strip() if isinstance(value, str) and value.strip() else None

    admins = frozenset(a.strip().casefold() for a in (get("KAIWA_ADMINS") or "").split(",") if a.strip())
    return AuthSettings(
        user_header=get("KAIWA_USER_HEADER") or AuthSettings.user_header,
        email_header=get("KAIWA_EMAIL_HEADER") or AuthSettings.email_header,
        trust_proxy=(get("KAIWA_TRUST_PROXY_HEADERS") or "0").lower() in _TRUE,
        admins=admins,
        admin_password=get("admin_password") or get("KAIWA_ADMIN_PASSWORD"),
        oidc_configured=isinstance(secrets.get("auth"), Mapping),
    )


def clean_value(value: Any) -> str:
    """An untrusted header value or typed name: capped, control/format characters removed,
    whitespace collapsed, at most :data:`MAX_VALUE_CHARS` characters."""
    if value is None:
        return ""
    text = str(value)[:_RAW_CAP]
    text = "".join(" " if ch.isspace() else ch for ch in text if ch.isspace() or unicodedata.category(ch)[0] != "C")
    return " ".join(text.split())[:MAX_VALUE_CHARS]


def _header(headers: Mapping[str, Any], name: str) -> str:
    wanted = name.strip().lower()
    for key, value in headers.items():
        if str(key).strip().lower() == wanted:
            return clean_value(value)
    return ""


def _email(value: str) -> str | None:
    value = value.strip().lower()
    return value if "@" in value and " " not in value else None


def _roles(settings: AuthSettings, name: str, email: str | None, source: str, admin_unlocked: bool) -> frozenset[str]:
    keys = {name.casefold(), f"{source}:{name}".casefold()} | ({email.casefold()} if email else set())
    is_admin = admin_unlocked or (source in ("oidc", "proxy") and bool(keys & settings.admins))
    return frozenset({OPERATOR, ADMIN}) if is_admin else frozenset({OPERATOR})


def _make(settings: AuthSettings, name: str, email: str | None, source: str, admin_unlocked: bool) -> Identity:
    return Identity(name=name, email=email, source=source,
                    roles=_roles(settings, name, email, source, admin_unlocked))


def resolve_identity(settings: AuthSettings, *, oidc_user: Mapping[str, Any] | None = None,
                     headers: Mapping[str, Any] | None = None, local_name: str | None = None,
                     admin_unlocked: bool = False) -> Identity:
    """The identity of the current user (see module docstring for the order)."""
    if settings.oidc_configured and oidc_user and oidc_user.get("is_logged_in", True):
        email = _email(clean_value(oidc_user.get("email")))
        name = clean_value(oidc_user.get("name")) or email or clean_value(oidc_user.get("sub"))
        if name:
            return _make(settings, name, email, "oidc", admin_unlocked)
    if settings.trust_proxy and headers:
        user = _header(headers, settings.user_header)
        email = _email(_header(headers, settings.email_header))
        if user or email:
            return _make(settings, user or email or "", email, "proxy", admin_unlocked)
    name = clean_value(local_name)
    if name:
        return _make(settings, name, None, "local", admin_unlocked)
    if admin_unlocked:
        return Identity(name=ANONYMOUS.name, source=ANONYMOUS.source, roles=frozenset({OPERATOR, ADMIN}))
    return ANONYMOUS


def check_admin_password(settings: AuthSettings, password: str | None) -> bool:
    """Whether ``password`` is the configured admin password (constant-time comparison)."""
    if not settings.admin_password or not password:
        return False
    return hmac.compare_digest(str(password).encode("utf-8"), settings.admin_password.encode("utf-8"))
