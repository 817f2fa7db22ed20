"""Every URL pattern of the URL conf, read from the resolver, each path parameter filled with an
object of the OTHER tenant (bob's nlp-group), requested by alice: she is never shown, never lets
change and never exports bob's objects.

No list of endpoints is kept here: a new pattern is swept as soon as it is routed, and a
parameter this file cannot fill fails the test until a filler is added to FILLERS."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.http import int_to_base36
from tests_reliability_helpers import response_body

METHODS = ("get", "post", "delete")
STAFF_ONLY = ("/console/", "/admin/")
DOORS = {"login", "logout"}  # the admin's own login and logout show nothing to anyone
# Bob's objects by the name of the parameter that names them; `route` tells the uuid of an export
# from the int of a job where both are called pk.
FILLERS = {
    "slug": lambda bob, route: bob["workspace"].slug,
    "pk": lambda bob, route: (bob["export"].pk if "exports/" in route
                              else bob["service_account_token"].pk if "tokens/" in route
                              else bob["notebook"].pk if "notebooks/" in route
                              else bob["service"].pk if "services/" in route
                              else bob["schedule"].pk if "schedules/" in route else bob["job"].pk),
    "action": lambda bob, route: "revoke" if "invitations/" in route else "stop",
    "month": lambda bob, route: bob["month"],
    # Staff-only areas: any of bob's objects, alice must be refused before it is looked at.
    "name": lambda bob, route: (bob["notebook"].name if route.startswith("nb/")
                                else bob["service"].name if route.startswith("serve/")
                                else bob["volume"].name if "/volumes/" in route
                                else bob["dataset"].name if "/datasets/" in route
                                else bob["secret"].name if "/secrets/" in route
                                else bob["service_account"].name if "/service-accounts/" in route
                                else bob["workspace"].slug),
    "token_id": lambda bob, route: bob["service_account_token"].pk,
    "key_id": lambda bob, route: bob["service_key"].pk,
    "number": lambda bob, route: 1,  # bob's dataset's first version
    "server": lambda bob, route: bob["registry"].server,
    "grantee": lambda bob, route: bob["grantee"],  # alice's workspace: she may not share bob's dataset with it
    "app_label": lambda bob, route: "portal",
    "object_id": lambda bob, route: bob["workspace"].pk,
    "content_type_id": lambda bob, route: 1,
    "id": lambda bob, route: bob["user"].pk,
    "username": lambda bob, route: bob["user"].username,
    "url": lambda bob, route: f"portal/workspace/{bob['workspace'].pk}/change/",
    "member_id": lambda bob, route: bob["membership"].pk,
    "session_id": lambda bob, route: bob["session"].pk,
    "invitation_id": lambda bob, route: bob["invitation"].pk,
    # the link of bob's invitation: alice, signed in, is not the invited address
    "token": lambda bob, route: bob["invitation_token"],
    # /nb/<workspace>/<name>/<path>: bob's notebook through the portal's proxy
    "workspace": lambda bob, route: bob["workspace"].slug,
    "path": lambda bob, route: "lab",
    # /scim/v2/Users/<uuid> and the like: bob's account (SCIM is operator-level: alice's token is refused)
    "uuid": lambda bob, route: bob["user"].pk,
    "provider_id": lambda bob, route: "corp",
    # a password reset link for bob's account, with a key nobody sent
    "uidb36": lambda bob, route: int_to_base36(bob["user"].pk),
    "key": lambda bob, route: "made-up-key",  # an OIDC provider's sign-in: none configured here, so 404
}
_PARAM = re.compile(r"<(?:(?P<conv>\w+):)?(?P<name>\w+)>|\(\?P<(?P<rname>\w+)>[^)]*\)")


def url_patterns(resolver=None, prefix: str = ""):
    """(route, pattern) for every leaf of the URL conf, routes joined along the way."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern).lstrip("^").rstrip("$").replace("\\Z", "")
        if isinstance(entry, URLResolver):
            yield from url_patterns(entry, route)
        elif isinstance(entry, URLPattern):
            yield route, entry


def fill(route: str, bob: dict) -> str:
    def one(match):
        name = match["name"] or match["rname"]
        if name not in FILLERS:
            raise LookupError(name)
        return str(FILLERS[name](bob, route))

    return "/" + _PARAM.sub(one, route)


