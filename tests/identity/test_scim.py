"""SCIM 2.0 provisioning at /scim/v2/, fed what Okta's and Microsoft Entra's provisioning clients send:
accounts created, found by filter, deactivated (sessions, API tokens and notebooks end at once; other
jobs and charges stay) and reactivated; SCIM groups whose memberships give roles through the mapping;
only a SCIM token opens it; bad bodies answer SCIM errors, never a server error."""

from __future__ import annotations

import json
import uuid

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from portal.api.errors import BodyTooLarge
from portal.console.models import AuditEntry
from portal.models import ApiToken, GroupRoleMapping, Membership, Role, UserSession
from portal.scim import services
from portal.scim.models import ScimAccount, ScimGroup, ScimToken
from portal.server_error import error_answer
from portal.services import create_api_token
from scheduling.models import JobState

pytestmark = pytest.mark.django_db

SCIM = "application/scim+json"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"
PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
NOTEBOOK = "kind: notebook\nname: lab\nqueue: vision-lab\nresources: {gpu: 0.5, gpuMemory: 10Gi}\n"
TRAINING = "name: train\nqueue: vision-lab\nroles:\n  - name: main\n    image: busybox:1.36\n    resources: {gpu: 1}\n"


class Scim:
    """An identity provider's client: a SCIM token on every call."""

    def __init__(self, client, raw: str):
        self.client, self.auth = client, {"HTTP_AUTHORIZATION": f"Bearer {raw}"}

    def call(self, method: str, path: str, body=None, **extra):
        data = body if isinstance(body, str | bytes) or body is None else json.dumps(body)
        kwargs = {"content_type": SCIM} if data is not None else {}
        response = getattr(self.client, method)(f"/scim/v2/{path}", data, **kwargs, **{**self.auth, **extra})
        response.doc = json.loads(response.content) if response.content else None
        return response

    def get(self, path, **extra):
        return self.call("get", path, **extra)

    def post(self, path, body, **extra):
        return self.call("post", path, body, **extra)

    def patch(self, path, body, **extra):
        return self.call("patch", path, body, **extra)

    def put(self, path, body, **extra):
        return self.call("put", path, body, **extra)

    def delete(self, path, **extra):
        return self.call("delete", path, **extra)


@pytest.fixture
def scim(client, tenants):
    _token, raw = services.create_token(tenants.admin, "okta")
    return Scim(client, raw)


def okta_user(name: str, **more) -> dict:
    return {"schemas": [USER], "userName": name, "name": {"givenName": "Dana", "familyName": "Reyes"},
            "emails": [{"primary": True, "value": name, "type": "work"}], "displayName": "Dana Reyes",
            "locale": "en-US", "externalId": "00u1abcd", "groups": [], "active": True, **more}


def patch(*operations) -> dict:
    return {"schemas": [PATCH_OP], "Operations": list(operations)}


def assert_scim_error(response, status: int, scim_type: str | None = None):
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith(SCIM)
    assert response.doc["schemas"] == [ERROR] and response.doc["status"] == str(status)
    assert response.doc["detail"]
    if scim_type:
        assert response.doc["scimType"] == scim_type


def test_okta_creates_a_user_finds_it_by_filter_and_a_second_create_conflicts(scim):
    created = scim.post("Users", okta_user("dana@corp.example"))
    assert created.status_code == 201, created.content
    user = get_user_model().objects.get(username="dana@corp.example")
    assert created.doc["id"] == str(user.pk) and created["Location"].endswith(f"/scim/v2/Users/{user.pk}")
    assert (user.email, user.first_name, user.last_name, user.is_active) == ("dana@corp.example", "Dana", "Reyes",
                                                                            True)
    assert not user.has_usable_password()  # signs in through the company's sign-in only
    assert created.doc["externalId"] == "00u1abcd" and created.doc["active"] is True

    found = scim.get('Users?filter=userName eq "dana@corp.example"&startIndex=1&count=100')
    assert found.status_code == 200 and found.doc["totalResults"] == 1
    assert found.doc["Resources"][0]["id"] == str(user.pk)
    assert scim.get('Users?filter=userName eq "nobody@corp.example"').doc["totalResults"] == 0
    assert scim.get('Users?filter=emails.value eq "dana@corp.example"').doc["totalResults"] == 1
    assert scim.get(f"Users/{user.pk}").doc["userName"] == "dana@corp.example"

    again = scim.post("Users", okta_user("Dana@corp.example"))
    assert_scim_error(again, 409, "uniqueness")
    assert AuditEntry.objects.filter(username="scim:okta", action="create", target_id=str(user.pk)).exists()


