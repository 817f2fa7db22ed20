"""Reads for the cluster and jobs, always scoped to what the caller may see."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count, Prefetch, QuerySet
from django.utils.translation import gettext

from scheduling import formats
from scheduling.core.units import MILLI_PER_GPU, gpu_model_name, vendor_name
from scheduling.health import model_differs
from scheduling.models import ACTIVE_STATES, Gpu, Job, JobEvent, Node, NodePool, Queue, QueueAccess, Replica
from scheduling.spec import ClusterInfo, PoolInfo


@dataclass(frozen=True)
class PoolGpus:
    total: int  # GPUs in the pool
    most_per_node: int  # GPUs of its largest node


def pool_gpu_counts() -> dict[int, PoolGpus]:
    """GPU counts per pool id, in one query (quotes and spec checks need them for every pool)."""
    # counted and summed in the database: a row per pool, not per node or GPU (every submit and quote reads it)
    quote = connection.ops.quote_name
    node, gpu = Node._meta, Gpu._meta
    sql = (f"SELECT n.{quote(node.get_field('pool').column)}, COALESCE(SUM(g.n), 0), COALESCE(MAX(g.n), 0) "
           f"FROM {quote(node.db_table)} n LEFT JOIN (SELECT {quote(gpu.get_field('node').column)} AS node_id, "
           f"COUNT(*) AS n FROM {quote(gpu.db_table)} GROUP BY {quote(gpu.get_field('node').column)}) g "
           f"ON g.node_id = n.{quote(node.pk.column)} GROUP BY n.{quote(node.get_field('pool').column)}")
    with connection.cursor() as cursor:
        cursor.execute(sql)
        rows = cursor.fetchall()
    return {pool_id: PoolGpus(int(total), int(most)) for pool_id, total, most in rows}


def pool_domain_gpus() -> dict[int, tuple[tuple[str, int], ...]]:
    """Per pool id with topology levels: each level (label key, outermost first) with the GPUs of its largest
    domain (the nodes sharing their values of the keys down to that level), in one query."""
    levels = {pk: tuple(keys) for pk, keys in NodePool.objects.values_list("pk", "topology_levels") if keys}
    if not levels:
        return {}
    sizes: dict[tuple[int, int, tuple], int] = defaultdict(int)
    for pool_id, labels, gpus in Node.objects.filter(pool_id__in=levels).annotate(n=Count("gpus")).values_list(
            "pool_id", "labels", "n"):
        keys, labels = levels[pool_id], labels or {}
        for depth in range(1, len(keys) + 1):
            if all(k in labels for k in keys[:depth]):
                sizes[(pool_id, depth, tuple(str(labels[k]) for k in keys[:depth]))] += gpus
    largest = {pk: [0] * len(keys) for pk, keys in levels.items()}
    for (pool_id, depth, _), gpus in sizes.items():
        largest[pool_id][depth - 1] = max(largest[pool_id][depth - 1], gpus)
    return {pk: tuple(zip(keys, largest[pk], strict=True)) for pk, keys in levels.items()}


def cluster_info() -> ClusterInfo:
    """What the spec checks need: each pool with its largest node's GPU count and its largest domains'."""
    counts = pool_gpu_counts()
    domains = pool_domain_gpus()
    return ClusterInfo(pools=tuple(
        PoolInfo(name=pool.name, vendor=vendor_name(pool.vendor), gpu_model=gpu_model_name(pool.gpu_model),
                 gpu_memory_mib=pool.gpu_memory_mib,
                 gpus_per_node=counts.get(pool.pk, PoolGpus(0, 0)).most_per_node,
                 sharing_modes=pool.sharing_modes, mig_profiles=frozenset(pool.mig_layout or ()),
                 topology_levels=tuple(pool.topology_levels or ()),
                 domain_gpus=domains.get(pool.pk, ()))
        for pool in NodePool.objects.order_by("name")
    ))


def queues_for_workspace(workspace) -> QuerySet[Queue]:
    return Queue.objects.filter(queueaccess__workspace=workspace).order_by("name")


def default_queue(workspace) -> Queue | None:
    access = QueueAccess.objects.select_related("queue").filter(workspace=workspace, is_default=True).first()
    return access.queue if access else None


def jobs_in(workspaces, *, workspace=None, state: str | None = None) -> QuerySet[Job]:
    """Jobs of the given workspaces (the caller's, as the portal scopes them)."""
    jobs = Job.objects.filter(workspace__in=workspaces)
    if workspace is not None:
        jobs = jobs.filter(workspace=workspace)
    if state:
        jobs = jobs.filter(state=state)
    return jobs.select_related("workspace", "queue").prefetch_related(
        Prefetch("replicas", queryset=Replica.objects.select_related("node"))
    )


def events_of(job: Job) -> QuerySet[JobEvent]:
    return job.events.order_by("time", "id")


def cluster_view() -> list[dict]:
    """Every pool, node and GPU with what holds it now (the operators' cluster page)."""
    held: dict[tuple[int, int], list[dict]] = {}
    replicas = Replica.objects.filter(state__in=("Scheduled", "Running"), node__isnull=False).select_related(
        "job__workspace")
    for r in replicas:
        slice_ = r.slice or {}
        for index in r.gpu_indices:
            held.setdefault((r.node_id, index), []).append({
                "job": r.job_id, "name": r.job.name, "workspace": r.job.workspace.slug, "state": r.state,
                "kind": slice_.get("kind", "whole"), "milli": slice_.get("gpu_milli", MILLI_PER_GPU),
                "mig": slice_.get("mig_profile", ""), "idle_since": r.idle_since,
            })
    pools = []
    for pool in NodePool.objects.prefetch_related("nodes__gpus").order_by("name"):
        nodes = []
        for node in pool.nodes.all():
            gpus = []
            for gpu in node.gpus.all():
                holders = held.get((node.pk, gpu.index), [])
                used = sum(h["milli"] for h in holders if h["kind"] in ("whole", "fraction", "mig"))
                if pool.sharing == "timeslice":
                    used = MILLI_PER_GPU * len(holders) // max(pool.timeslice_replicas, 1)
                gpus.append({"index": gpu.index, "uuid": gpu.uuid, "holders": holders, "used_milli": min(used, MILLI_PER_GPU)})
            nodes.append({"name": node.name, "ready": node.is_ready, "agent_silent": node.agent_silent,
                          "cordoned": node.cordoned, "last_heartbeat": node.last_heartbeat, "gpus": gpus,
                          "allocated": sum(g["used_milli"] for g in gpus) / MILLI_PER_GPU, "total": len(gpus)})
        pools.append({"pool": pool, "nodes": nodes, "allocated": sum(n["allocated"] for n in nodes),
                      "total": sum(n["total"] for n in nodes)})
    return pools


# --------------------------------------------------------------------------- node health


def age_text(age: timedelta | None) -> str:
    """"45 s", "12 min", "3 h", "2 d" in the reader's language; "never" for no time at all."""
    if age is None:
        return formats.gettext("never")
    return formats.age(age.total_seconds())


@dataclass(frozen=True)
class NodeHealth:
    node: Node
    state: str                 # Ready, NotReady
    why: str                   # why not ready, or why it is cordoned
    heartbeat_age: timedelta | None
    late: bool                 # silent past the window but not marked (every agent silent: the platform's fault?)
    gpus: list[dict]           # {"gpu": Gpu, "holders": [...], "errors": bool, "other_model": bool}

    @property
    def heartbeat_age_text(self) -> str:
        return age_text(self.heartbeat_age)


def node_health(now: datetime) -> list[dict]:
    """Every pool's nodes with their readiness, heartbeat age and agent version, and per GPU what its
    agent last reported and which placements hold it (job, workspace, submitter, slice, idle since).
    For operators: every workspace."""
    window = timedelta(seconds=settings.NODE_NOT_READY_AFTER_S)
    held: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for r in (Replica.objects.filter(state__in=ACTIVE_STATES, node__isnull=False)
              .select_related("job__workspace", "job__submitted_by").order_by("job_id", "role", "index")):
        holder = {"job": r.job_id, "name": r.job.name, "workspace": r.job.workspace.slug,
                  "submitter": r.job.submitted_by.get_username() if r.job.submitted_by else "",
                  "replica": f"{r.role}-{r.index}", "slice": r.slice_label, "idle_since": r.idle_since}
        for index in r.gpu_indices:
            held[(r.node_id, index)].append(holder)
    pools = []
    for pool in NodePool.objects.prefetch_related("nodes__gpus").order_by("name"):
        nodes = []
        for node in pool.nodes.all():
            age = now - node.last_heartbeat if node.last_heartbeat else None
            why = (gettext("its agent is silent") if node.agent_silent
                   else gettext("the cluster reports it not ready") if not node.ready
                   else gettext("cordoned") if node.cordoned else "")
            gpus = [{"gpu": g, "holders": held.get((node.pk, g.index), []),
                     "errors": bool(g.ecc_uncorrected or g.xid_count),
                     "other_model": model_differs(g.model, g.memory_mib, pool.gpu_model, pool.gpu_memory_mib)}
                    for g in node.gpus.all()]
            nodes.append(NodeHealth(node=node, state="Ready" if node.is_ready else "NotReady", why=why,
                                    heartbeat_age=age, late=bool(age and age > window and not node.agent_silent),
                                    gpus=gpus))
        pools.append({"pool": pool, "nodes": nodes})
    return pools


@dataclass(frozen=True)
class QueueShare:
    """A queue's subtree as the scheduler sees it now, in GPUs."""

    fair_share: float
    allocated: float       # held by the subtree's jobs
    pending_demand: float  # what its pending jobs need to start (gang minimum)
    demand: float          # what its jobs ask for at most (running + pending, elastic maxima)


def queue_shares(now: datetime) -> dict[str, QueueShare]:
    """Per queue: its fair share (water-filling over the cluster's capacity and the jobs' current demand,
    exactly as the scheduler computes it), allocation and demand."""
    from scheduling.core.session import Session, request_milli  # numpy: loaded when a dashboard asks
    from scheduling.cycle.snapshot import build_snapshot

    session = Session.build(build_snapshot(now))
    pending: dict[str, float] = defaultdict(float)
    demand: dict[str, float] = defaultdict(float)
    for state in session.jobs.values():
        total = 0
        for role in state.job.roles:
            pools = session.pools_for(role.request)
            total += request_milli(role.request, session.pools[pools[0]] if pools else None) * role.max_replicas
        for name in session.queue_path[state.job.queue]:
            demand[name] += total
            if state.is_pending():
                pending[name] += state.min_milli
    names = set(session.queue_path) | set(session.fair_share) | set(session.alloc)
    return {name: QueueShare(session.fair_share.get(name, 0.0) / MILLI_PER_GPU,
                             session.alloc.get(name, 0) / MILLI_PER_GPU,
                             pending[name] / MILLI_PER_GPU, demand[name] / MILLI_PER_GPU) for name in names}
