"""D1: a 16-GPU gang at queue position 1 was passed by later one-GPU jobs of the same priority, again and again,
and started long after its range. The position is the order the scheduler tries jobs; the page and the API
say that smaller jobs may start first; after BACKFILL_PATIENCE the gang gets GPUs reserved and starts inside
the range the forecast gives it then. The real cycle runs the simulated cluster on the test clock."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from billing.services import submit_quoted_job
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.forecast import pending_outlook
from scheduling.models import JobEvent, JobState

SPEC = """name: {name}
preemptible: true
expectedDuration: {duration}
roles:
  - name: main
    image: busybox
    resources: {{gpu: {gpus}}}
    replicas: {{min: {replicas}, max: {replicas}}}
    nodePool: h100
"""
PATIENCE_S = 120


def submit(cluster, name, *, gpus=1, replicas=1, duration="60m"):
    return submit_quoted_job(user=cluster.alice, workspace=cluster.vision, option="h100.exclusive.now",
                             spec=SPEC.format(name=name, gpus=gpus, replicas=replicas, duration=duration))


def scheduled_at(job):
    return JobEvent.objects.filter(job=job, kind="scheduled").order_by("id").values_list("time", flat=True).first()


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock)  # a 1 h job runs 60 s


def play(cluster, backend, clock, run, *, patience):
    """The h100 pool's 16 GPUs busy with one-GPU jobs ending one by one, the gang submitted, then a one-GPU
    job of the same priority every 10 s. Returns the gang, the later jobs, and the outlook and the API's and
    page's words taken once the gang holds a reservation (None without reservations)."""
    for i in range(16):
        submit(cluster, f"busy-{i:02d}", duration=f"{30 + 7 * i}m")   # 30 .. 135 s
        clock.advance(0.001)
    run(backend, clock)
    clock.advance(2)
    gang = submit(cluster, "gang", gpus=8, replicas=2, duration="60m")
    later, seen = [], None
    api = APIClient()
    api.force_authenticate(cluster.alice)
    page = Client()
    page.force_login(cluster.alice)
    for step in range(120):
        if step % 2 == 0 and len(later) < 40:
            later.append(submit(cluster, f"later-{len(later):02d}"))
        run(backend, clock)
        gang.refresh_from_db()
        if gang.state != JobState.PENDING:
            break
        if step == 3:
            detail = api.get(f"/api/v1/jobs/{gang.pk}/").json()
            assert detail["queue_position"] == 1
            assert detail["position_note"]["code"] == "backfill_may_pass"
            html = page.get("/w/vision-lab/").content.decode()
            assert "smaller jobs may start first while this one waits for 16 GPUs in one pool" in html
        if seen is None and gang.pending_code == "several" and patience is not None:
            detail = api.get(f"/api/v1/jobs/{gang.pk}/").json()
            seen = (pending_outlook([gang])[gang.pk], detail, page.get("/w/vision-lab/").content.decode())
        clock.advance(5)
    return gang, later, seen


def test_d1_without_reservations_later_jobs_pass_the_gang_at_position_1(cluster, backend, clock, run, settings):
    settings.BACKFILL_PATIENCE_S = None
    gang, later, _ = play(cluster, backend, clock, run, patience=None)
    start = scheduled_at(gang)
    passed = [j for j in later if (t := scheduled_at(j)) is not None and (start is None or t < start)]
    assert len(passed) >= 20    # D1: position 1 meant nothing


def test_d1_with_reservations_the_gang_starts_inside_its_range(cluster, backend, clock, run, settings):
    settings.BACKFILL_PATIENCE_S = PATIENCE_S
    gang, later, seen = play(cluster, backend, clock, run, patience=PATIENCE_S)
    assert seen is not None, "the gang never held a reservation"
    outlook, detail, html = seen
    assert outlook.position == 1
    assert detail["position_note"]["code"] == "gpus_reserved"
    assert "GPUs reserved" in html
    start = scheduled_at(gang)
    assert start is not None
    window = outlook.expected_start
    assert window is not None and window.earliest <= start <= window.latest, (window, start)
    # from the reservation on, no later job took the gang's GPUs
    passed_after = [j for j in later if (t := scheduled_at(j)) is not None and
                    gang.created.timestamp() + PATIENCE_S + 5 < t.timestamp() < start.timestamp()]
    assert passed_after == []
