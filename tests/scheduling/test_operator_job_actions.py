"""Operators' actions on jobs (scheduling.services): a path of their own for staff, while the tenant
rule for cancelling stays as it was; each action's rule, and the job event it leaves."""

import pytest
from tests_job_specs import job_spec

from scheduling import services
from scheduling.errors import Conflict, DomainError
from scheduling.models import Job, JobState, Queue


@pytest.fixture
def backend(clock):
    from scheduling.backends.simulated.backend import SimulatedBackend

    return SimulatedBackend(speedup=1, failure_rate=0, clock=clock)


def submit(cluster, name, *, user=None, workspace=None, **kwargs):
    return services.submit_job(user=user or cluster.alice, workspace=workspace or cluster.vision,
                               spec=job_spec(name, **kwargs))


@pytest.fixture
def running(cluster, backend, clock, run):
    job = submit(cluster, "runner", gpus=2)
    run(backend, clock)
    clock.advance(5)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    return job


def kinds(job):
    return list(job.events.order_by("id").values_list("kind", flat=True))


# --------------------------------------------------------------------------- who may act


def test_the_tenant_rule_is_unchanged_staff_included(cluster, clock):
    job = submit(cluster, "alices")
    for outsider in (cluster.bob, cluster.finance, cluster.admin):  # another tenant, a non-submitter, staff
        with pytest.raises(services.NotSubmitter):
            services.cancel_job(user=outsider, job=job)
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING


@pytest.mark.parametrize("action", ["cancel", "requeue", "priority", "move"])
def test_only_operators_take_the_operator_path(cluster, clock, action):
    job = submit(cluster, "alices", preemptible="true")
    community = Queue.objects.get(name="community")
    call = {
        "cancel": lambda user: services.cancel_job_as_operator(operator=user, job=job),
        "requeue": lambda user: services.requeue_job_as_operator(operator=user, job=job),
        "priority": lambda user: services.change_job_priority(operator=user, job=job, priority=50),
        "move": lambda user: services.move_job_to_queue(operator=user, job=job, queue=community),
    }[action]
    for tenant in (cluster.alice, cluster.bob):  # the job's own owner is no operator either
        with pytest.raises(services.NotOperator):
            call(tenant)
    job.refresh_from_db()
    assert (job.state, job.priority, job.queue.name) == (JobState.PENDING, 0, "vision-lab")
    assert kinds(job) == ["submitted"]


# --------------------------------------------------------------------------- cancel


def test_an_operator_cancels_any_workspaces_job_with_a_reason(cluster, running, clock):
    job = services.cancel_job_as_operator(operator=cluster.admin, job=running, reason="node maintenance")
    assert job.state == JobState.CANCELLED and job.finished == clock.now
    assert not job.replicas.filter(state__in=("Scheduled", "Running")).exists()
    event = job.events.order_by("id").last()
    assert event.kind == "cancelled" and event.reason.startswith("cancelled by operator admin: node maintenance")
    with pytest.raises(Conflict):
        services.cancel_job_as_operator(operator=cluster.admin, job=job)


# --------------------------------------------------------------------------- requeue


def test_requeue_stops_the_replicas_and_puts_the_job_back_in_its_queue(cluster, running, clock):
    held = list(running.replicas.filter(state=JobState.RUNNING))
    job = services.requeue_job_as_operator(operator=cluster.admin, job=running, reason="bad node")
    assert job.state == JobState.PENDING and job.pending_code == "requeued"
    for replica in held:
        replica.refresh_from_db()
        assert (replica.state, replica.end_reason, replica.ended) == (JobState.PREEMPTED, "operator", clock.now)
    assert kinds(job)[-2:] == ["preempted", "requeued"]
    preempted = job.events.get(kind="preempted")
    assert "by operator admin: bad node" in preempted.reason and preempted.data["reason"] == "operator"


def test_the_next_cycle_places_a_requeued_job_again(cluster, running, backend, clock, run):
    services.requeue_job_as_operator(operator=cluster.admin, job=running)
    clock.advance(5)
    run(backend, clock)
    clock.advance(5)
    run(backend, clock)
    running.refresh_from_db()
    assert running.state == JobState.RUNNING and running.replicas.count() == 2