@pytest.fixture
def bob_world(cluster, clock):
    from billing.models import Budget, ReportExport
    from billing.services import submit_quoted_job
    from portal.services import set_time_zone
    from scheduling.spec.examples import CLEAN_YAML

    job = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, option=None,
                            spec=CLEAN_YAML.replace("vision-lab", "nlp-group").replace("bert-finetune", "bob-secret-run"))
    export = ReportExport.objects.create(user=cluster.bob, filters={"workspace": "nlp-group"},
                                         state=ReportExport.State.DONE, file_name="bob-secret.xlsx")
    Budget.objects.create(workspace=cluster.nlp, amount=Decimal("1234.00"), currency="USD")
    set_time_zone(cluster.bob, "Europe/London")
    _bob_notifications(cluster)
    notebook = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp,
                                 spec="kind: notebook\nname: bob-secret-notebook\nqueue: nlp-group\n")
    service = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp,
                                spec="kind: inference\nname: bob-secret-service\nqueue: nlp-group\n"
                                     "model: {path: /models/secret}\nresources: {gpu: 1}\n")
    from portal.service_keys import create_key

    service_key = create_key(cluster.bob, service, "bob's app")[0]
    _bob_billing_account(cluster, clock)
    return {"user": cluster.bob, "workspace": cluster.nlp, "job": job, "export": export, "month": clock.now.strftime("%Y-%m"),
            "membership": cluster.nlp.memberships.get(user=cluster.bob), "notebook": notebook, "service": service,
            "service_key": service_key,
            "grantee": cluster.vision.slug, "session": _bob_session(cluster), **_bob_storage(cluster),
            "schedule": _bob_schedule(cluster)}


def _bob_billing_account(cluster, clock):
    """A prepaid billing account paying for nlp-group, named as the workspace so the slug filler names it."""
    from billing.accounts import assign_workspace, save_account
    from billing.models import CreditTopUp

    account = save_account(slug=cluster.nlp.slug, name="bob-secret-account", currency="USD", prepaid=True)
    assign_workspace(cluster.nlp, account)
    CreditTopUp.objects.create(account=account, amount=Decimal("4321.00"), currency="USD", at=clock.now)


def _bob_schedule(cluster):
    """Bob's schedule, with one run."""
    from billing.services import submit_quoted_schedule
    from scheduling import schedules

    schedule = submit_quoted_schedule(user=cluster.bob, workspace=cluster.nlp, spec=(
        "name: bob-secret-schedule\nqueue: nlp-group\nroles: [{name: main, image: busybox, resources: {gpu: 1}}]\n"
        "schedule: {cron: '0 2 * * *', timeZone: Asia/Shanghai}\n"))
    schedules.trigger_schedule(user=cluster.bob, schedule=schedule)
    return schedule


def _bob_session(cluster):
    """Bob signed in elsewhere: his session in the store and its row."""
    from django.test import Client

    from portal.models import UserSession

    Client().force_login(cluster.bob)
    return UserSession.objects.get(user=cluster.bob)


def _bob_storage(cluster) -> dict:
    """Bob's volume, dataset version, secret and registry credential."""
    from scheduling import secrets
    from scheduling.models import Dataset, DatasetVersion, Volume

    volume = Volume.objects.create(workspace=cluster.nlp, name="bob-secret-volume", size_gib=1)
    dataset = Dataset.objects.create(workspace=cluster.nlp, name="bob-secret-dataset")
    DatasetVersion.objects.create(dataset=dataset, number=1, source_volume=volume.name)
    secret, _new = secrets.set_secret(cluster.bob, cluster.nlp, "bob-token", "bob-secret-value-5e1f")
    registry = secrets.set_registry(cluster.bob, cluster.nlp, "registry.nlp.example", "bob", "bob-secret-pass-77c2")
    registry = registry[0] if isinstance(registry, tuple) else registry
    return {"volume": volume, "dataset": dataset, "secret": secret, "registry": registry, **_bob_service_account(cluster)}


def _bob_service_account(cluster) -> dict:
    """Bob's service account and its token."""
    from portal import service_accounts

    account = service_accounts.create_service_account(cluster.bob, cluster.nlp, "bob-secret-robot", "member")
    token, _raw = service_accounts.create_token(cluster.bob, cluster.nlp, account.name, "bob-secret-ci")
    return {"service_account": account, "service_account_token": token, **_bob_invitation(cluster)}


def _bob_invitation(cluster) -> dict:
    """Bob's pending invitation of an outsider, and a token of its link (its e-mail is sent after commit)."""
    from billing.models import hash_token
    from portal import invitations
    from portal.models import Invitation

    invitation = invitations.invite(cluster.bob, cluster.nlp, "bob-secret-invitee@nlp.example", "member",
                                    base_url="http://testserver/")
    token = "bob-invitation-link-token"
    Invitation.objects.filter(pk=invitation.pk).update(digest=hash_token(token))
    return {"invitation": invitation, "invitation_token": token}


