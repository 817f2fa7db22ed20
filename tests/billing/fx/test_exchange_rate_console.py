"""The console's exchange-rate page: operators only; a rate added or a file imported is audited; a refused
one stores nothing and says why beside its field."""

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from billing.models import ExchangeRate
from portal.console.models import AuditEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(tenants, clock):
    clock.now = datetime(2026, 3, 31, 12, tzinfo=UTC)
    client = Client()
    client.force_login(tenants.admin)
    return client


def add(client, **fields):
    data = {"action": "add", "add-base": "EUR", "add-quote": "USD", "add-day": "2026-03-02", "add-rate": "1.08"}
    data.update({f"add-{k}": v for k, v in fields.items()})
    return client.post("/console/exchange-rates/", data)


def test_a_rate_added_is_listed_and_audited(operator):
    assert add(operator).status_code == 302
    assert ExchangeRate.objects.get().rate == Decimal("1.08")
    entry = AuditEntry.objects.get(target_type="billing.exchangerate")
    assert entry.action == "create" and entry.username == "admin" and "1 EUR = 1.0800000000 USD" in entry.message
    page = operator.get("/console/exchange-rates/").content.decode()
    assert 'data-pair="EUR/USD" data-day="2026-03-02"' in page


@pytest.mark.parametrize(("fields", "field"), [
    ({"rate": "0"}, "rate"), ({"rate": "-1"}, "rate"), ({"day": "2026-04-01"}, "day"), ({"quote": "EUR"}, "quote"),
])
def test_a_bad_rate_is_refused_beside_its_field(operator, fields, field):
    response = add(operator, **fields)
    assert response.status_code == 400 and response.context["add_form"].errors[field]
    assert not ExchangeRate.objects.exists() and not AuditEntry.objects.filter(target_type="billing.exchangerate")


def test_the_ecb_file_is_imported_and_a_bad_one_stores_nothing(operator):
    good = SimpleUploadedFile("eurofxref.csv", b"Date, USD, CNY, \n2 March 2026, 1.0800, 7.8000, \n")
    assert operator.post("/console/exchange-rates/", {"action": "import", "import-file": good}).status_code == 302
    assert ExchangeRate.objects.filter(day=date(2026, 3, 2)).count() == 2
    assert AuditEntry.objects.filter(action="import", target_type="billing.exchangerate").count() == 1
    bad = SimpleUploadedFile("eurofxref.csv", b"Date,USD,CNY\n2026-03-03,1.09,7.85\n2026-03-04,0,7.9\n")
    response = operator.post("/console/exchange-rates/", {"action": "import", "import-file": bad})
    assert response.status_code == 400
    assert response.context["import_form"].errors["file"] == ["line 3, USD: a rate must be more than 0, not 0"]
    assert ExchangeRate.objects.count() == 2


def test_a_tenant_may_not_see_the_page(tenants, clock):
    client = Client()
    client.force_login(tenants.finance)
    assert client.get("/console/exchange-rates/").status_code == 403
