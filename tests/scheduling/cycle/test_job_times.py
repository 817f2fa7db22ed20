"""A job's times are the platform clock's (submitted, its events, started, finished), whatever the
hour on the machine; and a job that runs or has ended carries no pending reason. The demo history
plays a past month through these same services and relies on both."""

from datetime import timedelta

import pytest

from billing.services import submit_quoted_job
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, JobState
from scheduling.services import cancel_job
from tests.scheduling.cycle.test_cycle import spec


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock)  # a 1 h job runs 60 s


def test_submitted_and_event_times_are_the_platform_clocks(cluster, backend, clock, run):
    clock.now -= timedelta(days=20)  # three weeks ago on the platform, today on the machine
    submitted_at = clock.now
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("past"))
    for seconds in (5, 2, 61):  # picked up, running, finished
        clock.advance(seconds)
        run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED
    assert job.created == submitted_at
    assert submitted_at < job.started < job.finished == clock.now
    times = dict(job.events.values_list("kind", "time"))
    assert times == {"submitted": submitted_at, "scheduled": submitted_at + timedelta(seconds=5),
                     "running": job.started, "succeeded": job.finished}


def _reasons_outside_pending() -> list[tuple]:
    """Jobs that are not waiting but still say why they wait."""
    rows = Job.objects.exclude(state=JobState.PENDING).values_list("name", "state", "pending_reason",
                                                                    "pending_code", "pending_params")
    return [row for row in rows if any(row[2:])]


def test_a_job_that_runs_or_ended_has_no_pending_reason(cluster, backend, clock, run):
    # two 8-GPU jobs fill the h100 pool; the next two wait, with a reason
    jobs = []
    for n in range(4):
        jobs.append(submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                                      spec=spec(f"big{n}", gpus=8, preemptible="false")))
        clock.advance(1)  # the queue's order is this one (at one instant the ids would decide it)
    first, second, third, fourth = jobs
    run(backend, clock)
    clock.advance(2)
    run(backend, clock)
    assert {Job.objects.get(pk=j.pk).state for j in (first, second)} == {JobState.RUNNING}
    assert all(Job.objects.get(pk=j.pk).pending_reason for j in (third, fourth))
    assert _reasons_outside_pending() == []

    cancel_job(user=cluster.alice, job=second)  # running: its GPUs go to the third
    cancel_job(user=cluster.alice, job=fourth)  # waiting: it never runs
    for seconds in (0, 2):
        clock.advance(seconds)
        run(backend, clock)
    assert Job.objects.get(pk=third.pk).state == JobState.RUNNING
    assert _reasons_outside_pending() == []

    clock.advance(61)
    run(backend, clock)
    assert {Job.objects.get(pk=j.pk).state for j in (first, third)} == {JobState.SUCCEEDED}
    assert _reasons_outside_pending() == []


def test_a_reason_computed_before_a_cancel_is_not_written_after_it(cluster, clock):
    """The cycle read the job as pending, the owner cancelled it, then the cycle wrote its reasons."""
    from scheduling.cycle.pending import write_pending_reasons

    waiting, cancelled = (submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec(name))
                          for name in ("still-waiting", "cancelled-meanwhile"))
    read_by_the_cycle = list(Job.objects.filter(pk__in=[waiting.pk, cancelled.pk]).order_by("pk"))
    cancel_job(user=cluster.alice, job=cancelled)
    for job in read_by_the_cycle:
        job.pending_reason, job.pending_code, job.pending_params = "no GPU free", "no-room", {"gpus": 1}
    write_pending_reasons(read_by_the_cycle)
    waiting.refresh_from_db()
    cancelled.refresh_from_db()
    assert waiting.pending_reason == "no GPU free"
    assert cancelled.state == JobState.CANCELLED and not cancelled.pending_reason and not cancelled.pending_code
