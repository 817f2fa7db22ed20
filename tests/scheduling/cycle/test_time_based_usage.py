"""Queues' past usage read from the placement history, for time-based fair share."""

from datetime import timedelta

import pytest

from billing.services import submit_quoted_job
from scheduling.cycle.snapshot import build_snapshot
from scheduling.cycle.usage import decayed_seconds, queue_usage
from scheduling.models import Job, JobState, Node, Replica
from tests.scheduling.cycle.test_cycle import spec


def held(cluster, clock, queue, *, hours_ago, hours, gpus=1, user=None, workspace=None):
    job = submit_quoted_job(user=user or cluster.alice, workspace=workspace or cluster.vision,
                            spec=spec(f"past-{queue}-{hours_ago}", queue=queue))
    node = Node.objects.filter(pool__name="h100").order_by("name").first()
    start = clock.now - timedelta(hours=hours_ago)
    end = start + timedelta(hours=hours)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, started=start, finished=end)
    Replica.objects.create(job=job, role="main", index=0, state=JobState.SUCCEEDED, node=node,
                           gpu_indices=list(range(gpus)), slice={"kind": "whole", "gpu_milli": 1000},
                           started=start, ended=end)


def test_decay_halves_per_half_life():
    assert decayed_seconds(0, 3600, 3600) == pytest.approx(2 * decayed_seconds(3600, 7200, 3600))


def test_usage_is_off_by_default_and_weighted_by_age_when_on(cluster, clock, settings):
    held(cluster, clock, "vision-lab", hours_ago=2, hours=1, gpus=2)            # recent
    held(cluster, clock, "nlp-group", hours_ago=26, hours=1, gpus=2, user=cluster.bob,
         workspace=cluster.nlp)                                                   # a day older
    held(cluster, clock, "nlp-group", hours_ago=24 * 9, hours=5, user=cluster.bob,
         workspace=cluster.nlp)                                                   # outside the window
    assert queue_usage(clock.now, 16000) == {}
    snap = build_snapshot(clock.now)
    assert snap.queue_usage == () and snap.usage_k == 0.0

    settings.FAIR_SHARE_HALF_LIFE_H = 24
    usage = queue_usage(clock.now, 16000)
    assert set(usage) == {"vision-lab", "nlp-group"}
    assert usage["vision-lab"] == pytest.approx(2 * usage["nlp-group"], rel=0.01)  # same GPU-hours, a day apart
    snap = build_snapshot(clock.now)
    capacity = sum(len(n.gpus) for n in snap.nodes) * 1000  # the cluster's GPUs
    assert dict(snap.queue_usage) == pytest.approx(queue_usage(clock.now, capacity))
    assert snap.usage_k == settings.FAIR_SHARE_USAGE_K
