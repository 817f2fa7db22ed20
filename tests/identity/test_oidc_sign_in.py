"""Sign-in through a real OpenID Connect provider (tests/identity/idp.mjs): accounts found by verified e-mail
or made on first sign-in, groups to roles at each sign-in, forged and replayed answers refused, sign-out at the
provider too."""

from __future__ import annotations

import pytest
import requests
from allauth.socialaccount.models import SocialAccount
from django.contrib.auth import get_user_model
from django.test import Client

from portal.console.models import AuditEntry
from portal.models import Membership, Role
from portal.settings.identity import socialaccount_providers
from tests.identity.oidc_provider import (
    SECRET,
    at_provider,
    callback_path,
    oidc_idp,  # noqa: F401 - the session's provider
    query,
    start_sign_in,
)

pytestmark = [pytest.mark.django_db, pytest.mark.slow_server]

GROUP_ROLES = {"vision-owners": [{"workspace": "vision-lab", "role": "owner"}],
               "nlp-members": [{"workspace": "nlp-group", "role": "member"}]}


@pytest.fixture
def providers(settings, oidc_idp):  # noqa: F811
    def configure(**extra):
        settings.OIDC_PROVIDERS = [oidc_idp.provider("corp", **extra), oidc_idp.provider("other")]
        settings.SOCIALACCOUNT_PROVIDERS = socialaccount_providers(settings.OIDC_PROVIDERS)
    settings.IDENTITY_GROUP_ROLES = GROUP_ROLES
    configure()
    return configure


def sign_in(client: Client, account: str, provider_id: str = "corp"):
    """Press the provider's button, sign in there as `account`, come back: the portal's answer."""
    url = at_provider(requests.Session(), start_sign_in(client, provider_id), account)
    return client.get(callback_path(url))


def roles_of(user) -> dict[str, tuple[str, str]]:
    return {m.workspace.slug: (m.role, m.source) for m in Membership.objects.filter(user=user)
            .select_related("workspace")}


def test_the_sign_in_page_offers_each_provider(providers, client):
    page = client.get("/login/").content.decode()
    assert 'id="oidc-corp"' in page and "Sign in with Corp corp" in page and 'id="oidc-other"' in page
    assert 'id="id_password"' in page  # local accounts as ever


def test_a_first_sign_in_makes_the_account_and_its_groups_give_roles(providers, tenants, client, caplog):
    response = sign_in(client, "dora")
    callback = [r.getMessage() for r in caplog.records if "/login/callback/" in r.getMessage()]
    assert len(callback) == 1 and "?code=[redacted]&state=" in callback[0]  # the code is never logged
    assert response.status_code == 302 and response["Location"] == "/"
    dora = get_user_model().objects.get(email="dora@example.com")
    assert client.get("/").wsgi_request.user == dora
    assert (dora.first_name, dora.last_name) == ("Dora", "Dev") and not dora.has_usable_password()
    assert SocialAccount.objects.get(user=dora).provider == "corp"
    assert roles_of(dora) == {"vision-lab": (Role.OWNER, "oidc:corp")}
    assert client.get("/w/vision-lab/").status_code == 200
    assert AuditEntry.objects.filter(action="group role added", message__contains="oidc:corp").exists()


def test_another_tenants_groups_give_no_access_to_the_first(providers, tenants, client):
    assert sign_in(client, "erin").status_code == 302
    erin = get_user_model().objects.get(email="erin@example.com")
    assert roles_of(erin) == {"nlp-group": (Role.MEMBER, "oidc:corp")}
    assert client.get("/w/nlp-group/").status_code == 200
    assert client.get("/w/vision-lab/").status_code in (403, 404)


def test_a_verified_address_links_the_existing_account_and_sign_in_again_finds_it(providers, tenants, client):
    users = get_user_model().objects.count()
    assert sign_in(client, "carol-idp").status_code == 302  # Carol@example.com: case does not matter
    assert client.get("/").wsgi_request.user == tenants.carol
    assert SocialAccount.objects.get(uid="carol-idp").user == tenants.carol
    assert roles_of(tenants.carol) == {"vision-lab": (Role.MEMBER, "")}  # made by hand: left alone
    client.post("/logout/")
    assert sign_in(client, "carol-idp").status_code == 302
    assert client.get("/").wsgi_request.user == tenants.carol
    assert get_user_model().objects.count() == users


