"""factory-boy factories for the platform's models: tests build what they need from these (or
from the explicit world in tests/world.py), never from the demo data in portal/demo.

Imported lazily by fixtures (Django must be set up first), e.g. ``from tests.factories import NodeFactory``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import factory
from django.contrib.auth import get_user_model
from factory.django import DjangoModelFactory

from billing.models import GpuRate, PriceTable
from portal.models import Membership, Role, Workspace
from scheduling.models import Gpu, Job, Node, NodePool, PoolSharing, Queue, QueueAccess, Vendor

GIB = 1024


class UserFactory(DjangoModelFactory):
    """A user whose password is ``<username>-test`` (or ``password=...``)."""

    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    is_staff = False
    is_superuser = False

    @factory.post_generation
    def password(user, create, extracted, **kwargs):  # noqa: N805 (factory-boy hook)
        user.set_password(extracted or f"{user.username}-test")
        if create:
            user.save()


class WorkspaceFactory(DjangoModelFactory):
    class Meta:
        model = Workspace
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"workspace-{n}")
    name = factory.LazyAttribute(lambda w: w.slug.replace("-", " ").title())


class MembershipFactory(DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    workspace = factory.SubFactory(WorkspaceFactory)
    role = Role.MEMBER


class NodePoolFactory(DjangoModelFactory):
    """An 80 GiB NVIDIA H100 pool unless told otherwise."""

    class Meta:
        model = NodePool
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"pool-{n}")
    vendor = Vendor.NVIDIA
    gpu_model = "H100-80GB"
    gpu_memory_mib = 80 * GIB
    sharing = PoolSharing.STANDARD


class NodeFactory(DjangoModelFactory):
    """An 8-GPU node (16 cores and 128 GiB per GPU); ``gpus=N`` makes N GPUs instead (0 for none),
    each of its pool's memory, uuid ``GPU-<node>-<index>``."""

    class Meta:
        model = Node
        django_get_or_create = ("name",)
        skip_postgeneration_save = True

    pool = factory.SubFactory(NodePoolFactory)
    name = factory.Sequence(lambda n: f"node-{n:02d}")
    cpu_milli = 8 * 16000
    memory_mib = 8 * 128 * GIB

    @factory.post_generation
    def gpus(node, create, extracted, **kwargs):  # noqa: N805 (factory-boy hook)
        if create:
            for index in range(8 if extracted is None else extracted):
                GpuFactory(node=node, index=index)


class GpuFactory(DjangoModelFactory):
    class Meta:
        model = Gpu
        django_get_or_create = ("uuid",)

    node = factory.SubFactory(NodeFactory, gpus=0)
    index = 0
    uuid = factory.LazyAttribute(lambda g: f"GPU-{g.node.name}-{g.index}")
    memory_mib = factory.LazyAttribute(lambda g: g.node.pool.gpu_memory_mib)


class QueueFactory(DjangoModelFactory):
    class Meta:
        model = Queue
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"queue-{n}")
    parent = None
    deserved_gpus = Decimal(0)
    over_quota_weight = Decimal(1)


class QueueAccessFactory(DjangoModelFactory):
    class Meta:
        model = QueueAccess

    queue = factory.SubFactory(QueueFactory)
    workspace = factory.SubFactory(WorkspaceFactory)
    is_default = False


class PriceTableFactory(DjangoModelFactory):
    """A USD table in force since 2020 with the platform's default discounts and off-peak window."""

    class Meta:
        model = PriceTable
        django_get_or_create = ("currency", "effective_from")

    name = "Test prices"
    currency = "USD"
    effective_from = datetime(2020, 1, 1, tzinfo=UTC)
    cpu_core_hour = Decimal("0.02")
    memory_gib_hour = Decimal("0.005")


class GpuRateFactory(DjangoModelFactory):
    class Meta:
        model = GpuRate

    table = factory.SubFactory(PriceTableFactory)
    vendor = Vendor.NVIDIA
    gpu_model = "H100-80GB"
    per_gpu_hour = Decimal("3.00")


class JobFactory(DjangoModelFactory):
    """A bare pending job row (no quote, no replicas). To go through validation and quoting, use
    ``billing.services.submit_quoted_job`` with a spec instead."""

    class Meta:
        model = Job

    workspace = factory.SubFactory(WorkspaceFactory)
    queue = factory.SubFactory(QueueFactory)
    submitted_by = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"job-{n}")
    job_type = "single"
    spec_text = factory.LazyAttribute(lambda j: f"name: {j.name}\n")
    spec = factory.LazyAttribute(lambda j: {"name": j.name})


def billed_prepaid_account(admin, n: int, hour: datetime, *, parent=None, workspace_slug: str | None = None):
    """A prepaid USD account `lab-{n}` paying for a new workspace, with a monthly budget of 100, a top-up of 50
    and a usage line of 10.00 for `hour` (an account list's row with every figure filled)."""
    from datetime import timedelta

    from billing.accounts import assign_workspace, save_account
    from billing.credits import top_up
    from billing.ledger.periods import period_start
    from billing.models import ChargeLine
    from billing.reports.services import set_account_budget

    account = save_account(slug=f"lab-{n}", name=f"Lab {n}", currency="USD", prepaid=True, parent=parent)
    workspace = WorkspaceFactory(**({"slug": workspace_slug} if workspace_slug else {}))
    assign_workspace(workspace, account)
    set_account_budget(user=admin, account=account, amount="100")
    top_up(admin, account, "50")
    ChargeLine.objects.create(
        category=ChargeLine.Category.USAGE, resource=ChargeLine.Resource.COMPUTE, hour=hour, day=hour.date(),
        period=period_start(hour), charge_start=hour, charge_end=hour + timedelta(hours=1), workspace=workspace,
        cost=Decimal("10.00"), currency="USD", provisional=False, computed_at=hour)
    return account
