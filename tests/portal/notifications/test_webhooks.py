"""A workspace's webhook gets its events as JSON signed with HMAC-SHA256 (`X-GPU-Signature`), posted
to a real HTTP server here; failures are retried with backoff and never hold up other webhooks; the
other tenant's webhook never hears of vision-lab. Owners manage it on the workspace's Webhook page."""

import hashlib
import hmac
import json

import pytest
from django.core.exceptions import PermissionDenied
from tests_job_specs import job_spec

from billing.reports.services import check_budgets, set_budget
from billing.services import submit_quoted_job
from portal.console.models import AuditEntry
from portal.models import Webhook, WebhookDelivery
from portal.notifications import services, signing
from portal.notifications.tasks import deliver_webhook
from scheduling.errors import DomainError
from tests.billing.reports.tests_reports_helpers import charge


def hook(workspace, url, owner):
    made, secret = services.save_webhook(owner, workspace, url)
    assert secret is not None and made.secret == secret
    return made


def budget_alert(cluster, workspace, owner):
    set_budget(user=owner, workspace=workspace, amount="10")
    job = submit_quoted_job(user=owner, workspace=workspace, spec=job_spec("spend", queue=workspace.slug))
    charge(job, "6")
    check_budgets()


# --------------------------------------------------------------------------- signatures


def test_the_signature_is_the_hmac_sha256_of_the_body():
    body = b'{"event":"job.failed"}'
    expected = "sha256=" + hmac.new(b"whsec_k", body, hashlib.sha256).hexdigest()
    assert signing.signature("whsec_k", body) == expected
    assert signing.verify("whsec_k", body, expected)
    assert not signing.verify("whsec_other", body, expected)
    assert not signing.verify("whsec_k", body + b" ", expected)
    assert not signing.verify("whsec_k", body, None) and not signing.verify("whsec_k", body, "")


def test_a_delivery_is_signed_json_the_receiver_can_verify(cluster, webhook_receiver, eager_tasks,
                                                          django_capture_on_commit_callbacks):
    made = hook(cluster.vision, webhook_receiver.url, cluster.alice)
    with django_capture_on_commit_callbacks(execute=True):
        budget_alert(cluster, cluster.vision, cluster.alice)
    (got,) = webhook_receiver.received
    assert got.path == "/hooks/gpu" and got.headers["Content-Type"] == "application/json"
    assert signing.verify(made.secret, got.body, got.headers[signing.SIGNATURE_HEADER])
    assert not signing.verify(Webhook.new_secret(), got.body, got.headers[signing.SIGNATURE_HEADER])
    delivery = WebhookDelivery.objects.get()
    assert got.headers[signing.EVENT_HEADER] == "budget.alert" and got.headers[signing.DELIVERY_HEADER] == str(delivery.pk)
    payload = got.json
    assert payload["id"] == str(delivery.pk) and payload["event"] == "budget.alert"
    assert payload["workspace"] == "vision-lab" and payload["data"]["percent"] == "60.0"
    assert payload["data"]["threshold"] == 50 and payload["data"]["currency"] == "USD"
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("delivered", 1, 200)


# --------------------------------------------------------------------------- retries


def test_a_failed_delivery_is_retried_with_backoff_until_it_gets_through(cluster, webhook_receiver, clock, settings):
    webhook_receiver.statuses = [500, 503, 200]
    hook(cluster.vision, webhook_receiver.url, cluster.alice)
    budget_alert(cluster, cluster.vision, cluster.alice)
    delivery = WebhookDelivery.objects.get()
    first = services.attempt_delivery(delivery.pk)
    delivery.refresh_from_db()
    assert first.retry_in == settings.WEBHOOK_RETRY_BASE_S == 30
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("pending", 1, 500)
    assert delivery.last_error == "failed" and (delivery.next_attempt - clock.now).total_seconds() == 30
    assert services.attempt_delivery(delivery.pk).retry_in == 60
    assert services.attempt_delivery(delivery.pk).state == "delivered"
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.last_status) == ("delivered", 3, 200)
    bodies = {r.body for r in webhook_receiver.received}
    assert len(webhook_receiver.received) == 3 and len(bodies) == 1  # the same signed body each time
    assert services.attempt_delivery(delivery.pk).state == "gone"  # delivered: never sent again
    assert len(webhook_receiver.received) == 3


def test_the_task_retries_and_gives_up_after_the_last_attempt(cluster, webhook_receiver, eager_tasks, settings):
    settings.WEBHOOK_MAX_ATTEMPTS = 4
    webhook_receiver.statuses = [500]
    hook(cluster.vision, webhook_receiver.url, cluster.alice)
    budget_alert(cluster, cluster.vision, cluster.alice)
    delivery = WebhookDelivery.objects.get()
    assert deliver_webhook.delay(str(delivery.pk)).get() == "failed"
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts, delivery.next_attempt) == ("failed", 4, None)
    assert len(webhook_receiver.received) == 4


