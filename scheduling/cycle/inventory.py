"""Nodes and GPUs in the database follow the backend's inventory; workspaces get their place.

Only differences are written, so a cycle on an unchanged cluster writes nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.cache import cache
from django.db import transaction

from scheduling import clock, kinds
from scheduling.backends.base import ClusterBackend, NodeInventory
from scheduling.core.units import MILLI_PER_GPU
from scheduling.errors import Conflict, DomainError, Unprocessable
from scheduling.health import read_health
from scheduling.models import (
    ACTIVE_STATES,
    Gpu,
    JobState,
    Node,
    NodePool,
    PoolSharing,
    QueueAccess,
    Replica,
)

WORKSPACE_SYNC_EVERY_S = 60


def _pool_for(inv: NodeInventory, pools: dict[str, NodePool]) -> NodePool:
    pool = pools.get(inv.pool)
    if pool is None:  # a pool the operators have not configured yet: take what the node says
        mig = sorted({p for g in inv.gpus for p in g.mig_profiles})
        sharing = PoolSharing.MIG if mig else PoolSharing.TIMESLICE if inv.timeslice_replicas else PoolSharing.STANDARD
        pool = NodePool.objects.create(
            name=inv.pool, vendor=inv.vendor, gpu_model=inv.gpu_model,
            gpu_memory_mib=max((g.memory_mib for g in inv.gpus), default=1), sharing=sharing,
            timeslice_replicas=inv.timeslice_replicas or 4, mig_layout=list(inv.gpus[0].mig_profiles) if mig else [],
            spot=inv.spot)
        pools[inv.pool] = pool
    return pool


TOPOLOGY_PREFIX = "topology.kubernetes.io/"


def topology_labels(inv: NodeInventory, keys: set[str]) -> dict[str, str]:
    """The node's cluster labels that topology levels read: Kubernetes' topology.kubernetes.io/ ones and
    any key a pool names as a level. The operator's other labels on the node are kept as they are."""
    return {k: v for k, v in inv.labels if k.startswith(TOPOLOGY_PREFIX) or k in keys}


@transaction.atomic
def sync_inventory(backend: ClusterBackend) -> int:
    """Apply the backend's view of nodes and GPUs; returns how many rows changed."""
    inventory = backend.inventory()
    pools = {p.name: p for p in NodePool.objects.all()}
    # the columns compared, not the rows: thousands of nodes and GPUs are read every cycle
    fields = ("pool_id", "cpu_milli", "memory_mib", "ready", "cordoned")
    nodes = {row[1]: (row[0], row[2:]) for row in Node.objects.values_list("pk", "name", *fields)}
    topology_keys = {key for pool in pools.values() for key in pool.topology_levels or ()}
    kept_labels = dict(Node.objects.values_list("name", "labels")) if any(inv.labels for inv in inventory) else {}
    gpus = {(node_id, index): (pk, uuid, memory)
            for pk, node_id, index, uuid, memory in Gpu.objects.values_list("pk", "node_id", "index", "uuid", "memory_mib")}
    changed = 0
    seen = set()
    for inv in inventory:
        seen.add(inv.name)
        pool = _pool_for(inv, pools)
        found = nodes.get(inv.name)
        wanted = (pool.pk, inv.cpu_milli, inv.memory_mib, inv.ready, inv.cordoned)
        if found is None:
            node_id = Node.objects.create(name=inv.name, **dict(zip(fields, wanted, strict=True))).pk
            changed += 1
        else:
            node_id = found[0]
            if found[1] != wanted:
                Node.objects.filter(pk=node_id).update(**dict(zip(fields, wanted, strict=True)))
                changed += 1
        labels = topology_labels(inv, topology_keys)
        if labels:
            merged = {**(kept_labels.get(inv.name) or {}), **labels}
            if merged != kept_labels.get(inv.name):
                Node.objects.filter(pk=node_id).update(labels=merged)
                changed += 1
        for g in inv.gpus:
            row = gpus.get((node_id, g.index))
            if row is None:
                Gpu.objects.create(node_id=node_id, index=g.index, uuid=g.uuid, memory_mib=g.memory_mib)
                changed += 1
            elif row[1:] != (g.uuid, g.memory_mib):
                Gpu.objects.filter(pk=row[0]).update(uuid=g.uuid, memory_mib=g.memory_mib)
                changed += 1
    gone = [pk for name, (pk, values) in nodes.items() if name not in seen and values[3]]
    changed += Node.objects.filter(pk__in=gone).update(ready=False)  # vanished nodes: their work is lost
    return changed


def sync_workspaces(backend: ClusterBackend, *, force: bool = False) -> bool:
    """Each workspace's place in the cluster, its GPU quota mirroring its default queue's deserved
    share. At most once a minute: namespaces and quotas change rarely."""
    if not force and not cache.add("scheduling:workspaces-synced", True, WORKSPACE_SYNC_EVERY_S):
        return False
    quotas = {a.workspace_id: int(a.queue.deserved_gpus * MILLI_PER_GPU)
              for a in QueueAccess.objects.filter(is_default=True).select_related("queue")}
    workspaces = QueueAccess.workspace.field.related_model.objects.all()  # the tenants live in the portal
    for workspace in workspaces:
        backend.sync_workspace(workspace.slug, quotas.get(workspace.pk))
    return True


