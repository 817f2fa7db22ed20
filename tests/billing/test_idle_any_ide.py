"""The idle rule for any IDE: a notebook, or a job with an open SSH session, is active while any of
kernel activity, SSH traffic in the window (IDLE_SSH_BYTES), GPU use over its pool's threshold or CPU over
IDLE_CPU_PCT holds; the notice names the quiet ones. SSH traffic is fed through the check's provider
(billing.idle.signals.ssh_bytes_by_job's seam). A kept-alive notebook is skipped until its time."""

from __future__ import annotations

import uuid
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core import mail
from tests_job_specs import job_spec

from billing.idle import signals
from billing.idle.keep_alive import set_keep_alive
from billing.idle.services import check_idle_gpus
from billing.models import UsageSample
from billing.services import submit_quoted_job
from scheduling.models import JobState, Node, Replica
from scheduling.notebooks import Activity

NOTEBOOK = ("kind: notebook\nname: lab\nqueue: vision-lab\nnodePool: h100\nidleAfter: 10m\n"
            "resources: {gpu: 1}\n")
QUIET = Activity(kernel_idle_s=3600, busy_kernels=0, gpu_measured=True, cpu_pct=0.5, cpu_busy_age_s=None)
UTC = ZoneInfo("UTC")


def place(job, clock, *, started_ago_s=3600) -> Replica:
    """The job's replica held on an h100 node since `started_ago_s` (rows only: no process)."""
    node = Node.objects.filter(pool__name="h100").order_by("name").first()
    return Replica.objects.create(job=job, role=job.spec["roles"][0]["name"] if job.spec.get("roles") else "notebook",
                                  index=0, state=JobState.RUNNING, node=node, gpu_indices=[0],
                                  started=clock.now - timedelta(seconds=started_ago_s), clock_scale=1.0)


@pytest.fixture
def notebook(cluster, clock):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    job.state = JobState.RUNNING
    job.save(update_fields=["state"])
    return job, place(job, clock)


@pytest.fixture
def check(django_capture_on_commit_callbacks, clock):
    def do(activities=None, ssh=None):
        with django_capture_on_commit_callbacks(execute=True):
            return check_idle_gpus(now=clock.now, activities=activities or {},
                                   ssh_bytes=(lambda since, until: ssh or {}))
    return do


@pytest.mark.django_db
def test_with_no_ssh_session_the_signal_lists_no_job(clock):
    assert signals.ssh_bytes_by_job(clock.now - timedelta(minutes=30), clock.now) == {}


@pytest.mark.django_db
def test_a_registered_provider_is_what_the_beats_check_reads(notebook, clock, django_capture_on_commit_callbacks):
    job, replica = notebook
    wired = signals._provider  # the portal's SSH session audit, registered at start-up
    signals.use_ssh_provider(lambda since, until: {job.pk: 10_000})
    try:
        assert signals.ssh_bytes_by_job(clock.now, clock.now) == {job.pk: 10_000}
        with django_capture_on_commit_callbacks(execute=True):
            assert check_idle_gpus(now=clock.now, activities={replica.pk: QUIET}).stopped == []
    finally:
        signals.use_ssh_provider(wired)
    with django_capture_on_commit_callbacks(execute=True):
        assert check_idle_gpus(now=clock.now, activities={replica.pk: QUIET}).stopped == [job]


@pytest.mark.django_db
def test_a_quiet_notebook_is_stopped_and_its_notice_names_each_quiet_signal(notebook, check, cluster):
    job, replica = notebook
    result = check({replica.pk: QUIET}, ssh={job.pk: 100})
    assert result.stopped == [job]
    event = job.events.get(kind="idle")
    assert event.data["quiet"] == ["kernel", "ssh", "gpu", "cpu"]
    assert ("quiet: no kernel activity, SSH traffic 100 B (below 4096 B per window), GPU use below 5 %, "
            "CPU 0.5 % (at most 5 %)") in event.reason
    (message,) = mail.outbox
    assert "SSH traffic 100 B" in message.body and "CPU 0.5 %" in message.body


