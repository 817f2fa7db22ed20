"""Company sign-in in the browser, through a real OpenID Connect provider (tests/identity/idp.mjs): the sign-in
page's provider button, the provider's own sign-in page, back to the portal signed in with the roles the
provider's groups map to (and none for a group the person is not in); sign-out ends the portal's session and
the provider's (RP-initiated logout), so the next press of the button asks for the password again."""

import json
import re

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import shot

from portal.testing import free_port
from tests.identity.oidc_provider import SECRET, running_idp

PROVIDER = "corp"
# dora (tests/identity/oidc_provider.py ACCOUNTS) is in vision-owners only: nlp-members must give her nothing
GROUP_ROLES = {
    "vision-owners": [{"workspace": "vision-lab", "role": "owner"}],
    "nlp-members": [{"workspace": "nlp-group", "role": "member"}],
}


@pytest.fixture(scope="session")
def sso_portal(start_live_daphne, tmp_path_factory):
    """A live portal whose one provider is the session's oidc-provider. The portal is told the issuer first
    (it reads the discovery document only at the first sign-in), the provider then the portal's address."""
    issuer_port = free_port()
    provider = {
        "id": PROVIDER,
        "name": "Corp SSO",
        "issuer": f"http://127.0.0.1:{issuer_port}",
        "client_id": PROVIDER,
        "secret": SECRET,
        "scopes": ["openid", "profile", "email", "groups"],
    }
    with start_live_daphne(
        OIDC_PROVIDERS=json.dumps([provider]), IDENTITY_GROUP_ROLES=json.dumps(GROUP_ROLES)
    ) as server:
        with running_idp(tmp_path_factory, portal=server.url, port=issuer_port, providers=(PROVIDER,)) as idp:
            yield server, idp


def provider_pages_offline(page):
    """The provider's default pages import a web font: never fetched (the tests reach no outside host)."""
    page.route(re.compile(r"^https://fonts\.(googleapis|gstatic)\.com/"), lambda route: route.abort())


def sign_in_at_the_provider(page, account):
    """The provider's development sign-in form (any password); consent is implied for the portal."""
    expect(page.locator("input[name=login]")).to_be_visible()
    page.fill("input[name=login]", account)
    page.fill("input[name=password]", "any-password")
    page.click("button.login-submit")


@pytest.mark.django_db(transaction=True)
def test_a_person_signs_in_at_the_provider_and_lands_with_the_mapped_role(sso_portal, tenants, page):
    from django.contrib.auth import get_user_model

    from portal.models import Membership, Role

    server, idp = sso_portal
    provider_pages_offline(page)
    page.goto(f"{server.url}/login/")
    button = page.locator(f"#oidc-{PROVIDER}")
    expect(button).to_have_text("Sign in with Corp SSO")
    button.click()
    page.wait_for_url(re.compile(rf"^{re.escape(idp.issuer)}/"), wait_until="domcontentloaded")
    sign_in_at_the_provider(page, "dora")

    page.wait_for_url(f"{server.url}/", wait_until="domcontentloaded")
    expect(page.locator("h1")).to_have_text("Dashboard")
    # the one workspace her group maps to, and none from the group she is not in
    expect(page.locator("#workspace-switcher option")).to_have_count(1)
    expect(page.locator("#workspace-switcher option")).to_have_attribute("value", "vision-lab")
    page.goto(f"{server.url}/w/vision-lab/members/")
    expect(page.locator("#my-role")).to_have_text("Owner")
    shot(page, "sso-signed-in")
    assert page.goto(f"{server.url}/w/nlp-group/").status == 404

    dora = get_user_model().objects.get(email="dora@example.com")
    assert {(m.workspace.slug, m.role, m.source) for m in Membership.objects.filter(user=dora)} == {
        ("vision-lab", Role.OWNER, f"oidc:{PROVIDER}")
    }


@pytest.mark.django_db(transaction=True)
def test_sign_out_ends_the_portal_session_and_the_providers(sso_portal, tenants, page):
    server, idp = sso_portal
    provider_pages_offline(page)
    page.goto(f"{server.url}/login/")
    page.click(f"#oidc-{PROVIDER}")
    sign_in_at_the_provider(page, "erin")
    page.wait_for_url(f"{server.url}/", wait_until="domcontentloaded")
    expect(page.locator("#workspace-switcher option")).to_have_attribute("value", "nlp-group")

    page.click("#logout")
    # the provider's "sign out?" page, reached with the portal's ID token as the hint
    page.wait_for_url(re.compile(rf"^{re.escape(idp.issuer)}/session/end"), wait_until="domcontentloaded")
    page.click("button[name=logout][value=yes]")
    page.wait_for_url(f"{server.url}/login/", wait_until="domcontentloaded")
    expect(page.locator(f"#oidc-{PROVIDER}")).to_be_visible()

    page.goto(f"{server.url}/")
    expect(page).to_have_url(re.compile(r".*/login/\?next=/$"))  # the portal's session is gone
    # and the provider's: its button leads to the provider's sign-in form again, not straight back in
    page.click(f"#oidc-{PROVIDER}")
    page.wait_for_url(re.compile(rf"^{re.escape(idp.issuer)}/interaction/"), wait_until="domcontentloaded")
    expect(page.locator("input[name=login]")).to_be_visible()
