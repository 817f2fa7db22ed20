"""API tokens have a scope (read, submit, manage) and an expiry (90 days by default). A request the
scope does not cover is a 403 problem naming the scope it needs; an expired or revoked token is a
401 problem that says so. Bob, the other tenant, sees nothing of vision-lab whatever his scope."""

from datetime import UTC, timedelta

import pytest
from rest_framework.test import APIClient

from portal.api.authentication import required_scope
from portal.models import ApiToken, TokenScope
from portal.services import create_api_token, revoke_api_token
from scheduling.errors import DomainError
from scheduling.models import Job, JobState
from scheduling.spec.examples import CLEAN_YAML

PROBLEM = "application/problem+json"


def api_with(raw):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def token(user, scope, **kwargs):
    return create_api_token(user, f"{scope} token", scope=scope, **kwargs)


def submit(api, workspace="vision-lab"):
    spec = CLEAN_YAML.replace("vision-lab", workspace)  # its queue is the workspace's
    return api.post("/api/v1/jobs/", {"workspace": workspace, "spec": spec}, format="json")


def test_a_read_token_reads_and_quotes_but_neither_submits_nor_cancels(cluster, clock):
    job = Job.objects.get(pk=submit(api_with(token(cluster.alice, "submit")[1])).json()["id"])
    api = api_with(token(cluster.alice, "read")[1])
    assert api.get("/api/v1/jobs/").json()["count"] == 1
    assert api.get(f"/api/v1/jobs/{job.pk}/").status_code == 200
    assert api.get("/api/v1/costs/").status_code == 200
    quote = api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": CLEAN_YAML}, format="json")
    assert quote.status_code == 200, quote.json()  # a price changes nothing
    refused = submit(api)
    assert refused.status_code == 403 and refused["Content-Type"] == PROBLEM
    body = refused.json()
    assert body["type"] == "urn:gpu-platform:problem:missing-scope"
    assert "this token has scope 'read'; POST /api/v1/jobs/ needs scope 'submit'" in body["detail"]
    cancel = api.post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert cancel.status_code == 403 and "needs scope 'submit'" in cancel.json()["detail"]
    assert Job.objects.count() == 1 and Job.objects.get().state == JobState.PENDING


def test_a_submit_token_submits_and_cancels(cluster, clock):
    api = api_with(token(cluster.alice, "submit")[1])
    created = submit(api)
    assert created.status_code == 201, created.json()
    assert api.post(f"/api/v1/jobs/{created.json()['id']}/cancel/").json()["state"] == "Cancelled"


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
def test_a_write_no_view_names_needs_manage(cluster, clock, method):
    """No view declares these: they need manage, so a submit token is refused before the view's
    own 405 (that a manage token gets)."""
    job_id = submit(api_with(token(cluster.alice, "submit")[1])).json()["id"]
    refused = getattr(api_with(token(cluster.alice, "submit")[1]), method)(f"/api/v1/jobs/{job_id}/", {})
    assert refused.status_code == 403 and "needs scope 'manage'" in refused.json()["detail"]
    assert getattr(api_with(token(cluster.alice, "manage")[1]), method)(f"/api/v1/jobs/{job_id}/", {}).status_code == 405


def test_required_scope_reads_the_views_declaration():
    class Declared:
        token_scopes = {"POST": "submit"}

    assert required_scope(Declared(), "GET") == "read" and required_scope(Declared(), "HEAD") == "read"
    assert required_scope(Declared(), "POST") == "submit" and required_scope(Declared(), "DELETE") == "manage"
    assert required_scope(object(), "POST") == "manage" and required_scope(None, "OPTIONS") == "read"


def test_a_signed_in_session_is_not_limited_by_scopes(client, cluster, clock):
    client.force_login(cluster.alice)
    response = client.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": CLEAN_YAML},
                           content_type="application/json")
    assert response.status_code == 201


def test_bob_sees_nothing_of_vision_even_with_manage(cluster, clock):
    job_id = submit(api_with(token(cluster.alice, "submit")[1])).json()["id"]
    bob = api_with(token(cluster.bob, "manage")[1])
    assert bob.get("/api/v1/jobs/").json()["results"] == []
    assert bob.get(f"/api/v1/jobs/{job_id}/").status_code == 404
    assert bob.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 404
    assert submit(bob).status_code == 404
    assert submit(bob, "nlp-group").status_code == 201  # his own
    assert Job.objects.get(pk=job_id).state == JobState.PENDING