def test_a_dead_webhook_holds_up_no_other(cluster, webhook_receiver, closed_port_url, eager_tasks,
                                          django_capture_on_commit_callbacks):
    hook(cluster.nlp, closed_port_url, cluster.bob)
    hook(cluster.vision, webhook_receiver.url, cluster.alice)
    with django_capture_on_commit_callbacks(execute=True):
        budget_alert(cluster, cluster.nlp, cluster.bob)
        budget_alert(cluster, cluster.vision, cluster.alice)
    dead = WebhookDelivery.objects.get(webhook__workspace=cluster.nlp)
    live = WebhookDelivery.objects.get(webhook__workspace=cluster.vision)
    assert dead.state == "failed" and dead.last_error == "failed" and dead.last_status is None  # never how
    assert live.state == "delivered" and [r.json["workspace"] for r in webhook_receiver.received] == ["vision-lab"]


def test_a_delivery_whose_task_was_lost_is_sent_again(cluster, webhook_receiver, clock, eager_tasks):
    hook(cluster.vision, webhook_receiver.url, cluster.alice)
    budget_alert(cluster, cluster.vision, cluster.alice)  # no commit here: its task was never sent
    assert webhook_receiver.received == [] and services.resend_waiting(now=clock.now) == (0, 0)
    clock.advance(6 * 60)
    assert services.resend_waiting(now=clock.now) == (0, 1)
    assert WebhookDelivery.objects.get().state == "delivered" and len(webhook_receiver.received) == 1


# --------------------------------------------------------------------------- tenants


def test_job_events_go_only_to_their_workspaces_webhook(cluster, webhook_receiver, closed_port_url, clock, run,
                                                         eager_tasks):
    from scheduling.backends.simulated.backend import SimulatedBackend

    hook(cluster.vision, webhook_receiver.url, cluster.alice)
    hook(cluster.nlp, closed_port_url, cluster.bob)
    backend = SimulatedBackend(speedup=3600, failure_rate=1, clock=clock)
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("vision-run"))
    for step in (0, 1.5, 5):
        clock.advance(step)
        run(backend, clock)
    events = list(WebhookDelivery.objects.order_by("created").values_list("webhook__workspace__slug", "event"))
    assert events == [("vision-lab", "job.started"), ("vision-lab", "job.failed")]
    body = json.loads(WebhookDelivery.objects.get(event="job.failed").body)
    assert body["data"]["job"] == job.pk and body["data"]["state"] == "Failed" and body["data"]["submitted_by"] == "alice"
    assert [r.json["event"] for r in webhook_receiver.received] == ["job.started", "job.failed"]


def test_only_an_owner_manages_the_webhook(tenants, webhook_receiver):
    for user in (tenants.carol, tenants.finance, tenants.bob):
        with pytest.raises(PermissionDenied):
            services.save_webhook(user, tenants.vision, webhook_receiver.url)
    assert not Webhook.objects.exists()
    with pytest.raises(DomainError) as bad:
        services.save_webhook(tenants.alice, tenants.vision, "ftp://example.com/x")
    assert "http:// or https://" in bad.value.errors["url"][0]
    made = hook(tenants.vision, webhook_receiver.url, tenants.alice)
    assert services.save_webhook(tenants.alice, tenants.vision, webhook_receiver.url + "2")[1] is None
    assert services.new_webhook_secret(tenants.alice, tenants.vision) != made.secret
    services.remove_webhook(tenants.alice, tenants.vision)
    assert [(e.action, e.source) for e in AuditEntry.objects.filter(target_type="portal.webhook").order_by("id")] == [
        ("create", "tenant"), ("change", "tenant"), ("change", "tenant"), ("delete", "tenant")]


# --------------------------------------------------------------------------- the page


def test_the_owner_makes_the_webhook_sees_its_secret_once_and_pings_it(client, tenants, webhook_receiver,
                                                                      eager_tasks, django_capture_on_commit_callbacks):
    client.force_login(tenants.alice)
    assert client.get("/w/vision-lab/webhook/").status_code == 200
    bad = client.post("/w/vision-lab/webhook/", {"url": "not a url", "active": "on"})
    assert bad.status_code == 400
    assert "http:// or https://" in bad.content.decode().split('data-field="url"')[1].split("</ul>")[0]
    made = client.post("/w/vision-lab/webhook/", {"url": webhook_receiver.url, "active": "on"}).content.decode()
    secret = Webhook.objects.get(workspace=tenants.vision).secret
    assert 'id="new-secret"' in made and secret in made
    assert secret not in client.get("/w/vision-lab/webhook/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        with_ping = client.post("/w/vision-lab/webhook/", {"action": "ping"}, follow=True)
    assert "Test event queued" in with_ping.content.decode()
    (got,) = webhook_receiver.received
    assert got.json["event"] == "ping" and signing.verify(secret, got.body, got.headers[signing.SIGNATURE_HEADER])
    assert 'class="badge good">Delivered' in client.get("/w/vision-lab/webhook/").content.decode()


def test_members_get_403_and_outsiders_404_on_the_webhook_page(client, tenants, webhook_receiver):
    hook(tenants.nlp, webhook_receiver.url, tenants.bob)
    client.force_login(tenants.carol)
    assert client.get("/w/vision-lab/webhook/").status_code == 403
    assert client.post("/w/vision-lab/webhook/", {"url": webhook_receiver.url}).status_code == 403
    client.force_login(tenants.alice)
    assert client.get("/w/nlp-group/webhook/").status_code == 404
    assert client.post("/w/nlp-group/webhook/", {"action": "remove"}).status_code == 404
    assert client.post("/w/nlp-group/webhook/", {"action": "ping"}).status_code == 404
    assert Webhook.objects.filter(workspace=tenants.nlp).exists() and not WebhookDelivery.objects.exists()
