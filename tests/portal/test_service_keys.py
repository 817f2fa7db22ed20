"""A service's own keys and limits on the API and the service page: made (the value shown once, only its
hash stored), listed, revoked, audited; limits set; a viewer may not write, another tenant sees nothing
and bad input changes nothing."""

from __future__ import annotations

import pytest

from billing.models import hash_token
from portal import service_keys
from portal.console.models import AuditEntry
from portal.models import Membership, Role, ServiceKey, TokenScope
from portal.services import create_api_token
from scheduling import services
from scheduling.models import ServiceScale

pytestmark = pytest.mark.django_db

SERVICE = """\
kind: inference
name: chat
queue: vision-lab
model: {registry: hf.co/org/chat-7b, name: chat}
resources: {gpu: 1}
replicas: {min: 0, max: 2}
limits: {requestsPerMinute: 600, tokensPerMinute: 100000}
"""


@pytest.fixture
def service(cluster):
    return services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)


def bearer(user, scope=TokenScope.SUBMIT) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {create_api_token(user, 'api', scope=scope)[1]}"}


def test_the_spec_sets_the_service_limits_and_bad_limits_are_refused(cluster, service):
    scale = ServiceScale.objects.get(job=service)
    assert (scale.requests_per_minute, scale.tokens_per_minute) == (600, 100000)
    from scheduling.spec import SpecError, parse_job_spec

    for bad in ("limits: {requestsPerMinute: 0}", "limits: {requestPerMinute: 5}", "limits: 5"):
        with pytest.raises(SpecError):
            parse_job_spec(SERVICE.replace("limits: {requestsPerMinute: 600, tokensPerMinute: 100000}", bad))


def test_keys_on_the_api_are_shown_once_hashed_listed_revoked_and_audited(client, cluster, service):
    url = f"/api/v1/services/{service.pk}/keys/"
    made = client.post(url, {"name": "chat app", "expires_in_days": 0, "requests_per_minute": 60},
                       content_type="application/json", **bearer(cluster.carol))
    assert made.status_code == 201, made.content
    raw = made.json()["key"]
    assert raw.startswith("gsk_") and made.json()["expires"] is None and made.json()["requests_per_minute"] == 60
    stored = ServiceKey.objects.get()
    assert stored.digest == hash_token(raw) and raw not in str(list(ServiceKey.objects.values()))
    listed = client.get(url, **bearer(cluster.alice)).json()
    assert [k["name"] for k in listed] == ["chat app"] and "key" not in listed[0]
    entry = AuditEntry.objects.get(action="create", target_type="portal.servicekey")
    assert entry.username == "carol" and raw not in str(entry.changes)
    # the key authenticates at /serve/ for this service (portal.service_keys), and last use is kept
    assert service_keys.authenticate(raw).job == service
    assert ServiceKey.objects.get().last_used is not None
    assert client.delete(f"{url}{stored.pk}/", **bearer(cluster.alice)).status_code == 204
    assert client.get(url, **bearer(cluster.alice)).json()[0]["revoked"] is not None
    assert AuditEntry.objects.filter(action="revoke", target_type="portal.servicekey").count() == 1
    with pytest.raises(service_keys.KeyRefused):
        service_keys.authenticate(raw)


def test_another_tenant_a_viewer_and_bad_input_change_nothing(client, cluster, service):
    url = f"/api/v1/services/{service.pk}/keys/"
    key, _ = service_keys.create_key(cluster.alice, service, "app")
    bob = bearer(cluster.bob)
    assert client.get(url, **bob).status_code == 404
    assert client.post(url, {"name": "mine"}, content_type="application/json", **bob).status_code == 404
    assert client.delete(f"{url}{key.pk}/", **bob).status_code == 404
    assert client.post(f"/api/v1/services/{service.pk}/limits/", {"requests_per_minute": 1, "tokens_per_minute": None},
                       content_type="application/json", **bob).status_code == 404
    # bob's own service does not reach alice's key either
    theirs = services.submit_job(user=cluster.bob, workspace=cluster.nlp,
                                 spec=SERVICE.replace("queue: vision-lab", "queue: nlp-group"))
    assert client.delete(f"/api/v1/services/{theirs.pk}/keys/{key.pk}/", **bob).status_code == 404
    Membership.objects.filter(user=cluster.carol, workspace=cluster.vision).update(role=Role.VIEWER)
    viewer = bearer(cluster.carol)
    assert client.get(url, **viewer).status_code == 200
    assert client.post(url, {"name": "x"}, content_type="application/json", **viewer).status_code == 403
    reader = bearer(cluster.alice, TokenScope.READ)
    assert client.post(url, {"name": "x"}, content_type="application/json", **reader).status_code == 403
    for body in ({"name": ""}, {"name": "x", "expires_in_days": 2}, {"name": "x", "requests_per_minute": 0},
                 {"name": "x", "tokens_per_minute": "many"}):
        refused = client.post(url, body, content_type="application/json", **bearer(cluster.alice))
        assert refused.status_code == 400, body
        assert refused["Content-Type"] == "application/problem+json"
    limits = f"/api/v1/services/{service.pk}/limits/"
    assert client.post(limits, {"requests_per_minute": -1, "tokens_per_minute": None},
                       content_type="application/json", **bearer(cluster.alice)).status_code == 400
    assert ServiceKey.objects.count() == 1 and key.revoked is None
    assert ServiceScale.objects.get(job=service).requests_per_minute == 600
    set_ = client.post(limits, {"requests_per_minute": 30, "tokens_per_minute": None},
                       content_type="application/json", **bearer(cluster.alice))
    assert set_.json() == {"requests_per_minute": 30, "tokens_per_minute": None}
    assert service.events.filter(kind="limits").count() == 1


def test_the_service_page_makes_shows_once_and_revokes_keys(client, cluster, service):
    client.force_login(cluster.alice)
    page = f"/services/{service.pk}/"
    assert b'id="service-keys"' in client.get(page).content
    made = client.post(f"{page}keys/", {"name": "web app", "days": "30", "requests_per_minute": ""})
    assert made.status_code == 200 and made["Cache-Control"] == "no-store"
    key = ServiceKey.objects.get()
    raw = made.content.decode().split('id="new-key"')[1].split("<pre>")[1].split("</pre>")[0]
    assert key.digest == hash_token(raw)
    shown = client.get(page).content.decode()
    assert "web app" in shown and key.hint in shown and raw not in shown
    assert client.post(f"{page}keys/", {"name": "", "days": "30"}).status_code == 302
    assert ServiceKey.objects.count() == 1
    assert client.post(f"{page}keys/{key.pk}/revoke/").status_code == 302
    key.refresh_from_db()
    assert key.revoked is not None
    assert client.post(f"{page}limits/", {"requests_per_minute": "120", "tokens_per_minute": ""}).status_code == 302
    assert ServiceScale.objects.get(job=service).requests_per_minute == 120
    assert client.post(f"{page}limits/", {"requests_per_minute": "lots", "tokens_per_minute": ""}).status_code == 302
    assert ServiceScale.objects.get(job=service).requests_per_minute == 120
    # another tenant: the page and its forms are a 404
    client.force_login(cluster.bob)
    assert client.get(page).status_code == 404
    assert client.post(f"{page}keys/", {"name": "x", "days": "30"}).status_code == 404
    assert client.post(f"{page}keys/{key.pk}/revoke/").status_code == 404
    assert client.post(f"{page}limits/", {"requests_per_minute": "1"}).status_code == 404
    assert ServiceKey.objects.count() == 1
