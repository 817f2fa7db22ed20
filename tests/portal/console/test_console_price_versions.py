"""Scheduled price tables are edited and withdrawn from the console; versions in force or past are read-only
there too. Every change is audited, and tenants are kept out."""

from decimal import Decimal

import pytest

from billing.models import PriceTable
from portal.console.models import AuditEntry
from tests.portal.console.test_console_forms import PRICE


@pytest.fixture
def scheduled(admin_client, cluster):
    assert admin_client.post("/console/prices/", PRICE).status_code == 302
    return PriceTable.objects.get(name="Next")


def _in_force():
    from scheduling import clock

    return PriceTable.objects.filter(effective_from__lte=clock.now()).order_by("-effective_from").first()


@pytest.mark.django_db
def test_a_scheduled_version_is_edited_with_its_rates_and_the_change_audited(admin_client, scheduled):
    page = admin_client.get(f"/console/prices/{scheduled.pk}/").content.decode()
    assert 'value="Next"' in page and "nvidia H100-80GB 3.2" in page
    done = admin_client.post(f"/console/prices/{scheduled.pk}/",
                             {**PRICE, "name": "Next, revised", "gpu_rates": "nvidia H100-80GB 3.5\namd MI300X-192GB 2"},
                             follow=True)
    assert "Price table Next, revised saved" in done.content.decode()
    scheduled.refresh_from_db()
    assert scheduled.name == "Next, revised"
    assert {(r.gpu_model, r.per_gpu_hour) for r in scheduled.gpu_rates.all()} == {
        ("H100-80GB", Decimal("3.5")), ("MI300X-192GB", Decimal("2"))}
    entry = AuditEntry.objects.get(action="update", target_type="billing.pricetable")
    assert entry.changes["name"] == ["Next", "Next, revised"]
    assert entry.changes["gpu_rates"][1] == ["amd MI300X-192GB 2", "nvidia H100-80GB 3.5"]


@pytest.mark.django_db
def test_an_edit_with_errors_changes_nothing_and_shows_them_beside_their_fields(admin_client, scheduled):
    bad = admin_client.post(f"/console/prices/{scheduled.pk}/",
                            {**PRICE, "name": "Changed", "effective_from": "2001-01-01 00:00", "gpu_rates": "x"})
    assert bad.status_code == 400
    text = bad.content.decode()
    for field in ("effective_from", "gpu_rates"):
        assert f'data-field="{field}"' in text.split(f'data-field-row="{field}"')[1].split("</div>")[0]
    scheduled.refresh_from_db()
    assert scheduled.name == "Next" and scheduled.gpu_rates.count() == 1
    assert not AuditEntry.objects.filter(action="update").exists()


@pytest.mark.django_db
def test_the_version_in_force_is_read_only_in_the_console(admin_client, scheduled):
    current = _in_force()
    before = (current.name, list(current.gpu_rates.values_list("per_gpu_hour", flat=True)))
    page = admin_client.get(f"/console/prices/{current.pk}/")
    assert page.status_code == 400 and "read-only" in page.content.decode()
    assert 'id="save-price-table"' not in page.content.decode()
    refused = admin_client.post(f"/console/prices/{current.pk}/", {**PRICE, "name": "Rewritten"})
    assert refused.status_code == 400 and "prices of the past never change" in refused.content.decode()
    assert admin_client.post(f"/console/prices/{current.pk}/withdraw/").status_code == 400
    current.refresh_from_db()
    assert (current.name, list(current.gpu_rates.values_list("per_gpu_hour", flat=True))) == before
    listing = admin_client.get("/console/prices/").content.decode()
    row = listing.split(f'data-table="{current.pk}"')[1].split("</tr>")[0]
    assert "edit" not in row and "withdraw" not in row
    assert f'href="/console/prices/{scheduled.pk}/withdraw/"' in listing


@pytest.mark.django_db
def test_withdrawing_asks_first_then_deletes_the_scheduled_version_only(admin_client, scheduled):
    confirm = admin_client.get(f"/console/prices/{scheduled.pk}/withdraw/")
    assert confirm.status_code == 200 and 'id="confirm-withdraw"' in confirm.content.decode()
    assert PriceTable.objects.filter(pk=scheduled.pk).exists()
    done = admin_client.post(f"/console/prices/{scheduled.pk}/withdraw/", follow=True)
    assert "Price table Next withdrawn" in done.content.decode()
    assert not PriceTable.objects.filter(pk=scheduled.pk).exists()
    assert _in_force() is not None
    entry = AuditEntry.objects.get(action="delete", target_type="billing.pricetable")
    assert entry.changes["name"] == ["Next", None] and "withdrew Next" in entry.message


@pytest.mark.django_db
def test_tenants_cannot_edit_or_withdraw_prices(client, scheduled, cluster):
    client.force_login(cluster.alice)
    assert client.post(f"/console/prices/{scheduled.pk}/", {**PRICE, "name": "Mine"}).status_code == 403
    assert client.post(f"/console/prices/{scheduled.pk}/withdraw/").status_code == 403
    scheduled.refresh_from_db()
    assert scheduled.name == "Next"
    assert not AuditEntry.objects.filter(action__in=("update", "delete")).exists()
