"""The factories build valid rows on their own, and the test world is what tests/world.py says."""

from decimal import Decimal

from tests.world import PASSWORDS, POOLS, RATES


def test_every_factory_builds_a_row_with_its_defaults(db):
    from tests import factories as f

    job = f.JobFactory()
    assert job.pk and job.workspace.pk and job.queue.pk and job.submitted_by.check_password(
        f"{job.submitted_by.username}-test")
    node = f.NodeFactory(gpus=2)
    assert [g.uuid for g in node.gpus.order_by("index")] == [f"GPU-{node.name}-0", f"GPU-{node.name}-1"]
    assert node.gpus.first().memory_mib == node.pool.gpu_memory_mib
    rate = f.GpuRateFactory()
    assert rate.table.to_pricing().rates.gpu == {("nvidia", "H100-80GB"): Decimal("3.00")}
    assert f.MembershipFactory().role == "member" and f.QueueAccessFactory().is_default is False


def test_the_world_is_explicit(cluster):
    from django.contrib.auth import get_user_model

    from billing.models import PriceTable
    from scheduling.models import Gpu, Node, NodePool, Queue

    assert all(get_user_model().objects.get(username=n).check_password(p) for n, p in PASSWORDS.items())
    assert cluster.admin.is_staff and not cluster.alice.is_staff
    assert set(cluster.vision.members.all()) == {cluster.alice, cluster.carol, cluster.finance}
    assert set(cluster.nlp.members.all()) == {cluster.bob, cluster.finance}
    assert set(NodePool.objects.values_list("name", flat=True)) == set(POOLS)
    assert Node.objects.count() == sum(count for count, *_ in POOLS.values())
    assert Gpu.objects.count() == sum(count * gpus for count, gpus, *_ in POOLS.values())
    assert {q.name: q.parent_id and q.parent.name for q in Queue.objects.all()} == {
        "root": None, "vision-lab": "root", "nlp-group": "root", "community": "root"}
    assert PriceTable.objects.get().to_pricing().rates.gpu == RATES
