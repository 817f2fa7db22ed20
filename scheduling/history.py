"""The platform's own job history as replay input, and its cluster as a core Snapshot to replay it on.

`history_jobs` reads the jobs submitted in a window (by default the last 30 days): each one's queue,
roles, priority and preemptible flag as the cycle would give them to the core, its submission (or the
off-peak window it waited for), and how long it ran: from its first replica's start to its last
replica's end (a job still running: so far, or its declared duration if that is longer; a job that
never ran and still waits: its declared duration; a job cancelled or failed before it ran asked for
nothing and is left out). `cluster_snapshot` is the cluster as it is: pools, every node (ready and
schedulable: capacity planning counts what is owned) and the queue tree. A job with a deadline (`complete_by`)
is replayed as one: in the gaps until its latest start (`deadlines.margin_s` kept in hand), strict from it. `where_ran` says in which pool
each job's replicas ran, for figures per pool.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduling import clock
from scheduling.core import model as cm
from scheduling.core.replay import ReplayJob
from scheduling.cycle.snapshot import core_job, core_queue, core_roles
from scheduling.deadlines import margin_s
from scheduling.models import FINAL_STATES, Gpu, Job, Node, NodePool, Queue, Replica

DEFAULT_DAYS = 30


@dataclass(frozen=True)
class HistoryJob:
    job: cm.Job
    submit: float                  # epoch seconds
    duration: float                # seconds it ran (or will, as declared)
    pool: str                      # where its first replica ran ("" never ran)
    finished: bool
    complete_by: float | None = None   # a deadline job's deadline (epoch seconds)


def cluster_snapshot() -> cm.Snapshot:
    """The cluster's pools, nodes and queues; no jobs, nothing running."""
    pools = tuple(p.as_core() for p in NodePool.objects.order_by("name"))
    gpus_by_node: dict[int, list[cm.Gpu]] = defaultdict(list)
    for node_id, index, uuid, memory in Gpu.objects.values_list("node_id", "index", "uuid", "memory_mib"):
        gpus_by_node[node_id].append(cm.Gpu(index=index, uuid=uuid, memory_mib=memory))
    nodes = tuple(
        cm.Node(name=name, pool=pool, gpus=tuple(sorted(gpus_by_node[pk], key=lambda g: g.index)), cpu_milli=cpu,
                memory_mib=mem)
        for pk, name, pool, cpu, mem in Node.objects.order_by("name").values_list(
            "pk", "name", "pool__name", "cpu_milli", "memory_mib"))
    names = dict(Queue.objects.values_list("pk", "name"))
    queues = tuple(core_queue(q, names.get(q.parent_id)) for q in Queue.objects.order_by("name"))
    return cm.Snapshot(pools=pools, nodes=nodes, queues=queues, jobs=())


def history_jobs(*, since: datetime | None = None, until: datetime | None = None,
                 days: int = DEFAULT_DAYS) -> list[HistoryJob]:
    """Jobs submitted in [since, until] (default: the last `days` days), in submission order."""
    until = until or clock.now()
    since = since or until - timedelta(days=days)
    runs: dict[int, list[tuple[datetime, datetime | None, str]]] = defaultdict(list)
    for job_id, started, ended, pool in Replica.objects.filter(
            job__created__gte=since, job__created__lte=until, started__isnull=False).values_list(
            "job_id", "started", "ended", "node__pool__name"):
        runs[job_id].append((started, ended, pool or ""))
    roles_by_text: dict[str, tuple[cm.Role, ...]] = {}
    out = []
    rows = Job.objects.filter(created__gte=since, created__lte=until).exclude(roles=[]).order_by("created", "pk")
    for pk, queue, roles, priority, preemptible, reduce_cost, created, not_before, state, declared, deadline in \
            rows.values_list("pk", "queue__name", "roles", "priority", "preemptible", "reduce_cost", "created",
                             "not_before", "state", "expected_duration_s", "complete_by"):
        placed = runs.get(pk)
        finished = state in FINAL_STATES
        if placed:
            first = min(p[0] for p in placed)
            ends = [p[1] for p in placed]
            if finished and all(ends):
                seconds = (max(ends) - first).total_seconds()
            else:
                seconds = max((until - first).total_seconds(), float(declared))
            pool = min(placed, key=lambda p: p[0])[2]   # the first placement's pool (ends may be open)
        elif finished:
            continue                       # ended before it ever ran
        else:
            seconds, pool = float(declared), ""
        text = repr(roles)
        if text not in roles_by_text:
            roles_by_text[text] = core_roles(roles)
        job = core_job(pk, queue, roles_by_text[text], priority, preemptible, reduce_cost, created)
        submit = max(created, not_before) if not_before else created
        out.append(HistoryJob(job, submit.timestamp(), max(seconds, 0.0), pool, finished,
                              None if deadline is None else deadline.timestamp()))
    return out


def replay_jobs(history: list[HistoryJob], *, checkpoint_s: float | None, preemption: bool = True) -> list[ReplayJob]:
    """The history as the replay engine's jobs. Without `preemption` no job may be evicted; the core then keeps
    each queue's work within its deserved quota (what non-preemptible work gets)."""
    out = []
    for h in history:
        job = h.job if preemption or not h.job.preemptible else cm.Job(
            h.job.id, h.job.queue, h.job.roles, priority=h.job.priority, preemptible=False,
            reduce_cost=h.job.reduce_cost, created=h.job.created)
        # a deadline job keeps its deadline: the core runs it in the gaps until its latest start
        out.append(ReplayJob(job, h.submit, h.duration, checkpoint_s, deadline=h.complete_by,
                             margin_s=0.0 if h.complete_by is None else margin_s(h.duration)))
    return out


__all__ = ["DEFAULT_DAYS", "HistoryJob", "cluster_snapshot", "history_jobs", "replay_jobs"]