def _bob_notifications(cluster):
    """Bob's webhook with a delivery, a notification and a choice of his, for the sweep to leave alone."""
    from portal.models import Notification, NotificationPreference, Webhook, WebhookDelivery

    hook = Webhook.objects.create(workspace=cluster.nlp, url="https://nlp.example/hook", secret="whsec_bob-secret-key")
    WebhookDelivery.objects.create(webhook=hook, event="job.failed", body='{"bob-secret-run": 1}')
    Notification.objects.create(user=cluster.bob, workspace=cluster.nlp, event="job.failed",
                                subject="bob-secret-run failed")
    NotificationPreference.objects.create(user=cluster.bob, event="job.failed", email=False, in_app=True)


def _bob_state(bob):
    """Everything of bob's a request could change or export."""
    from django.contrib.sessions.models import Session

    from billing.models import BillingAccount, Budget, CreditTopUp, ReportExport
    from portal.models import (
        ApiToken,
        Invitation,
        Membership,
        Notification,
        NotificationPreference,
        ServiceAccount,
        ServiceKey,
        UserPreference,
        UserSession,
        Webhook,
        WebhookDelivery,
        Workspace,
    )
    from scheduling.models import (
        Dataset,
        DatasetGrant,
        Job,
        RegistryCredential,
        Schedule,
        ScheduleFiring,
        Volume,
        WorkspaceSecret,
    )

    workspace = bob["workspace"]
    return (
        list(Workspace.objects.filter(pk=workspace.pk).values()),
        list(Membership.objects.filter(workspace=workspace).values()),
        list(Job.objects.filter(workspace=workspace).values().order_by("pk")),
        list(Budget.objects.filter(workspace=workspace).values("amount", "currency", "block_at_limit")),
        list(ReportExport.objects.filter(user__username="bob").values().order_by("pk")),
        # alice may make exports of her own, never of bob's workspace
        ReportExport.objects.filter(filters__workspace=workspace.slug).exclude(user__username="bob").count(),
        list(ApiToken.objects.filter(user__username="bob").values()),
        list(ApiToken.objects.filter(user__service_account__workspace=workspace).values()),
        list(ServiceAccount.objects.filter(workspace=workspace).values()),
        list(Invitation.objects.filter(workspace=workspace).values()),
        list(UserPreference.objects.filter(user__username="bob").values()),
        list(Webhook.objects.filter(workspace=workspace).values()),
        list(WebhookDelivery.objects.filter(webhook__workspace=workspace).values().order_by("pk")),
        list(Notification.objects.filter(user__username="bob").values().order_by("pk")),
        list(NotificationPreference.objects.filter(user__username="bob").values().order_by("pk")),
        list(Volume.objects.filter(workspace=workspace).values().order_by("pk")),
        list(Dataset.objects.filter(workspace=workspace).values().order_by("pk")),
        list(DatasetGrant.objects.filter(dataset__workspace=workspace).values().order_by("pk")),
        list(WorkspaceSecret.objects.filter(workspace=workspace).values().order_by("pk")),
        list(ServiceKey.objects.filter(job__workspace=workspace).values().order_by("pk")),
        list(RegistryCredential.objects.filter(workspace=workspace).values().order_by("pk")),
        list(UserSession.objects.filter(user__username="bob").values().order_by("pk")),
        Session.objects.filter(session_key__in=UserSession.objects.filter(user__username="bob")
                               .values("session_key")).count(),
        list(Schedule.objects.filter(workspace=workspace).values().order_by("pk")),
        list(ScheduleFiring.objects.filter(schedule__workspace=workspace).values().order_by("pk")),
        list(BillingAccount.objects.filter(workspace_links__workspace=workspace).values().order_by("pk")),
        list(CreditTopUp.objects.filter(account__workspace_links__workspace=workspace).values().order_by("pk")),
    )




def _secrets(bob) -> list[bytes]:
    return [s.encode() for s in (bob["workspace"].name, bob["job"].name, bob["export"].file_name, "1234.00",
                                 "whsec_bob-secret-key", "nlp.example", bob["notebook"].name, "bob-secret-volume",
                                 "bob-secret-dataset", "bob-secret-value-5e1f", "bob-secret-pass-77c2",
                                 "bob-secret-robot", "bob-secret-ci", "bob-secret-invitee", "bob-secret-schedule",
                                 "bob-secret-account", "4321.00")]


