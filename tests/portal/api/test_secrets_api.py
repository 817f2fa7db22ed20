"""/api/v1/workspaces/<slug>/secrets/ and /registries/: owners add, replace and delete; every member lists the
names, who changed each and when; no answer holds a value; bad input is a problem-details 4xx naming the field
with nothing stored; another tenant sees nothing and can neither use nor touch them; each write is one audit
line without the value. A spec naming an unknown secret is refused with its line and column; the quote says which
registry credential pulls the image."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from portal.console.models import AuditEntry
from portal.models import Membership, Role
from portal.services import create_api_token
from scheduling.models import Job, RegistryCredential, WorkspaceSecret
from tests.factories import UserFactory

PROBLEM = "application/problem+json"
VALUE = "hf_s3cr3t-Value-0123456789"
SECRETS, REGISTRIES = "/api/v1/workspaces/vision-lab/secrets/", "/api/v1/workspaces/vision-lab/registries/"
SPEC = """name: uses-secret
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: registry.example.com/team/train:1
    env:
      HF_TOKEN: {secret: hf-token}
    resources: {gpu: 1}
    nodePool: h100
"""



def problem(response, status: int, field: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == PROBLEM
    body = response.json()
    assert field in [e["field"] for e in body["errors"]], body
    return body


def test_an_owner_adds_replaces_lists_and_deletes_a_secret(cluster, clock, api_as):
    alice = api_as(cluster.alice)
    created = alice.post(SECRETS, {"name": "hf-token", "value": VALUE}, format="json")
    assert created.status_code == 201, created.content
    assert set(created.json()) == {"name", "size", "created", "changed", "changed_by"}
    assert created.json()["changed_by"] == "alice" and created.json()["size"] == len(VALUE)
    clock.advance(60)
    replaced = alice.post(SECRETS, {"name": "hf-token", "value": "another-value-1"}, format="json")
    assert replaced.status_code == 200 and replaced.json()["changed"] > created.json()["changed"]
    assert WorkspaceSecret.objects.count() == 1
    listed = alice.get(SECRETS)
    assert [s["name"] for s in listed.json()] == ["hf-token"]
    assert alice.get(SECRETS + "hf-token/").json()["name"] == "hf-token"
    for response in (created, replaced, listed):
        assert VALUE not in response.content.decode() and "another-value-1" not in response.content.decode()
    assert alice.delete(SECRETS + "hf-token/").status_code == 204
    assert alice.get(SECRETS).json() == []
    problem(alice.delete(SECRETS + "hf-token/"), 404, "name")


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "HF_TOKEN", "value": VALUE}, "name"), ({"name": "hf-token", "value": ""}, "value"),
    ({"name": "hf-token", "value": "x" * (64 * 1024 + 1)}, "value"), ({"name": "hf-token"}, "value"),
    ({"value": VALUE}, "name"), ({"name": "a" * 64, "value": VALUE}, "name"),
])
def test_bad_input_is_a_problem_naming_the_field_and_nothing_is_stored(cluster, api_as, body, field):
    problem(api_as(cluster.alice).post(SECRETS, body, format="json"), 400, field)
    assert not WorkspaceSecret.objects.exists() and not AuditEntry.objects.filter(target_type__contains="secret")


def test_members_viewers_and_finance_see_names_only_and_cannot_write(cluster, api_as):
    viewer = UserFactory(username="victor")
    Membership.objects.create(user=viewer, workspace=cluster.vision, role=Role.VIEWER)
    api_as(cluster.alice).post(SECRETS, {"name": "hf-token", "value": VALUE}, format="json")
    for user in (cluster.carol, cluster.finance, viewer):
        api = api_as(user)
        assert [s["name"] for s in api.get(SECRETS).json()] == ["hf-token"]
        problem(api.post(SECRETS, {"name": "hf-token", "value": "overwritten"}, format="json"), 403, "workspace")
        assert api.delete(SECRETS + "hf-token/").status_code == 403
        assert api.post(REGISTRIES, {"server": "r.example.com", "username": "u", "password": "p"},
                        format="json").status_code == 403
    assert WorkspaceSecret.objects.get().changed_by == cluster.alice and not RegistryCredential.objects.exists()


def test_another_tenant_can_neither_read_nor_touch_nor_use_them(cluster, clock, api_as):
    api_as(cluster.alice).post(SECRETS, {"name": "hf-token", "value": VALUE}, format="json")
    bob = api_as(cluster.bob)
    assert bob.get(SECRETS).status_code == 404
    assert bob.get(SECRETS + "hf-token/").status_code == 404
    assert bob.post(SECRETS, {"name": "hf-token", "value": "x"}, format="json").status_code == 404
    assert bob.delete(SECRETS + "hf-token/").status_code == 404
    assert bob.get(REGISTRIES).status_code == 404
    # bob's own workspace has no such secret: his spec naming it is refused
    refused = bob.post("/api/v1/jobs/", {"workspace": "nlp-group", "spec": SPEC.replace("vision-lab", "nlp-group")},
                       format="json")
    body = problem(refused, 400, "roles[0].env.HF_TOKEN.secret")
    assert [(e["line"], e["column"]) for e in body["errors"]] == [(8, 26)]
    assert not Job.objects.exists()


def test_a_spec_with_an_unknown_secret_creates_nothing_and_a_known_one_is_submitted(cluster, clock, api_as):
    alice = api_as(cluster.alice)
    refused = alice.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": SPEC}, format="json")
    problem(refused, 400, "roles[0].env.HF_TOKEN.secret")
    assert not Job.objects.exists()
    alice.post(SECRETS, {"name": "hf-token", "value": VALUE}, format="json")
    submitted = alice.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": SPEC}, format="json")
    assert submitted.status_code == 201, submitted.content
    carol = api_as(cluster.carol)  # a member uses the secret in her own spec
    assert carol.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": SPEC.replace("uses-secret", "carols")},
                      format="json").status_code == 201
    job = Job.objects.get(pk=submitted.json()["id"])
    assert job.roles[0]["secret_env"] == {"HF_TOKEN": "hf-token"} and VALUE not in json.dumps(job.roles)


def test_registries_add_replace_list_delete_and_the_quote_names_the_credential(cluster, clock, api_as):
    alice = api_as(cluster.alice)
    alice.post(SECRETS, {"name": "hf-token", "value": VALUE}, format="json")
    quote = alice.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": SPEC}, format="json")
    assert quote.json()["image_pulls"][0]["credential"] is None
    created = alice.post(REGISTRIES, {"server": "https://Registry.Example.com/", "username": "robot",
                                      "password": "pull-pass-77"}, format="json")
    assert created.status_code == 201 and created.json()["server"] == "registry.example.com"
    replaced = alice.post(REGISTRIES, {"server": "registry.example.com", "username": "robot2",
                                       "password": "pull-pass-88"}, format="json")
    assert replaced.status_code == 200 and replaced.json()["username"] == "robot2"
    listed = alice.get(REGISTRIES)
    assert [(r["server"], r["username"]) for r in listed.json()] == [("registry.example.com", "robot2")]
    quote = alice.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": SPEC}, format="json")
    pulls = quote.json()["image_pulls"]
    assert pulls[0]["registry"] == "registry.example.com" and pulls[0]["credential"] == "registry.example.com"
    for response in (created, replaced, listed, quote):
        assert "pull-pass" not in response.content.decode()
    problem(alice.post(REGISTRIES, {"server": "bad host", "username": "u", "password": "p"}, format="json"), 400,
            "server")
    problem(alice.post(REGISTRIES, {"server": "r.example.com", "username": "u", "password": ""}, format="json"), 400,
            "password")
    assert alice.delete(REGISTRIES + "registry.example.com/").status_code == 204
    assert alice.get(REGISTRIES).json() == []


def test_each_write_is_one_audit_line_without_the_value(cluster, clock, api_as):
    alice = api_as(cluster.alice)
    alice.post(SECRETS, {"name": "hf-token", "value": VALUE}, format="json")
    alice.post(SECRETS, {"name": "hf-token", "value": VALUE + "2"}, format="json")
    alice.delete(SECRETS + "hf-token/")
    alice.post(REGISTRIES, {"server": "registry.example.com", "username": "robot", "password": "pull-pass-77"},
               format="json")
    lines = list(AuditEntry.objects.order_by("id").values_list("action", "target_type", "target_repr", "source"))
    assert lines == [("create", "scheduling.workspacesecret", "vision-lab/hf-token", "tenant"),
                     ("change", "scheduling.workspacesecret", "vision-lab/hf-token", "tenant"),
                     ("delete", "scheduling.workspacesecret", "vision-lab/hf-token", "tenant"),
                     ("create", "scheduling.registrycredential", "vision-lab/registry.example.com", "tenant")]
    text = json.dumps(list(AuditEntry.objects.values()), default=str)
    assert VALUE not in text and "pull-pass-77" not in text


def test_writes_need_a_manage_token(cluster):
    def with_token(scope):
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_token(cluster.alice, scope, scope=scope)[1]}")
        return api

    assert with_token("submit").post(SECRETS, {"name": "hf-token", "value": VALUE}, format="json").status_code == 403
    assert with_token("read").get(SECRETS).status_code == 200
    assert with_token("manage").post(SECRETS, {"name": "hf-token", "value": VALUE}, format="json").status_code == 201
