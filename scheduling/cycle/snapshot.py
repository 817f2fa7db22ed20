"""The scheduler's view of the database: one core Snapshot per cycle, built with a few queries."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from datetime import datetime

from django.conf import settings
from django.db.models import TextField
from django.db.models.functions import Cast

from scheduling import signals
from scheduling.core import model as cm
from scheduling.core.units import MILLI_PER_GPU, gpu_model_name, vendor_name
from scheduling.cycle.usage import queue_usage
from scheduling.models import (
    ACTIVE_STATES,
    FINAL_STATES,
    UNSCHEDULED_STATES,
    Gpu,
    Job,
    Node,
    NodePool,
    Queue,
    Replica,
)


def core_pool(pool: NodePool) -> cm.Pool:
    return cm.Pool(name=pool.name, vendor=vendor_name(pool.vendor), gpu_model=gpu_model_name(pool.gpu_model),
                   gpu_memory_mib=pool.gpu_memory_mib, placement=pool.placement,
                   sharing=pool.sharing_modes, timeslice_replicas=pool.timeslice_replicas,
                   mig_layout=tuple(pool.mig_layout or ()), spot=pool.spot)


def core_queue(queue: Queue, parent: str | None) -> cm.Queue:
    return cm.Queue(
        name=queue.name, parent=parent, deserved_milli=int(queue.deserved_gpus * MILLI_PER_GPU),
        over_quota_weight=float(queue.over_quota_weight),
        limit_milli=None if queue.limit_gpus is None else int(queue.limit_gpus * MILLI_PER_GPU), priority=queue.priority,
    )


REQUEST_FIELDS = ("mode", "num_gpus", "gpu_milli", "gpu_mem_mib", "mig_profile", "cpu_milli", "mem_mib", "vendor",
                  "gpu_model", "pool")


def core_request(role: dict) -> cm.Request:
    fields = {f: role[f] for f in REQUEST_FIELDS}
    # jobs stored before names were normalised at submit may spell them differently
    fields["gpu_model"], fields["vendor"] = gpu_model_name(fields["gpu_model"]), vendor_name(fields["vendor"])
    return cm.Request(**fields)


def core_roles(roles: list[dict]) -> tuple[cm.Role, ...]:
    return tuple(cm.Role(r["name"], core_request(r), r["min_replicas"], r["max_replicas"]) for r in roles)


def core_job(job_id: int, queue: str, roles: tuple[cm.Role, ...], priority: int, preemptible: bool,
             reduce_cost: bool, created: datetime) -> cm.Job:
    return cm.Job(
        id=str(job_id), queue=queue, priority=priority, preemptible=preemptible, reduce_cost=reduce_cost,
        created=created.timestamp(), roles=roles,
    )


def core_slice(slice_: dict, gpu_memory: list[int]) -> cm.Slice:
    """A stored slice. A whole-GPU one written before slices named their memory holds the GPUs'
    full memory (the core refuses a whole GPU that holds none: evicting it would free nothing)."""
    held = cm.Slice(**slice_)
    if held.kind == "whole" and held.gpu_mem_mib <= 0 and gpu_memory and min(gpu_memory) > 0:
        held = replace(held, gpu_milli=MILLI_PER_GPU, gpu_mem_mib=min(gpu_memory))
    return held


def build_snapshot(now: datetime) -> cm.Snapshot:
    pools = [core_pool(p) for p in NodePool.objects.all()]
    gpus_by_node: dict[int, list[cm.Gpu]] = defaultdict(list)
    for node_id, index, uuid, memory in Gpu.objects.values_list("node_id", "index", "uuid", "memory_mib"):
        gpus_by_node[node_id].append(cm.Gpu(index=index, uuid=uuid, memory_mib=memory))
    nodes = [
        cm.Node(name=name, pool=pool, gpus=tuple(sorted(gpus_by_node[pk], key=lambda g: g.index)),
                cpu_milli=cpu, memory_mib=mem, ready=ready and not silent, cordoned=cordoned)
        for pk, name, pool, cpu, mem, ready, silent, cordoned in Node.objects.values_list(
            "pk", "name", "pool__name", "cpu_milli", "memory_mib", "ready", "agent_silent", "cordoned")
    ]
    queue_rows = list(Queue.objects.values_list("pk", "name", "parent_id"))
    names = {pk: name for pk, name, _ in queue_rows}
    queues = [core_queue(q, names.get(q.parent_id)) for q in Queue.objects.all()]
    # Roles come as JSON text and are decoded once per distinct text: many jobs share their roles
    # (the core's objects are immutable, so sharing them is safe), and decoding them was about half of the build.
    roles_by_text: dict[str, tuple[cm.Role, ...]] = {}
    jobs = []
    for pk, queue, roles_text, priority, preemptible, reduce_cost, created in Job.objects.exclude(
            state__in=UNSCHEDULED_STATES).exclude(roles=[]).exclude(not_before__gt=now).values_list(
            "pk", "queue__name", Cast("roles", TextField()), "priority", "preemptible", "reduce_cost", "created"):
        roles = roles_by_text.get(roles_text)
        if roles is None:
            roles = roles_by_text[roles_text] = core_roles(json.loads(roles_text))
        jobs.append(core_job(pk, queue, roles, priority, preemptible, reduce_cost, created))
    memory = {(node.name, gpu.index): gpu.memory_mib for node in nodes for gpu in node.gpus}
    running = [
        cm.RunningReplica(job_id=str(job_id), role=role, index=index, node=node, gpus=tuple(gpus),
                          slice=core_slice(slice_, [memory.get((node, g), 0) for g in gpus]))
        for job_id, role, index, node, gpus, slice_ in Replica.objects.filter(
            state__in=ACTIVE_STATES, node__isnull=False).exclude(job__state__in=FINAL_STATES).values_list(
            "job_id", "role", "index", "node__name", "gpu_indices", "slice")
    ]
    when = signals.off_peak_at(now)
    usage = queue_usage(now, sum(len(n.gpus) for n in nodes) * MILLI_PER_GPU)
    return cm.Snapshot(pools=tuple(pools), nodes=tuple(nodes), queues=tuple(queues), jobs=tuple(jobs),
                       running=tuple(sorted(running, key=lambda r: (r.job_id, r.role, r.index))),
                       now=now.timestamp(), off_peak=when.now, next_off_peak=when.next_start,
                       queue_usage=tuple(sorted(usage.items())), usage_k=settings.FAIR_SHARE_USAGE_K if usage else 0.0)

