"""Who is using the console and what they may do: identity resolution and role permissions.

An :class:`Identity` comes from (first that applies, see :func:`resolve_identity`):

1. OIDC (``st.login``) when an ``[auth]`` section exists in ``.streamlit/secrets.toml``;
2. a trusted reverse-proxy header (``X-Forwarded-User`` / ``X-Forwarded-Email`` from oauth2-proxy,
   names configurable) when ``KAIWA_TRUST_PROXY_HEADERS=1``. **Hop rule:** only the value the trusted
   proxy (the one hop in front of the console) set counts, which is the *last* one: with several headers
   of that name the last header, and within a comma-joined value the last item (a proxy that appends
   adds its value at the end; whatever comes before is what the client sent itself and is ignored);
   see :func:`proxy_value`;
3. a display name the user typed (``source="local"``, shown as unverified);
4. otherwise :data:`ANONYMOUS`.

Everyone is an ``operator``. ``reviewer`` (the review queues, issue #22) comes from a verified e-mail listed in
``KAIWA_REVIEWERS``, by the same rule as admin; admins may review too. ``admin`` comes from a **verified e-mail** listed in ``KAIWA_ADMINS`` (e-mails
only: the OIDC ``email`` claim, not used when the provider sends ``email_verified: false``, or the trusted
proxy's e-mail header), never from a name (an OIDC ``name`` claim is editable by its user at most identity
providers, ``X-Forwarded-User`` is a user name, and anyone can type a local name); or from unlocking the
session with the admin password (``admin_password`` in ``secrets.toml`` or ``KAIWA_ADMIN_PASSWORD``), which
:func:`unlock_wait` slows down and then locks after repeated failures.
:data:`PERMISSIONS` maps each permission to the roles holding it. No Streamlit import here:
the page layer reads ``st.user`` / ``st.context.headers`` and passes plain mappings in.
"""
from __future__ import annotations

import hmac
import os
import unicodedata
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

OPERATOR = "operator"
ADMIN = "admin"
REVIEWER = "reviewer"
MAX_VALUE_CHARS = 200  # header values and typed names are cut to this many characters
_RAW_CAP = 4 * MAX_VALUE_CHARS  # never look at more than this of an untrusted value

_BOTH = frozenset({OPERATOR, ADMIN})
_ADMIN_ONLY = frozenset({ADMIN})
_REVIEWERS = frozenset({REVIEWER, ADMIN})
PERMISSIONS: dict[str, frozenset[str]] = {
    "manual.write": _ADMIN_ONLY,  # upload, replace, delete manuals; rebuild the index
    "prompt.write": _ADMIN_ONLY,
    "entry.archive": _ADMIN_ONLY,
    "debug.clear": _ADMIN_ONLY,
    "scenario.write": _ADMIN_ONLY,  # save regression scenarios (tests/scenarios) from the workbench
    "entry.edit": _BOTH,
    "entry.confirm": _BOTH,
    "booking.update": _BOTH,
    "review.work": _REVIEWERS,  # claim, judge, skip review items; turn a reviewed item into a regression case
    "review.config": _ADMIN_ONLY,  # edit the review labels (score configuration)
    "review.unmasked": _ADMIN_ONLY,  # see an item's personal data when its entry was kept with contract text
}


@dataclass(frozen=True)
class Identity:
    name: str  # display name
    email: str | None = None  # verified e-mail only (OIDC ``email`` unless ``email_verified`` is false; proxy header)
    source: str = "local"  # "oidc" | "proxy" | "local" | "anonymous"
    roles: frozenset[str] = frozenset({OPERATOR})
    subject: str | None = None  # the OIDC ``sub`` when there is no verified e-mail (a stable id; the name is not)

    @property
    def verified(self) -> bool:
        return self.source in ("oidc", "proxy")

    @property
    def user_id(self) -> str:
        """Stable owner key: the e-mail, else ``oidc:sub:<sub>``, else ``<source>:<name>``."""
        if self.email:
            return self.email
        return f"{self.source}:sub:{self.subject}" if self.subject else f"{self.source}:{self.name}"

    @property
    def label(self) -> str:
        """For the UI: the name, marked 「未確認」 when the user only typed it."""
        if self.source == "local":
            return f"{self.name}（未確認）"
        return self.name

    @property
    def is_admin(self) -> bool:
        return ADMIN in self.roles

    @property
    def is_reviewer(self) -> bool:
        """May work the review queues (``reviewer`` from ``KAIWA_REVIEWERS``, or admin)."""
        return bool(self.roles & _REVIEWERS)

    def can(self, permission: str) -> bool:
        return bool(self.roles & PERMISSIONS.get(permission, frozenset()))


