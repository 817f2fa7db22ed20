"""Issuing invoices from closed months: per-line tax rounded once, sums of rounded figures, numbers that are
never given twice, immutability, credit notes and payments."""

from datetime import date, timedelta
from decimal import Decimal
from unittest import mock

import pytest
from django.db import IntegrityError, transaction

from billing.invoices import services as invoices
from billing.ledger.services import close_period
from billing.models import BilledRecordIsFinal, Invoice, InvoiceLine, InvoicePayment, InvoiceSequence
from scheduling.api import Forbidden
from tests.billing.invoices.conftest import MARCH

pytestmark = pytest.mark.django_db


def close_all(tenants, books):
    close_period(user=tenants.finance, workspace=tenants.vision, month=MARCH)
    close_period(user=tenants.finance, workspace=books.robotics, month=MARCH)
    return Invoice.objects.get(account=books.account, period=MARCH)


def test_closing_the_last_workspace_issues_the_invoice_with_tax_per_rounded_line(tenants, books):
    close_period(user=tenants.finance, workspace=tenants.vision, month=MARCH)
    assert not Invoice.objects.exists()  # robotics is still open
    close_period(user=tenants.finance, workspace=books.robotics, month=MARCH)
    invoice = Invoice.objects.get(account=books.account)
    assert invoice.number == "AIL-2026-0001" and invoice.kind == "invoice" and invoice.currency == "CNY"
    assert invoice.issued_on == date(2026, 4, 2) and invoice.due_on == date(2026, 5, 2)
    assert invoice.account_name == "人工智能实验室有限公司" and invoice.tax_rate == Decimal("13")
    lines = [(li.workspace.slug, li.service, li.amount, li.tax, li.total) for li in invoice.lines.all()]
    assert lines == [
        ("robotics", "storage", Decimal("0.05"), Decimal("0.01"), Decimal("0.06")),
        ("vision-lab", "compute", Decimal("100.00"), Decimal("13.00"), Decimal("113.00")),
        ("vision-lab", "storage", Decimal("0.05"), Decimal("0.01"), Decimal("0.06")),
        ("vision-lab", "adjustment", Decimal("0.05"), Decimal("0.01"), Decimal("0.06")),
        ("vision-lab", "credit", Decimal("-2.00"), Decimal("-0.26"), Decimal("-2.26")),
    ]
    # sums of the rounded figures: 12.77, where 13 % of the subtotal 98.15 would round to 12.76
    assert (invoice.subtotal, invoice.tax, invoice.total) == (Decimal("98.15"), Decimal("12.77"), Decimal("110.92"))
    assert not Invoice.objects.filter(account=books.other).exists()  # nlp-group's month is open


def test_an_invoice_for_an_open_period_is_refused_with_a_field_error(tenants, books):
    close_period(user=tenants.finance, workspace=tenants.vision, month=MARCH)
    with pytest.raises(invoices.InvoiceError) as refused:
        invoices.issue_invoice(user=tenants.admin, account=books.account, month="2026-03")
    assert refused.value.errors.keys() == {"month"} and "robotics" in str(refused.value)
    with pytest.raises(invoices.InvoiceError) as refused:
        invoices.issue_invoices(user=tenants.admin, month="2026-03")
    assert refused.value.errors.keys() == {"month"}
    with pytest.raises(invoices.InvoiceError) as refused:
        invoices.issue_invoice(user=tenants.admin, account=books.account, month="2026-13")
    assert refused.value.errors.keys() == {"month"}
    assert not Invoice.objects.exists() and not InvoiceSequence.objects.exists()


def test_finance_issues_a_month_explicitly_and_only_once(tenants, books):
    for workspace in (tenants.vision, books.robotics, tenants.nlp):
        with mock.patch("billing.ledger.services.issue_when_closed"):  # the explicit action, not the close, issues
            close_period(user=tenants.admin, workspace=workspace, month=MARCH)
    with pytest.raises(Forbidden):
        invoices.issue_invoices(user=tenants.bob, month="2026-03")
    issued = invoices.issue_invoices(user=tenants.admin, month="2026-03")
    assert sorted(i.number for i in issued) == ["AIL-2026-0001", "NLP-CO-2026-0001"]
    assert invoices.issue_invoices(user=tenants.admin, month="2026-03") == []
    with pytest.raises(invoices.Conflict):
        invoices.issue_invoice(user=tenants.admin, account=books.account, month="2026-03")


def test_numbers_follow_each_other_and_a_failed_issue_gives_none_away(tenants, books):
    invoice = close_all(tenants, books)
    april, lines = date(2026, 4, 1), invoices.draft_lines(books.account, MARCH)
    with mock.patch.object(InvoiceLine.objects, "bulk_create", side_effect=RuntimeError("disk full")):
        with pytest.raises(RuntimeError):
            invoices._write(books.account, kind="invoice", period=april, lines=lines, user=None, now=invoice.issued_at)
    assert Invoice.objects.count() == 1  # neither the document nor its number survived the failure
    assert InvoiceSequence.objects.get(account=books.account, kind="invoice").last == 1
    second = invoices._write(books.account, kind="invoice", period=april, lines=lines, user=None, now=invoice.issued_at)
    assert second.number == "AIL-2026-0002"
    # the database refuses a second document with a number already given, whatever the code says
    copy = {f.attname: getattr(invoice, f.attname) for f in Invoice._meta.concrete_fields if f.name != "id"}
    with pytest.raises(IntegrityError), transaction.atomic():
        Invoice.objects.create(**copy | {"period": date(2026, 5, 1)})