@pytest.mark.django_db
@pytest.mark.parametrize("activity, ssh", [
    (QUIET, {"job": 4096}),                                                          # SSH traffic at the threshold
    (Activity(kernel_idle_s=3600, busy_kernels=0, gpu_measured=True, cpu_pct=40.0), {}),  # CPU busy now
    (Activity(kernel_idle_s=3600, busy_kernels=0, gpu_measured=True, cpu_pct=1.0, cpu_busy_age_s=120), {}),
    (Activity(kernel_idle_s=60, busy_kernels=0, gpu_measured=True), {}),             # a cell ran a minute ago
    (Activity(kernel_idle_s=3600, busy_kernels=0, gpu_measured=True, gpu_busy=True), {}),
])
def test_any_active_signal_keeps_the_notebook(notebook, check, activity, ssh):
    job, replica = notebook
    ssh = {job.pk: ssh["job"]} if "job" in ssh else {}
    result = check({replica.pk: activity}, ssh=ssh)
    assert result.stopped == [] and result.flagged == []
    job.refresh_from_db()
    assert job.state == JobState.RUNNING


@pytest.mark.django_db
def test_ssh_bytes_below_the_setting_are_quiet_and_the_setting_moves_it(notebook, check, settings):
    job, replica = notebook
    settings.IDLE_SSH_BYTES = 50
    assert check({replica.pk: QUIET}, ssh={job.pk: 100}).stopped == []
    settings.IDLE_SSH_BYTES = 101
    assert check({replica.pk: QUIET}, ssh={job.pk: 100}).stopped == [job]


@pytest.mark.django_db
def test_the_provider_is_asked_for_the_notebooks_idle_window(notebook, clock, django_capture_on_commit_callbacks):
    job, replica = notebook
    asked = []

    def provider(since, until):
        asked.append((since, until))
        return {}

    with django_capture_on_commit_callbacks(execute=True):
        check_idle_gpus(now=clock.now, activities={replica.pk: QUIET}, ssh_bytes=provider)
    assert asked == [(clock.now - timedelta(minutes=10), clock.now)]


@pytest.mark.django_db
def test_a_real_jupyter_tells_no_cpu_and_the_notice_says_so(notebook, check):
    job, replica = notebook
    jupyter = Activity(kernel_idle_s=3600, busy_kernels=0, gpu_measured=False)
    assert check({replica.pk: jupyter}).stopped == [job]
    reason = job.events.get(kind="idle").reason
    assert "CPU not measured" in reason and "SSH" not in reason  # no SSH session: not a signal of it


def report(replica, clock, util, *, minutes):
    for _ in range(minutes):
        clock.advance(60)
        UsageSample.objects.create(id=uuid.uuid4(), node=replica.node, ts=clock.now, gpu_uuid="GPU-x-0",
                                   gpu_index=0, pod_uid="", replica=replica, gpu_util_pct=util, interval_s=60)


@pytest.mark.django_db
def test_a_training_job_with_an_ssh_session_is_active_while_its_ssh_traffic_is(cluster, clock, check):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("train", gpus=1, hours=10))
    replica = place(job, clock)
    report(replica, clock, 0.0, minutes=31)  # its GPU idle for the pool's whole window
    assert check(ssh={job.pk: 10_000}).flagged == []  # but someone types in its shell
    flagged = check(ssh={job.pk: 10})
    assert flagged.flagged == [replica]
    event = job.events.get(kind="idle")
    assert event.data["quiet"] == ["ssh", "gpu", "cpu"] and "SSH traffic 10 B" in event.reason


@pytest.mark.django_db
def test_a_training_job_without_ssh_keeps_its_old_notice(cluster, clock, check):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec("train", gpus=1, hours=10))
    replica = place(job, clock)
    report(replica, clock, 0.0, minutes=31)
    assert check().flagged == [replica]
    event = job.events.get(kind="idle")
    assert "quiet:" not in event.reason and event.data["quiet"] == []


@pytest.mark.django_db
def test_a_kept_alive_notebook_is_skipped_until_its_time(notebook, check, clock, cluster):
    job, replica = notebook
    set_keep_alive(cluster.alice, job, clock.now + timedelta(hours=2), now=clock.now, zone=UTC)
    assert check({replica.pk: QUIET}).stopped == []
    assert job.events.filter(kind="keep_alive").count() == 1
    clock.advance(2 * 3600 + 1)
    assert check({replica.pk: QUIET}).stopped == [job]
