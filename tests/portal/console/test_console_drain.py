"""Draining a node: the preview, then the effect (preemptible replicas requeued and placed
elsewhere by the next cycle, non-preemptible ones untouched)."""

import pytest

from scheduling.models import Job, JobState, Node, Replica


def running_on(job):
    return {r.node.name for r in job.replicas.filter(state__in=("Scheduled", "Running")).select_related("node")}


@pytest.fixture
def two_jobs_on_h100_01(cluster, submit, backend, clock, run):
    """A preemptible and a non-preemptible job, both on h100-01 (h100-02 cordoned while they start)."""
    Node.objects.filter(name="h100-02").update(cordoned=True)
    movable = submit(cluster, "movable", preemptible="true", gpus=4, hours=5)
    fixed = submit(cluster, "fixed", preemptible="false", gpus=4, hours=5)
    run(backend, clock)
    clock.advance(5)
    run(backend, clock)
    Node.objects.filter(name="h100-02").update(cordoned=False)
    movable.refresh_from_db()
    fixed.refresh_from_db()
    assert movable.state == fixed.state == JobState.RUNNING
    assert running_on(movable) == running_on(fixed) == {"h100-01"}
    return movable, fixed


@pytest.mark.django_db(transaction=True)
def test_drain_preview_shows_what_moves_and_what_stays(two_jobs_on_h100_01, admin_client):
    movable, fixed = two_jobs_on_h100_01
    from portal.console.services import drain_preview

    preview = drain_preview(Node.objects.get(name="h100-01"))
    assert [i.job_id for i in preview.moves] == [movable.pk]
    assert [i.job_id for i in preview.stays] == [fixed.pk]
    page = admin_client.get("/console/nodes/h100-01/drain/").content.decode()
    moves, stays = page.split('id="drain-moves"')[1].split('id="drain-stays"')
    assert f'data-job="{movable.pk}"' in moves and f'data-job="{fixed.pk}"' not in moves
    assert f'data-job="{fixed.pk}"' in stays
    assert not Node.objects.get(name="h100-01").cordoned  # a preview changes nothing


@pytest.mark.django_db(transaction=True)
def test_drain_moves_preemptible_work_and_leaves_the_rest(two_jobs_on_h100_01, admin_client, backend, clock, run):
    movable, fixed = two_jobs_on_h100_01
    fixed_replica = fixed.replicas.get(state="Running")
    response = admin_client.post("/console/nodes/h100-01/drain/")
    assert response.status_code == 302
    node = Node.objects.get(name="h100-01")
    assert node.cordoned
    evicted = movable.replicas.get(node=node)
    assert (evicted.state, evicted.end_reason) == (JobState.PREEMPTED, "drain") and evicted.ended is not None
    movable.refresh_from_db()
    assert movable.state == JobState.PENDING and "h100-01" in movable.pending_reason
    assert list(movable.events.values_list("kind", flat=True))[-2:] == ["preempted", "requeued"]
    fixed_replica.refresh_from_db()
    assert fixed_replica.state == JobState.RUNNING and fixed_replica.ended is None
    # the next cycle stops the evicted pod and places the job on the other node
    clock.advance(5)
    run(backend, clock)
    clock.advance(5)
    run(backend, clock)
    movable.refresh_from_db()
    assert movable.state == JobState.RUNNING and running_on(movable) == {"h100-02"}
    assert running_on(Job.objects.get(pk=fixed.pk)) == {"h100-01"}
    assert Replica.objects.filter(job=movable).count() == 2
    from scheduling.models import SimulatedPod

    assert set(SimulatedPod.objects.filter(job_id=movable.pk).values_list("node", flat=True)) == {"h100-02"}
    from portal.console.models import AuditEntry

    entry = AuditEntry.objects.get(action="drain")
    assert entry.username == "admin" and entry.target_repr == "h100-01" and str(movable.pk) in entry.message


@pytest.mark.django_db
def test_cordon_and_uncordon_are_audited(admin_client, cluster):
    from portal.console.models import AuditEntry

    admin_client.post("/console/nodes/rtx4090-01/cordon/", {"cordon": "1"})
    assert Node.objects.get(name="rtx4090-01").cordoned
    admin_client.post("/console/nodes/rtx4090-01/cordon/", {"cordon": "0"})
    assert not Node.objects.get(name="rtx4090-01").cordoned
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == ["cordon", "uncordon"]
