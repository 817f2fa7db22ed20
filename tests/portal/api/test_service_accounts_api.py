"""/api/v1/workspaces/<slug>/service-accounts/: an owner makes a service account (member or viewer, never
owner) and mints its tokens; members, viewers, finance are refused (403) and another tenant sees nothing (404).
Its token acts only within its workspace, under its own name (jobs' submitter, job events, audit lines), keeps
working when the owner who made it is gone, and is refused (401) once revoked. A token's value is answered once
and is in no listing, log or audit line. Bad input is an RFC 9457 400 and changes nothing."""

from __future__ import annotations

import json
import logging

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from portal.console.models import AuditEntry
from portal.models import ApiToken, Membership, Role, ServiceAccount
from scheduling.models import Job, JobEvent
from scheduling.spec.examples import CLEAN_YAML
from tests.factories import UserFactory

PROBLEM = "application/problem+json"
ACCOUNTS = "/api/v1/workspaces/vision-lab/service-accounts/"
CI_TOKENS = ACCOUNTS + "ci-pipeline/tokens/"



def bearer(raw: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def problem(response, status: int, field: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert field in [e["field"] for e in body["errors"]], body
    return body


def submit(api, workspace="vision-lab"):
    return api.post("/api/v1/jobs/", {"workspace": workspace, "spec": CLEAN_YAML.replace("vision-lab", workspace)},
                    format="json")


def make_ci(api, role="member", scope="submit") -> str:
    made = api.post(ACCOUNTS, {"name": "ci-pipeline", "role": role}, format="json")
    assert made.status_code == 201, made.content
    minted = api.post(CI_TOKENS, {"name": "github", "scope": scope, "expires_in_days": 30}, format="json")
    assert minted.status_code == 201, minted.content
    return minted.json()["token"]


def test_an_owner_makes_one_and_mints_a_token_shown_once(cluster, clock, api_as, client):
    alice = api_as(cluster.alice)
    made = alice.post(ACCOUNTS, {"name": "ci-pipeline", "role": "member"}, format="json")
    assert made.status_code == 201, made.content
    assert made.json() | {"created": None} == {"name": "ci-pipeline", "username": "svc:ci-pipeline@vision-lab",
                                               "role": "member", "created": None, "created_by": "alice"}
    minted = alice.post(CI_TOKENS, {"name": "github", "scope": "submit", "expires_in_days": 30}, format="json")
    assert minted.status_code == 201, minted.content
    raw = minted.json()["token"]
    assert raw.startswith("gpt_") and minted.json()["hint"] == raw[:10] and minted.json()["scope"] == "submit"
    listed = alice.get(CI_TOKENS)
    assert [t["name"] for t in listed.json()] == ["github"] and "token" not in listed.json()[0]
    assert raw not in listed.content.decode() and raw not in alice.get(ACCOUNTS).content.decode()
    assert [a["name"] for a in alice.get(ACCOUNTS).json()] == ["ci-pipeline"]
    assert alice.get(ACCOUNTS + "ci-pipeline/").json()["role"] == "member"
    account = ServiceAccount.objects.get()
    assert not account.user.has_usable_password() and account.user.username == "svc:ci-pipeline@vision-lab"
    # it is no person: the Members page does not list it, and no one can add it, promote it or remove it there
    client.force_login(cluster.alice)
    members_page = client.get("/w/vision-lab/members/")
    assert members_page.status_code == 200 and "svc:ci-pipeline" not in members_page.content.decode()


def test_members_viewers_finance_are_refused_and_another_tenant_sees_nothing(cluster, clock, api_as):
    raw = make_ci(api_as(cluster.alice))
    viewer = UserFactory(username="victor")
    Membership.objects.create(user=viewer, workspace=cluster.vision, role=Role.VIEWER)
    for user in (cluster.carol, cluster.finance, viewer):
        api = api_as(user)
        problem(api.post(ACCOUNTS, {"name": "mine", "role": "member"}, format="json"), 403, "workspace")
        assert api.get(ACCOUNTS).status_code == 403
        assert api.post(CI_TOKENS, {"name": "x"}, format="json").status_code == 403
        assert api.delete(ACCOUNTS + "ci-pipeline/").status_code == 403
    bob = api_as(cluster.bob)
    for response in (bob.get(ACCOUNTS), bob.post(ACCOUNTS, {"name": "mine", "role": "member"}, format="json"),
                     bob.get(CI_TOKENS), bob.post(CI_TOKENS, {"name": "x"}, format="json"),
                     bob.delete(ACCOUNTS + "ci-pipeline/")):
        assert response.status_code == 404
    # bob's own workspace has none of vision-lab's
    assert bob.get("/api/v1/workspaces/nlp-group/service-accounts/").json() == []
    assert ServiceAccount.objects.count() == 1 and ApiToken.objects.filter(revoked__isnull=True).count() == 1
    assert bearer(raw).get("/api/v1/workspaces/vision-lab/").status_code == 200


def test_its_token_acts_only_within_its_workspace_under_its_own_name(cluster, clock, api_as):
    ci = bearer(make_ci(api_as(cluster.alice)))
    submitted = submit(ci)
    assert submitted.status_code == 201, submitted.content
    job = Job.objects.get(pk=submitted.json()["id"])
    assert job.submitted_by.username == "svc:ci-pipeline@vision-lab"
    assert ci.get(f"/api/v1/jobs/{job.pk}/").status_code == 200
    assert ci.post(f"/api/v1/jobs/{job.pk}/cancel/").json()["state"] == "Cancelled"
    cancelled = JobEvent.objects.filter(job=job, kind="cancelled").get()
    assert "svc:ci-pipeline@vision-lab" in cancelled.reason
    # another workspace does not exist for it
    assert ci.get("/api/v1/workspaces/nlp-group/").status_code == 404
    assert submit(ci, "nlp-group").status_code in (400, 403, 404)
    bobs = Job.objects.get(pk=submit(api_as(cluster.bob), "nlp-group").json()["id"])
    assert ci.get(f"/api/v1/jobs/{bobs.pk}/").status_code == 404
    assert [w["slug"] for w in ci.get("/api/v1/workspaces/").json()["results"]] == ["vision-lab"]
    # nor can it manage its workspace (member role): no secrets, no service accounts of its own
    assert ci.post(ACCOUNTS, {"name": "escalate", "role": "member"}, format="json").status_code == 403
    # the owner's writes about it are audited under the owner, its own under its name
    assert set(AuditEntry.objects.values_list("username", "action")) >= {("alice", "create")}


def test_a_viewer_account_reads_and_cannot_submit(cluster, clock, api_as):
    ci = bearer(make_ci(api_as(cluster.alice), role="viewer", scope="manage"))
    assert ci.get("/api/v1/jobs/").status_code == 200
    assert submit(ci).status_code == 403 and not Job.objects.exists()


def test_its_tokens_survive_the_creator_leaving(cluster, clock, api_as):
    raw = make_ci(api_as(cluster.alice))
    Membership.objects.filter(user=cluster.carol, workspace=cluster.vision).update(role=Role.OWNER)
    alice_membership = Membership.objects.get(user=cluster.alice, workspace=cluster.vision)
    from portal.members import services as members

    members.remove_member(cluster.carol, alice_membership)
    assert bearer(raw).get("/api/v1/workspaces/vision-lab/").status_code == 200
    cluster.alice.is_active = False
    cluster.alice.save()
    assert submit(bearer(raw)).status_code == 201
    get_user_model().objects.filter(pk=cluster.alice.pk).delete()
    assert bearer(raw).get("/api/v1/jobs/").status_code == 200
    assert ServiceAccount.objects.get().created_by is None


def test_a_revoked_token_and_a_deleted_account_are_refused(cluster, clock, api_as):
    alice = api_as(cluster.alice)
    raw = make_ci(alice)
    token_id = alice.get(CI_TOKENS).json()[0]["id"]
    assert alice.delete(f"{CI_TOKENS}{token_id}/").status_code == 204
    refused = bearer(raw).get("/api/v1/jobs/")
    assert refused.status_code == 401 and refused["Content-Type"] == PROBLEM
    assert alice.get(CI_TOKENS).json()[0]["revoked"] is not None
    problem(alice.delete(f"{CI_TOKENS}999999/"), 404, "token")
    # a person's token is not the account's to revoke
    mine = ApiToken.objects.create(user=cluster.alice, name="own", digest="d" * 64, hint="gpt_own")
    problem(alice.delete(f"{CI_TOKENS}{mine.pk}/"), 404, "token")
    assert ApiToken.objects.get(pk=mine.pk).revoked is None
    second = alice.post(CI_TOKENS, {"name": "second"}, format="json").json()["token"]
    assert alice.delete(ACCOUNTS + "ci-pipeline/").status_code == 204
    assert bearer(second).get("/api/v1/jobs/").status_code == 401
    assert alice.get(ACCOUNTS).json() == [] and alice.get(CI_TOKENS).status_code == 404
    assert not Membership.objects.filter(user__username__startswith="svc:").exists()
    # the name can be made again, with none of the old tokens
    assert alice.post(ACCOUNTS, {"name": "ci-pipeline", "role": "viewer"}, format="json").status_code == 201
    assert bearer(second).get("/api/v1/jobs/").status_code == 401
    assert alice.get(ACCOUNTS).json()[0]["role"] == "viewer"
    actions = list(AuditEntry.objects.filter(source="tenant").order_by("id").values_list("action", "target_type"))
    assert actions == [("create", "portal.serviceaccount"), ("create", "portal.apitoken"),
                       ("revoke", "portal.apitoken"), ("create", "portal.apitoken"),
                       ("delete", "portal.serviceaccount"), ("create", "portal.serviceaccount")]


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "ci-pipeline", "role": "owner"}, "role"), ({"name": "ci-pipeline", "role": "finance"}, "role"),
    ({"name": "CI Pipeline", "role": "member"}, "name"), ({"name": "-ci", "role": "member"}, "name"),
    ({"name": "a" * 41, "role": "member"}, "name"), ({"role": "member"}, "name"), ({"name": "ci"}, "role"),
    ({"name": "taken", "role": "member"}, "name"),
])
def test_bad_accounts_are_a_problem_and_change_nothing(cluster, clock, api_as, body, field):
    alice = api_as(cluster.alice)
    assert alice.post(ACCOUNTS, {"name": "taken", "role": "viewer"}, format="json").status_code == 201
    before = (get_user_model().objects.count(), Membership.objects.count(), AuditEntry.objects.count())
    problem(alice.post(ACCOUNTS, body, format="json"), 400, field)
    assert (get_user_model().objects.count(), Membership.objects.count(), AuditEntry.objects.count()) == before
    assert ServiceAccount.objects.count() == 1 and ServiceAccount.objects.get().name == "taken"


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "t", "expires_in_days": 3}, "expires_in_days"), ({"name": "t", "expires_in_days": "never"},
                                                               "expires_in_days"),
    ({"name": "t", "expires_in_days": 0}, "expires_in_days"), ({"name": "t", "scope": "owner"}, "scope"),
    ({"name": ""}, "name"), ({"expires_in_days": 30}, "name"), ({"name": "x" * 101}, "name"),
])
def test_bad_tokens_are_a_problem_and_mint_nothing(cluster, clock, api_as, body, field):
    alice = api_as(cluster.alice)
    alice.post(ACCOUNTS, {"name": "ci-pipeline", "role": "member"}, format="json")
    problem(alice.post(CI_TOKENS, body, format="json"), 400, field)
    assert not ApiToken.objects.exists() and not AuditEntry.objects.filter(target_type="portal.apitoken").exists()


