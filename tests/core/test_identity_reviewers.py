"""The ``reviewer`` role (issue #22): from a verified e-mail in KAIWA_REVIEWERS only, like admin; admins may
review too; names never count."""
from __future__ import annotations

from core.identity import ADMIN, REVIEWER, load_auth_settings, resolve_identity

ENV = {"KAIWA_TRUST_PROXY_HEADERS": "1", "KAIWA_REVIEWERS": "Sato@Example.jp, sato, ", "KAIWA_ADMINS": "boss@example.jp"}


def test_reviewer_from_a_verified_email_only():
    settings = load_auth_settings(ENV)
    assert settings.reviewers == frozenset({"sato@example.jp"})  # entries without "@" are nobody
    sato = resolve_identity(settings, headers={"X-Forwarded-User": "sato", "X-Forwarded-Email": "sato@example.jp"})
    assert REVIEWER in sato.roles and sato.is_reviewer and sato.can("review.work") and not sato.can("review.config")
    by_name = resolve_identity(settings, headers={"X-Forwarded-User": "sato@example.jp"})
    assert not by_name.is_reviewer  # a user name is not a verified e-mail
    typed = resolve_identity(settings, local_name="sato@example.jp")
    assert not typed.is_reviewer
    oidc = resolve_identity(load_auth_settings(ENV, {"auth": {}}),
                            oidc_user={"email": "sato@example.jp", "email_verified": False, "name": "sato"})
    assert not oidc.is_reviewer  # the provider says the e-mail is not verified


def test_admins_may_review_and_edit_the_score_configuration():
    settings = load_auth_settings(ENV)
    boss = resolve_identity(settings, headers={"X-Forwarded-Email": "boss@example.jp"})
    assert ADMIN in boss.roles and boss.is_reviewer and boss.can("review.work") and boss.can("review.config")
    untrusted = resolve_identity(load_auth_settings({**ENV, "KAIWA_TRUST_PROXY_HEADERS": "0"}),
                                 headers={"X-Forwarded-Email": "sato@example.jp"})
    assert not untrusted.is_reviewer
