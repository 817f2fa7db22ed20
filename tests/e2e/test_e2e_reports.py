"""Finance opens last week's report, sees the charts drawn by the vendored plotly.js and the "as of"
of its figures, exports CSV, and opens a statement that says as of when, with its total."""

import csv
import io
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import SCREENSHOTS, login

from billing.ledger.posting import post_ledger
from billing.reports.selectors import last_week
from billing.services import submit_quoted_job
from scheduling import clock
from scheduling.formats import money
from scheduling.models import JobState, Node, Replica
from tests.world import PASSWORDS

SPEC = "name: {name}\nroles:\n  - name: main\n    image: busybox\n    resources: {{gpu: 1}}\n    nodePool: h100\n"


def _usage(cluster):
    monday, sunday = last_week(clock.now().date())
    for user, workspace, name, node in [(cluster.alice, cluster.vision, "vision-train", "h100-01"),
                                        (cluster.bob, cluster.nlp, "nlp-finetune", "h100-02")]:
        job = submit_quoted_job(user=user, workspace=workspace, spec=SPEC.format(name=name))
        start = datetime.combine(monday + timedelta(days=1), time(9), tzinfo=UTC)
        Replica.objects.create(job=job, role="main", index=0, state=JobState.SUCCEEDED,
                               node=Node.objects.get(name=node), gpu_indices=[0], slice={"kind": "whole"},
                               started=start, ended=start + timedelta(hours=5))
    post_ledger(now=clock.now())


@pytest.mark.django_db(transaction=True)
def test_finance_reports_last_week_and_exports_csv(live_daphne, cluster, page):
    _usage(cluster)
    login(page, live_daphne, "finance", PASSWORDS["finance"])
    page.click("nav >> text=Reports")
    page.click("#last-week")
    expect(page.locator("#by-workspace tr[data-workspace]")).to_have_count(2)
    expect(page.locator("#as-of time")).not_to_have_text("–")
    # plotly.js is 4.8 MB to parse: give a loaded CI machine time for it
    expect(page.locator("#chart-time .main-svg").first).to_be_visible(timeout=45000)
    expect(page.locator("#chart-models .main-svg").first).to_be_visible(timeout=45000)
    expect(page.locator("#chart-models")).to_contain_text("H100-80GB")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "reports-last-week.png"), full_page=True)

    with page.expect_download() as download_info:
        page.click("#export-csv")
    download = download_info.value
    rows = list(csv.DictReader(io.StringIO(open(download.path(), encoding="utf-8").read())))
    assert {r["BillingAccountId"] for r in rows} == {"vision-lab", "nlp-group"}
    assert {r["x_JobName"] for r in rows} == {"vision-train", "nlp-finetune"}
    assert sum(float(r["x_AllocatedGpuHours"]) for r in rows) == 10
    monday, _ = last_week(clock.now().date())
    assert download.suggested_filename == f"report-{monday}-{monday + timedelta(days=6)}.csv"
    page_total = page.locator('#totals [data-total="cost"]').inner_text().split()[0]
    assert money(sum(Decimal(r["BilledCost"]) for r in rows), "USD", "en") == page_total

    month = (monday + timedelta(days=1)).strftime("%Y-%m")
    page.goto(f"{live_daphne.url}/reports/statements/vision-lab/{month}/")
    expect(page.locator("#statement-as-of")).not_to_have_text("–")
    vision = sum(Decimal(r["BilledCost"]) for r in rows if r["BillingAccountId"] == "vision-lab"
                 and r["ChargePeriodStart"].startswith(month))
    expect(page.locator("#statement-total")).to_have_text(f"${vision:,.2f}")
    expect(page.locator("#close-period")).to_be_visible()  # finance may close; the month may not have ended
    page.screenshot(path=str(SCREENSHOTS / "statement.png"), full_page=True)
