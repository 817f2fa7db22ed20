"""The test world, written out here so that no test depends on the demo data (portal/demo):
changing the demo tenants, cluster or prices can no longer break a test.

People and workspaces:
- admin: staff (the operator)
- vision-lab: alice (owner), carol (member), finance (finance)
- nlp-group: bob (owner, the outsider to vision-lab), finance (finance)
Every user's password is ``<username>-test`` (PASSWORDS).

The cluster (POOLS): nodes ``<pool>-01``, ``<pool>-02`` ..., GPUs ``GPU-<node>-<index>``;
queues root > vision-lab (16 GPUs deserved, vision's default), nlp-group (16, nlp's default) and
community (0 deserved, preemptible only, open to both); prices (RATES, USD per GPU-hour) in force
since 2020, off-peak 00:00-08:00 at 40% off, spot 60% off.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

PASSWORDS = {name: f"{name}-test" for name in ("admin", "alice", "bob", "carol", "finance")}

GIB = 1024

# name: (nodes, GPUs per node, vendor, model, GPU memory GiB, sharing, extra pool fields)
POOLS = {
    "h100": (2, 8, "nvidia", "H100-80GB", 80, "standard", {}),
    "h100-mig": (1, 8, "nvidia", "H100-80GB", 80, "mig", {"mig_layout": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}),
    "a100-spot": (4, 8, "nvidia", "A100-80GB", 80, "standard", {"spot": True}),
    "l40s-shared": (2, 4, "nvidia", "L40S-48GB", 48, "timeslice", {"timeslice_replicas": 4}),
    "rtx4090": (4, 2, "nvidia", "RTX-4090-24GB", 24, "standard", {}),
    "mi300x": (1, 8, "amd", "MI300X-192GB", 192, "standard", {}),
}

RATES = {
    ("nvidia", "H100-80GB"): Decimal("3.00"),
    ("nvidia", "A100-80GB"): Decimal("1.80"),
    ("nvidia", "L40S-48GB"): Decimal("1.00"),
    ("nvidia", "RTX-4090-24GB"): Decimal("0.40"),
    ("amd", "MI300X-192GB"): Decimal("2.10"),
}
CPU_CORE_HOUR = Decimal("0.02")
MEMORY_GIB_HOUR = Decimal("0.005")
PRICES_FROM = datetime(2020, 1, 1, tzinfo=UTC)

TEAM_DESERVED_GPUS = 16


@dataclass
class Tenants:
    alice: object  # owner of vision-lab
    carol: object  # member of vision-lab
    bob: object  # owner of nlp-group: the outsider to vision-lab
    finance: object  # finance role on both
    vision: object
    nlp: object
    admin: object = None  # staff: the operator


def make_tenants() -> Tenants:
    from portal.models import Role
    from tests.factories import MembershipFactory, UserFactory, WorkspaceFactory

    admin = UserFactory(username="admin", is_staff=True, is_superuser=True, password=PASSWORDS["admin"])
    users = {name: UserFactory(username=name, password=PASSWORDS[name]) for name in ("alice", "bob", "carol", "finance")}
    vision = WorkspaceFactory(slug="vision-lab", name="Vision Lab")
    nlp = WorkspaceFactory(slug="nlp-group", name="NLP Group")
    for user, workspace, role in [
        ("alice", vision, Role.OWNER), ("carol", vision, Role.MEMBER), ("finance", vision, Role.FINANCE),
        ("bob", nlp, Role.OWNER), ("finance", nlp, Role.FINANCE),
    ]:
        MembershipFactory(user=users[user], workspace=workspace, role=role)
    return Tenants(alice=users["alice"], carol=users["carol"], bob=users["bob"], finance=users["finance"],
                   vision=vision, nlp=nlp, admin=admin)


def make_cluster(tenants: Tenants) -> Tenants:
    """POOLS, the queues and the prices, on top of `tenants` (returned, as the `cluster` fixture)."""
    from tests.factories import (
        GpuRateFactory,
        NodeFactory,
        NodePoolFactory,
        PriceTableFactory,
        QueueAccessFactory,
        QueueFactory,
    )

    for name, (count, gpus, vendor, model, mem_gib, sharing, extra) in POOLS.items():
        pool = NodePoolFactory(name=name, vendor=vendor, gpu_model=model, gpu_memory_mib=mem_gib * GIB,
                               sharing=sharing, **extra)
        for n in range(1, count + 1):
            NodeFactory(pool=pool, name=f"{name}-{n:02d}", cpu_milli=gpus * 16000, memory_mib=gpus * 128 * GIB,
                        gpus=gpus)

    total = sum(count * gpus for count, gpus, *_ in POOLS.values())
    root = QueueFactory(name="root", deserved_gpus=Decimal(total))
    for workspace in (tenants.vision, tenants.nlp):
        queue = QueueFactory(name=workspace.slug, parent=root, deserved_gpus=TEAM_DESERVED_GPUS)
        QueueAccessFactory(queue=queue, workspace=workspace, is_default=True)
    community = QueueFactory(name="community", parent=root, deserved_gpus=0, over_quota_weight=1,
                             preemptible_only=True)
    for workspace in (tenants.vision, tenants.nlp):
        QueueAccessFactory(queue=community, workspace=workspace)

    table = PriceTableFactory(name="Test prices", currency="USD", effective_from=PRICES_FROM,
                              cpu_core_hour=CPU_CORE_HOUR, memory_gib_hour=MEMORY_GIB_HOUR)
    for (vendor, model), price in RATES.items():
        GpuRateFactory(table=table, vendor=vendor, gpu_model=model, per_gpu_hour=price)
    return tenants


def world_rates(**changes):
    """RATES as a pure price list (billing.pricing.Rates), with `changes` to its fields."""
    from billing.pricing import Rates

    return Rates(**{"currency": "USD", "gpu": RATES, "cpu_core_hour": CPU_CORE_HOUR,
                    "memory_gib_hour": MEMORY_GIB_HOUR, **changes})


def world_price_table(effective_from: datetime = PRICES_FROM, **changes):
    """`world_rates(**changes)` as a pure price table in force from `effective_from` (default: since 2020)."""
    from billing.pricing import PriceTable

    return PriceTable(effective_from=effective_from, rates=world_rates(**changes), name="test")
