"""A resumable job preempted on the simulated cluster, with its real training process: SIGTERM makes the process
save its step to the checkpoint volume, the eviction records the GPU-hours lost since the last checkpoint (in the
replica, the event and its reason), and the next attempt resumes from the saved step."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from billing.ledger.posting import post_ledger
from billing.models import ChargeLine
from billing.reports.exports import HEADER, line_rows
from billing.services import submit_quoted_job
from scheduling import services, storage
from scheduling.backends.simulated import training_process
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, JobState, Replica, SimulatedPod
from tests.scheduling.cycle.specs import spec

SPEEDUP = 360  # a 1 h job's process lives 10 s
RESUMABLE = """name: train
queue: community
priority: 0
preemptible: true
expectedDuration: 1h
terminationGracePeriod: 10m
checkpoint: {path: /ckpt, volume: runs, every: 10m}
roles:
  - name: main
    image: busybox
    resources: {gpu: 8}
    nodePool: h100
"""


@pytest.fixture
def volumes(settings, tmp_path):
    settings.VOLUMES_DIR = tmp_path / "volumes"
    return settings.VOLUMES_DIR


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=SPEEDUP, failure_rate=0, clock=clock, training_processes=True)


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def preempted_after(cluster, backend, clock, run, job_spec: str, *, worked_s: float) -> tuple[Job, Job]:
    """Run the job beside a filler of higher priority, `worked_s` platform seconds, then let bob's urgent job
    in: the job is the one evicted. Returns it and bob's job."""
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec)
    submit_quoted_job(
        user=cluster.alice,
        workspace=cluster.vision,
        spec=spec("filler", queue="community", gpus=8, priority=10),
    )
    run(backend, clock)
    clock.advance(1)  # past the image pull: running from here
    run(backend, clock)
    assert backend.wait_for_starts()
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
    assert wait_for(lambda: "bucket:" in backend.logs((job.pk, "main", 0)))
    time.sleep(0.5)  # some steps done on the process's own clock
    clock.advance(worked_s)
    urgent = submit_quoted_job(
        user=cluster.bob, workspace=cluster.nlp, spec=spec("urgent", queue="community", gpus=8, priority=50)
    )
    run(backend, clock)
    assert Job.objects.get(pk=job.pk).events.filter(kind="preempted").exists()
    return job, urgent


@pytest.mark.django_db
def test_a_preempted_resumable_job_saves_on_sigterm_counts_its_loss_and_resumes_from_its_step(
    cluster, backend, clock, run, volumes
):
    storage.create_volume(cluster.alice, cluster.vision, name="runs", size_gib=1)
    # 4.5 platform s after it started = 1620 simulated s: 420 s since the checkpoint at 1200 s, on 8 GPUs
    job, urgent = preempted_after(cluster, backend, clock, run, RESUMABLE, worked_s=4.5)
    folder = storage.volume_dir(cluster.vision.slug, "runs")
    saved = training_process.read_step(folder, "main-0")
    assert saved > 0  # written on SIGTERM, within the grace
    first = Replica.objects.get(job=job, attempt=0)
    assert first.state == JobState.PREEMPTED
    assert first.lost_gpu_hours == Decimal("0.9333")  # 420 s × 8 GPUs
    event = job.events.get(kind="preempted")
    assert event.data["lost_gpu_hours"] == "0.9333"
    assert "0.9333 GPU-hours lost since the last checkpoint" in event.reason

    services.cancel_job(user=cluster.bob, job=urgent)  # its GPUs free again: the job is placed again
    clock.advance(1)
    run(backend, clock)
    clock.advance(1)
    run(backend, clock)
    assert backend.wait_for_starts()
    second = Replica.objects.get(job=job, attempt=1)
    assert second.state in (JobState.SCHEDULED, JobState.RUNNING)
    key = (job.pk, "main", 0)
    assert wait_for(lambda: f"resumed from step {saved}" in backend.logs(key))
    # it runs only what is left of its hour
    pod = SimulatedPod.objects.get(job_id=job.pk)
    assert pod.run_seconds == pytest.approx((3600 - saved) / SPEEDUP)

    # the job page and the API show what the eviction lost; another tenant sees neither
    owner, outsider = Client(), Client()
    owner.force_login(cluster.alice)
    outsider.force_login(cluster.bob)
    page = owner.get(reverse("job", args=[job.pk])).content.decode()
    assert '<dd id="lost-gpu-hours">0.9333</dd>' in page
    assert "0.9333 GPU-hours lost since the last checkpoint" in page  # the event
    assert "<code>/ckpt</code> on volume runs · every 10m · resumable" in page
    assert '<dd id="grace">10m</dd>' in page
    detail = owner.get(reverse("api-job", args=[job.pk])).json()
    assert detail["lost_gpu_hours"] == "0.9333" and detail["termination_grace_s"] == 600
    assert detail["checkpoint"] == {"path": "/ckpt", "volume": "runs", "every_s": 600, "resumable": True}
    assert [r["lost_gpu_hours"] for r in detail["replicas"]] == ["0.9333", "0.0000"]
    assert outsider.get(reverse("job", args=[job.pk])).status_code == 404
    assert outsider.get(reverse("api-job", args=[job.pk])).status_code == 404

    # the costs API and the FOCUS export carry the loss on the line the eviction ended
    post_ledger(now=clock.now)
    rows = owner.get(reverse("api-costs"), {"group_by": "job", "job": job.pk}).json()["rows"]
    assert [r["lost_gpu_hours"] for r in rows] == ["0.9333"]
    lines = [dict(zip(HEADER, r, strict=True)) for r in line_rows(ChargeLine.objects.filter(job=job))]
    assert [line["x_LostGpuHours"] for line in lines] == ["0.9333"]  # both attempts on one node, one hour
    assert outsider.get(reverse("api-costs"), {"group_by": "job", "job": job.pk}).json()["rows"] == []


@pytest.mark.django_db
def test_without_a_checkpoint_an_eviction_loses_everything_since_the_start(
    cluster, backend, clock, run, volumes
):
    plain = RESUMABLE.replace("checkpoint: {path: /ckpt, volume: runs, every: 10m}\n", "")
    job, _ = preempted_after(cluster, backend, clock, run, plain, worked_s=4.5)
    replica = Replica.objects.get(job=job, attempt=0)
    assert replica.lost_gpu_hours == Decimal("3.6000")  # 1620 s × 8 GPUs
    event = job.events.get(kind="preempted")
    assert "3.6 GPU-hours lost since the start (no checkpoint)" in event.reason
    assert "resumed" not in backend.logs((job.pk, "main", 0))