@pytest.mark.parametrize("state", [JobState.PENDING, JobState.SUCCEEDED, JobState.CANCELLED])
def test_only_a_scheduled_or_running_job_is_requeued(cluster, clock, state):
    job = submit(cluster, "idle")
    Job.objects.filter(pk=job.pk).update(state=state)
    with pytest.raises(Conflict, match="only a scheduled or running job"):
        services.requeue_job_as_operator(operator=cluster.admin, job=job)
    assert Job.objects.get(pk=job.pk).state == state and kinds(job) == ["submitted"]


# --------------------------------------------------------------------------- priority


def test_priority_changes_while_the_job_is_not_finished(cluster, running):
    job, old = services.change_job_priority(operator=cluster.admin, job=running, priority=70, reason="deadline")
    assert (old, job.priority, Job.objects.get(pk=job.pk).priority) == (0, 70, 70)
    event = job.events.get(kind="priority-changed")
    assert event.data == {"from": 0, "to": 70, "operator": "admin"} and "priority 0 → 70" in event.reason


@pytest.mark.parametrize("value", [-1, 101, 2.5, True, "50"])
def test_priority_is_a_whole_number_from_0_to_100(cluster, clock, value):
    job = submit(cluster, "p")
    with pytest.raises(DomainError) as refused:
        services.change_job_priority(operator=cluster.admin, job=job, priority=value)
    assert "priority" in refused.value.errors and Job.objects.get(pk=job.pk).priority == 0


def test_priority_refuses_no_change_and_finished_jobs(cluster, clock):
    job = submit(cluster, "p")
    with pytest.raises(DomainError, match="already 0"):
        services.change_job_priority(operator=cluster.admin, job=job, priority=0)
    Job.objects.filter(pk=job.pk).update(state=JobState.FAILED)
    with pytest.raises(Conflict):
        services.change_job_priority(operator=cluster.admin, job=job, priority=10)
    assert Job.objects.get(pk=job.pk).priority == 0 and kinds(job) == ["submitted"]


# --------------------------------------------------------------------------- move


def test_a_pending_job_moves_to_another_queue_of_its_workspace(cluster, clock):
    job = submit(cluster, "mover", preemptible="true")
    job, old = services.move_job_to_queue(operator=cluster.admin, job=job, queue=Queue.objects.get(name="community"))
    assert old == "vision-lab" and Job.objects.get(pk=job.pk).queue.name == "community"
    event = job.events.get(kind="queue-changed")
    assert event.data["from"] == "vision-lab" and event.data["to"] == "community"


@pytest.mark.parametrize("target, message", [
    ("nlp-group", "not open to workspace 'vision-lab'"),  # the other tenant's queue
    ("vision-lab", "already in queue"),
    ("root", "not open"),  # a parent queue
])
def test_a_job_moves_only_to_a_queue_open_to_its_workspace(cluster, clock, target, message):
    job = submit(cluster, "mover", preemptible="true")
    with pytest.raises(DomainError, match=message):
        services.move_job_to_queue(operator=cluster.admin, job=job, queue=Queue.objects.get(name=target))
    assert Job.objects.get(pk=job.pk).queue.name == "vision-lab" and kinds(job) == ["submitted"]


def test_a_parent_queue_takes_no_job_even_when_open(cluster, clock):
    from tests.factories import QueueAccessFactory, QueueFactory

    parent = QueueFactory(name="vision-parent", parent=Queue.objects.get(name="root"))
    QueueFactory(name="vision-child", parent=parent)
    QueueAccessFactory(queue=parent, workspace=cluster.vision)
    job = submit(cluster, "mover")
    with pytest.raises(DomainError, match="has sub-queues"):
        services.move_job_to_queue(operator=cluster.admin, job=job, queue=parent)


def test_a_preemptible_only_queue_takes_no_other_job(cluster, clock):
    job = submit(cluster, "fixed", preemptible="false")
    with pytest.raises(DomainError, match="preemptible work only"):
        services.move_job_to_queue(operator=cluster.admin, job=job, queue=Queue.objects.get(name="community"))


def test_only_a_pending_job_moves(cluster, running):
    with pytest.raises(Conflict, match="only a pending job"):
        services.move_job_to_queue(operator=cluster.admin, job=running, queue=Queue.objects.get(name="community"))
    assert Job.objects.get(pk=running.pk).queue.name == "vision-lab"
