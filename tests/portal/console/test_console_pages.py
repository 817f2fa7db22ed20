"""Console pages: operators only, and each form's errors name the field and change nothing."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

PAGES = ["/console/", "/console/pools/", "/console/pools/h100/", "/console/nodes/", "/console/nodes/h100-01/drain/",
         "/console/queues/", "/console/queues/new/", "/console/queues/root/", "/console/workspaces/",
         "/console/workspaces/vision-lab/", "/console/prices/", "/console/tokens/", "/console/audit/",
         "/console/advice/?params_b=7&task=inference&precision=fp16", "/console/?partial=1", "/console/nodes/?partial=1"]


@pytest.mark.django_db
@pytest.mark.parametrize("url", PAGES)
def test_operators_only(client, cluster, url):
    assert client.get(url).status_code == 302  # anonymous: to the login page
    client.force_login(cluster.alice)
    assert client.get(url).status_code == 403
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.get(username="admin"))
    assert client.get(url).status_code == 200


@pytest.mark.django_db
def test_tenants_cannot_post_to_the_console(client, cluster):
    from scheduling.models import Node

    client.force_login(cluster.alice)
    assert client.post("/console/nodes/h100-01/drain/").status_code == 403
    assert client.post("/console/nodes/h100-01/cordon/", {"cordon": "1"}).status_code == 403
    assert not Node.objects.get(name="h100-01").cordoned


@pytest.mark.django_db
def test_mig_layout_is_checked_against_the_card(admin_client, cluster):
    from scheduling.models import NodePool

    bad = admin_client.post("/console/pools/h100-mig/", {"placement": "default", "sharing": "mig",
                                                         "timeslice_replicas": "4", "mig_layout": "3g.20gb, 4g.20gb"})
    assert bad.status_code == 400 and 'data-field="mig_layout"' in bad.content.decode()
    assert "not profiles of H100-80GB" in bad.content.decode()
    too_many = admin_client.post("/console/pools/rtx4090/", {"placement": "default", "sharing": "mig",
                                                             "timeslice_replicas": "4", "mig_layout": "7g.80gb"})
    assert too_many.status_code == 400 and "no MIG profiles" in too_many.content.decode()
    slices = admin_client.post("/console/pools/a100-spot/", {"placement": "default", "sharing": "mig", "spot": "1",
                                                             "timeslice_replicas": "4", "mig_layout": "7g.80gb,1g.10gb"})
    assert slices.status_code == 400 and "8 compute slices" in slices.content.decode()
    assert NodePool.objects.get(name="a100-spot").sharing == "standard"
    good = admin_client.post("/console/pools/a100-spot/", {"placement": "frag", "sharing": "mig", "spot": "1",
                                                           "timeslice_replicas": "4", "mig_layout": "4g.40gb, 3g.40gb"})
    assert good.status_code == 302
    pool = NodePool.objects.get(name="a100-spot")
    assert (pool.sharing, pool.mig_layout, pool.placement, pool.spot) == ("mig", ["4g.40gb", "3g.40gb"], "frag", True)


@pytest.mark.django_db
def test_pool_layout_cannot_change_under_running_replicas(admin_client, cluster, submit, backend, clock, run):
    from scheduling.models import NodePool

    submit(cluster, "holder", gpus=1, pool="h100")
    run(backend, clock)
    response = admin_client.post("/console/pools/h100/", {"placement": "default", "sharing": "timeslice",
                                                          "timeslice_replicas": "4"})
    assert response.status_code == 400 and "drain its nodes" in response.content.decode()
    assert NodePool.objects.get(name="h100").sharing == "standard"


@pytest.mark.django_db
def test_a_new_price_table_is_offered_from_the_platform_clocks_tomorrow(admin_client, cluster, clock):
    from datetime import datetime

    from billing.time_zone import platform_tz

    clock.now = datetime(2031, 2, 28, 23, 30, tzinfo=platform_tz())  # never the machine's day
    page = admin_client.get("/console/prices/").content.decode()
    assert "Prices from 2031-03-01" in page and "2031-03-01 00:00" in page


@pytest.mark.django_db
def test_price_tables_only_for_the_future(admin_client, cluster, clock):
    from billing.models import PriceTable

    base = {"name": "Old", "currency": "USD", "cpu_core_hour": "0.03", "memory_gib_hour": "0.004",
            "priority_base": "1", "priority_step": "0.01", "offpeak_windows": "22:00-06:00", "offpeak_discount": "0.5",
            "spot_discount": "0.6", "gpu_rates": "nvidia H100-80GB 3.10"}
    past = (timezone.localtime(clock.now) - timedelta(hours=1)).strftime("%Y-%m-%d %H:%M")
    response = admin_client.post("/console/prices/", {**base, "effective_from": past})
    assert response.status_code == 400 and 'data-field="effective_from"' in response.content.decode()
    future = (timezone.localtime(clock.now) + timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
    response = admin_client.post("/console/prices/", {**base, "effective_from": future, "offpeak_windows": "25:00-01:00",
                                                      "offpeak_discount": "1.5", "gpu_rates": "intel X 1"})
    text = response.content.decode()
    assert response.status_code == 400
    for field in ("offpeak_windows", "offpeak_discount", "gpu_rates"):
        assert f'data-field="{field}"' in text
    assert PriceTable.objects.count() == 1
    assert admin_client.post("/console/prices/", {**base, "effective_from": future}).status_code == 302
    new = PriceTable.objects.get(name="Old")
    assert new.offpeak_windows == "22:00-06:00" and new.gpu_rates.get().per_gpu_hour == Decimal("3.1")


@pytest.mark.django_db
def test_node_token_shown_once_then_revoked(admin_client, cluster):
    from billing.models import NodeToken

    response = admin_client.post("/console/tokens/", {"node": "h100-02"})
    raw = response.content.decode().split('id="raw-token">')[1].split("<")[0]
    token = NodeToken.objects.get(node__name="h100-02")
    assert token.digest == NodeToken.digest_of(raw)
    assert raw not in admin_client.get("/console/tokens/").content.decode()
    admin_client.post("/console/tokens/", {"revoke": token.pk})
    token.refresh_from_db()
    assert token.revoked is not None


@pytest.mark.django_db
def test_a_tokens_last_use_is_told_by_the_platform_clock(admin_client, cluster, clock):
    from billing.models import NodeToken

    clock.advance(-40 * 86400)   # far from the machine's time: "used 40 days ago" if the page read that
    admin_client.post("/console/tokens/", {"node": "h100-02"})
    NodeToken.objects.filter(node__name="h100-02").update(last_used=clock.now - timedelta(hours=2))
    page = admin_client.get("/console/tokens/").content.decode()
    assert "used 2\xa0hours ago" in page


@pytest.mark.django_db
def test_workspace_and_member_management(admin_client, cluster):
    from portal.models import Membership, Workspace
    from scheduling.models import QueueAccess

    bad = admin_client.post("/console/workspaces/", {"slug": "Bad Slug", "name": ""})
    assert bad.status_code == 400 and 'data-field="slug"' in bad.content.decode()
    admin_client.post("/console/workspaces/", {"slug": "robotics", "name": "Robotics", "queue": "community"})
    ws = Workspace.objects.get(slug="robotics")
    assert QueueAccess.objects.get(workspace=ws).is_default
    admin_client.post("/console/workspaces/robotics/", {"username": "bob", "role": "member"})
    admin_client.post("/console/workspaces/robotics/", {"username": "bob", "role": "owner"})
    membership = Membership.objects.get(workspace=ws, user__username="bob")
    assert membership.role == "owner"
    admin_client.post("/console/workspaces/robotics/", {"username": "nobody", "role": "owner"})
    admin_client.post("/console/workspaces/robotics/", {"username": "alice", "role": "owner"})
    admin_client.post(f"/console/workspaces/robotics/members/{membership.pk}/remove/")  # the confirmed removal
    assert list(Membership.objects.filter(workspace=ws).values_list("user__username", flat=True)) == ["alice"]


@pytest.mark.django_db
def test_dashboard_shows_pending_reasons_oldest_first_and_the_heatmap(admin_client, cluster, submit):
    first = submit(cluster, "first-waiting", gpus=8, pool="h100", min=2, max=2)
    second = submit(cluster, "second-waiting", gpus=1, pool="h100")
    page = admin_client.get("/console/").content.decode()
    table = page.split('id="pending-table"')[1]
    assert table.index(f'data-job="{first.pk}"') < table.index(f'data-job="{second.pk}"')
    assert "waiting for the next scheduling cycle" in table
    assert 'id="heatmap-data"' in page and "h100-01" in page and "plotly-4.1.2.min.js" in page
