"""Idle GPU slices: a placement below its pool's threshold for the whole window is flagged, its
submitter told once per idle spell (e-mail and job event), and with notify-then-stop its job stopped
after the grace period, training jobs only where the pool allows it."""

import uuid
from datetime import timedelta

import pytest
from django.core import mail
from tests_job_specs import job_spec

from billing.idle.services import check_idle_gpus
from billing.models import UsageSample
from billing.services import submit_quoted_job
from billing.tasks import check_idle_gpus as check_idle_task
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import IdleAction, JobState, NodePool


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=1, failure_rate=0, clock=clock)


@pytest.fixture
def check(django_capture_on_commit_callbacks, clock):
    def do():
        with django_capture_on_commit_callbacks(execute=True):
            return check_idle_gpus(now=clock.now)

    return do


@pytest.fixture
def running(cluster, backend, clock, run):
    """Start a job on the h100 pool (exclusive GPUs unless `gpu` says a fraction); returns its replica."""

    def start(name="notebook-ish", *, gpus=1, fraction=None):
        spec = job_spec(name, gpus=gpus, hours=10)
        if fraction:
            spec = spec.replace(f"{{gpu: {gpus}}}", f"{{gpu: {fraction}, gpuMemory: 20Gi}}")
        job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec)
        run(backend, clock)
        clock.advance(1)
        run(backend, clock)
        return job.replicas.get(state=JobState.RUNNING)

    return start


def report(replica, clock, util, *, minutes, every_s=60):
    """The agent's samples for the replica's GPUs, one every `every_s`, for `minutes` up to now."""
    for n in range(int(minutes * 60 / every_s)):
        clock.advance(every_s)
        for index in replica.gpu_indices:
            UsageSample.objects.create(
                id=uuid.uuid4(), node=replica.node, ts=clock.now, gpu_uuid=f"GPU-{replica.node.name}-{index}",
                gpu_index=index, pod_uid=str(replica.uid), replica=replica,
                gpu_util_pct=util(n) if callable(util) else util, interval_s=every_s)


def test_an_idle_slice_is_flagged_and_its_submitter_told_once(running, clock, check, cluster):
    replica = running()
    report(replica, clock, 1.5, minutes=20)
    assert check().flagged == []  # below the threshold, but not for a whole window yet
    report(replica, clock, 1.5, minutes=12)
    result = check()
    assert result.flagged == [replica] and result.notified == [replica.job]
    replica.refresh_from_db()
    assert replica.idle_since == clock.now - timedelta(minutes=30) and replica.idle_notified == clock.now
    [message] = mail.outbox
    assert message.to == [cluster.alice.email] and "idle GPUs" in message.subject
    event = replica.job.events.get(kind="idle")
    assert "below 5 % utilisation for 30 min" in event.reason and "stopped" not in event.reason
    report(replica, clock, 1.5, minutes=5)
    assert check().notified == []  # the same spell: no second notice
    assert len(mail.outbox) == 1 and replica.job.events.filter(kind="idle").count() == 1


def test_a_busy_slice_ends_the_spell_and_a_new_one_is_told_again(running, clock, check):
    replica = running()
    report(replica, clock, 1, minutes=31)
    check()
    report(replica, clock, 90, minutes=10)  # busy: the window's mean rises above 5 %
    assert check().cleared == [replica]
    replica.refresh_from_db()
    assert replica.idle_since is None and replica.idle_notified is None
    report(replica, clock, 0, minutes=31)
    assert check().notified == [replica.job]
    assert len(mail.outbox) == 2


def test_busy_or_unreported_slices_are_not_idle(running, clock, check):
    busy = running("busy")
    quiet = running("quiet")
    report(busy, clock, lambda n: 80 if n % 2 else 2, minutes=31)
    report(quiet, clock, 1, minutes=31)
    clock.advance(20 * 60)  # then the agent stops reporting: silence is not idleness
    result = check()
    assert result.flagged == []


def test_a_fraction_is_judged_against_its_slice(running, clock, check):
    replica = running(fraction=0.5)
    report(replica, clock, 3, minutes=31)  # 3 % of the device is 6 % of a half GPU
    assert check().flagged == []
    report(replica, clock, 2, minutes=31)  # 4 % of the slice
    assert check().flagged == [replica]


def test_the_threshold_and_window_are_the_pools(running, clock, check):
    NodePool.objects.filter(name="h100").update(idle_threshold_pct=50, idle_window_min=10)
    replica = running()
    report(replica, clock, 40, minutes=11)
    assert check().flagged == [replica]


def make_stopping(**policy):
    NodePool.objects.filter(name="h100").update(idle_action=IdleAction.NOTIFY_THEN_STOP, idle_grace_min=15, **policy)


def test_notify_then_stop_never_stops_a_training_job_unless_the_pool_says_so(running, clock, check):
    make_stopping()
    replica = running()
    report(replica, clock, 0, minutes=31)
    check()
    assert "stopped" not in replica.job.events.get(kind="idle").reason
    report(replica, clock, 0, minutes=30)
    assert check().stopped == []
    replica.job.refresh_from_db()
    assert replica.job.state == JobState.RUNNING


def test_notify_then_stop_stops_after_the_grace_period(running, clock, check):
    make_stopping(idle_stop_training=True)
    replica = running()
    report(replica, clock, 0, minutes=31)
    check()
    event = replica.job.events.get(kind="idle")
    stop_at = clock.now + timedelta(minutes=15)
    assert f"will be stopped at {stop_at:%Y-%m-%d %H:%M}" in event.reason
    report(replica, clock, 0, minutes=10)
    assert check().stopped == []  # still within the grace period
    report(replica, clock, 0, minutes=6)
    assert check().stopped == [replica.job]
    job = replica.job
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and job.final_cost is not None
    assert "stopped by policy" in job.events.get(kind="cancelled").reason
    replica.refresh_from_db()
    assert replica.state == JobState.CANCELLED


def test_getting_busy_within_the_grace_period_saves_the_job(running, clock, check):
    make_stopping(idle_stop_training=True)
    replica = running()
    report(replica, clock, 0, minutes=31)
    check()
    report(replica, clock, 95, minutes=10)
    check()
    report(replica, clock, 95, minutes=10)
    assert check().stopped == []
    replica.job.refresh_from_db()
    assert replica.job.state == JobState.RUNNING


def test_the_beat_task_runs_the_check(running, clock):
    replica = running()
    report(replica, clock, 0, minutes=31)
    assert check_idle_task() == 1
    replica.refresh_from_db()
    assert replica.idle_since is not None
