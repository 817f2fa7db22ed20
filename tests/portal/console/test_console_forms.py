"""The pool and price forms: labels and help text (no internal field names), every error beside its field,
a success message, and tenants kept out."""

import pytest

PRICE = {"name": "Next", "currency": "USD", "cpu_core_hour": "0.03", "memory_gib_hour": "0.004",
         "priority_base": "1", "priority_step": "0.01", "offpeak_windows": "00:00-08:00", "offpeak_discount": "0.4",
         "spot_discount": "0.6", "effective_from": "2099-01-01 00:00", "gpu_rates": "nvidia H100-80GB 3.2"}


@pytest.mark.django_db
def test_pool_form_has_labels_and_help_and_errors_without_field_names(admin_client, cluster):
    page = admin_client.get("/console/pools/h100/").content.decode()
    assert "Time-slice replicas per GPU" in page and "replicas sharing one GPU" in page
    assert 'id="id_timeslice_replicas_helptext"' in page and "no completion promise" in page
    bad = admin_client.post("/console/pools/h100/", {"placement": "nowhere", "sharing": "standard",
                                                     "timeslice_replicas": "0"})
    assert bad.status_code == 400
    text = bad.content.decode()
    for field in ("placement", "timeslice_replicas"):
        row = text.split(f'data-field-row="{field}"')[1].split("</div>")[0]
        assert f'data-field="{field}"' in row  # beside its own field
    assert "timeslice_replicas:" not in text and "placement:" not in text


@pytest.mark.django_db
def test_pool_save_is_confirmed_and_tenants_cannot_save(admin_client, client, cluster):
    from scheduling.models import NodePool

    saved = admin_client.post("/console/pools/h100/", {"placement": "spread", "sharing": "standard",
                                                       "timeslice_replicas": "4"}, follow=True)
    assert "Pool h100 saved." in saved.content.decode()
    client.force_login(cluster.bob)
    assert client.post("/console/pools/h100/", {"placement": "binpack", "sharing": "standard",
                                               "timeslice_replicas": "4"}).status_code == 403
    assert NodePool.objects.get(name="h100").placement == "spread"


@pytest.mark.django_db
def test_price_form_has_help_and_shows_every_error_beside_its_field(admin_client, cluster):
    from billing.models import PriceTable

    page = admin_client.get("/console/prices/").content.decode()
    assert "the share taken off on spot pools" in page and "Price of one CPU core for an hour" in page
    bad = admin_client.post("/console/prices/", {**PRICE, "cpu_core_hour": "cheap", "spot_discount": "2",
                                                 "gpu_rates": "nvidia H100"})
    assert bad.status_code == 400
    text = bad.content.decode()
    for field in ("cpu_core_hour", "gpu_rates"):
        row = text.split(f'data-field-row="{field}"')[1].split("</div>")[0]
        assert f'data-field="{field}"' in row
    assert "cpu_core_hour:" not in text and "gpu_rates:" not in text
    assert not PriceTable.objects.filter(name="Next").exists()
    done = admin_client.post("/console/prices/", PRICE, follow=True)
    assert "Price table Next takes effect" in done.content.decode()


NEW_POOL = {"name": "b200", "vendor": "nvidia", "gpu_model": "B200-180GB", "gpu_memory_mib": "184320",
            "placement": "binpack", "sharing": "standard", "timeslice_replicas": "4", "mig_layout": ""}


@pytest.mark.django_db
def test_a_pool_is_created_from_the_console_and_audited(admin_client, cluster):
    from portal.console.models import AuditEntry
    from scheduling.models import NodePool

    page = admin_client.get("/console/pools/").content.decode()
    assert 'id="new-pool-form"' in page and "admin/scheduling/nodepool/add" not in page
    done = admin_client.post("/console/pools/", NEW_POOL, follow=True)
    assert "Pool b200 created" in done.content.decode()
    pool = NodePool.objects.get(name="b200")
    assert (pool.gpu_model, pool.gpu_memory_mib, pool.placement) == ("B200-180GB", 184320, "binpack")
    assert AuditEntry.objects.get(action="create", target_type="scheduling.nodepool").changes["name"] == [None, "b200"]


@pytest.mark.django_db
def test_a_refused_pool_shows_each_error_beside_its_field_and_creates_nothing(admin_client, client, cluster):
    from scheduling.models import NodePool

    count = NodePool.objects.count()
    bad = admin_client.post("/console/pools/", {**NEW_POOL, "name": "h100", "gpu_memory_mib": "-1",
                                                "sharing": "mig", "mig_layout": "9g.99gb"})
    assert bad.status_code == 400
    text = bad.content.decode()
    for field in ("name", "gpu_memory_mib"):
        assert f'data-field="{field}"' in text.split(f'data-field-row="{field}"')[1].split("</div>")[0]
    client.force_login(cluster.alice)
    assert client.post("/console/pools/", NEW_POOL).status_code == 403
    assert NodePool.objects.count() == count