ANONYMOUS = Identity(name="匿名", source="anonymous")


@dataclass(frozen=True)
class AuthSettings:
    user_header: str = "X-Forwarded-User"
    email_header: str = "X-Forwarded-Email"
    trust_proxy: bool = False
    admins: frozenset[str] = frozenset()  # casefolded e-mails (entries without "@" are not admins of anything)
    reviewers: frozenset[str] = frozenset()  # casefolded e-mails of KAIWA_REVIEWERS (the same rule)
    admin_password: str | None = None
    oidc_configured: bool = False

    @property
    def admin_configured(self) -> bool:
        """Whether anyone can become admin at all (an admin list with a verified identity
        source, or a password)."""
        return bool(self.admin_password) or bool(self.admins and (self.trust_proxy or self.oidc_configured))


_TRUE = ("1", "true", "yes", "on")
AUTH_ENV_KEYS = ("KAIWA_USER_HEADER", "KAIWA_EMAIL_HEADER", "KAIWA_TRUST_PROXY_HEADERS", "KAIWA_ADMINS",
                 "KAIWA_REVIEWERS", "admin_password", "KAIWA_ADMIN_PASSWORD")  # what load_auth_settings reads


def load_auth_settings(environ: Mapping[str, str] | None = None, secrets: Mapping[str, Any] | None = None) -> AuthSettings:
    """Settings from ``environ`` (default ``os.environ``); top-level ``secrets`` keys of the same
    names (and ``admin_password``) win where given; an ``auth`` section means OIDC is configured."""
    env = os.environ if environ is None else environ
    # only the settings' own keys: the API loads these on every request, and a copy of the whole
    # environment decoded every variable of the process each time
    source: dict[str, Any] = {key: env[key] for key in AUTH_ENV_KEYS if key in env}
    secrets = secrets or {}
    for key, value in secrets.items():
        if isinstance(value, (str, int, float, bool)):
            source[key] = str(value)

    def get(key: str) -> str | None:
        value = source.get(key)
        return value.strip() if isinstance(value, str) and value.strip() else None

    admins = frozenset(a.strip().casefold() for a in (get("KAIWA_ADMINS") or "").split(",") if "@" in a)
    reviewers = frozenset(a.strip().casefold() for a in (get("KAIWA_REVIEWERS") or "").split(",") if "@" in a)
    return AuthSettings(
        user_header=get("KAIWA_USER_HEADER") or AuthSettings.user_header,
        email_header=get("KAIWA_EMAIL_HEADER") or AuthSettings.email_header,
        trust_proxy=(get("KAIWA_TRUST_PROXY_HEADERS") or "0").lower() in _TRUE,
        admins=admins,
        reviewers=reviewers,
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


def _all_values(headers: Any, name: str) -> list[str]:
    """Every value of header ``name``, in the order received (Starlette's ``getlist``, Streamlit's
    ``get_all``, or every matching pair of a plain mapping / list of pairs)."""
    for method in ("getlist", "get_all"):
        get = getattr(headers, method, None)
        if callable(get):
            return [str(v) for v in get(name)]
    wanted = name.strip().lower()
    pairs = headers.items() if hasattr(headers, "items") else headers
    return [str(value) for key, value in pairs if str(key).strip().lower() == wanted]


def proxy_value(headers: Any, name: str) -> str:
    """The value of ``name`` the trusted proxy set (the module docstring's hop rule): the last item of the
    last header; "" when there is none."""
    values = _all_values(headers, name)
    if not values:
        return ""
    return clean_value(str(values[-1]).rsplit(",", 1)[-1])


def _header(headers: Mapping[str, Any], name: str) -> str:
    return proxy_value(headers, name)


def _email(value: str) -> str | None:
    value = value.strip().lower()
    return value if "@" in value and " " not in value else None


def _roles(settings: AuthSettings, email: str | None, source: str, admin_unlocked: bool) -> frozenset[str]:
    """Admin by a verified e-mail in ``KAIWA_ADMINS`` (``email`` is only ever a verified one here) or the
    unlocked password; a name never counts."""
    verified = source in ("oidc", "proxy") and bool(email)
    is_admin = admin_unlocked or (verified and email.casefold() in settings.admins)
    roles = {OPERATOR, ADMIN} if is_admin else {OPERATOR}
    if verified and email.casefold() in settings.reviewers:
        roles.add(REVIEWER)
    return frozenset(roles)


def _make(settings: AuthSettings, name: str, email: str | None, source: str, admin_unlocked: bool,
          subject: str | None = None) -> Identity:
    return Identity(name=name, email=email, source=source, roles=_roles(settings, email, source, admin_unlocked),
                    subject=None if email else subject)


def _unverified(claims: Mapping[str, Any]) -> bool:
    """The provider said the e-mail is not verified (``email_verified`` false, as a bool or a string)."""
    flag = claims.get("email_verified")
    return flag is False or (isinstance(flag, str) and flag.strip().lower() in ("false", "0", "no"))


def resolve_identity(settings: AuthSettings, *, oidc_user: Mapping[str, Any] | None = None,
                     headers: Mapping[str, Any] | None = None, local_name: str | None = None,
                     admin_unlocked: bool = False) -> Identity:
    """The identity of the current user (see module docstring for the order)."""
    if settings.oidc_configured and oidc_user and oidc_user.get("is_logged_in", True):
        # an unverified e-mail is not the user's: neither their id nor a way to admin
        email = None if _unverified(oidc_user) else _email(clean_value(oidc_user.get("email")))
        subject = clean_value(oidc_user.get("sub"))
        name = clean_value(oidc_user.get("name")) or email or subject
        if name:
            return _make(settings, name, email, "oidc", admin_unlocked, subject=subject or None)
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


# ---- the admin password: slow down, then lock -------------------------------------------------------------
FREE_FAILURES = 3  # failures within the window before any waiting (one person: an address and an account)
LOCK_FAILURES = 10  # failures within the window that lock the form (for that person)
ADDRESS_FREE_FAILURES = 20  # the larger budget of the unverified people behind one address together: slows
ADDRESS_LOCK_FAILURES = 50  # down from here, locks here (verified people are told apart and never share it)
WINDOW_SECONDS = 15 * 60  # failures older than this are forgotten; a lock lasts this long after the last one
MAX_DELAY_SECONDS = 60.0


@dataclass(frozen=True)
class UnlockWait:
    seconds: float  # how long until the next attempt is even checked (0: now)
    locked: bool  # LOCK_FAILURES reached: locked for ``seconds``
    failures: int


def unlock_wait(failures: Sequence[float], now: float, *, free: int = FREE_FAILURES,
                lock: int = LOCK_FAILURES) -> UnlockWait:
    """The wait before the next admin-password attempt, given the times (epoch seconds) of the failures
    since the last success: none for the first ``free`` (:data:`FREE_FAILURES`), then 2, 4, 8 … seconds
    (at most :data:`MAX_DELAY_SECONDS`) after the latest, and a lock of :data:`WINDOW_SECONDS` after the
    latest once ``lock`` (:data:`LOCK_FAILURES`) fall within the window. The address-wide budget uses
    :data:`ADDRESS_FREE_FAILURES` / :data:`ADDRESS_LOCK_FAILURES`."""
    recent = sorted(f for f in failures if now - f < WINDOW_SECONDS)
    n = len(recent)
    if n >= lock:
        return UnlockWait(max(0.0, recent[-1] + WINDOW_SECONDS - now), True, n)
    if n >= free:
        delay = min(MAX_DELAY_SECONDS, 2.0 ** (n - free + 1))
        return UnlockWait(max(0.0, recent[-1] + delay - now), False, n)
    return UnlockWait(0.0, False, n)
