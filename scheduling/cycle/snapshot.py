"""The scheduler's view of the database: one core Snapshot per cycle, built with a few queries."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import TextField
from django.db.models.functions import Cast

from billing.models import PriceTable
from billing.pricing import offpeak
from scheduling.core import model as cm
from scheduling.models import ACTIVE_STATES, FINAL_STATES, Gpu, Job, Node, NodePool, Queue, Replica

MILLI = 1000


@dataclass(frozen=True)
class OffPeak:
    now: bool
    next_start: str  # "HH:MM" in the platform's time zone


def off_peak_at(now: datetime) -> OffPeak:
    """Off-peak windows come from the price table in force (the platform default otherwise)."""
    table = PriceTable.objects.filter(effective_from__lte=now).order_by("-effective_from").first()
    windows = offpeak.parse_windows(table.offpeak_windows) if table else offpeak.DEFAULT_OFFPEAK_WINDOWS
    tz = offpeak.as_zone(settings.TIME_ZONE)
    start = offpeak.next_offpeak_start(now, windows, tz)
    return OffPeak(now=offpeak.is_offpeak(now, windows, tz), next_start=start.astimezone(tz).strftime("%H:%M"))


def core_pool(pool: NodePool) -> cm.Pool:
    return cm.Pool(name=pool.name, vendor=pool.vendor, gpu_model=pool.gpu_model,
                   gpu_memory_mib=pool.gpu_memory_mib, placement=pool.placement,
                   sharing=pool.sharing_modes, timeslice_replicas=pool.timeslice_replicas,
                   mig_layout=tuple(pool.mig_layout or ()), spot=pool.spot)


def core_queue(queue: Queue, parent: str | None) -> cm.Queue:
    return cm.Queue(
        name=queue.name, parent=parent, deserved_milli=int(queue.deserved_gpus * MILLI),
        over_quota_weight=float(queue.over_quota_weight),
        limit_milli=None if queue.limit_gpus is None else int(queue.limit_gpus * MILLI), priority=queue.priority,
    )


REQUEST_FIELDS = ("mode", "num_gpus", "gpu_milli", "gpu_mem_mib", "mig_profile", "cpu_milli", "mem_mib", "vendor",
                  "gpu_model", "pool")


def core_roles(roles: list[dict]) -> tuple[cm.Role, ...]:
    return tuple(cm.Role(r["name"], cm.Request(**{f: r[f] for f in REQUEST_FIELDS}), r["min_replicas"],
                         r["max_replicas"]) for r in roles)


def core_job(job_id: int, queue: str, roles: tuple[cm.Role, ...], priority: int, preemptible: bool,
             reduce_cost: bool, created: datetime) -> cm.Job:
    return cm.Job(
        id=str(job_id), queue=queue, priority=priority, preemptible=preemptible, reduce_cost=reduce_cost,
        created=created.timestamp(), roles=roles,
    )


def build_snapshot(now: datetime) -> cm.Snapshot:
    pools = [core_pool(p) for p in NodePool.objects.all()]
    gpus_by_node: dict[int, list[cm.Gpu]] = defaultdict(list)
    for node_id, index, uuid, memory in Gpu.objects.values_list("node_id", "index", "uuid", "memory_mib"):
        gpus_by_node[node_id].append(cm.Gpu(index=index, uuid=uuid, memory_mib=memory))
    nodes = [
        cm.Node(name=name, pool=pool, gpus=tuple(sorted(gpus_by_node[pk], key=lambda g: g.index)),
                cpu_milli=cpu, memory_mib=mem, ready=ready, cordoned=cordoned)
        for pk, name, pool, cpu, mem, ready, cordoned in Node.objects.values_list(
            "pk", "name", "pool__name", "cpu_milli", "memory_mib", "ready", "cordoned")
    ]
    queue_rows = list(Queue.objects.values_list("pk", "name", "parent_id"))
    names = {pk: name for pk, name, _ in queue_rows}
    queues = [core_queue(q, names.get(q.parent_id)) for q in Queue.objects.all()]
    # Roles come as JSON text and are decoded once per distinct text: many jobs share their roles
    # (the core's objects are immutable, so sharing them is safe), and decoding them was about half of the build.
    roles_by_text: dict[str, tuple[cm.Role, ...]] = {}
    jobs = []
    for pk, queue, roles_text, priority, preemptible, reduce_cost, created in Job.objects.exclude(
            state__in=FINAL_STATES).exclude(roles=[]).exclude(not_before__gt=now).values_list(
            "pk", "queue__name", Cast("roles", TextField()), "priority", "preemptible", "reduce_cost", "created"):
        roles = roles_by_text.get(roles_text)
        if roles is None:
            roles = roles_by_text[roles_text] = core_roles(json.loads(roles_text))
        jobs.append(core_job(pk, queue, roles, priority, preemptible, reduce_cost, created))
    running = [
        cm.RunningReplica(job_id=str(job_id), role=role, index=index, node=node, gpus=tuple(gpus),
                          slice=cm.Slice(**slice_))
        for job_id, role, index, node, gpus, slice_ in Replica.objects.filter(
            state__in=ACTIVE_STATES, node__isnull=False).exclude(job__state__in=FINAL_STATES).values_list(
            "job_id", "role", "index", "node__name", "gpu_indices", "slice")
    ]
    when = off_peak_at(now)
    return cm.Snapshot(pools=tuple(pools), nodes=tuple(nodes), queues=tuple(queues), jobs=tuple(jobs),
                       running=tuple(sorted(running, key=lambda r: (r.job_id, r.role, r.index))),
                       now=now.timestamp(), off_peak=when.now, next_off_peak=when.next_start)

