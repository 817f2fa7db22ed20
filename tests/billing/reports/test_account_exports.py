"""FOCUS BillingAccount* and SubAccount* follow billing accounts: no account, the workspace and its queue
(as before accounts); a top-level account, the account and the workspace; a sub-account, the account
above it and the sub-account. The workspace stays named in Tags; the money is the same either way."""

import csv
import io
import json
from decimal import Decimal

import pytest
from tests_reports_helpers import csv_body, make_usage

from billing.accounts import assign_workspace, save_account
from billing.models import ChargeLine
from billing.reports import exports

pytestmark = pytest.mark.django_db


def rows_of(body: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(body)))


def test_focus_account_columns_follow_the_accounts(cluster):
    usage = make_usage(cluster)
    before = rows_of(csv_body(cluster.finance))
    assert {(r["BillingAccountId"], r["SubAccountId"]) for r in before} == {
        ("vision-lab", "vision-lab"), ("nlp-group", "nlp-group")}  # no account: workspace and queue, as before
    dept = save_account(slug="ai-lab", name="AI Lab", currency="USD")
    team = save_account(slug="nlp-team", name="NLP Team", currency="USD", parent=dept)
    assign_workspace(cluster.vision, dept)
    assign_workspace(cluster.nlp, team)
    after = rows_of(csv_body(cluster.finance))
    columns = {(r["BillingAccountId"], r["BillingAccountName"], r["SubAccountId"], r["SubAccountName"]) for r in after}
    assert columns == {("ai-lab", "AI Lab", "vision-lab", "Vision Lab"), ("ai-lab", "AI Lab", "nlp-team", "NLP Team")}
    assert {json.loads(r["Tags"])["workspace"] for r in after if r["SubAccountId"] == "nlp-team"} == {"nlp-group"}
    assert "workspace" not in json.loads(before[0]["Tags"])
    # the same lines and cents, only the account columns differ
    assert len(after) == len(before) == ChargeLine.objects.count()
    assert sum(Decimal(r["BilledCost"]) for r in after) == sum(Decimal(r["BilledCost"]) for r in before)
    moved = {"BillingAccountId", "BillingAccountName", "SubAccountId", "SubAccountName", "Tags"}
    assert [{k: v for k, v in r.items() if k not in moved} for r in after] == [
        {k: v for k, v in r.items() if k not in moved} for r in before]
    assert {r["x_JobId"] for r in after if r["BillingAccountId"] == "ai-lab"} >= {str(usage.vision_job.pk)}


def test_a_workspace_without_an_account_keeps_its_columns_beside_one_with(cluster):
    make_usage(cluster)
    assign_workspace(cluster.vision, save_account(slug="ai-lab", name="AI Lab", currency="USD"))
    rows = list(exports.line_rows(ChargeLine.objects.all(), chunk_size=1000))
    named = {row[exports.HEADER.index("BillingAccountId")] for row in rows}
    assert named == {"ai-lab", "nlp-group"}
