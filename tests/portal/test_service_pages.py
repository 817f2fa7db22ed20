"""The service pages and API over a real service: deployed through the cycle onto a real server process of
the simulated cluster, called, sampled by the autoscaler and billed by the ledger. Its figures (requests,
cost per 1,000 requests, GPU-seconds per request) are the ledger's and the samples' own; members change
its replica range, another tenant sees nothing of it, and bad input changes nothing."""

from __future__ import annotations

import time
from decimal import Decimal

import httpx
import pytest

from billing.ledger.posting import post_ledger
from billing.ledger.selectors import job_totals
from portal.models import Membership, Role
from scheduling import inference, services
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import JobState, ServiceSample, ServiceScale

SERVICE = """\
kind: inference
name: chat
queue: vision-lab
nodePool: h100
model: {registry: hf.co/org/chat-7b, name: chat}
resources: {gpu: 1}
replicas: {min: 1, max: 2}
target: {rps: 5}
"""
CALLS = 30


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=1, failure_rate=0, clock=clock, server_startup_s=0)


@pytest.fixture
def called(cluster, backend, clock, run):
    """The service, running for an hour, having answered CALLS requests, sampled and billed."""
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)
    run(backend, clock)                      # evaluated once (no traffic yet), then bound and launched
    deadline = time.monotonic() + 20
    endpoints = []
    while not endpoints:
        assert time.monotonic() < deadline, "the server never listened"
        time.sleep(0.1)
        run(backend, clock)
        endpoints = inference.ready_endpoints(job, backend)
    [endpoint] = endpoints
    with httpx.Client(timeout=30) as client:
        for _ in range(CALLS):
            answer = client.post(endpoint.url + "v1/completions", json={"model": "chat", "prompt": "hi", "max_tokens": 2},
                                 headers={"Authorization": f"Bearer {endpoint.token}"})
            assert answer.status_code == 200, answer.text
    clock.advance(3600)
    run(backend, clock)                      # the evaluation that counts them
    post_ledger(now=clock.now)
    job.refresh_from_db()
    return job


@pytest.mark.django_db
def test_a_services_figures_come_from_its_samples_and_the_ledger(cluster, called, client):
    total, currency = job_totals([called.pk])[called.pk]
    assert total > 0 and currency == "USD"
    samples = ServiceSample.objects.filter(job=called)
    assert sum(s.requests for s in samples) == CALLS
    assert sum(s.gpu_seconds for s in samples) == pytest.approx(3600, rel=0.01)   # one whole GPU for an hour

    client.force_login(cluster.alice)
    [listed] = client.get("/api/v1/services/", {"workspace": "vision-lab"}).json()["results"]
    assert (listed["id"], listed["requests"], listed["running_replicas"]) == (called.pk, CALLS, 1)
    assert (listed["min_replicas"], listed["max_replicas"]) == (1, 2)
    assert Decimal(listed["cost_per_1000_requests"]) == (total * 1000 / CALLS).quantize(Decimal("0.0001"))
    assert listed["gpu_seconds_per_request"] == pytest.approx(3600 / CALLS, rel=0.01)
    assert listed["endpoint"].endswith("/serve/vision-lab/chat/")

    detail = client.get(f"/api/v1/services/{called.pk}/").json()
    assert detail["series"]["cost"][-1] == str(total) and sum(detail["series"]["replicas"]) >= 1

    page = client.get("/services/", {"workspace": "vision-lab"}).content.decode()
    assert f'data-job="{called.pk}"' in page and "/serve/vision-lab/chat/" in page
    service_page = client.get(f"/services/{called.pk}/").content.decode()
    assert "/serve/vision-lab/chat/v1/completions" in service_page and "Bearer $GPU_PLATFORM_TOKEN" in service_page
    assert 'id="service-series-data"' in service_page and 'id="scale-form"' in service_page
    series = client.get(f"/services/{called.pk}/series.json").json()
    assert series["requests"] == CALLS and series["state"] == JobState.RUNNING


@pytest.mark.django_db
def test_members_change_the_range_and_bad_input_changes_nothing(cluster, called, client):
    client.force_login(cluster.alice)
    changed = client.post(f"/api/v1/services/{called.pk}/scale/", {"min_replicas": 0, "max_replicas": 3},
                          content_type="application/json")
    assert changed.status_code == 200, changed.content
    scale = ServiceScale.objects.get(job=called)
    assert (scale.min_replicas, scale.max_replicas) == (0, 3)
    called.refresh_from_db()
    assert (called.roles[0]["scale_min"], called.roles[0]["scale_max"]) == (0, 3)

    for body in ({"min_replicas": 3, "max_replicas": 1}, {"min_replicas": -1, "max_replicas": 2},
                 {"min_replicas": 0, "max_replicas": 1000}, {"min_replicas": "x"}, {}):
        refused = client.post(f"/api/v1/services/{called.pk}/scale/", body, content_type="application/json")
        assert refused.status_code == 400 and refused["content-type"] == "application/problem+json", body
    page = client.post(f"/services/{called.pk}/scale/", {"min": "4", "max": "2"}, follow=True)
    assert page.status_code == 200 and "was not changed" in page.content.decode()
    scale.refresh_from_db()
    assert (scale.min_replicas, scale.max_replicas) == (0, 3)


@pytest.mark.django_db
def test_another_tenant_and_a_viewer(cluster, called, client):
    client.force_login(cluster.bob)
    for url in (f"/services/{called.pk}/", f"/services/{called.pk}/series.json", f"/api/v1/services/{called.pk}/"):
        assert client.get(url).status_code == 404, url
    assert client.post(f"/api/v1/services/{called.pk}/scale/", {"min_replicas": 0, "max_replicas": 1},
                       content_type="application/json").status_code == 404
    assert client.post(f"/api/v1/services/{called.pk}/delete/").status_code == 404
    assert client.get("/api/v1/services/").json()["results"] == []
    assert client.get("/api/v1/services/", {"workspace": "vision-lab"}).status_code == 404

    Membership.objects.filter(user=cluster.carol, workspace=cluster.vision).update(role=Role.VIEWER)
    client.force_login(cluster.carol)
    assert client.get(f"/services/{called.pk}/").status_code == 200
    assert client.post(f"/api/v1/services/{called.pk}/scale/", {"min_replicas": 0, "max_replicas": 1},
                       content_type="application/json").status_code == 403
    assert client.post(f"/services/{called.pk}/delete/").status_code == 403
    called.refresh_from_db()
    assert called.state == JobState.RUNNING
    assert (ServiceScale.objects.get(job=called).max_replicas) == 2


@pytest.mark.django_db
def test_deleting_a_service_ends_it_and_bills_what_it_held(cluster, called, client):
    client.force_login(cluster.alice)
    deleted = client.post(f"/api/v1/services/{called.pk}/delete/")
    assert deleted.status_code == 200 and deleted.json()["state"] == JobState.CANCELLED
    called.refresh_from_db()
    assert called.final_cost is not None and called.final_cost >= job_totals([called.pk])[called.pk][0]
    assert client.get("/api/v1/services/").json()["results"] == []
