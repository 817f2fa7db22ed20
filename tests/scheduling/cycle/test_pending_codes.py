"""A pending job's row holds its reason as a code and parameters, and the text rendered from them."""

import pytest

from billing.services import submit_quoted_job
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.core.reasons import lead_code, reason_text
from scheduling.models import Job, JobState
from scheduling.services import requeue_job
from tests.scheduling.cycle.test_cycle import spec


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock)


def pending_events(job):
    return list(job.events.filter(kind="pending").order_by("id").values_list("reason", flat=True))


def test_a_pending_job_stores_its_reason_code_and_params(cluster, backend, clock, run):
    for n in range(2):
        submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec(f"big{n}", gpus=8, preemptible="false"))
        clock.advance(1)  # the third is the last in the queue's order (at one instant the ids would decide it)
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("third", gpus=8, preemptible="false"))
    assert (job.pending_code, job.pending_params) == ("waiting_for_cycle", {})
    assert job.pending_reason == "waiting for the next scheduling cycle"
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    assert job.pending_code and job.pending_code != "waiting_for_cycle"
    assert job.pending_params
    assert job.pending_reason == reason_text(job.pending_code, job.pending_params)
    assert "GPU" in job.pending_reason
    assert pending_events(job) == [job.pending_reason]

    # the same reason next cycle: no new event, the row unchanged
    clock.advance(2)
    run(backend, clock)
    again = Job.objects.get(pk=job.pk)
    assert (again.pending_code, again.pending_params, again.pending_reason) == (
        job.pending_code, job.pending_params, job.pending_reason)
    assert len(pending_events(job)) == 1

    # a scheduled job has no reason left
    scheduled = Job.objects.exclude(pk=job.pk).filter(state__in=[JobState.SCHEDULED, JobState.RUNNING]).first()
    assert scheduled is not None and scheduled.pending_reason == ""


def test_requeue_and_off_peak_have_codes(cluster, backend, clock, run):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("night"),
                            option="h100.exclusive.off-peak", now=clock.now)
    assert job.pending_code == "waits_for_off_peak" and set(job.pending_params) == {"not_before"}
    assert job.pending_reason == reason_text(job.pending_code, job.pending_params)
    assert "off-peak" in job.pending_reason

    other = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("day"))
    run(backend, clock)
    other.refresh_from_db()
    assert other.state == JobState.SCHEDULED and (other.pending_code, other.pending_params) == ("", {})
    requeue_job(other, "evicted: test", "test")
    other.refresh_from_db()
    assert (other.pending_code, other.pending_params) == ("requeued", {})
    assert other.pending_reason == "requeued: waiting for the next cycle"


def test_reason_kind_is_the_leading_code():
    gpus = {"code": "gpus_short", "params": {"gpus": 2, "free": 0, "pool": "h100"}}
    share = {"code": "fair_share_held", "params": {"queue": "b", "held_milli": 1, "share_milli": 2, "lenders": []}}
    assert lead_code("gpus_short", gpus["params"]) == lead_code("several", {"parts": [gpus, share]})
    assert lead_code("gpus_short", gpus["params"]) != lead_code("pool_no_node", {"pool": "h100"})
    assert lead_code("", {}) == ""


def test_a_row_from_before_codes_takes_its_code_without_an_event(cluster, backend, clock, run):
    for n in range(3):
        job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                                spec=spec(f"big{n}", gpus=8, preemptible="false"))
        clock.advance(1)  # the last is the one that waits (at one instant the ids would decide it)
    run(backend, clock)
    job.refresh_from_db()
    code, params = job.pending_code, job.pending_params
    Job.objects.filter(pk=job.pk).update(pending_code="", pending_params={}, pending_reason="an old text")
    clock.advance(2)
    run(backend, clock)
    job.refresh_from_db()
    assert (job.pending_code, job.pending_params) == (code, params)
    assert len(pending_events(job)) == 1
