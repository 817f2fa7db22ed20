"""Nodes and GPUs in the database follow the backend's inventory; workspaces get their place.

Only differences are written, so a cycle on an unchanged cluster writes nothing here.
"""

from __future__ import annotations

from django.core.cache import cache
from django.db import transaction

from portal.models import Workspace
from scheduling.backends.base import ClusterBackend, NodeInventory
from scheduling.models import Gpu, Node, NodePool, PoolSharing, QueueAccess

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


@transaction.atomic
def sync_inventory(backend: ClusterBackend) -> int:
    """Apply the backend's view of nodes and GPUs; returns how many rows changed."""
    inventory = backend.inventory()
    pools = {p.name: p for p in NodePool.objects.all()}
    nodes = {n.name: n for n in Node.objects.all()}
    gpus = {(g.node_id, g.index): g for g in Gpu.objects.all()}
    changed = 0
    seen = set()
    for inv in inventory:
        seen.add(inv.name)
        pool = _pool_for(inv, pools)
        node = nodes.get(inv.name)
        wanted = {"pool_id": pool.pk, "cpu_milli": inv.cpu_milli, "memory_mib": inv.memory_mib,
                  "ready": inv.ready, "cordoned": inv.cordoned}
        if node is None:
            node = Node.objects.create(name=inv.name, **wanted)
            changed += 1
        elif any(getattr(node, k) != v for k, v in wanted.items()):
            Node.objects.filter(pk=node.pk).update(**wanted)
            changed += 1
        for g in inv.gpus:
            row = gpus.get((node.pk, g.index))
            if row is None:
                Gpu.objects.create(node=node, index=g.index, uuid=g.uuid, memory_mib=g.memory_mib)
                changed += 1
            elif (row.uuid, row.memory_mib) != (g.uuid, g.memory_mib):
                Gpu.objects.filter(pk=row.pk).update(uuid=g.uuid, memory_mib=g.memory_mib)
                changed += 1
    gone = [n.pk for name, n in nodes.items() if name not in seen and n.ready]
    changed += Node.objects.filter(pk__in=gone).update(ready=False)  # vanished nodes: their work is lost
    return changed


def sync_workspaces(backend: ClusterBackend, *, force: bool = False) -> bool:
    """Each workspace's place in the cluster, its GPU quota mirroring its default queue's deserved
    share. At most once a minute: namespaces and quotas change rarely."""
    if not force and not cache.add("scheduling:workspaces-synced", True, WORKSPACE_SYNC_EVERY_S):
        return False
    quotas = {a.workspace_id: int(a.queue.deserved_gpus * 1000)
              for a in QueueAccess.objects.filter(is_default=True).select_related("queue")}
    for workspace in Workspace.objects.all():
        backend.sync_workspace(workspace.slug, quotas.get(workspace.pk))
    return True