def test_an_unverified_address_never_reaches_an_existing_account(providers, tenants, client):
    users = get_user_model().objects.count()
    response = sign_in(client, "mallory")  # says alice@example.com, unverified, and the owners' group
    assert response.status_code == 403
    assert "has not verified your e-mail address" in response.content.decode()
    assert not client.get("/").wsgi_request.user.is_authenticated
    assert not SocialAccount.objects.exists() and get_user_model().objects.count() == users
    assert not Membership.objects.filter(source__startswith="oidc").exists()
    entry = AuditEntry.objects.get(action="login failed", source=AuditEntry.Source.SIGN_IN)
    assert entry.user == tenants.alice and "corp" in entry.message and "unverified" in entry.message


def test_an_account_whose_own_address_is_unconfirmed_is_never_linked(providers, tenants, client):
    """The provider vouches for Carol@example.com, but carol's account holds that address unconfirmed (allauth
    records it so): whoever typed it there must not receive the provider's identity."""
    from allauth.account.models import EmailAddress

    EmailAddress.objects.create(user=tenants.carol, email="carol@example.com", verified=False, primary=True)
    users = get_user_model().objects.count()
    refused = sign_in(client, "carol-idp")
    assert refused.status_code == 403 and "without having confirmed it" in refused.content.decode()
    assert not client.get("/").wsgi_request.user.is_authenticated
    assert not SocialAccount.objects.exists() and get_user_model().objects.count() == users
    entry = AuditEntry.objects.get(action="login failed", source=AuditEntry.Source.SIGN_IN)
    assert entry.user == tenants.carol and "unconfirmed" in entry.message


def test_a_provider_trusted_for_addresses_links_without_email_verified(providers, tenants, client):
    providers(trust_email=True)
    assert sign_in(client, "newbie").status_code == 302
    assert get_user_model().objects.filter(email="newbie@example.com").exists()


def test_no_account_is_made_when_creating_is_off(providers, tenants, client, settings):
    settings.OIDC_CREATE_USERS = False
    users = get_user_model().objects.count()
    response = sign_in(client, "dora")
    assert response.status_code == 200 and "no account here for you" in response.content.decode()
    assert get_user_model().objects.count() == users and not SocialAccount.objects.exists()


def test_a_forged_state_is_refused_with_nothing_made_and_audited(providers, tenants, client):
    users = get_user_model().objects.count()
    url = at_provider(requests.Session(), start_sign_in(client, "corp"), "dora")
    answer = query(url)
    response = client.get(f"/accounts/oidc/corp/login/callback/?code={answer['code']}&state=forged")
    assert response.status_code == 401 and "could not be accepted" in response.content.decode()
    assert get_user_model().objects.count() == users and not SocialAccount.objects.exists()
    assert not client.get("/").wsgi_request.user.is_authenticated
    entry = AuditEntry.objects.get(action="login failed")
    assert "unknown or used state" in entry.message and answer["code"] not in entry.message


def test_a_replayed_code_is_refused_with_nothing_made_and_audited(providers, tenants, client):
    url = at_provider(requests.Session(), start_sign_in(client, "corp"), "erin")
    assert client.get(callback_path(url)).status_code == 302
    client.post("/logout/")
    users, accounts = get_user_model().objects.count(), SocialAccount.objects.count()
    assert client.get(callback_path(url)).status_code == 401  # the same answer again: its state is spent
    # the code under a fresh sign-in's state: the provider refuses it (used once already)
    fresh = query(start_sign_in(client, "corp"))["state"]
    response = client.get(f"/accounts/oidc/corp/login/callback/?code={query(url)['code']}&state={fresh}")
    assert response.status_code == 401 and "could not be accepted" in response.content.decode()
    assert (get_user_model().objects.count(), SocialAccount.objects.count()) == (users, accounts)
    assert not client.get("/").wsgi_request.user.is_authenticated
    failed = AuditEntry.objects.filter(action="login failed").order_by("pk")
    assert failed.count() == 2 and "OAuth2Error" in failed.last().message
    assert SECRET not in " ".join(failed.values_list("message", flat=True))


def test_sign_out_ends_the_session_at_the_provider_too(providers, tenants, client, oidc_idp):  # noqa: F811
    assert sign_in(client, "dora").status_code == 302
    response = client.post("/logout/")
    assert response.status_code == 302 and response["Location"].startswith(f"{oidc_idp.issuer}/session/end?")
    params = query(response["Location"])
    assert params["post_logout_redirect_uri"] == "http://testserver/login/" and params["client_id"] == "corp"
    assert params["id_token_hint"].count(".") == 2
    assert not client.get("/").wsgi_request.user.is_authenticated
    # the provider takes the hint and the address: its "sign out?" page, not an error
    confirm = requests.get(response["Location"], timeout=10)
    assert confirm.status_code == 200 and "logout" in confirm.text.lower()


def test_a_local_sign_out_stays_local(providers, tenants, client):
    client.force_login(tenants.alice)
    response = client.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"
