"""E-mail addresses of local accounts are proven by a link mailed to them (allauth's confirmation): a new
address replaces the account's only once its link is followed, an expired or made-up link gets a styled
refusal that changes nothing, an invitation's link proves its address, and with ACCOUNT_EMAIL_VERIFICATION
mandatory an account whose address is recorded unconfirmed cannot sign in until it follows the link."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from allauth.account.models import EmailAddress, EmailConfirmation
from django.core import mail
from django.utils import timezone

from portal.invitations import verified_email
from tests.world import PASSWORDS

pytestmark = pytest.mark.django_db

NEW = "alice.new@example.org"


@pytest.fixture(autouse=True)
def no_allauth_rate_limits(settings):
    settings.ACCOUNT_RATE_LIMITS = False  # counted in the shared cache: other tests' must not spend these


def confirmation_link(to: str) -> str:
    [message] = [m for m in mail.outbox if m.to == [to]]
    match = re.search(r"http://testserver(/accounts/confirm-email/[^\s]+/)", message.body)
    assert match, message.body
    return match[1]


def ask_to_change(client, user, email=NEW):
    client.force_login(user)
    response = client.post("/accounts/email/", {"action_add": "", "email": email})
    assert response.status_code == 302, response.content
    return confirmation_link(email)


def test_a_new_address_counts_once_its_link_is_followed(tenants, client):
    client.force_login(tenants.alice)
    page = client.get("/accounts/email/")
    assert page.status_code == 200 and "alice@example.com" in page.content.decode()
    assert b'id="link-email"' in client.get("/account/preferences/").content
    link = ask_to_change(client, tenants.alice)
    tenants.alice.refresh_from_db()
    assert tenants.alice.email == "alice@example.com" and verified_email(tenants.alice) == "alice@example.com"
    assert not EmailAddress.objects.get(email=NEW).verified
    assert b'id="email-pending"' in client.get("/accounts/email/").content

    page = client.get(link)  # a mail scanner's GET confirms nothing
    assert page.status_code == 200 and b'id="email-confirm-submit"' in page.content
    assert not EmailAddress.objects.get(email=NEW).verified
    assert client.post(link).status_code == 302
    tenants.alice.refresh_from_db()
    assert tenants.alice.email == NEW and verified_email(tenants.alice) == NEW
    assert EmailAddress.objects.get(email=NEW).verified


def test_an_expired_or_made_up_link_is_refused_and_changes_nothing(tenants, client):
    link = ask_to_change(client, tenants.alice)
    EmailConfirmation.objects.update(sent=timezone.now() - timedelta(days=4))  # past the three days
    for url in (link, "/accounts/confirm-email/made-up-key/"):
        refused = client.get(url)
        assert refused.status_code == 404 and b'id="email-confirm-bad"' in refused.content
        assert b'href="/static/portal/site.css"' in refused.content  # the portal's page, styled
        assert client.post(url).status_code == 404
    tenants.alice.refresh_from_db()
    assert tenants.alice.email == "alice@example.com" and not EmailAddress.objects.get(email=NEW).verified


def test_another_accounts_verified_address_cannot_be_taken(tenants, client):
    EmailAddress.objects.create(user=tenants.bob, email="bob@example.com", verified=True, primary=True)
    # the same answer as for a free address (nothing says bob's exists), but its link cannot confirm it
    link = ask_to_change(client, tenants.alice, "bob@example.com")
    page = client.get(link)
    assert page.status_code == 200 and b'id="email-confirm-bad"' in page.content
    client.post(link)
    tenants.alice.refresh_from_db()
    assert tenants.alice.email == "alice@example.com"
    assert not EmailAddress.objects.filter(
        user=tenants.alice, email="bob@example.com", verified=True
    ).exists()


def test_the_page_is_a_local_accounts(tenants, client, settings):
    from tests.factories import UserFactory

    dora = UserFactory(username="dora")
    dora.set_unusable_password()
    dora.save()
    client.force_login(dora)
    assert client.get("/accounts/email/").status_code == 403  # the provider's address, not changed here
    settings.LOCAL_LOGIN = False
    client.force_login(tenants.alice)
    assert client.get("/accounts/email/").status_code == 403


def test_an_invitation_link_proves_the_address(cluster, client, clock, django_capture_on_commit_callbacks):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(cluster.alice)
    with django_capture_on_commit_callbacks(execute=True):
        api.post(
            "/api/v1/workspaces/vision-lab/invitations/",
            {"email": "dave@example.org", "role": "member"},
            format="json",
        )
    link = re.search(r"https?://[^/\s]+(/invitations/[^/\s]+/)", mail.outbox[-1].body)[1]
    strong = "quartz-Lantern-7319"
    assert client.post(link, {"username": "dave", "password": strong, "password2": strong}).status_code == 302
    address = EmailAddress.objects.get(user__username="dave")
    assert (address.email, address.verified, address.primary) == ("dave@example.org", True, True)


def test_mandatory_holds_the_sign_in_of_an_unconfirmed_address(tenants, client, settings):
    EmailAddress.objects.create(user=tenants.alice, email="alice@example.com", verified=False, primary=True)
    credentials = {"username": "alice", "password": PASSWORDS["alice"]}
    settings.ACCOUNT_EMAIL_VERIFICATION = "mandatory"
    held = client.post("/login/", credentials)
    assert held.status_code == 403 and b'id="verification-sent"' in held.content
    assert not client.get("/").wsgi_request.user.is_authenticated
    link = confirmation_link("alice@example.com")
    assert client.post(link).status_code == 302
    assert client.post("/login/", credentials).status_code == 302
    assert client.get("/").wsgi_request.user == tenants.alice


def test_optional_lets_the_sign_in_through(tenants, client, settings):
    EmailAddress.objects.create(user=tenants.alice, email="alice@example.com", verified=False, primary=True)
    assert settings.ACCOUNT_EMAIL_VERIFICATION == "optional"
    assert client.post("/login/", {"username": "alice", "password": PASSWORDS["alice"]}).status_code == 302
    assert not mail.outbox
