"""The scheduling cycle on the simulated cluster: states, idempotence, crash recovery, node loss,
preemption in the community queue, and a real Celery worker running the beat task."""

from datetime import timedelta
from decimal import Decimal

import pytest

from billing.services import submit_quoted_job
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, JobEvent, JobState, Node, Replica, SimulatedPod
from tests.scheduling.cycle.specs import spec


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock)  # a 1 h job runs 60 s


def kinds(job):
    return [e.kind for e in job.events.order_by("id")]


def test_a_job_goes_pending_scheduled_running_succeeded_with_a_final_cost(cluster, backend, clock, run):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("train"))
    assert run(backend, clock).binds == 1
    job.refresh_from_db()
    assert job.state == JobState.SCHEDULED
    clock.advance(2)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.started is not None
    clock.advance(61)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED
    assert kinds(job) == ["submitted", "scheduled", "running", "succeeded"]
    # 1 H100 for (about) one simulated hour at 3.00/h + 1 CPU + 4 GiB: close to the 3.04 estimate
    assert job.final_cost is not None and job.currency == "USD"
    assert abs(job.final_cost - Decimal(job.quote["estimate_low"])) < Decimal("0.10")
    assert not SimulatedPod.objects.exists()


def test_a_second_cycle_on_an_unchanged_cluster_changes_nothing(cluster, backend, clock, run):
    for n in range(3):
        submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec(f"j{n}"))
    first = run(backend, clock)
    assert first.binds == 3
    second = run(backend, clock)
    assert (second.binds, second.evicts, second.relaunched, second.orphans_removed) == (0, 0, 0, 0)
    assert Replica.objects.count() == 3


class CrashingBackend(SimulatedBackend):
    """A worker killed after the database committed its decisions, before the backend heard."""

    def launch_many(self, replicas):
        raise SystemExit("worker killed")


def test_killed_between_deciding_and_applying_is_reconciled_next_cycle(cluster, backend, clock, run):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("crash"))
    with pytest.raises(SystemExit):
        run(CrashingBackend(speedup=60, failure_rate=0, clock=clock), clock)
    assert Replica.objects.filter(job=job, state=JobState.SCHEDULED).count() == 1
    assert not SimulatedPod.objects.exists()
    report = run(backend, clock)
    assert report.relaunched == 1 and report.binds == 0
    assert SimulatedPod.objects.count() == 1 and Replica.objects.count() == 1
    clock.advance(2)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING


def test_a_pod_the_database_does_not_hold_is_removed(cluster, backend, clock, run):
    SimulatedPod.objects.create(job_id=999, role="main", index=0, node="h100-01", launched=clock.now,
                                job_started=clock.now, run_seconds=100)
    assert run(backend, clock).orphans_removed == 1
    assert not SimulatedPod.objects.exists()


def test_a_lost_node_requeues_its_jobs_which_run_elsewhere(cluster, backend, clock, run):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("fragile", gpus=8))
    run(backend, clock)
    clock.advance(2)
    run(backend, clock)
    node = Replica.objects.get(job=job).node
    Node.objects.filter(pk=node.pk).update(ready=False)
    clock.advance(2)
    run(backend, clock)
    job.refresh_from_db()
    assert "preempted" in kinds(job) and "requeued" in kinds(job)
    lost = Replica.objects.get(job=job, attempt=0)
    assert lost.state == JobState.PREEMPTED and lost.end_reason == "node-lost"
    clock.advance(2)
    run(backend, clock)
    again = Replica.objects.get(job=job, attempt=1)
    assert again.node != node and again.state in (JobState.SCHEDULED, JobState.RUNNING)


def test_higher_priority_preempts_lower_in_the_community_queue(cluster, backend, clock, run):
    alice_jobs = [
        submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                          spec=spec(f"a{n}", queue="community", gpus=8, pool="h100"))
        for n in range(2)
    ]
    run(backend, clock)
    clock.advance(2)
    run(backend, clock)
    assert all(Job.objects.get(pk=j.pk).state == JobState.RUNNING for j in alice_jobs)
    bob_job = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp,
                                spec=spec("b0", queue="community", gpus=8, priority=50, pool="h100"))
    for _ in range(3):
        clock.advance(2)
        run(backend, clock)
    bob_job.refresh_from_db()
    assert bob_job.state in (JobState.SCHEDULED, JobState.RUNNING)
    preempted = [j for j in alice_jobs if "preempted" in kinds(Job.objects.get(pk=j.pk))]
    assert len(preempted) == 1
    victim = Job.objects.get(pk=preempted[0].pk)
    assert victim.state == JobState.PENDING and victim.pending_reason
    # The eviction explains itself, naming another tenant's queue but never its job.
    event = victim.events.get(kind="preempted")
    assert event.data["causes"] == [{"by_job": "", "by_queue": "community", "level": "community", "rule": "priority"}]
    assert "taken by a job in queue community: a job of higher priority" in event.reason
    # neither the taking job (a reason names one as "job <id>") nor its name; the id's digits alone may be in
    # the reason's figures ("0.4 GPU-hours")
    assert "taken by job" not in event.reason and f"job {bob_job.pk}" not in event.reason
    assert "b0" not in event.reason


