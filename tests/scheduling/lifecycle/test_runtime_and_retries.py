"""A job's life in the cycle: max runtime, retries with back-off, attempts, end codes and clean-up, against the
simulated cluster (a 1 h job runs 60 s: 60 simulated seconds per real one), with training processes off: the
pods' timing alone says when a replica fails (SIM_EXIT_CODE, SIM_FAIL_AFTER in the spec's env)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.services import submit_quoted_job
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.lifecycle.ends import end_reason_text
from scheduling.models import Job, JobAttempt, JobState, Node, Replica, SimulatedPod
from scheduling.services import cancel_job, requeue_job_as_operator

SPEC = """name: {name}
queue: vision-lab
expectedDuration: 1h
{extra}
roles:
  - name: main
    image: busybox
    resources: {{gpu: 1, memory: 8Gi}}
    nodePool: h100
    env: {{{env}}}
"""


def spec(name, *, extra="", env=""):
    return SPEC.format(name=name, extra=extra, env=env)


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock, training_processes=False)


def submit(cluster, text):
    return submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=text)


def step(backend, clock, run, seconds):
    clock.advance(seconds)
    run(backend, clock)


def attempts(job):
    return list(JobAttempt.objects.filter(job=job).values_list("number", "end_class", "exit_code", "counted"))


def test_a_job_that_succeeds_ends_succeeded_with_one_attempt(cluster, backend, clock, run):
    job = submit(cluster, spec("ok"))
    for seconds in (1, 2, 61):
        step(backend, clock, run, seconds)
    job.refresh_from_db()
    assert (job.state, job.end_code) == (JobState.SUCCEEDED, "succeeded")
    assert end_reason_text(job) == "every replica finished"
    assert attempts(job) == [(1, "succeeded", None, False)]
    first = JobAttempt.objects.get(job=job)
    assert first.started == job.started and first.ended == job.finished and first.node.startswith("h100")


def test_max_runtime_ends_the_job_about_30_simulated_minutes_after_it_started(cluster, backend, clock, run):
    job = submit(cluster, spec("capped", extra="maxRuntime: 30m"))
    step(backend, clock, run, 1)
    step(backend, clock, run, 2)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.max_runtime_s == 1800
    started = job.started
    assert job.deadline == started + timedelta(seconds=30)  # 30 simulated minutes at 60x
    step(backend, clock, run, 29)
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
    step(backend, clock, run, 2)
    job.refresh_from_db()
    assert (job.state, job.end_code) == (JobState.FAILED, "max_runtime_exceeded")
    simulated_minutes = (job.finished - started).total_seconds() * 60 / 60
    assert 30 <= simulated_minutes <= 32
    assert end_reason_text(job) == "it reached its maximum runtime of 30m"
    assert attempts(job) == [(1, "max_runtime_exceeded", None, False)]
    assert Replica.objects.get(job=job).end_reason == "max runtime"
    assert not SimulatedPod.objects.filter(job_id=job.pk).exists()  # evicted
    assert job.deadline is None


def test_a_job_fails_twice_and_succeeds_on_its_third_attempt(cluster, backend, clock, run):
    job = submit(
        cluster,
        spec(
            "flaky",
            extra="retry: {limit: 3, backoff: 30s, maxBackoff: 10m}",
            env='SIM_EXIT_CODE: "1,1,0", SIM_FAIL_AFTER: 10m',
        ),
    )
    step(backend, clock, run, 1)  # placed
    step(backend, clock, run, 2)  # running
    step(backend, clock, run, 10)  # failed after 10 simulated minutes: waits 30 s
    job.refresh_from_db()
    assert (job.state, job.pending_code) == (JobState.PENDING, "retry_backoff")
    assert job.not_before == clock.now + timedelta(seconds=30)
    assert attempts(job) == [(1, "exit_code", 1, True)]
    step(backend, clock, run, 20)  # still backing off
    assert not Replica.objects.filter(job=job, state__in=[JobState.SCHEDULED, JobState.RUNNING]).exists()
    step(backend, clock, run, 11)  # placed again
    step(backend, clock, run, 2)  # running
    step(backend, clock, run, 10)  # fails again: the back-off doubles
    job.refresh_from_db()
    assert job.not_before == clock.now + timedelta(seconds=60)
    step(backend, clock, run, 61)
    step(backend, clock, run, 2)
    step(backend, clock, run, 62)  # the third placement exits 0
    job.refresh_from_db()
    assert (job.state, job.end_code) == (JobState.SUCCEEDED, "succeeded")
    assert attempts(job) == [
        (1, "exit_code", 1, True),
        (2, "exit_code", 1, True),
        (3, "succeeded", None, False),
    ]
    assert list(Replica.objects.filter(job=job).values_list("attempt", flat=True)) == [0, 1, 2]  # each billed
    kinds = list(job.events.values_list("kind", flat=True))
    assert kinds.count("retrying") == 2 and "failed" not in kinds


def test_the_last_attempt_fails_the_job_with_the_class_of_its_failure(cluster, backend, clock, run):
    job = submit(
        cluster,
        spec("oom", extra="retry: {limit: 1, backoff: 30s}", env='SIM_EXIT_CODE: "137", SIM_FAIL_AFTER: 5m'),
    )
    for seconds in (1, 2, 5, 31, 2, 5):
        step(backend, clock, run, seconds)
    job.refresh_from_db()
    assert (job.state, job.end_code) == (JobState.FAILED, "oom")
    assert attempts(job) == [(1, "oom", 137, True), (2, "oom", 137, True)]
    assert JobAttempt.objects.filter(job=job).first().memory_mib == 8192
    assert end_reason_text(job) == (
        "replica main-0 ran out of memory: killed at its 8Gi limit (exit code 137); "
        "no retry left (retry limit 1)"
    )


def test_on_exit_codes_narrows_what_retries(cluster, backend, clock, run):
    job = submit(
        cluster,
        spec(
            "narrow",
            extra="retry: {limit: 3, onExitCodes: [42]}",
            env='SIM_EXIT_CODE: "2", SIM_FAIL_AFTER: 5m',
        ),
    )
    for seconds in (1, 2, 5):
        step(backend, clock, run, seconds)
    job.refresh_from_db()
    assert (job.state, job.end_code) == (JobState.FAILED, "exit_code")
    assert attempts(job) == [(1, "exit_code", 2, False)]


def test_a_lost_node_requeues_and_counts_only_when_listed(cluster, backend, clock, run):
    plain = submit(cluster, spec("plain", extra="retry: {limit: 1}"))
    listed = submit(cluster, spec("listed", extra="retry: {limit: 0, on: [nodeLost]}"))
    step(backend, clock, run, 1)
    step(backend, clock, run, 2)
    nodes = set(Replica.objects.filter(job__in=[plain, listed]).values_list("node_id", flat=True))
    Node.objects.filter(pk__in=nodes).update(ready=False)
    step(backend, clock, run, 1)
    plain.refresh_from_db()
    listed.refresh_from_db()
    assert plain.state != JobState.FAILED and attempts(plain) == [(1, "node_lost", None, False)]  # requeued
    assert (listed.state, listed.end_code) == (JobState.FAILED, "node_lost")
    assert attempts(listed) == [(1, "node_lost", None, True)]


def test_an_eviction_ends_an_attempt_that_never_counts(cluster, backend, clock, run):
    job = submit(cluster, spec("evicted", extra="retry: {limit: 1}"))
    step(backend, clock, run, 1)
    step(backend, clock, run, 2)
    requeue_job_as_operator(operator=cluster.admin, job=job)
    assert attempts(job) == [(1, "preempted", None, False)]
    assert Job.objects.get(pk=job.pk).deadline is None


def test_a_cancelled_job_ends_cancelled(cluster, backend, clock, run):
    job = submit(cluster, spec("stop"))
    step(backend, clock, run, 1)
    step(backend, clock, run, 2)
    cancel_job(user=cluster.alice, job=job)
    job.refresh_from_db()
    assert job.end_code == "cancelled" and end_reason_text(job) == "cancelled by alice"
    assert attempts(job) == [(1, "cancelled", None, False)]


def test_ttl_after_finished_deletes_the_replicas_and_keeps_the_record(cluster, backend, clock, run):
    job = submit(cluster, spec("brief", extra="ttlAfterFinished: 1h"))
    for seconds in (1, 2, 61):
        step(backend, clock, run, seconds)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.cleanup_at == job.finished + timedelta(hours=1)
    step(backend, clock, run, 3500)
    assert Replica.objects.filter(job=job).exists()
    step(backend, clock, run, 100)
    job.refresh_from_db()
    assert not Replica.objects.filter(job=job).exists() and job.cleaned_up == clock.now
    assert job.state == JobState.SUCCEEDED and attempts(job) == [(1, "succeeded", None, False)]
    assert job.events.filter(kind="cleaned-up").count() == 1
    step(backend, clock, run, 10)
    assert job.events.filter(kind="cleaned-up").count() == 1


def test_the_cycles_queries_do_not_grow_with_the_jobs_that_fail_and_retry(cluster, backend, clock, run):
    def failing_cycle(count, prefix):
        jobs = [
            submit(
                cluster,
                spec(
                    f"{prefix}{n}",
                    extra="retry: {limit: 2}\nmaxRuntime: 1h",
                    env='SIM_EXIT_CODE: "1", SIM_FAIL_AFTER: 5m',
                ),
            )
            for n in range(count)
        ]
        step(backend, clock, run, 1)
        step(backend, clock, run, 2)
        clock.advance(5)
        with CaptureQueriesContext(connection) as queries:
            run(backend, clock)
        assert all(Job.objects.get(pk=j.pk).pending_code == "retry_backoff" for j in jobs)
        Job.objects.filter(pk__in=[j.pk for j in jobs]).update(state=JobState.CANCELLED)
        return len(queries)

    assert failing_cycle(4, "many") <= failing_cycle(1, "few")