def test_the_secret_is_in_no_log_and_no_audit_line(cluster, clock, api_as, caplog):
    caplog.set_level(logging.DEBUG)
    alice = api_as(cluster.alice)
    raw = make_ci(alice)
    submit(bearer(raw))
    alice.delete(ACCOUNTS + "ci-pipeline/")
    assert raw not in caplog.text
    assert raw not in json.dumps(list(AuditEntry.objects.values()), default=str)
    assert raw not in json.dumps(list(ApiToken.objects.values()), default=str)


def test_its_membership_cannot_be_changed_as_a_member(cluster, clock, api_as):
    from portal.console.services import ConsoleError
    from portal.members import services as members

    make_ci(api_as(cluster.alice))
    membership = Membership.objects.get(user__service_account__isnull=False)
    with pytest.raises(ConsoleError):
        members.change_role(cluster.alice, membership, Role.OWNER)
    with pytest.raises(ConsoleError):
        members.remove_member(cluster.alice, membership)
    with pytest.raises(ConsoleError):  # nor join another workspace
        members.add_member(cluster.bob, cluster.nlp, "svc:ci-pipeline@vision-lab", Role.OWNER)
    assert list(Membership.objects.filter(user__service_account__isnull=False).values_list("role", flat=True)) == [
        Role.MEMBER]
