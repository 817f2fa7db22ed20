"""The demo data loaders (portal/demo) still load, and are idempotent (the demo month has its own
module, test_demo_history). The only tests that use the demo data: every other test builds its
world from tests/factories.py and tests/world.py."""

from datetime import time

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from billing.currency import currency_at
from billing.models import GpuRate, PriceTable
from portal.demo import chinese, cluster, prices, tenants
from portal.demo.tenants import DEMO_PASSWORDS
from portal.models import Membership, Workspace
from scheduling.models import Gpu, Node, NodePool, Queue, QueueAccess


def _tenant_counts():
    return get_user_model().objects.count(), Workspace.objects.count(), Membership.objects.count()


def _cluster_counts():
    return (NodePool.objects.count(), Node.objects.count(), Gpu.objects.count(), Queue.objects.count(),
            QueueAccess.objects.count(), PriceTable.objects.count(), GpuRate.objects.count())


def _load_all():
    tenants.load_tenants()
    cluster.load_cluster()
    cluster.load_queues()
    prices.load_prices()


def test_demo_data_is_idempotent(db):
    tenants.load_tenants()
    counts = _tenant_counts()
    tenants.load_tenants()
    assert _tenant_counts() == counts
    assert counts == (4, 2, 4)
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_staff and admin.check_password("admin-demo")
    finance_roles = set(Membership.objects.filter(user__username="finance").values_list("role", flat=True))
    assert finance_roles == {"finance"}


def test_demo_cluster_queues_and_prices_load_and_are_idempotent(db):
    _load_all()
    counts = _cluster_counts()
    _load_all()
    assert _cluster_counts() == counts
    assert set(NodePool.objects.values_list("name", flat=True)) == set(cluster.DEMO_POOLS)
    assert Node.objects.count() == sum(count for count, *_ in cluster.DEMO_POOLS.values())
    assert Gpu.objects.count() == sum(count * gpus for count, gpus, *_ in cluster.DEMO_POOLS.values())
    assert set(Queue.objects.values_list("name", flat=True)) == {"root", "vision-lab", "nlp-group", "community"}
    for slug in ("vision-lab", "nlp-group"):
        assert QueueAccess.objects.get(workspace__slug=slug, is_default=True).queue.name == slug
    assert set(PriceTable.objects.values_list("currency", flat=True)) == {"USD", "CNY"}  # one table each
    for table in PriceTable.objects.all():
        assert table.to_pricing().rates.gpu
        priced = set(GpuRate.objects.filter(table=table).values_list("vendor", "gpu_model"))
        assert set(NodePool.objects.values_list("vendor", "gpu_model")) <= priced  # every demo GPU model
    cny = PriceTable.objects.get(currency="CNY").to_pricing().rates
    assert (cny.offpeak_time_zone, cny.offpeak_windows) == ("Asia/Shanghai", ((time(23), time(7)),))


def test_the_chinese_team_is_billed_in_cny_and_the_others_in_usd(db):
    _load_all()
    chinese.load_chinese_team()
    chinese.load_chinese_team()
    assert {w.slug: currency_at(w) for w in Workspace.objects.all()} == {
        "ai-lab": "CNY", "vision-lab": "USD", "nlp-group": "USD"}


def test_demo_password_logs_in(db):
    tenants.load_tenants()
    client = Client()
    response = client.post(reverse("login"), {"username": "alice", "password": DEMO_PASSWORDS["alice"]})
    assert response.status_code == 302
    assert client.get(reverse("dashboard")).status_code == 200


def test_load_demo_command_is_idempotent(db):
    call_command("load_demo")
    counts = _tenant_counts() + _cluster_counts()
    call_command("load_demo")
    assert _tenant_counts() + _cluster_counts() == counts


def test_the_chinese_demo_team_reads_the_portal_in_chinese(db):
    from portal.demo import chinese
    from portal.models import UserPreference

    tenants.load_tenants()
    cluster.load_cluster()
    cluster.load_queues()
    chinese.load_chinese_team()
    chinese.load_chinese_team()  # idempotent
    assert Workspace.objects.filter(slug="ai-lab").count() == 1
    assert Membership.objects.get(workspace__slug="ai-lab").user.username == "chen"
    assert UserPreference.objects.get(user__username="chen").language == "zh-hans"
    assert QueueAccess.objects.get(workspace__slug="ai-lab", is_default=True).queue.name == "community"
    client = Client()
    assert client.post(reverse("login"), {"username": "chen", "password": "chen-demo"}).status_code == 302
    page = client.get(reverse("dashboard"), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert '<html lang="zh-hans">' in page and "仪表盘" in page
