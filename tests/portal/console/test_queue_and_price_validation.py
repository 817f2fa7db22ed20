"""One set of rules for queues, pools and price tables, enforced alike through the Django admin
and the operator console: the message sits beside the field and nothing is saved."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone


@pytest.fixture
def staff_client(client, cluster):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.get(username="admin"))
    return client


@pytest.fixture
def org(cluster):
    """A small tree no workspace submits to: org (10 GPUs) > team (5 GPUs)."""
    from scheduling.models import Queue

    org = Queue.objects.create(name="org", deserved_gpus=10)
    Queue.objects.create(name="team", parent=org, deserved_gpus=5)
    return org


def field_errors(html: str, field: str) -> list[str]:
    """The messages shown beside `field`, in the admin (errorlist next to the input) or the console."""
    console = re.search(rf'<ul class="errors field-errors" data-field="{field}">(.*?)</ul>', html, re.S)
    admin = re.search(rf'<div class="[^"]*field-{field}[^"]*">.*?<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>',
                      html, re.S)
    found = console or admin
    return re.findall(r"<li>(.*?)</li>", found.group(1), re.S) if found else []


def admin_queue_data(queue, **changes):
    data = {"name": queue.name, "parent": queue.parent_id or "", "deserved_gpus": queue.deserved_gpus,
            "over_quota_weight": queue.over_quota_weight,
            "limit_gpus": "" if queue.limit_gpus is None else queue.limit_gpus, "priority": queue.priority,
            "queueaccess_set-TOTAL_FORMS": "0", "queueaccess_set-INITIAL_FORMS": "0",
            "queueaccess_set-MIN_NUM_FORMS": "0", "queueaccess_set-MAX_NUM_FORMS": "1000"}
    return {**data, **changes}


def console_queue_data(queue, **changes):
    data = {"name": queue.name, "parent": queue.parent.name if queue.parent else "",
            "deserved_gpus": queue.deserved_gpus, "over_quota_weight": queue.over_quota_weight,
            "limit_gpus": "" if queue.limit_gpus is None else queue.limit_gpus, "priority": queue.priority}
    return {**data, **changes}


# --------------------------------------------------------------------------- queues through the admin


@pytest.mark.django_db
def test_admin_refuses_a_queue_that_becomes_its_own_ancestor(staff_client, org):
    from scheduling.models import Queue

    team = Queue.objects.get(name="team")
    response = staff_client.post(f"/admin/scheduling/queue/{org.pk}/change/", admin_queue_data(org, parent=team.pk))
    assert response.status_code == 200  # the form again
    assert any("loop" in m for m in field_errors(response.content.decode(), "parent"))
    assert Queue.objects.get(name="org").parent is None


@pytest.mark.django_db
def test_admin_refuses_negative_quota_and_limit_beside_each_field(staff_client, org):
    from scheduling.models import Queue

    team = Queue.objects.get(name="team")
    response = staff_client.post(f"/admin/scheduling/queue/{team.pk}/change/",
                                 admin_queue_data(team, deserved_gpus="-1", limit_gpus="-2"))
    html = response.content.decode()
    assert response.status_code == 200
    assert any("0 or more" in m for m in field_errors(html, "deserved_gpus"))
    assert any("0 or more" in m for m in field_errors(html, "limit_gpus"))
    team.refresh_from_db()
    assert team.deserved_gpus == 5 and team.limit_gpus is None


@pytest.mark.django_db
def test_admin_refuses_a_child_that_deserves_more_than_its_parent(staff_client, org):
    from scheduling.models import Queue

    team = Queue.objects.get(name="team")
    response = staff_client.post(f"/admin/scheduling/queue/{team.pk}/change/",
                                 admin_queue_data(team, deserved_gpus="12"))
    assert response.status_code == 200
    assert any("more than its 10" in m for m in field_errors(response.content.decode(), "deserved_gpus"))
    assert Queue.objects.get(name="team").deserved_gpus == 5


@pytest.mark.django_db
def test_admin_saves_a_valid_queue(staff_client, org):
    from scheduling.models import Queue

    team = Queue.objects.get(name="team")
    response = staff_client.post(f"/admin/scheduling/queue/{team.pk}/change/",
                                 admin_queue_data(team, deserved_gpus="8"))
    assert response.status_code == 302
    assert Queue.objects.get(name="team").deserved_gpus == 8


# --------------------------------------------------------------------------- queues through the console


@pytest.mark.django_db
def test_console_refuses_a_loop_with_the_message_beside_parent(staff_client, org):
    from portal.console.models import AuditEntry
    from scheduling.models import Queue

    response = staff_client.post("/console/queues/org/", console_queue_data(org, parent="team"))
    assert response.status_code == 400
    assert any("loop" in m for m in field_errors(response.content.decode(), "parent"))
    assert Queue.objects.get(name="org").parent is None
    assert not AuditEntry.objects.exists()


@pytest.mark.django_db
def test_console_shows_every_error_of_a_field(staff_client, org):
    from scheduling.models import Queue

    team = Queue.objects.get(name="team")
    # a negative quota, and the sub-queues of org would no longer fit... a negative weight too
    response = staff_client.post("/console/queues/team/", console_queue_data(
        team, deserved_gpus="-1", over_quota_weight="-1", limit_gpus="-3"))
    html = response.content.decode()
    assert response.status_code == 400
    assert any("0 or more" in m for m in field_errors(html, "deserved_gpus"))
    assert any("0 or more" in m for m in field_errors(html, "over_quota_weight"))
    assert any("0 or more" in m for m in field_errors(html, "limit_gpus"))
    assert Queue.objects.get(name="team").deserved_gpus == 5


@pytest.mark.django_db
def test_console_refuses_a_child_over_its_parent(staff_client, org):
    from scheduling.models import Queue

    response = staff_client.post("/console/queues/new/", {"name": "big", "parent": "org", "deserved_gpus": "6",
                                                          "over_quota_weight": "1", "priority": "0"})
    assert response.status_code == 400
    assert any("more than its 10" in m for m in field_errors(response.content.decode(), "deserved_gpus"))
    assert not Queue.objects.filter(name="big").exists()


# --------------------------------------------------------------------------- pools


@pytest.mark.django_db
def test_admin_refuses_a_mig_layout_the_card_does_not_have(staff_client, cluster):
    from scheduling.models import NodePool

    pool = NodePool.objects.get(name="h100-mig")
    data = {"name": pool.name, "vendor": pool.vendor, "gpu_model": pool.gpu_model,
            "gpu_memory_mib": pool.gpu_memory_mib, "placement": pool.placement, "sharing": "mig",
            "timeslice_replicas": "4", "mig_layout": "3g.20gb, 4g.20gb"}
    response = staff_client.post(f"/admin/scheduling/nodepool/{pool.pk}/change/", data)
    assert response.status_code == 200
    assert any("not profiles of H100-80GB" in m for m in field_errors(response.content.decode(), "mig_layout"))
    assert NodePool.objects.get(name="h100-mig").mig_layout == pool.mig_layout


@pytest.mark.django_db
def test_admin_refuses_zero_timeslice_replicas(staff_client, cluster):
    from scheduling.models import NodePool

    pool = NodePool.objects.get(name="h100")
    data = {"name": pool.name, "vendor": pool.vendor, "gpu_model": pool.gpu_model,
            "gpu_memory_mib": pool.gpu_memory_mib, "placement": pool.placement, "sharing": "timeslice",
            "timeslice_replicas": "65", "mig_layout": ""}
    response = staff_client.post(f"/admin/scheduling/nodepool/{pool.pk}/change/", data)
    assert response.status_code == 200
    assert field_errors(response.content.decode(), "timeslice_replicas")
    assert NodePool.objects.get(name="h100").sharing == "standard"


# --------------------------------------------------------------------------- price tables


def price_data(effective_from, **changes):
    data = {"name": "Next", "currency": "USD", "effective_from": effective_from, "cpu_core_hour": "0.03",
            "memory_gib_hour": "0.004", "priority_base": "1", "priority_step": "0.01",
            "offpeak_windows": "22:00-06:00", "offpeak_discount": "0.5", "spot_discount": "0.6"}
    return {**data, **changes}


def admin_price_data(effective_from, **changes):
    at = timezone.localtime(effective_from)
    data = price_data("", **changes)
    del data["effective_from"]
    return {**data, "effective_from_0": at.strftime("%Y-%m-%d"), "effective_from_1": at.strftime("%H:%M:%S"),
            "gpu_rates-TOTAL_FORMS": "1", "gpu_rates-INITIAL_FORMS": "0", "gpu_rates-MIN_NUM_FORMS": "0",
            "gpu_rates-MAX_NUM_FORMS": "1000", "gpu_rates-0-vendor": "nvidia", "gpu_rates-0-gpu_model": "H100-80GB",
            "gpu_rates-0-per_gpu_hour": "3.10"}


@pytest.mark.django_db
def test_console_refuses_a_price_period_that_overlaps_another(staff_client, cluster, clock):
    from billing.models import PriceTable

    at = (timezone.localtime(clock.now) + timedelta(days=3)).replace(second=0, microsecond=0)
    PriceTable.objects.create(name="Scheduled", effective_from=at, cpu_core_hour=Decimal("0.03"),
                              memory_gib_hour=Decimal("0.004"))
    count = PriceTable.objects.count()
    response = staff_client.post("/console/prices/", price_data(at.strftime("%Y-%m-%d %H:%M"),
                                                                gpu_rates="nvidia H100-80GB 3.10"))
    assert response.status_code == 400
    assert any("overlap" in m for m in field_errors(response.content.decode(), "effective_from"))
    assert PriceTable.objects.count() == count


@pytest.mark.django_db
def test_admin_refuses_a_price_period_that_overlaps_another(staff_client, cluster, clock):
    from billing.models import PriceTable

    at = (timezone.localtime(clock.now) + timedelta(days=3)).replace(second=0, microsecond=0)
    PriceTable.objects.create(name="Scheduled", effective_from=at, cpu_core_hour=Decimal("0.03"),
                              memory_gib_hour=Decimal("0.004"))
    count = PriceTable.objects.count()
    response = staff_client.post("/admin/billing/pricetable/add/", admin_price_data(at))
    assert response.status_code == 200
    assert any("overlap" in m for m in field_errors(response.content.decode(), "effective_from"))
    assert PriceTable.objects.count() == count


@pytest.mark.django_db
def test_admin_refuses_a_past_start_and_a_discount_over_one(staff_client, cluster, clock):
    from billing.models import PriceTable

    count = PriceTable.objects.count()
    response = staff_client.post("/admin/billing/pricetable/add/", admin_price_data(
        timezone.localtime(clock.now) - timedelta(hours=1), offpeak_discount="1.5"))
    html = response.content.decode()
    assert response.status_code == 200
    assert any("future" in m for m in field_errors(html, "effective_from"))
    assert field_errors(html, "offpeak_discount")
    assert PriceTable.objects.count() == count
