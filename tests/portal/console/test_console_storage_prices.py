"""Operators set storage prices where they set GPU prices: per storage class and GiB-month, on a price
version of a currency, with the same future-only rule; mistakes are shown beside the field."""

from decimal import Decimal

import pytest

from billing.models import PriceTable
from portal.console.models import AuditEntry
from tests.portal.console.test_console_forms import PRICE

pytestmark = pytest.mark.django_db


def test_a_new_version_carries_storage_rates_that_the_ledger_prices_with(admin_client, cluster):
    done = admin_client.post("/console/prices/", {**PRICE, "storage_rates": "standard 0.10\nfast-nvme 0.25"})
    assert done.status_code == 302
    table = PriceTable.objects.get(name="Next")
    assert {(r.storage_class, r.per_gib_month) for r in table.storage_rates.all()} == {
        ("standard", Decimal("0.10")), ("fast-nvme", Decimal("0.25"))}
    assert table.to_pricing().rates.storage_rate("fast-nvme") == Decimal("0.25")
    entry = AuditEntry.objects.get(action="create", target_type="billing.pricetable")
    assert entry.changes["storage_rates"][1] == ["fast-nvme 0.25", "standard 0.1"]
    page = admin_client.get("/console/prices/").content.decode()
    assert "fast-nvme 0.2500" in page and 'id="f-storage-rates"' in page
    edit = admin_client.get(f"/console/prices/{table.pk}/").content.decode()
    assert "standard 0.1" in edit


@pytest.mark.parametrize(("text", "message"), [
    ("standard", "write `storage_class price`"), ("Standard 0.1", "lowercase letters"),
    ("standard -1", "0 or more"), ("standard 0.00001", "4 decimal places"), ("standard x", "is not a number"),
    ("standard 1\nstandard 2", "listed twice")])
def test_a_wrong_storage_rate_is_refused_beside_its_field(admin_client, cluster, text, message):
    bad = admin_client.post("/console/prices/", {**PRICE, "storage_rates": text})
    assert bad.status_code == 400
    row = bad.content.decode().split('data-field-row="storage_rates"')[1].split("</div>")[0]
    assert message in row
    assert not PriceTable.objects.filter(name="Next").exists()


def test_storage_rates_are_optional(admin_client, cluster):
    assert admin_client.post("/console/prices/", {**PRICE, "storage_rates": ""}).status_code == 302
    assert not PriceTable.objects.get(name="Next").storage_rates.exists()