def test_an_issued_invoice_never_changes(tenants, books):
    invoice = close_all(tenants, books)
    invoice.total = Decimal("1.00")
    with pytest.raises(BilledRecordIsFinal):
        invoice.save()
    with pytest.raises(BilledRecordIsFinal):
        invoice.delete()
    line = invoice.lines.first()
    with pytest.raises(BilledRecordIsFinal):
        line.save()
    books.account.name = "Renamed"
    books.account.save()
    assert Invoice.objects.get(pk=invoice.pk).account_name == "人工智能实验室有限公司"


def test_credit_notes_have_their_own_numbers_and_never_exceed_what_is_left(tenants, books):
    invoice = close_all(tenants, books)
    note = invoices.issue_credit_note(user=tenants.finance, invoice=invoice, amount="50", reason="slow disks")
    assert note.number == "AIL-CN2026-0001" and note.corrects == invoice and note.kind == "credit_note"
    assert (note.subtotal, note.tax, note.total) == (Decimal("50.00"), Decimal("6.50"), Decimal("56.50"))
    assert invoices.remaining(invoice) == Decimal("54.42")
    for amount in ("48.17", "0", "-1", "abc", "NaN"):  # 48.17 + 6.26 tax = 54.43 > 54.42
        with pytest.raises(invoices.InvoiceError) as refused:
            invoices.issue_credit_note(user=tenants.finance, invoice=invoice, amount=amount, reason="again")
        assert refused.value.errors.keys() == {"amount"}, amount
    with pytest.raises(invoices.InvoiceError) as refused:
        invoices.issue_credit_note(user=tenants.finance, invoice=invoice, amount="1", reason=" ")
    assert refused.value.errors.keys() == {"reason"}
    with pytest.raises(Forbidden):
        invoices.issue_credit_note(user=tenants.bob, invoice=invoice, amount="1", reason="mine")
    last = invoices.issue_credit_note(user=tenants.finance, invoice=invoice, amount="48.16", reason="the rest")
    assert last.number == "AIL-CN2026-0002" and invoices.remaining(invoice) == Decimal("0.00")
    assert Invoice.objects.filter(kind="credit_note").count() == 2


def test_finance_marks_an_invoice_paid_once(tenants, books):
    invoice = close_all(tenants, books)
    today = invoice.issued_on
    for bad in ("yesterday", (today + timedelta(days=1)).isoformat(), (today - timedelta(days=1)).isoformat()):
        with pytest.raises(invoices.InvoiceError) as refused:
            invoices.mark_paid(user=tenants.finance, invoice=invoice, paid_on=bad)
        assert refused.value.errors.keys() == {"paid_on"}
    with pytest.raises(Forbidden):
        invoices.mark_paid(user=tenants.alice, invoice=invoice, paid_on=today.isoformat())
    payment = invoices.mark_paid(user=tenants.finance, invoice=invoice, paid_on=today.isoformat())
    assert payment.paid_on == today and payment.recorded_by == tenants.finance
    with pytest.raises(invoices.Conflict):
        invoices.mark_paid(user=tenants.finance, invoice=invoice, paid_on=today.isoformat())
    assert InvoicePayment.objects.count() == 1


def test_a_prepaid_account_gets_no_invoice(tenants, books):
    books.account.prepaid = True
    books.account.save()
    close_all_closes = [close_period(user=tenants.finance, workspace=w, month=MARCH)
                        for w in (tenants.vision, books.robotics)]
    assert len(close_all_closes) == 2 and not Invoice.objects.exists()
    with pytest.raises(invoices.InvoiceError) as refused:
        invoices.issue_invoice(user=tenants.admin, account=books.account, month="2026-03")
    assert refused.value.errors.keys() == {"account"}


def test_lines_in_another_currency_than_the_accounts_are_refused(tenants, books):
    from billing.accounts import assign_workspace
    from tests.billing.invoices.conftest import charge
    from tests.factories import WorkspaceFactory

    edge = WorkspaceFactory(slug="edge")  # billed in the platform's USD
    assign_workspace(edge, books.account)
    charge(edge, "1.00", currency="USD")
    for workspace in (tenants.vision, books.robotics, edge):  # closing still works; the invoice waits
        close_period(user=tenants.admin, workspace=workspace, month=MARCH)
    assert not Invoice.objects.exists()
    with pytest.raises(invoices.InvoiceError) as refused:
        invoices.issue_invoice(user=tenants.admin, account=books.account, month="2026-03")
    assert refused.value.errors.keys() == {"currency"} and "edge" in str(refused.value)
    assert not Invoice.objects.exists()
