"""Password reset and change for local accounts (allauth's pages): the reset answers the same whether or not
the address has an account, its link works once and for an hour, and its key is never logged; an account
made by an OIDC provider has no password here; LOCAL_LOGIN=0 turns the pages off."""

from __future__ import annotations

import re

import pytest
from django.core import mail

from tests.factories import UserFactory
from tests.world import PASSWORDS

pytestmark = pytest.mark.django_db

NEW = "a-new-long-passphrase-9"


@pytest.fixture(autouse=True)
def no_allauth_rate_limits(settings):
    """allauth's own limits on these pages count by user id and address in the shared cache: other tests' (the
    cross-tenant sweep's) requests must not spend this one's."""
    settings.ACCOUNT_RATE_LIMITS = False


def reset_link(to: str) -> str:
    [message] = [m for m in mail.outbox if m.to == [to]]
    match = re.search(r"http://testserver(/accounts/password/reset/key/[^\s]+)", message.body)
    assert match, message.body
    return match[1]


def test_a_reset_link_sets_a_new_password_once(tenants, client, caplog):
    response = client.post("/accounts/password/reset/", {"email": "alice@example.com"})
    assert response.status_code == 302 and response["Location"] == "/accounts/password/reset/done/"
    link = reset_link("alice@example.com")
    form = client.get(link)
    assert form.status_code == 302  # to the same page without the key (no key in a Referer)
    response = client.post(form["Location"], {"password1": NEW, "password2": NEW})
    assert response.status_code == 302 and response["Location"] == "/accounts/password/reset/key/done/"
    client.logout()
    assert client.post("/login/", {"username": "alice", "password": PASSWORDS["alice"]}).status_code == 200
    assert client.post("/login/", {"username": "alice", "password": NEW}).status_code == 302
    client.logout()
    again = client.get(link)  # the password changed: the link is spent
    assert again.status_code == 400 and "This link does not work" in again.content.decode()
    key = link.rsplit("/", 2)[-2].split("-", 1)[1]
    assert not [r for r in caplog.records if key in r.getMessage()]


def test_an_unknown_address_gets_the_same_answer(tenants, client):
    known = client.post("/accounts/password/reset/", {"email": "alice@example.com"})
    unknown = client.post("/accounts/password/reset/", {"email": "nobody@example.com"})
    assert (unknown.status_code, unknown["Location"]) == (known.status_code, known["Location"])
    assert "/password/reset/key/" not in "".join(m.body for m in mail.outbox if m.to == ["nobody@example.com"])


def test_the_link_expires_after_an_hour(tenants, client, settings, clock):
    assert settings.PASSWORD_RESET_TIMEOUT == 3600
    client.post("/accounts/password/reset/", {"email": "alice@example.com"})
    link = reset_link("alice@example.com")
    clock.advance(59 * 60)  # the platform's clock: the link's age is counted on it
    assert client.get(link).status_code == 302  # still works: on to the form
    client.cookies.clear()
    clock.advance(2 * 60)
    response = client.get(link)
    assert response.status_code == 400 and "This link does not work" in response.content.decode()


def test_asking_for_a_reset_leaves_the_address_trusted(tenants, client):
    """allauth would record the address as unconfirmed on the way: the account would then stop joining the
    workspaces its e-mail is invited to, and a company sign-in could no longer find it."""
    from portal.invitations import verified_email

    client.post("/accounts/password/reset/", {"email": "alice@example.com"})
    assert reset_link("alice@example.com")
    assert verified_email(tenants.alice) == "alice@example.com"


def test_a_signed_in_user_changes_the_password(tenants, client):
    client.force_login(tenants.alice)
    response = client.post("/accounts/password/change/", {"oldpassword": PASSWORDS["alice"], "password1": NEW,
                                                           "password2": NEW})
    assert response.status_code == 302
    tenants.alice.refresh_from_db()
    assert tenants.alice.check_password(NEW)
    wrong = client.post("/accounts/password/change/", {"oldpassword": "wrong", "password1": "x" + NEW,
                                                        "password2": "x" + NEW})
    assert wrong.status_code == 200 and not tenants.alice.__class__.objects.get(pk=tenants.alice.pk).check_password(
        "x" + NEW)


def test_an_account_from_a_provider_has_no_password_here(tenants, client):
    dora = UserFactory(username="dora")
    dora.set_unusable_password()
    dora.save()
    client.force_login(dora)
    for url in ("/accounts/password/change/", "/accounts/password/set/"):
        assert client.get(url).status_code == 403


def test_the_pages_are_off_with_local_login(tenants, client, settings):
    settings.LOCAL_LOGIN = False
    assert client.post("/accounts/password/reset/", {"email": "alice@example.com"}).status_code == 403
    assert not mail.outbox
    client.force_login(tenants.alice)
    assert client.get("/accounts/password/change/").status_code == 403
