"""Applying a cycle's evictions: the replicas stopped, each job Preempted then back in its queue (or
shrunk), its events in that order with the job's state at each, and the rows written together, so
that the queries do not grow with the jobs evicted."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.services import submit_quoted_job
from scheduling import core
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.cycle.run import CycleReport, apply
from scheduling.models import Job, JobState, Replica
from scheduling.signals import job_events_committed
from tests.scheduling.cycle.specs import spec


def running_jobs(cluster, backend, clock, run, count, prefix):
    jobs = [submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec(f"{prefix}{n}"))
            for n in range(count)]
    run(backend, clock)
    assert all(r.state == JobState.SCHEDULED for r in Replica.objects.filter(job__in=jobs))
    return jobs


def evicts(jobs, reason="preempt"):
    out = []
    for job in jobs:
        replica = Replica.objects.get(job=job)
        out.append(core.Evict(str(job.pk), replica.role, replica.index, replica.node.name, reason,
                              by_queue="vision-lab", level="vision-lab", rule="priority"))
    return out


def applied(decisions, backend, clock, django_capture_on_commit_callbacks):
    report = CycleReport()
    with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks(execute=True):
        apply(decisions, backend, clock.now, report)
    return report, len(queries)


def test_evicted_jobs_are_requeued_with_their_events_in_order(cluster, clock, run, django_capture_on_commit_callbacks):
    backend = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)
    jobs = running_jobs(cluster, backend, clock, run, 3, "low")
    published = []

    def receive(sender, events, **kwargs):
        published.extend(message for _, message in events)

    job_events_committed.connect(receive, dispatch_uid="test-evictions-applied")
    try:
        report, _ = applied(core.Decisions(evicts=evicts(jobs)), backend, clock, django_capture_on_commit_callbacks)
    finally:
        job_events_committed.disconnect(dispatch_uid="test-evictions-applied")
    assert (report.evicts, report.requeued) == (3, 3)
    for job in jobs:
        job.refresh_from_db()
        assert job.state == JobState.PENDING and job.pending_code == "requeued"
        events = list(job.events.order_by("time", "id").values_list("kind", "state"))
        assert events[-2:] == [("preempted", JobState.PREEMPTED), ("requeued", JobState.PENDING)]
        assert Replica.objects.get(job=job).state == JobState.PREEMPTED
        sent = [(m["kind"], m["state"]) for m in published if m["job"] == job.pk]
        assert sent == [("preempted", JobState.PREEMPTED), ("requeued", JobState.PENDING)]


def test_a_replica_evicted_twice_or_no_longer_active_counts_once(cluster, clock, run, django_capture_on_commit_callbacks):
    backend = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)
    first, second = running_jobs(cluster, backend, clock, run, 2, "low")
    Replica.objects.filter(job=second).update(state=JobState.SUCCEEDED)
    twice = evicts([first]) * 2
    report, _ = applied(core.Decisions(evicts=[*twice, *evicts([second])]), backend, clock,
                        django_capture_on_commit_callbacks)
    assert (report.evicts, report.requeued) == (1, 1)
    assert [e.kind for e in Job.objects.get(pk=first.pk).events.order_by("id")].count("preempted") == 1
    assert not Job.objects.get(pk=second.pk).events.filter(kind="preempted").exists()


def test_the_queries_do_not_grow_with_the_jobs_evicted(cluster, clock, run, django_capture_on_commit_callbacks):
    backend = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)
    few = running_jobs(cluster, backend, clock, run, 1, "few")
    many = running_jobs(cluster, backend, clock, run, 5, "many")
    _, one = applied(core.Decisions(evicts=evicts(few)), backend, clock, django_capture_on_commit_callbacks)
    _, five = applied(core.Decisions(evicts=evicts(many)), backend, clock, django_capture_on_commit_callbacks)
    assert five == one