def test_an_eviction_names_the_taking_job_within_the_same_workspace(cluster, backend, clock, run):
    low = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                            spec=spec("low", queue="community", gpus=8, pool="h100"))
    others = [submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                                spec=spec("other", queue="community", gpus=8, pool="h100"))]
    run(backend, clock)
    urgent = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                               spec=spec("urgent", queue="community", gpus=8, priority=50, pool="h100"))
    for _ in range(3):
        clock.advance(2)
        run(backend, clock)
    events = JobEvent.objects.filter(job__in=[low, *others], kind="preempted")
    assert len(events) == 1
    assert events[0].data["causes"][0]["by_job"] == str(urgent.pk)
    assert f"taken by job {urgent.pk} in queue community" in events[0].reason


def test_non_preemptible_work_is_never_evicted(cluster, backend, clock, run):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                            spec=spec("steady", preemptible="false", gpus=8))
    run(backend, clock)
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                      spec=spec("urgent", preemptible="false", gpus=8, priority=90))
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                      spec=spec("urgent2", preemptible="false", gpus=8, priority=90))
    for _ in range(3):
        clock.advance(2)
        run(backend, clock)
    assert "preempted" not in kinds(Job.objects.get(pk=job.pk))


def test_pending_jobs_get_a_readable_reason(cluster, backend, clock, run):
    for n in range(2):
        submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec(f"big{n}", gpus=8, preemptible="false"))
        clock.advance(1)  # the third is the last in the queue's order (at one instant the ids would decide it)
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("third", gpus=8, preemptible="false"))
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    assert "GPU" in job.pending_reason and "waiting for the next" not in job.pending_reason
    assert "pending" in kinds(job)


@pytest.mark.django_db(transaction=True)
def test_real_celery_worker_runs_the_scheduling_cycle(cluster, celery_worker_queue):
    from scheduling.tasks import scheduling_cycle

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("via-celery"))
    result = scheduling_cycle.apply_async(queue=celery_worker_queue)
    result.get(timeout=60)
    job.refresh_from_db()
    assert job.state in (JobState.SCHEDULED, JobState.RUNNING)
    assert Replica.objects.filter(job=job).count() == 1


def test_only_one_cycle_runs_at_a_time(cluster):
    import redis
    from django.conf import settings

    from scheduling.tasks import LOCK_NAME, scheduling_cycle

    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("locked"))
    lock = redis.Redis.from_url(settings.REDIS_URL).lock(LOCK_NAME, timeout=30)
    assert lock.acquire(blocking=False)
    try:
        assert scheduling_cycle() is None
        assert not Replica.objects.exists()
    finally:
        lock.release()
    assert scheduling_cycle()["binds"] == 1


def test_an_off_peak_option_waits_for_its_window(cluster, backend, clock, run):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("night"),
                            option="h100.exclusive.off-peak", now=clock.now)
    assert job.not_before is not None and job.not_before > clock.now
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.PENDING and "off-peak" in job.pending_reason
    clock.now = job.not_before + timedelta(minutes=1)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.SCHEDULED


def test_a_whole_gpu_stored_without_its_memory_still_holds_the_gpu(cluster, backend, clock, run):
    """Rows written before slices named their memory: the cycle reads them as the GPU's full memory
    instead of refusing the whole snapshot, and no one else is placed on that GPU."""
    from scheduling.cycle.snapshot import build_snapshot

    node = Node.objects.filter(pool__name="h100").order_by("name").first()
    old = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("old-row"))
    Job.objects.filter(pk=old.pk).update(state=JobState.RUNNING, started=clock.now)
    Replica.objects.create(job=old, role="main", index=0, state=JobState.RUNNING, node=node, gpu_indices=[0],
                           slice={"kind": "whole"}, started=clock.now)
    held = next(r for r in build_snapshot(clock.now).running if r.job_id == str(old.pk))
    assert held.slice.gpu_milli == 1000 and held.slice.gpu_mem_mib == node.gpus.get(index=0).memory_mib
    clock.advance(1)  # the new jobs come after it in the queue's order (at one instant the ids would decide it)
    jobs = [submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec(f"new-{n}"))
            for n in range(node.gpus.count())]
    run(backend, clock)
    placed = list(Replica.objects.filter(job__in=jobs, node=node).values_list("gpu_indices", flat=True))
    assert placed and [0] not in placed