def test_new_tokens_expire_after_90_days_by_default_and_then_answer_401(tenants, clock):
    made, raw = create_api_token(tenants.alice, "laptop")
    assert made.scope == TokenScope.SUBMIT and made.expires == clock.now + timedelta(days=90)
    api = api_with(raw)
    clock.advance(90 * 86400 - 1)
    assert api.get("/api/v1/workspaces/").status_code == 200
    used = ApiToken.objects.get(pk=made.pk).last_used
    assert used == clock.now
    clock.advance(1)
    response = api.get("/api/v1/workspaces/")
    assert response.status_code == 401 and response["Content-Type"] == PROBLEM
    assert response["WWW-Authenticate"] == "Bearer"
    body = response.json()
    assert body["type"] == "urn:gpu-platform:problem:token-expired"
    assert body["detail"] == (f"token {made.hint}… expired on {made.expires.astimezone(UTC):%Y-%m-%d %H:%M} UTC: "
                              "create a new one at /account/tokens/.")
    clock.advance(120)
    api.get("/api/v1/workspaces/")
    assert ApiToken.objects.get(pk=made.pk).last_used == used  # a refused call is no use


def test_a_revoked_token_answers_401_saying_when(tenants, clock):
    made, raw = create_api_token(tenants.bob, "ci", scope="read", days=7)
    assert api_with(raw).get("/api/v1/workspaces/").status_code == 200
    revoke_api_token(tenants.bob, made.pk)
    response = api_with(raw).get("/api/v1/workspaces/")
    assert response.status_code == 401
    assert response.json()["type"] == "urn:gpu-platform:problem:token-revoked"
    assert response.json()["detail"] == f"token {made.hint}… was revoked on {clock.now.astimezone(UTC):%Y-%m-%d %H:%M} UTC."


def test_an_unknown_token_and_a_deactivated_account_answer_401(tenants, clock):
    assert api_with("gpt_nothing").get("/api/v1/workspaces/").status_code == 401
    _, raw = create_api_token(tenants.carol, "x")
    tenants.carol.is_active = False
    tenants.carol.save()
    response = api_with(raw).get("/api/v1/workspaces/")
    assert response.status_code == 401 and "Invalid token" in response.json()["detail"]


def test_a_token_made_before_expiry_existed_never_expires(tenants, clock):
    made, raw = create_api_token(tenants.alice, "old")
    ApiToken.objects.filter(pk=made.pk).update(expires=None)
    clock.advance(3 * 365 * 86400)
    assert api_with(raw).get("/api/v1/workspaces/").status_code == 200


def test_bad_scope_or_lifetime_is_refused_by_field_and_makes_nothing(tenants):
    with pytest.raises(DomainError) as error:
        create_api_token(tenants.alice, "", scope="admin", days=1000)
    assert set(error.value.errors) == {"name", "scope", "days"}
    with pytest.raises(DomainError):
        create_api_token(tenants.alice, "x", days="ninety")
    assert not ApiToken.objects.exists()


# --------------------------------------------------------------------------- the tokens page


def test_the_page_makes_a_token_with_its_scope_and_lifetime(client, tenants, clock):
    client.force_login(tenants.alice)
    page = client.get("/account/tokens/").content.decode()
    assert 'value="90" selected' in page and 'id="scope-submit" checked' in page
    html = client.post("/account/tokens/", {"name": "notebook", "scope": "read", "days": "30"}).content.decode()
    made = ApiToken.objects.get(user=tenants.alice)
    assert made.scope == "read" and made.expires == clock.now + timedelta(days=30)
    assert 'id="new-token"' in html and 'data-field="scope">read<' in html
    assert 'data-field="last-used">never<' in html
    raw = html.split('id="new-token"')[1].split("<code>")[1].split("</code>")[0]
    api_with(raw).get("/api/v1/workspaces/")
    page = client.get("/account/tokens/").content.decode()
    assert raw not in page and f'data-field="last-used">{clock.now:%Y-%m-%d %H:%M}<' in page


def test_the_page_shows_errors_beside_their_fields(client, tenants):
    client.force_login(tenants.alice)
    response = client.post("/account/tokens/", {"name": "", "scope": "root", "days": "3"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "a token needs a name" in html.split('data-field="name"')[1].split("</ul>")[0]
    assert "is not a scope" in html.split('data-field="scope"')[1].split("</ul>")[0]
    assert "choose a lifetime" in html.split('data-field="days"')[1].split("</ul>")[0]
    assert not ApiToken.objects.exists()


def test_the_page_marks_expired_tokens_and_shows_only_mine(client, tenants, clock):
    create_api_token(tenants.alice, "short", days=1)
    create_api_token(tenants.bob, "bobs-token")
    clock.advance(2 * 86400)
    client.force_login(tenants.alice)
    html = client.get("/account/tokens/").content.decode()
    assert "expired</span>" in html and "short" in html and "bobs-token" not in html
