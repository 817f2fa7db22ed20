"""A drain keeps the promise of its preview: a job whose replicas left elsewhere would fall below
its minimum goes back to its queue whole (not left running, and billed, short of what it needs);
an elastic job that keeps its minimum runs on, shrunk. The ledger of a drained replica ends at the
drain, and a replica that never started is billed nothing."""

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db.models import Max, Sum
from tests_job_specs import job_spec

from billing.api import post_ledger
from billing.models import ChargeLine
from billing.services import submit_quoted_job
from portal.console.services import drain, drain_preview
from scheduling.models import ACTIVE_STATES, JobState, Node, Replica


@dataclass(frozen=True)
class Shape:
    name: str
    min: int
    max: int
    nodes: tuple[str, ...]          # where each replica runs
    requeued: bool                  # what the drain of h100-01 should do to the job
    started: tuple[bool, ...] = ()  # per replica: running (True) or only scheduled (False); default all running


SHAPES = [
    Shape("min-1 elastic, one replica drained", 1, 3, ("h100-01", "h100-02", "h100-02"), requeued=False),
    Shape("min-2 on 3 replicas, 2 on the drained node", 2, 3, ("h100-01", "h100-01", "h100-02"), requeued=True),
    Shape("min-2 on 3 replicas, 1 on the drained node", 2, 3, ("h100-01", "h100-02", "h100-02"), requeued=False),
    Shape("gang (min = max)", 3, 3, ("h100-01", "h100-02", "h100-02"), requeued=True),
    Shape("all replicas on the drained node", 1, 2, ("h100-01", "h100-01"), requeued=True),
]


def place(cluster, clock, shape: Shape):
    """The job running as `shape` says, each replica started an hour ago with 2 GPUs."""
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=job_spec(
        shape.name.split(",")[0].replace(" ", "-").replace("(", "").replace(")", "").replace("=", ""),
        preemptible="true", gpus=2, min=shape.min, max=shape.max))
    started = shape.started or (True,) * len(shape.nodes)
    since = clock.now - timedelta(hours=1)
    used: dict[str, int] = {}
    for index, (name, running) in enumerate(zip(shape.nodes, started, strict=True)):
        node = Node.objects.get(name=name)
        first = used.get(name, 0)
        used[name] = first + 2
        Replica.objects.create(
            job=job, role="main", index=index, node=node, gpu_indices=[first, first + 1],
            slice={"kind": "whole", "gpu_milli": 2000, "gpu_mem_mib": 2 * 80 * 1024},
            state=JobState.RUNNING if running else JobState.SCHEDULED, started=since if running else None)
    job.state = JobState.RUNNING
    job.save(update_fields=["state"])
    return job


@pytest.mark.django_db
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_the_drain_does_what_its_preview_said(cluster, clock, operator, shape):
    job = place(cluster, clock, shape)
    node = Node.objects.get(name="h100-01")
    preview = drain_preview(node)
    on_node = sum(1 for n in shape.nodes if n == "h100-01")
    assert [i.job_id for i in preview.moves] == [job.pk] * on_node
    assert (job.pk in preview.requeued, job.pk in preview.shrunk) == (shape.requeued, not shape.requeued)
    promised_stopped = {(i.job_id, i.replica) for i in preview.moves + preview.also_stopped}

    done = drain(operator, node, now=clock.now)
    assert (done.requeued, done.shrunk, done.also_stopped) == (preview.requeued, preview.shrunk, preview.also_stopped)
    job.refresh_from_db()
    stopped = {(job.pk, f"{r.role}-{r.index}") for r in job.replicas.filter(state=JobState.PREEMPTED, ended=clock.now)}
    assert stopped == promised_stopped
    active = job.replicas.filter(state__in=ACTIVE_STATES)
    if shape.requeued:
        assert job.state == JobState.PENDING and not active.exists()
        assert job.pending_code == "node_drained"
        assert list(job.events.values_list("kind", flat=True))[-2:] == ["preempted", "requeued"]
    else:
        assert job.state == JobState.RUNNING
        assert active.count() == len(shape.nodes) - on_node >= shape.min
        assert not active.filter(node=node).exists()
        assert job.events.filter(kind="shrunk").exists()


@pytest.mark.django_db
def test_a_preemptible_job_below_its_minimum_is_no_longer_left_running(cluster, clock, operator):
    """The measured defect: min 2, two of its three replicas on the drained node; it ran on in one."""
    job = place(cluster, clock, SHAPES[1])
    drain(operator, Node.objects.get(name="h100-01"), now=clock.now)
    assert not job.replicas.filter(state__in=ACTIVE_STATES).exists()


@pytest.mark.django_db
def test_the_ledger_of_a_drained_replica_stops_at_the_drain(cluster, clock, operator):
    shape = Shape("drained-and-billed", 2, 3, ("h100-01", "h100-01", "h100-02"), requeued=True,
                  started=(True, False, True))
    job = place(cluster, clock, shape)
    drained_at = clock.now
    drain(operator, Node.objects.get(name="h100-01"), now=drained_at)
    post_ledger(now=drained_at + timedelta(hours=3))
    lines = ChargeLine.objects.filter(job=job)
    assert lines.exists()
    assert lines.aggregate(end=Max("charge_end"))["end"] == drained_at
    # two replicas ran one hour each with 2 GPUs; the one only scheduled is billed nothing
    assert lines.aggregate(hours=Sum("allocated_gpu_hours"))["hours"] == 4


@pytest.mark.django_db
def test_the_preview_page_lists_replicas_stopped_elsewhere(cluster, clock, admin_client):
    job = place(cluster, clock, SHAPES[1])
    page = admin_client.get("/console/nodes/h100-01/drain/").content.decode()
    also = page.split('id="drain-also-stopped"')[1].split('id="drain-stays"')[0]
    assert f'data-job="{job.pk}"' in also and "main-2" in also


@pytest.mark.django_db
def test_the_planner_history_replays_a_job_shrunk_by_a_drain(cluster, clock, operator):
    """Replicas started together, one ended by the drain and one still running: the history still reads."""
    from scheduling.history import history_jobs

    job = place(cluster, clock, SHAPES[0])
    drain(operator, Node.objects.get(name="h100-01"), now=clock.now)
    clock.advance(60)
    history = {h.job.id: h for h in history_jobs()}
    assert history[str(job.pk)].pool == "h100" and not history[str(job.pk)].finished
