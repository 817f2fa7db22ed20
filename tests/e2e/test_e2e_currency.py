"""Finance of a USD and a CNY workspace: the report shows one total per currency and its charts one
cost series per currency, drawn by reports.js; never one sum of both."""

from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login

from billing.currency import set_workspace_currency
from billing.ledger.posting import post_ledger
from billing.models import ChargeLine
from billing.reports.selectors import last_week
from billing.services import submit_quoted_job
from scheduling import clock
from scheduling.formats import money
from scheduling.models import JobState, Node, Replica
from tests.factories import GpuRateFactory, PriceTableFactory
from tests.world import PASSWORDS

SPEC = "name: {name}\nroles:\n  - name: main\n    image: busybox\n    resources: {{gpu: 1}}\n    nodePool: h100\n"


@pytest.mark.django_db(transaction=True)
def test_finance_sees_a_total_and_a_cost_series_per_currency(live_daphne, cluster, page):
    table = PriceTableFactory(name="人民币", currency="CNY", offpeak_windows="23:00-07:00",
                              offpeak_time_zone="Asia/Shanghai", cpu_core_hour=Decimal("0.15"),
                              memory_gib_hour=Decimal("0.036"))
    GpuRateFactory(table=table, vendor="nvidia", gpu_model="H100-80GB", per_gpu_hour=Decimal("21.60"))
    set_workspace_currency(cluster.nlp, "CNY")
    monday, _ = last_week(clock.now().date())
    start = datetime.combine(monday + timedelta(days=1), time(9), tzinfo=UTC)
    for user, workspace, name, node in [(cluster.alice, cluster.vision, "usd-train", "h100-01"),
                                        (cluster.bob, cluster.nlp, "cny-train", "h100-02")]:
        job = submit_quoted_job(user=user, workspace=workspace, spec=SPEC.format(name=name))
        Replica.objects.create(job=job, role="main", index=0, state=JobState.SUCCEEDED,
                               node=Node.objects.get(name=node), gpu_indices=[0], slice={"kind": "whole"},
                               started=start, ended=start + timedelta(hours=2))
    post_ledger(now=clock.now())

    login(page, live_daphne, "finance", PASSWORDS["finance"])
    page.click("nav >> text=Reports")
    page.click("#last-week")
    for currency in ("USD", "CNY"):
        cost = sum(ChargeLine.objects.filter(currency=currency).values_list("cost", flat=True))
        expect(page.locator(f'#totals table[data-currency="{currency}"] [data-total="cost"]')).to_contain_text(
            money(cost, currency, "en"))
    expect(page.locator("#chart-time .legend")).to_contain_text("cost CNY", timeout=45000)
    expect(page.locator("#chart-time .legend")).to_contain_text("cost USD")
    expect(page.locator("#chart-models .legend")).to_contain_text("cost CNY")
