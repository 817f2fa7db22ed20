"""The demo cluster and queues (idempotent), the kind of cluster the seeds describe."""

from decimal import Decimal

from django.db import transaction

from portal.models import Workspace
from scheduling.models import Gpu, Node, NodePool, PoolSharing, Queue, QueueAccess, Vendor

GIB = 1024

# name: (nodes, gpus per node, vendor, model, GPU memory GiB, sharing, extra pool fields)
DEMO_POOLS = {
    "h100": (2, 8, Vendor.NVIDIA, "H100-80GB", 80, PoolSharing.STANDARD, {}),
    "h100-mig": (1, 8, Vendor.NVIDIA, "H100-80GB", 80, PoolSharing.MIG,
                 {"mig_layout": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}),
    "a100-spot": (4, 8, Vendor.NVIDIA, "A100-80GB", 80, PoolSharing.STANDARD, {"spot": True}),
    "l40s-shared": (2, 4, Vendor.NVIDIA, "L40S-48GB", 48, PoolSharing.TIMESLICE, {"timeslice_replicas": 4}),
    "rtx4090": (4, 2, Vendor.NVIDIA, "RTX-4090-24GB", 24, PoolSharing.STANDARD, {}),
    "mi300x": (1, 8, Vendor.AMD, "MI300X-192GB", 192, PoolSharing.STANDARD, {}),
}


@transaction.atomic
def load_cluster() -> None:
    for pool_name, (count, gpus, vendor, model, mem_gib, sharing, extra) in DEMO_POOLS.items():
        pool, _ = NodePool.objects.get_or_create(
            name=pool_name,
            defaults={"vendor": vendor, "gpu_model": model, "gpu_memory_mib": mem_gib * GIB,
                      "sharing": sharing, **extra},
        )
        names = [f"{pool_name}-{n:02d}" for n in range(1, count + 1)]
        Node.objects.bulk_create(
            [Node(name=name, pool=pool, cpu_milli=gpus * 16000, memory_mib=gpus * 128 * GIB) for name in names],
            ignore_conflicts=True,
        )
        Gpu.objects.bulk_create(
            [Gpu(node=node, index=i, uuid=f"GPU-{node.name}-{i}", memory_mib=mem_gib * GIB)
             for node in Node.objects.filter(name__in=names) for i in range(gpus)],
            ignore_conflicts=True,
        )


@transaction.atomic
def load_queues() -> None:
    total = sum(count * gpus for count, gpus, *_ in DEMO_POOLS.values())
    root, _ = Queue.objects.get_or_create(name="root", defaults={"deserved_gpus": Decimal(total)})
    for slug in ("vision-lab", "nlp-group"):
        queue, _ = Queue.objects.get_or_create(name=slug, defaults={"parent": root, "deserved_gpus": 16})
        QueueAccess.objects.get_or_create(queue=queue, workspace=Workspace.objects.get(slug=slug),
                                          defaults={"is_default": True})
    community, _ = Queue.objects.get_or_create(
        name="community", defaults={"parent": root, "deserved_gpus": 0, "over_quota_weight": 1,
                                    "preemptible_only": True})
    for workspace in Workspace.objects.filter(slug__in=("vision-lab", "nlp-group")):
        QueueAccess.objects.get_or_create(queue=community, workspace=workspace)
