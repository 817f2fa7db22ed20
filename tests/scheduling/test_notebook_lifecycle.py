"""Stop, start and delete a notebook: stopping frees its slice at once and bills nothing while stopped,
starting queues it like any job, deleting cancels it and keeps its home unless asked; members of its
workspace act, viewers and other tenants cannot; the scheduler leaves a stopped notebook alone."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied

from billing.ledger.posting import post_ledger
from billing.models import ChargeLine
from billing.services import submit_quoted_job
from scheduling import services
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.cycle.run import CycleReport, end_overdue_runs
from scheduling.cycle.snapshot import build_snapshot
from scheduling.errors import Conflict
from scheduling.models import Job, JobState
from scheduling.spec import SpecError

NOTEBOOK = ("kind: notebook\nname: scratch\nqueue: vision-lab\nnodePool: h100\n"
            "resources: {gpu: 0.5, gpuMemory: 10Gi}\n")
TRAINING = "name: train\nqueue: vision-lab\nroles:\n  - name: main\n    image: busybox:1.36\n    nodePool: h100\n"


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=1, failure_rate=0, clock=clock)


def running(run, backend, clock, job: Job) -> Job:
    deadline = time.monotonic() + 20
    while job.state != JobState.RUNNING and time.monotonic() < deadline:
        run(backend, clock)
        job.refresh_from_db()
        time.sleep(0.05)
    assert job.state == JobState.RUNNING
    return job


@pytest.mark.django_db
def test_stop_frees_the_slice_bills_nothing_after_and_start_queues_again(cluster, backend, clock, run):
    job = running(run, backend, clock, submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                                                         spec=NOTEBOOK))
    clock.advance(3600)
    stopped = services.stop_workload(cluster.carol, job, "lunch")  # a member of the workspace may
    assert stopped.state == JobState.STOPPED and not stopped.is_final and stopped.finished is None
    replica = job.replicas.get()
    assert (replica.state, replica.end_reason, replica.ended) == (JobState.STOPPED, "stopped", clock.now)
    event = job.events.last()
    assert (event.kind, event.state, event.reason) == ("stopped", "Stopped", "stopped by carol: lunch")
    assert str(job.pk) not in {j.id for j in build_snapshot(clock.now).jobs}  # the scheduler leaves it alone

    clock.advance(2 * 3600)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.STOPPED and job.replicas.count() == 1  # not placed again on its own
    post_ledger(now=clock.now)
    held = sum(ChargeLine.objects.filter(job=job).values_list("allocated_gpu_hours", flat=True), Decimal(0))
    assert held == Decimal("0.5")  # half a GPU for the hour it ran, nothing for the two stopped hours

    started = services.start_workload(cluster.alice, job)
    assert (started.state, started.pending_code) == (JobState.PENDING, "waiting_for_cycle")
    assert job.events.last().kind == "start-requested"
    job = running(run, backend, clock, job)
    assert job.replicas.count() == 2 and job.replicas.filter(state=JobState.RUNNING, attempt=1).exists()


@pytest.mark.django_db
def test_a_notebook_past_its_max_runtime_is_stopped_not_failed(cluster, backend, clock, run):
    """Its kind's overdue_action: a notebook can start again, so the cycle stops it (a training job fails)."""
    job = running(run, backend, clock, submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                                                         spec=NOTEBOOK + "maxRuntime: 1h\n"))
    Job.objects.filter(pk=job.pk).update(deadline=clock.now)
    end_overdue_runs(backend, clock.now, CycleReport())
    job.refresh_from_db()
    assert (job.state, job.finished, job.end_code) == (JobState.STOPPED, None, "")
    assert job.replicas.get().state == JobState.STOPPED
    assert job.events.last().reason == "stopped by policy: it reached its maximum runtime of 1h"


@pytest.mark.django_db
def test_only_members_who_may_submit_act_and_only_on_what_can_stop(cluster, backend, clock, run):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    for outsider in (cluster.bob, cluster.finance):  # another tenant, and a viewer of this one
        for act in (lambda u: services.stop_workload(u, job, ""), lambda u: services.delete_notebook(u, job)):
            with pytest.raises(PermissionDenied):
                act(outsider)
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.events.count() == 1

    services.stop_workload(cluster.alice, job)  # a pending notebook may stop too: it leaves the queue
    with pytest.raises(Conflict, match="already Stopped"):
        services.stop_workload(cluster.alice, job)
    with pytest.raises(PermissionDenied):
        services.start_workload(cluster.bob, job)
    job.refresh_from_db()
    assert job.state == JobState.STOPPED

    training = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=TRAINING)
    with pytest.raises(Conflict, match="is a training job, which does not stop and start"):
        services.stop_workload(cluster.alice, training)
    with pytest.raises(Conflict, match="is a training job, which does not stop and start"):
        services.start_workload(cluster.alice, training)
    services.start_workload(cluster.alice, job)
    with pytest.raises(Conflict, match="Pending: only a stopped one can be started"):
        services.start_workload(cluster.alice, job)
    with pytest.raises(Conflict, match="a training job, which has no home volume"):
        services.delete_notebook(cluster.alice, training)


@pytest.mark.django_db
def test_one_live_notebook_per_name_and_delete_keeps_the_home_unless_asked(cluster, backend, clock, run,
                                                                           django_capture_on_commit_callbacks):
    job = running(run, backend, clock, submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                                                         spec=NOTEBOOK))
    with pytest.raises(SpecError, match="notebook 'scratch' already exists in workspace 'vision-lab'"):
        submit_quoted_job(user=cluster.carol, workspace=cluster.vision, spec=NOTEBOOK)
    home = backend.home_of("vision-lab", "scratch")
    assert home.is_dir()

    deleted = services.delete_notebook(cluster.alice, job, backend=backend)
    assert deleted.state == JobState.CANCELLED and "deleted by alice" in job.events.last().reason
    run(backend, clock)
    assert backend.runtime.find((job.pk, "notebook", 0)) is None and home.is_dir()  # the process ends, home stays

    again = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)  # the name is free
    with pytest.raises(Conflict, match="newer live notebook"):
        services.delete_notebook(cluster.alice, job, delete_home=True, backend=backend)
    with django_capture_on_commit_callbacks(execute=True):
        services.delete_notebook(cluster.alice, again, delete_home=True, backend=backend)
    assert not home.exists()


@pytest.mark.django_db
def test_a_budget_suspension_leaves_a_stopped_notebook_stopped(cluster):
    from datetime import timedelta

    from scheduling import clock as platform_clock

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    services.stop_workload(cluster.alice, job)
    assert services.suspend_jobs([job], until=platform_clock.now() + timedelta(days=1), reason="budget") == []
    job.refresh_from_db()
    assert job.state == JobState.STOPPED