def test_service_accounts_are_not_scims_to_see(scim, tenants):
    from portal.service_accounts import create_service_account

    account = create_service_account(tenants.alice, tenants.vision, "ci-robot", role=Role.MEMBER)
    listed = {r["userName"] for r in scim.get("Users").doc["Resources"]}
    assert "alice" in listed and account.user.username not in listed
    assert_scim_error(scim.get(f"Users/{account.user.pk}"), 404)


def _alice_busy(cluster, run, clock):
    """alice signed in twice, with an API token, a notebook and a training job placed on the cluster."""
    from billing.services import submit_quoted_job
    from scheduling.backends.simulated.backend import SimulatedBackend

    browsers = [Client(), Client()]
    for browser in browsers:
        assert browser.login(username="alice", password="alice-test")
    _token, raw = create_api_token(cluster.alice, "laptop")
    notebook = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    training = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=TRAINING)
    run(SimulatedBackend(speedup=1, failure_rate=0, clock=clock), clock)
    notebook.refresh_from_db()
    training.refresh_from_db()
    assert UserSession.objects.filter(user=cluster.alice).count() == 2
    return browsers, raw, notebook, training


def test_okta_deactivation_ends_sessions_tokens_and_notebooks_at_once_and_nothing_else(
        scim, cluster, run, clock):
    browsers, raw, notebook, training = _alice_busy(cluster, run, clock)
    training_state = training.state
    assert notebook.state not in (JobState.STOPPED, JobState.CANCELLED)

    done = scim.patch(f"Users/{cluster.alice.pk}", patch({"op": "replace", "value": {"active": False}}))
    assert done.status_code == 200, done.content
    assert done.doc["active"] is False
    cluster.alice.refresh_from_db()
    assert not cluster.alice.is_active
    assert not UserSession.objects.filter(user=cluster.alice).exists()
    for browser in browsers:  # their next request is anonymous
        assert browser.get("/account/sessions/").status_code == 302
    assert not ApiToken.objects.filter(user=cluster.alice, revoked__isnull=True).exists()
    assert Client().get("/api/v1/workspaces/", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401
    notebook.refresh_from_db()
    training.refresh_from_db()
    assert notebook.state == JobState.STOPPED
    assert training.state == training_state  # its other jobs run on
    assert Membership.objects.filter(user=cluster.alice, workspace=cluster.vision).exists()
    assert not Client().login(username="alice", password="alice-test")
    entry = AuditEntry.objects.get(username="scim:okta", action="deactivate")
    assert "2 session(s) ended, 1 API token(s) revoked, 1 notebook(s) stopped" in entry.message

    # Entra reactivates with its own shape (the op capitalised, the boolean as text): she signs in again,
    # her tokens stay revoked
    back = scim.patch(f"Users/{cluster.alice.pk}", patch({"op": "Replace", "path": "active", "value": "True"}))
    assert back.status_code == 200 and back.doc["active"] is True
    assert Client().login(username="alice", password="alice-test")
    assert not ApiToken.objects.filter(user=cluster.alice, revoked__isnull=True).exists()
    assert AuditEntry.objects.filter(username="scim:okta", action="reactivate").count() == 1


def test_entra_patches_attributes_with_paths_and_deactivates_with_text(scim):
    entra = {"schemas": [USER, "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"],
             "externalId": "erin", "userName": "erin@corp.example", "active": True, "displayName": "Erin",
             "emails": [{"primary": True, "type": "work", "value": "erin@corp.example"}],
             "meta": {"resourceType": "User"}, "name": {"formatted": "Erin Ode", "familyName": "Ode",
                                                        "givenName": "Erin"},
             "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"department": "Vision"}}
    created = scim.post("Users", entra)
    assert created.status_code == 201, created.content
    erin = created.doc["id"]
    changed = scim.patch(f"Users/{erin}", patch(
        {"op": "Replace", "path": 'emails[type eq "work"].value', "value": "erin.ode@corp.example"},
        {"op": "Replace", "path": "name.givenName", "value": "Erin M."},
        {"op": "Add", "path": "title", "value": "Researcher"},
        {"op": "Replace", "path": "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department",
         "value": "NLP"},
        {"op": "Replace", "path": "active", "value": "False"}))
    assert changed.status_code == 200, changed.content
    user = get_user_model().objects.get(pk=erin)
    assert (user.email, user.first_name, user.is_active) == ("erin.ode@corp.example", "Erin M.", False)
    change = AuditEntry.objects.get(username="scim:okta", action="change")
    assert change.changes == {"email": ["erin@corp.example", "erin.ode@corp.example"], "first_name": ["Erin", "Erin M."]}
    # the same values again change nothing, and say so nowhere
    scim.patch(f"Users/{erin}", patch({"op": "Replace", "path": "name.givenName", "value": "Erin M."}))
    assert AuditEntry.objects.filter(username="scim:okta", action="change").count() == 1


def test_a_deleted_user_is_gone_from_scim_but_kept_and_can_be_provisioned_again(scim, cluster):
    from billing.services import submit_quoted_job

    job = submit_quoted_job(user=cluster.carol, workspace=cluster.vision, spec=TRAINING)
    GroupRoleMapping.objects.create(group="nlp-readers", workspace=cluster.nlp, role=Role.VIEWER)
    group = scim.post("Groups", {"schemas": [GROUP], "displayName": "nlp-readers",
                                 "members": [{"value": str(cluster.carol.pk)}]})
    assert group.status_code == 201
    assert Membership.objects.get(user=cluster.carol, workspace=cluster.nlp).source == "scim"

    assert scim.delete(f"Users/{cluster.carol.pk}").status_code == 204
    assert_scim_error(scim.get(f"Users/{cluster.carol.pk}"), 404)
    assert scim.get('Users?filter=userName eq "carol"').doc["totalResults"] == 0
    cluster.carol.refresh_from_db()
    assert not cluster.carol.is_active  # the account, its jobs and its hand-made membership stay
    job.refresh_from_db()
    assert job.state != JobState.CANCELLED
    assert Membership.objects.filter(user=cluster.carol, workspace=cluster.vision).exists()
    assert not Membership.objects.filter(user=cluster.carol, workspace=cluster.nlp).exists()

    again = scim.post("Users", okta_user("carol", emails=[{"value": "carol@corp.example", "primary": True}]))
    assert again.status_code == 201 and again.doc["id"] == str(cluster.carol.pk) and again.doc["active"] is True
    assert ScimAccount.objects.get(user=cluster.carol).deleted is None


def test_scim_groups_give_and_take_back_roles_through_the_mapping(scim, tenants):
    GroupRoleMapping.objects.create(group="ml-vision-devs", workspace=tenants.vision, role=Role.MEMBER)
    dana = scim.post("Users", okta_user("dana@corp.example")).doc["id"]
    erin = scim.post("Users", okta_user("erin@corp.example", externalId="00u2")).doc["id"]

    def roles(user_id):
        return {m.workspace.slug: (m.role, m.source) for m in Membership.objects.filter(user_id=user_id)}

    # Okta: the group pushed empty, then its members added
    created = scim.post("Groups", {"schemas": [GROUP], "displayName": "ml-vision-devs", "members": []})
    assert created.status_code == 201, created.content
    group = created.doc["id"]
    added = scim.patch(f"Groups/{group}", patch({"op": "add", "path": "members",
                                                 "value": [{"value": dana, "display": "dana@corp.example"},
                                                           {"value": erin}]}))
    assert added.status_code == 200, added.content
    assert {m["value"] for m in added.doc["members"]} == {dana, erin}
    assert roles(dana) == roles(erin) == {"vision-lab": ("member", "scim")}
    assert scim.get('Groups?filter=displayName eq "ml-vision-devs"').doc["Resources"][0]["id"] == group
    assert scim.get(f"Users/{dana}").doc["groups"][0]["display"] == "ml-vision-devs"

    # Entra: one member removed by filter
    removed = scim.patch(f"Groups/{group}", patch({"op": "Remove", "path": f'members[value eq "{erin}"]'}))
    assert removed.status_code == 200, removed.content
    assert roles(erin) == {} and roles(dana) == {"vision-lab": ("member", "scim")}
    # Okta: remove with a value list
    scim.patch(f"Groups/{group}", patch({"op": "remove", "path": "members", "value": [{"value": dana}]}))
    assert roles(dana) == {}
    scim.patch(f"Groups/{group}", patch({"op": "add", "path": "members", "value": [{"value": dana}]}))
    assert roles(dana) == {"vision-lab": ("member", "scim")}

    # Okta renames the group: the mapping no longer gives the role
    renamed = scim.patch(f"Groups/{group}", patch({"op": "replace", "value": {"id": group,
                                                                              "displayName": "ml-old"}}))
    assert renamed.status_code == 200 and renamed.doc["displayName"] == "ml-old"
    assert roles(dana) == {}
    scim.put(f"Groups/{group}", {"schemas": [GROUP], "displayName": "ml-vision-devs", "members": [{"value": dana}]})
    assert roles(dana) == {"vision-lab": ("member", "scim")}

    assert scim.delete(f"Groups/{group}").status_code == 204
    assert roles(dana) == {} and not ScimGroup.objects.exists()
    assert AuditEntry.objects.filter(username="scim:okta", target_type="scim.scimgroup").count() >= 5


def test_a_membership_made_by_hand_is_left_alone(scim, tenants):
    GroupRoleMapping.objects.create(group="vision-owners", workspace=tenants.vision, role=Role.OWNER)
    group = scim.post("Groups", {"schemas": [GROUP], "displayName": "vision-owners",
                                 "members": [{"value": str(tenants.carol.pk)}]}).doc["id"]
    assert Membership.objects.get(user=tenants.carol, workspace=tenants.vision).role == Role.MEMBER  # by hand
    scim.delete(f"Groups/{group}")
    assert Membership.objects.get(user=tenants.carol, workspace=tenants.vision).role == Role.MEMBER


@pytest.mark.parametrize("path", ["ServiceProviderConfig", "ResourceTypes", "Schemas", "ResourceTypes/User",
                                  "Schemas/urn:ietf:params:scim:schemas:core:2.0:Group"])
def test_discovery_endpoints(scim, path):
    response = scim.get(path)
    assert response.status_code == 200 and response["Content-Type"].startswith(SCIM)
    if path == "ServiceProviderConfig":
        assert response.doc["patch"]["supported"] and response.doc["filter"]["supported"]
        assert response.doc["authenticationSchemes"][0]["type"] == "oauthbearertoken"
    if path == "ResourceTypes":
        assert {r["endpoint"] for r in response.doc["Resources"]} == {"/scim/v2/Users", "/scim/v2/Groups"}


def test_only_a_live_scim_token_opens_scim(client, tenants):
    token, raw = services.create_token(tenants.admin, "okta")
    _api, api_raw = create_api_token(tenants.alice, "owner's")  # a workspace owner's API token
    _staff_api, staff_raw = create_api_token(tenants.admin, "operator's")
    refused = [{}, {"HTTP_AUTHORIZATION": f"Bearer {api_raw}"}, {"HTTP_AUTHORIZATION": f"Bearer {staff_raw}"},
               {"HTTP_AUTHORIZATION": f"Bearer {raw} extra"}, {"HTTP_AUTHORIZATION": f"Basic {raw}"},
               {"HTTP_AUTHORIZATION": f"Bearer scim_{uuid.uuid4().hex}"}]
    for headers in refused:
        for path in ("Users", f"Users/{tenants.bob.pk}", "Groups", "ServiceProviderConfig", "Schemas"):
            answer = client.get(f"/scim/v2/{path}", **headers)
            answer.doc = json.loads(answer.content)
            assert_scim_error(answer, 401)
            assert answer["WWW-Authenticate"].startswith("Bearer")
    # a session, even an operator's, does not open it
    client.force_login(tenants.admin)
    answer = client.post("/scim/v2/Users", json.dumps(okta_user("x@corp.example")), content_type=SCIM)
    assert answer.status_code == 401 and not get_user_model().objects.filter(username="x@corp.example").exists()
    assert client.get("/scim/v2/Users", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    services.revoke_token(tenants.admin, token)
    assert client.get("/scim/v2/Users", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401
    # and a SCIM token opens nothing else
    assert client.get("/api/v1/workspaces/", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401


MALFORMED_USER_BODIES = [
    ("post", "Users", "{not json", "invalidSyntax"),
    ("post", "Users", b"\xff\xfe", "invalidSyntax"),
    ("post", "Users", "[1, 2]", "invalidSyntax"),
    ("post", "Users", {"schemas": [USER], "name": {"givenName": "x"}}, "invalidValue"),  # no userName
    ("post", "Users", {"userName": 5}, "invalidValue"),
    ("post", "Users", {"userName": "x@corp.example", "active": "maybe"}, "invalidValue"),
    ("post", "Users", {"userName": "x@corp.example", "emails": [{"value": "not-an-address"}]}, "invalidValue"),
    ("post", "Users", {"userName": "x@corp.example", "emails": "x"}, "invalidValue"),
    ("post", "Users", {"userName": "x@corp.example", "name": "Dana"}, "invalidValue"),
    ("post", "Users", {"userName": "x" * 200}, "invalidValue"),
    ("patch", "Users/{alice}", {"schemas": [PATCH_OP]}, "invalidSyntax"),
    ("patch", "Users/{alice}", {"Operations": "replace"}, "invalidSyntax"),
    ("patch", "Users/{alice}", {"Operations": [{"op": "frobnicate", "path": "active", "value": False}]},
     "invalidSyntax"),
    ("patch", "Users/{alice}", {"Operations": [{"path": "active", "value": False}]}, "invalidSyntax"),
    ("patch", "Users/{alice}", {"Operations": ["replace"]}, "invalidSyntax"),
    ("patch", "Users/{alice}", {"Operations": [{"op": "replace", "value": False}]}, "invalidSyntax"),
    ("patch", "Users/{alice}", {"Operations": [{"op": "replace", "path": 7, "value": False}]}, "invalidPath"),
    ("patch", "Users/{alice}", {"Operations": [{"op": "replace", "path": "active", "value": "nope"}]},
     "invalidValue"),
    # the first operation is fine, the second is not: neither is applied
    ("patch", "Users/{alice}", {"Operations": [{"op": "replace", "path": "active", "value": False},
                                               {"op": "replace", "path": "userName", "value": ["a"]}]},
     "invalidValue"),
    ("put", "Users/{alice}", {"active": False}, "invalidValue"),
    ("post", "Groups", {"members": []}, "invalidValue"),
    ("post", "Groups", {"displayName": "g", "members": "everyone"}, "invalidValue"),
    ("post", "Groups", {"displayName": "g", "members": [{"value": "999999"}]}, "invalidValue"),
    ("post", "Groups", {"displayName": "g", "members": [{"value": "abc"}]}, "invalidValue"),
    ("post", "Groups", {"displayName": "g", "members": [{"value": "9" * 40}]}, "invalidValue"),
]


@pytest.mark.parametrize(("method", "path", "body", "scim_type"), MALFORMED_USER_BODIES)
def test_bad_bodies_answer_scim_errors_and_change_nothing(scim, tenants, method, path, body, scim_type):
    before = (get_user_model().objects.count(), ScimGroup.objects.count(), AuditEntry.objects.count())
    response = scim.call(method, path.format(alice=tenants.alice.pk), body)
    assert_scim_error(response, 400, scim_type)
    tenants.alice.refresh_from_db()
    assert tenants.alice.is_active and tenants.alice.username == "alice"
    assert (get_user_model().objects.count(), ScimGroup.objects.count(), AuditEntry.objects.count()) == before


def test_bad_group_patches_and_filters_answer_scim_errors(scim, tenants):
    group = scim.post("Groups", {"displayName": "g", "members": [{"value": str(tenants.bob.pk)}]}).doc["id"]
    for operation, scim_type in [({"op": "add", "path": "owner", "value": "x"}, "invalidPath"),
                                 ({"op": "add", "path": 'members[value eq "1"]', "value": []}, "invalidPath"),
                                 ({"op": "add", "path": "members", "value": [1, 2]}, "invalidValue"),
                                 ({"op": "add", "path": "members", "value": [{"value": None}]}, "invalidValue")]:
        assert_scim_error(scim.patch(f"Groups/{group}", patch(operation)), 400, scim_type)
    assert list(ScimGroup.objects.get().members.all()) == [tenants.bob]
    for query in ('userName eq', 'userName zz "x"', '(userName eq "x"', "userName eq \"x\" and"):
        assert_scim_error(scim.get(f"Users?filter={query}"), 400, "invalidFilter")
    assert_scim_error(scim.get("Users?count=x"), 400)
    assert_scim_error(scim.get("Users/abc"), 404)
    assert_scim_error(scim.get(f"Users/{'9' * 30}"), 404)
    assert_scim_error(scim.patch("Groups/999999", patch({"op": "remove", "path": "members"})), 404)
    assert scim.get("Users?count=-5").status_code == 200
    assert_scim_error(scim.get("Bulk"), 501)
    assert_scim_error(scim.get("Users/"), 404)
    assert_scim_error(scim.delete("Nothing/here"), 404)
    assert_scim_error(scim.get("Schemas/urn:nothing"), 404)
    assert_scim_error(scim.get("ResourceTypes/Printer"), 404)


def test_scim_is_csrf_exempt_and_its_answers_to_refusals_before_a_view_are_scim_errors(tenants):
    _token, raw = services.create_token(tenants.admin, "entra")
    browser = Client(enforce_csrf_checks=True)
    created = browser.post("/scim/v2/Users", json.dumps(okta_user("f@corp.example")), content_type=SCIM,
                           HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert created.status_code == 201
    too_large = error_answer("/scim/v2/Users", BodyTooLarge("the body may hold at most 10 bytes"))
    assert too_large.status_code == 413 and json.loads(too_large.content)["schemas"] == [ERROR]
    nul = browser.get("/scim/v2/Users", {"filter": 'userName eq "a\x00"'}, HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert nul.status_code == 400 and json.loads(nul.content)["schemas"] == [ERROR]


@override_settings(RATE_LIMITS={**settings.RATE_LIMITS, "scim": "2/60"})
def test_scim_calls_are_rate_limited_by_token(client, tenants):
    _a, first = services.create_token(tenants.admin, f"okta-{uuid.uuid4().hex[:6]}")
    _b, second = services.create_token(tenants.admin, f"entra-{uuid.uuid4().hex[:6]}")
    codes = [client.get("/scim/v2/Users", HTTP_AUTHORIZATION=f"Bearer {first}").status_code for _ in range(3)]
    assert codes[:2] == [200, 200] and codes[2] == 429
    refused = client.get("/scim/v2/Users", HTTP_AUTHORIZATION=f"Bearer {first}")
    assert json.loads(refused.content)["schemas"] == [ERROR] and int(refused["Retry-After"]) >= 1
    assert client.get("/scim/v2/Users", HTTP_AUTHORIZATION=f"Bearer {second}").status_code == 200


def test_an_operator_makes_lists_and_revokes_scim_tokens_on_the_console(client, tenants):
    client.force_login(tenants.alice)
    assert client.get("/console/identity/scim/").status_code == 403
    assert client.post("/console/identity/scim/", {"name": "sneaky"}).status_code == 403
    client.force_login(tenants.admin)
    made = client.post("/console/identity/scim/", {"name": "okta-production"})
    assert made.status_code == 200
    token = ScimToken.objects.get(name="okta-production")
    raw = made.context["new"]["raw"]
    assert raw.startswith("scim_") and token.digest != raw and raw not in str(token.__dict__)
    assert b"/scim/v2/" in made.content
    listed = client.get("/console/identity/scim/")
    assert b"okta-production" in listed.content and raw.encode() not in listed.content  # shown once
    assert Client().get("/scim/v2/Users", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    assert client.post("/console/identity/scim/", {"name": "  "}).status_code == 400
    assert client.post("/console/identity/scim/", {"revoke": str(token.pk)}).status_code == 302
    assert Client().get("/scim/v2/Users", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401
    assert list(AuditEntry.objects.filter(target_type="scim.scimtoken").values_list("action", flat=True)
                .order_by("id")) == ["create", "revoke"]
    assert raw not in json.dumps(list(AuditEntry.objects.values("message", "changes", "target_repr")))


def test_scim_off_answers_404_even_to_a_valid_token(scim):
    with override_settings(SCIM_ENABLED=False):
        response = scim.get("Users")
        assert_scim_error(response, 404)
        assert "SCIM_ENABLED" in response.doc["detail"]
        assert_scim_error(scim.post("Users", okta_user("off@example.com")), 404)
    assert not get_user_model().objects.filter(username="off@example.com").exists()
    assert scim.get("Users").status_code == 200
