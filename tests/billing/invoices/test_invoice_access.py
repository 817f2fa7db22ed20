"""Who sees an invoice: finance and the owners and finance members of the account's workspaces, in the API, the
download and the console; a second tenant gets 404. Bad input is a problem (RFC 9457) naming its field."""

import pytest
from django.test import Client

from billing.ledger.services import close_period
from billing.models import Invoice, InvoicePayment
from portal.console.models import AuditEntry
from tests.billing.invoices.conftest import MARCH

pytestmark = pytest.mark.django_db


@pytest.fixture
def invoice(tenants, books):
    for workspace in (tenants.vision, books.robotics, tenants.nlp):
        close_period(user=tenants.finance, workspace=workspace, month=MARCH)
    return Invoice.objects.get(account=books.account, period=MARCH)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_api_lists_and_details_only_the_callers_accounts_invoices(invoice, tenants, api_as):
    listed = api_as(tenants.alice).get("/api/v1/invoices/")
    assert listed.status_code == 200
    assert [row["number"] for row in listed.json()["results"]] == ["AIL-2026-0001"]
    row = listed.json()["results"][0]
    assert (row["currency"], row["tax_rate"], row["subtotal"], row["tax"], row["total"], row["month"]) == (
        "CNY", "13", "98.15", "12.77", "110.92", "2026-03")
    assert sorted(r["number"] for r in api_as(tenants.admin).get("/api/v1/invoices/").json()["results"]) == [
        "AIL-2026-0001", "NLP-CO-2026-0001"]
    assert [r["number"] for r in api_as(tenants.bob).get("/api/v1/invoices/").json()["results"]] == ["NLP-CO-2026-0001"]
    assert api_as(tenants.admin).get("/api/v1/invoices/", {"month": "2026-04", "account": "ai-lab"}).json()["count"] == 0
    assert api_as(tenants.admin).get("/api/v1/invoices/", {"month": "2026-03", "account": "ai-lab"}).json()["count"] == 1
    assert api_as(tenants.admin).get(f"/api/v1/invoices/{10**30}/").status_code == 404
    detail = api_as(tenants.finance).get(f"/api/v1/invoices/{invoice.pk}/").json()
    assert [(li["workspace"], li["service"], li["tax"]) for li in detail["lines"]][1] == ("vision-lab", "compute", "13.00")
    for user in (tenants.bob, tenants.carol):  # the other tenant; a plain member of vision-lab
        assert api_as(user).get(f"/api/v1/invoices/{invoice.pk}/").status_code == 404
        assert api_as(user).get(f"/api/v1/invoices/{invoice.pk}.pdf").status_code == 404


def test_the_pdf_downloads_for_an_owner_and_not_for_another_tenant(invoice, tenants, api_as):
    pdf = api_as(tenants.alice).get(f"/api/v1/invoices/{invoice.pk}.pdf")
    assert pdf.status_code == 200 and pdf["Content-Type"] == "application/pdf" and pdf.content.startswith(b"%PDF-")
    assert 'filename="AIL-2026-0001.pdf"' in pdf["Content-Disposition"]
    page = signed_in(tenants.finance).get(f"/reports/invoices/{invoice.pk}/invoice.pdf")
    assert page.status_code == 200 and page.content.startswith(b"%PDF-")
    assert signed_in(tenants.bob).get(f"/reports/invoices/{invoice.pk}/invoice.pdf").status_code == 404
    html = signed_in(tenants.alice).get(f"/reports/invoices/{invoice.pk}/invoice.html")
    assert html.status_code == 200 and "人工智能实验室有限公司" in html.content.decode() and "@page" in html.content.decode()


@pytest.mark.parametrize("query, field", [("month=2026-13", "month"), ("month=march", "month"), ("month=0000-01", "month"),
                                          ("kind=bill", "kind"), ("colour=red", "colour")])
def test_bad_filters_are_problems_naming_the_field(invoice, tenants, api_as, query, field):
    response = api_as(tenants.admin).get(f"/api/v1/invoices/?{query}")
    assert response.status_code == 400 and response["Content-Type"].startswith("application/problem+json")
    assert [e["field"] for e in response.json()["errors"]] == [field]


def test_finance_works_invoices_in_the_console_and_each_write_is_audited(invoice, tenants, settings, mailoutbox):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    console = signed_in(tenants.admin)
    listing = console.get("/console/invoices/")
    assert listing.status_code == 200 and "AIL-2026-0001" in listing.content.decode()
    detail = console.get(f"/console/invoices/{invoice.pk}/")
    assert detail.status_code == 200 and "¥110.92" in detail.content.decode()
    assert signed_in(tenants.alice).get("/console/invoices/").status_code == 403

    refused = console.post("/console/invoices/", {"month": "2026-04"})  # April has not ended
    assert refused.status_code == 400 and "2026-04" in refused.content.decode()
    console.post(f"/console/invoices/{invoice.pk}/credit/", {"amount": "500", "reason": "too much"})
    assert not Invoice.objects.filter(kind="credit_note").exists()
    console.post(f"/console/invoices/{invoice.pk}/credit/", {"amount": "10", "reason": "slow disks"})
    note = Invoice.objects.get(kind="credit_note")
    assert note.number == "AIL-CN2026-0001" and note.corrects == invoice
    console.post(f"/console/invoices/{invoice.pk}/paid/", {"paid_on": "2026-04-02"})
    assert InvoicePayment.objects.get(invoice=invoice).recorded_by == tenants.admin
    console.post(f"/console/invoices/{invoice.pk}/mail/")
    assert mailoutbox[0].to == ["ap@ai-lab.example", "finance@ai-lab.example"]
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"issue credit note", "mark invoice paid", "e-mail invoice"} <= actions


def test_closing_the_last_workspace_on_its_statement_page_audits_the_invoice_it_issues(tenants, books):
    finance = signed_in(tenants.finance)
    for workspace in (tenants.vision, books.robotics):
        finance.post(f"/reports/statements/{workspace.slug}/2026-03/close/")
    invoice = Invoice.objects.get(account=books.account)
    entry = AuditEntry.objects.get(action="issue invoice")
    assert entry.target_id == str(invoice.pk) and entry.user == tenants.finance and "110.92 CNY" in entry.message


def test_finance_issues_a_closed_month_from_the_console(tenants, books):
    from unittest import mock

    with mock.patch("billing.ledger.services.issue_when_closed"):
        for workspace in (tenants.vision, books.robotics):
            close_period(user=tenants.finance, workspace=workspace, month=MARCH)
    console = signed_in(tenants.admin)
    refused = console.post("/console/invoices/", {"month": "2026-03"})  # nlp-group's month is open
    assert refused.status_code == 400 and "nlp-group" in refused.content.decode() and not Invoice.objects.exists()
    issued = console.post("/console/invoices/", {"month": "2026-03", "account": "ai-lab"})
    assert issued.status_code == 302
    invoice = Invoice.objects.get(account=books.account)
    assert AuditEntry.objects.get(action="issue invoice").target_id == str(invoice.pk)