def test_alice_never_sees_changes_or_exports_bobs_objects(client, cluster, bob_world):
    from portal.services import create_api_token

    alice_token = create_api_token(cluster.alice, "sweep")[1]
    patterns = list(url_patterns())
    unfillable, leaks, requests = [], [], 0
    before = _bob_state(bob_world)
    # Bodies and queries also point at bob's things, for views that read them from there.
    data = {"workspace": bob_world["workspace"].slug, "job": str(bob_world["job"].pk), "amount": "1",
            "currency": "USD", "spec": "name: x", "month": bob_world["month"],
            "from": str(bob_world["job"].pk)}  # the Submit page's clone of a job
    for route, pattern in patterns:
        try:
            url = fill(route, bob_world)
        except LookupError as missing:
            unfillable.append(f"/{route} ({pattern.name}): no filler for parameter {missing}")
            continue
        for method in METHODS:
            client.force_login(cluster.alice)  # /logout/ may have ended the session
            # the API and service endpoints take her token (a service endpoint takes nothing else)
            kwargs = ({"HTTP_AUTHORIZATION": f"Bearer {alice_token}"} if url.startswith(("/api/", "/serve/", "/scim/"))
                      else {})
            if url.startswith("/api/") and method != "get":
                kwargs["content_type"] = "application/json"  # the API reads JSON bodies only (else 415)
            response = getattr(client, method)(url, data, **kwargs)
            requests += 1
            body = response_body(response)
            where = f"{method.upper()} {url} ({pattern.name}) -> {response.status_code}"
            if url.startswith("/scim/"):  # only a SCIM token opens it: not her API token, not her session
                if response.status_code != 401:
                    leaks.append(f"{where}: SCIM not refused to a workspace owner's API token")
            elif url.startswith(STAFF_ONLY) and pattern.name not in DOORS:
                if not (response.status_code in (403, 404, 405)
                        or (response.status_code == 302 and "login" in response["Location"])):
                    leaks.append(f"{where}: a staff-only page not refused to alice")
            elif _PARAM.search(route):
                if response.status_code not in (400, 403, 404, 405):
                    leaks.append(f"{where}: bob's object not refused")
            # a page may echo its own URL (the 404 page does); anything else of bob's is a leak
            if leaked := [s.decode() for s in _secrets(bob_world) if s in body and s not in url.encode()]:
                leaks.append(f"{where}: body shows {leaked}")
    assert not unfillable, "parameters the sweep cannot fill (add a filler):\n" + "\n".join(unfillable)
    assert not leaks, "\n".join(leaks)
    assert _bob_state(bob_world) == before, "a request as alice changed or exported bob's data"
    print(f"cross-tenant sweep: {len(patterns)} URL patterns, {requests} requests")
    assert len(patterns) > 50 and requests >= 3 * len(patterns) - 3 * len(unfillable)


# The tenant jobs list's query parameters name workspaces, queues, people and jobs: each given one of
# bob's, alice's list and her bulk cancel show and change nothing of his.
JOB_LIST_FILLERS = {
    "workspace": lambda bob: bob["workspace"].slug,
    "queue": lambda bob: bob["job"].queue.name,
    "submitter": lambda bob: bob["user"].username,
    "q": lambda bob: bob["job"].name,
    "job": lambda bob: bob["job"].pk,
}


def test_the_jobs_list_parameters_never_reach_bobs_jobs(client, cluster, bob_world):
    before = _bob_state(bob_world)
    client.force_login(cluster.alice)
    leaks = []
    for name, value in JOB_LIST_FILLERS.items():
        for method, url, data in (("get", "/jobs/", {name: value(bob_world)}),
                                  ("get", "/jobs/", {name: value(bob_world), "partial": "1"}),
                                  ("get", "/jobs/cancel/", {name: value(bob_world), "job": bob_world["job"].pk}),
                                  ("post", "/jobs/cancel/", {name: value(bob_world), "job": bob_world["job"].pk,
                                                             "confirm": "1"})):
            response = getattr(client, method)(url, data, follow=method == "post")
            body = response_body(response)
            where = f"{method.upper()} {url} {name}={value(bob_world)} -> {response.status_code}"
            if response.status_code >= 500:
                leaks.append(f"{where}: a server error")
            if f'data-job="{bob_world["job"].pk}"'.encode() in body and url == "/jobs/":
                leaks.append(f"{where}: bob's job listed")
            sent = str(value(bob_world)).encode()  # the search box shows what was asked, nothing more
            if leaked := [s.decode() for s in _secrets(bob_world) if s != sent and s in body]:
                leaks.append(f"{where}: body shows {leaked}")
    assert not leaks, "\n".join(leaks)
    assert _bob_state(bob_world) == before, "alice's jobs list changed bob's data"
