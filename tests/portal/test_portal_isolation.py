"""A tenant sees only its workspaces: pages, switcher and API (404 for the others, never 500)."""

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from portal.services import create_api_token, revoke_api_token


@pytest.fixture
def alice_client(client, tenants):
    client.force_login(tenants.alice)
    return client


def test_login_required_for_pages(client, db):
    response = client.get(reverse("dashboard"))
    assert response.status_code == 302
    assert reverse("login") in response["Location"]


def test_alice_opens_her_workspace_but_not_bobs(alice_client):
    assert alice_client.get("/w/vision-lab/").status_code == 200
    assert alice_client.get("/w/nlp-group/").status_code == 404
    assert alice_client.get("/w/no-such-workspace/").status_code == 404


def test_switcher_lists_only_her_workspaces(alice_client):
    html = alice_client.get(reverse("dashboard")).content.decode()
    options = re.findall(r'<option value="([^"]+)"', html)
    assert options == ["vision-lab"]
    assert "nlp-group" not in html


def test_switching_to_another_tenants_workspace_is_404_and_changes_nothing(alice_client):
    response = alice_client.post(reverse("switch-workspace"), {"workspace": "nlp-group"})
    assert response.status_code == 404
    assert alice_client.session.get("workspace") is None


def test_finance_switches_between_both_workspaces(client, tenants):
    client.force_login(tenants.finance)
    html = client.get(reverse("dashboard")).content.decode()
    assert re.findall(r'<option value="([^"]+)"', html) == ["nlp-group", "vision-lab"]
    response = client.post(reverse("switch-workspace"), {"workspace": "vision-lab"})
    assert response.status_code == 302
    assert client.session["workspace"] == "vision-lab"
    page = client.get(reverse("dashboard")).content.decode()
    assert re.search(r'<option value="vision-lab"\s+selected', page)


def test_switch_ignores_offsite_next(alice_client):
    response = alice_client.post(
        reverse("switch-workspace"), {"workspace": "vision-lab", "next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("dashboard")


def test_api_lists_mine_only_and_hides_others(tenants):
    api = APIClient()
    api.force_authenticate(tenants.alice)
    listed = api.get("/api/v1/workspaces/").json()
    assert [w["slug"] for w in listed["results"]] == ["vision-lab"]
    assert listed["results"][0]["role"] == "owner"
    assert api.get("/api/v1/workspaces/vision-lab/").status_code == 200
    assert api.get("/api/v1/workspaces/nlp-group/").status_code == 404


def test_api_requires_authentication(db):
    response = APIClient().get("/api/v1/workspaces/")
    assert response.status_code == 401


def test_token_authentication_and_revocation(tenants):
    token, raw = create_api_token(tenants.bob, "laptop")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert [w["slug"] for w in api.get("/api/v1/workspaces/").json()["results"]] == ["nlp-group"]
    assert api.get("/api/v1/workspaces/vision-lab/").status_code == 404
    token.refresh_from_db()
    assert token.last_used is not None
    revoke_api_token(tenants.bob, token.pk)
    assert api.get("/api/v1/workspaces/").status_code == 401


def test_a_user_cannot_revoke_someone_elses_token(client, tenants):
    token, _ = create_api_token(tenants.bob, "ci")
    client.force_login(tenants.alice)
    client.post(reverse("api-tokens"), {"revoke": token.pk})
    token.refresh_from_db()
    assert token.revoked is None


def test_token_page_shows_raw_value_once_and_stores_only_a_hash(client, tenants):
    client.force_login(tenants.alice)
    html = client.post(reverse("api-tokens"), {"name": "notebook"}).content.decode()
    raw = re.search(r"<code>(gpt_[^<]+)</code>", html).group(1)
    token = tenants.alice.api_tokens.get()
    assert raw not in (token.digest, token.hint) and token.hint == raw[:10]
    assert raw not in client.get(reverse("api-tokens")).content.decode()


def test_empty_token_name_is_refused_with_a_message(client, tenants):
    client.force_login(tenants.alice)
    html = client.post(reverse("api-tokens"), {"name": "  "}, follow=True).content.decode()
    assert "a token needs a name" in html
    assert not tenants.alice.api_tokens.exists()


def test_schema_and_docs(client, tenants):
    client.force_login(tenants.alice)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/workspaces/{slug}/" in schema.content
    assert client.get("/api/docs/").status_code == 200


def test_admin_is_for_staff_only(client, tenants):
    client.force_login(tenants.alice)
    assert client.get("/admin/").status_code == 302
    client.force_login(tenants.alice.__class__.objects.get(username="admin"))
    page = client.get("/admin/")
    assert page.status_code == 200 and b"GPU Platform console" in page.content


def test_revoking_a_token_asks_first_and_another_users_token_is_not_found(client, tenants):
    from portal.services import create_api_token

    token, _raw = create_api_token(tenants.alice, "laptop")
    bobs, _raw = create_api_token(tenants.bob, "bob-secret-laptop")
    client.force_login(tenants.alice)
    listing = client.get(reverse("api-tokens")).content.decode()
    assert f'href="/account/tokens/{token.pk}/revoke/"' in listing and 'name="revoke"' not in listing
    confirm = client.get(f"/account/tokens/{token.pk}/revoke/")
    assert confirm.status_code == 200 and "laptop" in confirm.content.decode()
    token.refresh_from_db()
    assert token.revoked is None  # asking changes nothing
    assert client.get(f"/account/tokens/{bobs.pk}/revoke/").status_code == 404
    client.post(reverse("api-tokens"), {"revoke": token.pk})
    token.refresh_from_db()
    assert token.revoked is not None
    assert client.get(f"/account/tokens/{token.pk}/revoke/").status_code == 404  # already revoked