MAX_GPUS = 64
MAX_UUID = 64  # Gpu.uuid's length
MAX_MEMORY_MIB = 2**31 - 1


def _whole(value, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= high


@dataclass(frozen=True)
class HeartbeatResult:
    gpus: int
    rejected: list[dict]  # health figures refused: {"gpu": index or None, "field", "reason"}


@transaction.atomic
def record_heartbeat(node: Node, gpus, payload: dict | None = None) -> HeartbeatResult:
    """A node agent's report of its GPUs: new or changed GPUs are stored, the node is alive now.
    A malformed inventory changes nothing; a bad health figure (scheduling.health) is refused alone."""
    if not isinstance(gpus, list) or not all(isinstance(g, dict) for g in gpus):
        raise DomainError("gpus must be a list of objects", field="gpus")
    if len(gpus) > MAX_GPUS:
        raise DomainError(f"a node reports at most {MAX_GPUS} GPUs", field="gpus")
    for n, gpu in enumerate(gpus):
        index, uuid, memory = gpu.get("index"), gpu.get("uuid"), gpu.get("memory_mib")
        if not (_whole(index, MAX_GPUS - 1) and _whole(memory, MAX_MEMORY_MIB) and isinstance(uuid, str)
                and 0 < len(uuid) <= MAX_UUID and "\x00" not in uuid):
            raise DomainError(f"gpus[{n}] needs index 0..{MAX_GPUS - 1}, a uuid of 1..{MAX_UUID} characters "
                              f"and memory_mib 0..{MAX_MEMORY_MIB}", field="gpus")
    if len({g["index"] for g in gpus}) < len(gpus) or len({g["uuid"] for g in gpus}) < len(gpus):
        raise Unprocessable("each GPU index and uuid appears once", field="gpus")
    if Gpu.objects.filter(uuid__in=[g["uuid"] for g in gpus]).exclude(node=node).exists():
        raise Conflict("a reported GPU uuid belongs to another node", field="gpus")
    if node.gpus.filter(uuid__in=[g["uuid"] for g in gpus]).exclude(index__in=[g["index"] for g in gpus]).exists():
        raise Conflict("a reported GPU uuid is at another index of this node, which the report leaves out",
                       field="gpus")
    now = clock.now()
    health = read_health(payload or {}, gpus)
    known = {g.index: g for g in node.gpus.all()}
    # GPUs that changed places (uuid unique): free their uuids first, so that a swap is not a collision
    moving = [known[g["index"]].pk for g in gpus if g["index"] in known and known[g["index"]].uuid != g["uuid"]]
    for pk in moving:
        Gpu.objects.filter(pk=pk).update(uuid=f"moving-{pk}")
    for gpu in gpus:
        index, uuid, memory = gpu["index"], gpu["uuid"], gpu["memory_mib"]
        figures = health.gpus.get(index, {})
        if figures:
            figures = {**figures, "health_at": now}
        if index not in known:
            Gpu.objects.create(node=node, index=index, uuid=uuid, memory_mib=memory, **figures)
        elif (known[index].uuid, known[index].memory_mib) != (uuid, memory) or figures or known[index].pk in moving:
            Gpu.objects.filter(pk=known[index].pk).update(uuid=uuid, memory_mib=memory, **figures)
    node.last_heartbeat = now
    fields = ["last_heartbeat"]
    if health.agent_version is not None:
        node.agent_version = health.agent_version
        fields.append("agent_version")
    node.save(update_fields=fields)
    return HeartbeatResult(gpus=len(gpus), rejected=health.rejected)


def node_assignments(node: Node, backend: ClusterBackend | None = None) -> list[dict]:
    """What runs on the node's GPUs now, for its agent to attribute usage: one entry per GPU held.
    On the simulated cluster a running notebook or inference replica is a real process that measures
    its own GPU use: its entries add `metrics_url` and the `metrics_auth` header that server asks for."""
    assignments = []
    for uid, gpus, slice_, state, job_id, kind, name, workspace, role, replica_index in (
            Replica.objects.filter(node=node, state__in=ACTIVE_STATES)
            .values_list("uid", "gpu_indices", "slice", "state", "job_id", "job__kind", "job__name",
                         "job__workspace__slug", "role", "index")):
        metrics = {}
        if backend is not None and getattr(backend, "name", "") == "simulated" and state == JobState.RUNNING:
            metrics = kinds.get(kind).process_metrics(backend, (job_id, role, replica_index), workspace, name)
        assignments += [{"pod_uid": str(uid), "gpu_index": index, "milli": (slice_ or {}).get("gpu_milli", 1000),
                         "memory_mib": (slice_ or {}).get("gpu_mem_mib", 0), **metrics} for index in gpus]
    return assignments

