"""A service in the scheduling cycle, on the platform clock: with no traffic for its scale-down delay it
scales to zero in the cycle that evaluates it, and the GPUs it frees go to a job of its queue that was
waiting for them in that same cycle; it is billed only for the time it held them."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from billing.ledger.posting import post_ledger
from billing.models import ChargeLine
from scheduling import services
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import ACTIVE_STATES, JobState, ServiceScale

SERVICE = """\
kind: inference
name: big
queue: vision-lab
vendor: amd
nodePool: mi300x
model: {path: /models/big}
resources: {gpu: 4}
replicas: {min: 0, max: 1}
scaleDownDelay: 60s
"""
TRAINING = """\
name: train
queue: vision-lab
roles:
  - name: main
    image: busybox:1.36
    vendor: amd
    nodePool: mi300x
    resources: {gpu: 8}
"""


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=1, failure_rate=0, clock=clock, server_startup_s=0)


@pytest.mark.django_db
def test_scale_to_zero_frees_the_gpus_for_the_queues_waiting_job(cluster, backend, clock, run):
    service = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)
    deadline = time.monotonic() + 20
    while service.state != JobState.RUNNING:
        assert time.monotonic() < deadline, service.pending_reason
        run(backend, clock)
        service.refresh_from_db()
        time.sleep(0.1)
    started = clock.now
    training = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=TRAINING)
    clock.advance(30)
    run(backend, clock)
    training.refresh_from_db()
    assert training.state == JobState.PENDING and training.pending_code   # the service holds half the node

    clock.advance(31)   # past the delay since it was submitted, with no request at all
    run(backend, clock)
    service.refresh_from_db()
    training.refresh_from_db()
    assert service.state == JobState.STOPPED
    assert not service.replicas.filter(state__in=ACTIVE_STATES).exists()
    assert training.state in (JobState.SCHEDULED, JobState.RUNNING)
    assert ServiceScale.objects.get(job=service).desired == 0
    assert service.events.filter(kind="stopped", reason__contains="scaled to zero").exists()

    post_ledger(now=clock.now)
    [replica] = service.replicas.all()
    held_s = (replica.ended - replica.started).total_seconds()
    assert 0 < held_s <= (clock.now - started).total_seconds() + 1
    lines = ChargeLine.objects.filter(job=service)
    assert sum(line.allocated_gpu_hours for line in lines) == pytest.approx(Decimal(4 * held_s) / 3600, abs=Decimal("0.001"))


@pytest.mark.django_db
def test_a_started_service_keeps_its_replica_for_a_delay_and_a_minimum_starts_it(cluster, backend, clock, run):
    from scheduling import inference

    service = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)
    run(backend, clock)
    clock.advance(61)
    run(backend, clock)
    service.refresh_from_db()
    assert service.state == JobState.STOPPED

    services.start_workload(cluster.alice, service)    # by hand: it runs for a whole delay at least
    for _ in range(3):
        clock.advance(15)
        run(backend, clock)
    service.refresh_from_db()
    assert service.state != JobState.STOPPED and service.replicas.filter(state__in=ACTIVE_STATES).count() == 1

    clock.advance(61)
    run(backend, clock)
    service.refresh_from_db()
    assert service.state == JobState.STOPPED
    inference.set_range(cluster.alice, service, 1, 1)   # a minimum of one: it starts again, and stays
    service.refresh_from_db()
    assert service.state == JobState.PENDING
    for _ in range(3):
        clock.advance(61)
        run(backend, clock)
    service.refresh_from_db()
    assert service.state != JobState.STOPPED
    assert ServiceScale.objects.get(job=service).desired == 1
