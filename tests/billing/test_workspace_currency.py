"""A workspace billed in CNY beside one billed in USD, each on its own currency's timeline of price
tables: quotes, ledger lines, statements and budgets in the workspace's currency, the CNY table's
off-peak window read in Asia/Shanghai, totals across workspaces per currency (each the sum of its
lines to the cent), and the rule that a currency change never mixes two currencies in a month.

The platform runs in UTC (tests/billing/conftest.py). nlp-group (bob) is billed in CNY: H100 21.60
yuan/GPU-hour, CPU 0.15, memory 0.036, valley hours 23:00-07:00 in Shanghai (15:00-23:00 UTC) at
half price; vision-lab (alice) stays in USD: H100 3.00, CPU 0.02, memory 0.005, off-peak 00:00-08:00
UTC. Both run a whole H100 (1 CPU, 4 GiB) from 14:00 to 17:00 UTC on 2 March 2026.
"""

import csv
import io
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync
from rest_framework.test import APIClient

from billing.currency import (
    EVER,
    CurrencyChangeRefused,
    CurrencyError,
    currency_at,
    currency_in,
    set_workspace_currency,
)
from billing.ledger.jobs import finalize_job_cost
from billing.ledger.posting import post_ledger
from billing.ledger.selectors import MixedCurrencies, money_sum
from billing.ledger.services import add_adjustment
from billing.models import Budget, ChargeLine, PriceTable, WorkspaceCurrency
from billing.reports import selectors as reports
from billing.reports.services import budget_status, set_budget
from billing.services import submit_quoted_job
from gpuctl.output import format_costs
from portal.console.models import AuditEntry
from scheduling.errors import DomainError
from scheduling.models import Job, JobState, Node, Replica
from tests.factories import GpuRateFactory, PriceTableFactory

pytestmark = pytest.mark.django_db
WHOLE = """name: {name}
roles:
  - name: main
    image: busybox
    resources: {{gpu: 1, cpu: 1, memory: 4Gi}}
    nodePool: h100
"""
DAY = date(2026, 3, 2)
RANGE = {"start": "2026-03-01", "end": "2026-03-31"}


def at(hour, minute=0, day=2, month=3):
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def cny_table(**fields) -> PriceTable:
    table = PriceTableFactory(name="人民币价目表", currency="CNY", cpu_core_hour=Decimal("0.15"),
                              memory_gib_hour=Decimal("0.036"), offpeak_windows="23:00-07:00",
                              offpeak_time_zone="Asia/Shanghai", offpeak_discount=Decimal("0.50"), **fields)
    GpuRateFactory(table=table, vendor="nvidia", gpu_model="H100-80GB", per_gpu_hour=Decimal("21.60"))
    GpuRateFactory(table=table, vendor="nvidia", gpu_model="A100-80GB", per_gpu_hour=Decimal("13.00"))
    return table


@pytest.fixture
def yuan(cluster, clock):
    """nlp-group billed in CNY, never billed before: the currency holds for its whole history."""
    clock.now = at(14)
    table = cny_table()
    row = set_workspace_currency(cluster.nlp, "cny", user=cluster.admin)
    assert (row.currency, row.period) == ("CNY", EVER)
    return table


@pytest.fixture
def admin_client(client, cluster):
    """The test world's operator (pytest-django's own would be logged out when the world sets its password)."""
    client.force_login(cluster.admin)
    return client


def run(user, workspace, name, start, end, *, node):
    job = submit_quoted_job(user=user, workspace=workspace, spec=WHOLE.format(name=name))
    Replica.objects.create(job=job, role="main", index=0, state=JobState.SUCCEEDED, node=Node.objects.get(name=node),
                           gpu_indices=[0], slice={"kind": "whole", "gpu_milli": 1000}, started=start, ended=end)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    return job


@pytest.fixture
def side_by_side(cluster, yuan, clock):
    usd = run(cluster.alice, cluster.vision, "usd-train", at(14), at(17), node="h100-01")
    cny = run(cluster.bob, cluster.nlp, "cny-train", at(14), at(17), node="h100-02")
    post_ledger(now=at(0, day=4))
    return usd, cny


# --------------------------------------------------------------------------- quotes and lines


def test_a_cny_workspace_is_quoted_in_yuan_on_its_table_and_its_shanghai_valley_hours(cluster, yuan, clock):
    clock.now = at(14)  # 22:00 in Shanghai: one peak hour, then the valley from 23:00
    api = APIClient()
    api.force_authenticate(cluster.bob)
    body = api.post("/api/v1/quotes/", {"workspace": "nlp-group", "spec": WHOLE.format(name="q"),
                                        "duration_hours": "2"}, format="json").json()
    assert body["currency"] == "CNY"
    now = next(o for o in body["options"] if o["id"] == "h100.exclusive.now")
    # 21.60 + 1 x 0.15 + 4 x 0.036 = 21.894 an hour; half of it in the valley
    assert (now["currency"], now["price_per_hour"], now["price_per_hour_offpeak"]) == ("CNY", "21.8940", "10.9470")
    assert now["total"] == "32.84"  # 21.894 + 10.947, rounded once
    valley = next(o for o in body["options"] if o["id"] == "h100.exclusive.off-peak")
    assert datetime.fromisoformat(valley["starts_at"]) == at(15)  # 23:00 in Shanghai
    assert valley["total"] == "21.89"  # two valley hours

    api.force_authenticate(cluster.alice)
    usd = api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": WHOLE.format(name="q"),
                                       "duration_hours": "2"}, format="json").json()
    usd_now = next(o for o in usd["options"] if o["id"] == "h100.exclusive.now")
    assert (usd["currency"], usd_now["price_per_hour"], usd_now["total"]) == ("USD", "3.0400", "6.08")


ANY_GPU = "name: {name}\nroles:\n  - name: main\n    image: busybox\n    resources: {{gpu: 1}}\n{pin}"


def test_pools_its_currencys_table_does_not_price_are_not_offered_to_a_workspace(cluster, yuan, clock):
    """The CNY table prices H100 and A100 only: nlp-group is offered neither the RTX 4090 nor the L40S
    pool (priced in USD only) and says why; vision-lab, in USD, is offered them."""
    api = APIClient()
    api.force_authenticate(cluster.bob)
    body = api.post("/api/v1/quotes/", {"workspace": "nlp-group", "spec": ANY_GPU.format(name="q", pin="")},
                    format="json").json()
    assert {o["pool"] for o in body["options"]} == {"h100", "a100-spot"}
    assert all(o["currency"] == "CNY" for o in body["options"])
    assert "rtx4090: the CNY price table has no rate for nvidia RTX-4090-24GB" in body["unavailable"]
    refused = {c["params"]["pool"]: c for c in body["unavailable_codes"]}
    assert refused["rtx4090"] == {"code": "not_priced", "params": {
        "pool": "rtx4090", "currency": "CNY", "vendor": "nvidia", "gpu_model": "RTX-4090-24GB"}}
    assert refused["l40s-shared"]["code"] == "not_priced"  # mi300x: refused first for its vendor

    api.force_authenticate(cluster.alice)
    usd = api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": ANY_GPU.format(name="q", pin="")},
                   format="json").json()
    assert "rtx4090" in {o["pool"] for o in usd["options"]} and usd["currency"] == "USD"


def test_a_workspace_cannot_submit_to_a_pool_its_currency_does_not_price(cluster, yuan, clock):
    api = APIClient()
    api.force_authenticate(cluster.bob)
    named = api.post("/api/v1/jobs/", {"workspace": "nlp-group", "spec": ANY_GPU.format(name="q", pin=""),
                                       "option": "rtx4090.exclusive.now"}, format="json")
    assert named.status_code == 400 and "unknown quote option 'rtx4090.exclusive.now'" in named.json()["detail"]
    pinned = api.post("/api/v1/jobs/", {"workspace": "nlp-group",
                                        "spec": ANY_GPU.format(name="q", pin="    nodePool: rtx4090\n")}, format="json")
    assert pinned.status_code == 422, pinned.json()
    assert "rtx4090: the CNY price table has no rate for nvidia RTX-4090-24GB" in pinned.json()["detail"]
    with pytest.raises(DomainError):
        submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=ANY_GPU.format(name="q", pin=""),
                          option="rtx4090.exclusive.now")
    assert not Job.objects.filter(workspace=cluster.nlp).exists()
    # what it may submit runs where it was quoted, in yuan
    job = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=ANY_GPU.format(name="q", pin=""))
    assert job.quote["pool"] in {"h100", "a100-spot"} and job.quote["currency"] == "CNY"


def test_the_submit_page_says_in_chinese_why_a_pool_is_not_offered(client, cluster, yuan, clock):
    client.force_login(cluster.bob)
    page = client.post("/submit/", {"workspace": "nlp-group", "spec": ANY_GPU.format(name="q", pin=""),
                                    "duration_hours": "2"}, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "rtx4090: CNY 价目表没有 nvidia RTX-4090-24GB 的价格" in page
    assert "¥" in page.split('id="quote-table"')[1]


def test_ledger_lines_are_in_each_workspaces_currency_at_its_tables_rates(side_by_side, yuan):
    usd_job, cny_job = side_by_side
    cny = list(ChargeLine.objects.filter(job=cny_job).order_by("hour"))
    assert {(x.currency, x.price_table_id) for x in cny} == {("CNY", yuan.pk)}
    # 14:00 UTC is 22:00 in Shanghai (peak); 15:00 and 16:00 are valley hours
    assert [(x.hour, x.offpeak, x.cost) for x in cny] == [
        (at(14), False, Decimal("21.89")), (at(15), True, Decimal("10.95")), (at(16), True, Decimal("10.95"))]
    assert all(x.list_unit_price == Decimal("21.6000") for x in cny)
    usd = list(ChargeLine.objects.filter(job=usd_job).order_by("hour"))
    assert {x.currency for x in usd} == {"USD"} and [x.cost for x in usd] == [Decimal("3.04")] * 3
    assert finalize_job_cost(cny_job.pk).currency == "CNY"
    assert (Job.objects.get(pk=cny_job.pk).final_cost, Job.objects.get(pk=cny_job.pk).currency) == (
        Decimal("43.79"), "CNY")
    assert finalize_job_cost(usd_job.pk).final_cost == Decimal("9.12")


def test_each_tenant_sees_only_its_own_in_its_currency(client, cluster, side_by_side):
    for user, slug, currency, total in ((cluster.alice, "vision-lab", "USD", "9.12"),
                                        (cluster.bob, "nlp-group", "CNY", "43.79")):
        client.force_login(user)
        body = client.get("/api/v1/costs/", {**RANGE, "group_by": "workspace"}).json()
        assert (body["currency"], body["total"]) == (currency, total)
        assert body["totals"] == [{"currency": currency, "total": total}]
        assert [(r["workspace"], r["currency"]) for r in body["rows"]] == [(slug, currency)]
        page = client.get("/reports/", RANGE).content.decode()
        assert f'data-currency="{currency}"' in page
        assert 'data-currency="USD"' not in page if currency == "CNY" else 'data-currency="CNY"' not in page
        other = "nlp-group" if slug == "vision-lab" else "vision-lab"
        assert client.get("/api/v1/costs/", {**RANGE, "workspace": other}).status_code == 404


def test_finance_totals_across_workspaces_are_per_currency_and_each_the_sum_of_its_lines(client, cluster,
                                                                                       side_by_side):
    client.force_login(cluster.finance)  # finance of both workspaces
    sums = {c: sum(ChargeLine.objects.filter(currency=c).values_list("cost", flat=True)) for c in ("USD", "CNY")}
    assert sums == {"USD": Decimal("9.12"), "CNY": Decimal("43.79")}
    for group in ("day", "workspace", "job", "gpu_model"):
        body = client.get("/api/v1/costs/", {**RANGE, "group_by": group}).json()
        assert body["currency"] is None and body["total"] is None  # two currencies are never added
        assert body["totals"] == [{"currency": "CNY", "total": "43.79"}, {"currency": "USD", "total": "9.12"}]
        for currency, total in sums.items():
            rows = [Decimal(r["cost"]) for r in body["rows"] if r["currency"] == currency]
            assert sum(rows) == total, group
    rows = reports.report_rows(cluster.finance, reports.parse_filters(RANGE, today=DAY))
    assert {t.currency: t.cost for t in reports.totals(rows)} == sums
    with pytest.raises(MixedCurrencies):
        money_sum(rows)
    page = client.get("/reports/", RANGE).content.decode()
    assert 'data-currency="USD"' in page and 'data-currency="CNY"' in page
    charts = reports.chart_data(rows, reports.parse_filters(RANGE, today=DAY))
    assert [(c["currency"], sum(c["cost"])) for c in charts["costs"]] == [("CNY", 43.79), ("USD", 9.12)]
    text = format_costs(client.get("/api/v1/costs/", {**RANGE, "group_by": "workspace"}).json(), title="Costs")
    assert "43.79 CNY" in text and "9.12 USD" in text and "COST (" not in text


def test_exports_carry_the_currency_of_each_line(client, cluster, side_by_side):
    client.force_login(cluster.finance)
    response = client.get("/reports/export.csv", RANGE)
    content = b"".join(async_to_sync(_collect)(response.streaming_content)).decode()
    lines = list(csv.DictReader(io.StringIO(content)))
    by_currency = {}
    for line in lines:
        by_currency.setdefault(line["BillingCurrency"], []).append(Decimal(line["BilledCost"]))
    assert {c: sum(v) for c, v in by_currency.items()} == {"USD": Decimal("9.12"), "CNY": Decimal("43.79")}
    assert {line["BillingAccountId"]: line["BillingCurrency"] for line in lines} == {
        "vision-lab": "USD", "nlp-group": "CNY"}
    grouped = client.get("/reports/export.csv", {**RANGE, "group_by": "workspace"})
    rows = list(csv.DictReader(io.StringIO(b"".join(async_to_sync(_collect)(grouped.streaming_content)).decode())))
    assert {(r["workspace__slug"], r["currency"], r["cost"]) for r in rows} == {
        ("vision-lab", "USD", "9.12"), ("nlp-group", "CNY", "43.79")}
    statement = client.get("/reports/statements/nlp-group/2026-03/statement.csv")
    assert statement.status_code == 200
    assert {r["BillingCurrency"] for r in csv.DictReader(io.StringIO(statement.content.decode()))} == {"CNY"}


async def _collect(stream):
    return [chunk async for chunk in stream]


def test_statement_budget_and_console_totals_are_in_the_workspaces_currency(admin_client, cluster, side_by_side,
                                                                            clock):
    clock.now = at(12, day=20)
    statement = reports.monthly_statement(cluster.bob, "nlp-group", date(2026, 3, 1))
    assert (statement.currency, statement.total) == ("CNY", Decimal("43.79"))
    set_budget(user=cluster.bob, workspace=cluster.nlp, amount="100")
    assert Budget.objects.get(workspace=cluster.nlp).currency == "CNY"
    assert budget_status(cluster.nlp).spent == Decimal("43.79")
    with pytest.raises(DomainError):  # a budget is in the workspace's currency
        set_budget(user=cluster.alice, workspace=cluster.vision, amount="100", currency="CNY")
    # no agent sample: every held GPU-hour was idle, so the idle cost is the whole bill, per currency
    capacity = admin_client.get("/console/capacity/", {"start": "2026-03-01", "end": "2026-03-20"}).content.decode()
    idle_totals = capacity.split('id="idle-cost"')[1].split("<tfoot>")[1].split("</tfoot>")[0]
    assert "¥43.79" in idle_totals and "$9.12" in idle_totals
    forecasts = capacity.split("Month-end forecast")[1].split("</table>")[0]
    assert forecasts.count("¥") >= 2 and "¥43.79" in forecasts  # nlp-group's spend and forecast
    clock.now = at(18)
    dashboard = admin_client.get("/console/").content.decode()
    waste = dashboard.split('id="waste-table"')[1].split('data-pool="h100"')[1].split("</tr>")[0]
    assert '<span data-currency="CNY">¥43.79</span>' in waste and '<span data-currency="USD">$9.12</span>' in waste


# --------------------------------------------------------------------------- changing a currency


def test_a_change_applies_from_the_current_month_and_never_mixes_one(cluster, side_by_side, yuan, clock):
    usd_job, _ = side_by_side
    # March is billed in USD: a change now would mix it
    clock.now = at(12, day=20)
    with pytest.raises(CurrencyChangeRefused) as refused:
        set_workspace_currency(cluster.vision, "CNY")
    assert "2026-03" in str(refused.value) and currency_at(cluster.vision) == "USD"
    # an unfinished job (quoted in USD) refuses it too, whatever the month
    clock.now = at(12, day=2, month=4)
    pending = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=WHOLE.format(name="waits"))
    with pytest.raises(CurrencyChangeRefused) as refused:
        set_workspace_currency(cluster.vision, "CNY")
    assert f"#{pending.pk}" in str(refused.value)
    Job.objects.filter(pk=pending.pk).update(state=JobState.CANCELLED)
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="50")
    row = set_workspace_currency(cluster.vision, "CNY")
    assert (row.period, currency_in(cluster.vision, date(2026, 3, 1)), currency_at(cluster.vision)) == (
        date(2026, 4, 1), "USD", "CNY")
    # March keeps its currency: its statement, an adjustment booked in it, a late recompute of its lines
    add_adjustment(user=cluster.finance, workspace=cluster.vision, amount="-1.00", reason="goodwill",
                   period=date(2026, 3, 1))
    post_ledger(now=at(12, day=2, month=4), job_ids=[usd_job.pk])
    march = ChargeLine.objects.filter(workspace=cluster.vision, period=date(2026, 3, 1))
    assert set(march.values_list("currency", flat=True)) == {"USD"} and money_sum(march) == Decimal("8.12")
    # a job ending in March cannot be adjusted in an April billed in yuan
    with pytest.raises(DomainError):
        add_adjustment(user=cluster.finance, workspace=cluster.vision, amount="1.00", reason="x", job=usd_job)
    # April is billed in yuan; the USD budget no longer applies
    april = run(cluster.alice, cluster.vision, "april", at(1, day=2, month=4), at(2, day=2, month=4), node="h100-01")
    post_ledger(now=at(12, day=3, month=4))
    assert set(ChargeLine.objects.filter(job=april).values_list("currency", flat=True)) == {"CNY"}
    assert budget_status(cluster.vision) is None
    assert reports.monthly_statement(cluster.alice, "vision-lab", date(2026, 4, 1)).opening == Decimal("0.00")
    assert reports.monthly_statement(cluster.alice, "vision-lab", date(2026, 3, 1)).currency == "USD"


def test_a_currency_without_a_table_in_force_is_refused(cluster, clock):
    with pytest.raises(CurrencyChangeRefused):
        set_workspace_currency(cluster.nlp, "EUR")
    with pytest.raises(CurrencyError):
        set_workspace_currency(cluster.nlp, "XYZ")
    assert not WorkspaceCurrency.objects.exists() and currency_at(cluster.nlp) == "USD"


# --------------------------------------------------------------------------- the console


def test_the_operator_sets_a_workspaces_currency_on_the_price_page_audited(admin_client, cluster, yuan, clock):
    page = admin_client.get("/console/prices/").content.decode()
    assert 'id="currency-form"' in page and 'data-currency="CNY"' in page
    row = page.split('id="currency-table"')[1].split('<tr data-currency="CNY">')[1].split("</tr>")[0]
    assert "nlp-group" in row and "vision-lab" not in row
    done = admin_client.post("/console/prices/currency/", {"workspace": "vision-lab", "currency": "CNY"},
                             follow=True)
    assert done.status_code == 200 and "vision-lab is billed in CNY" in done.content.decode()
    assert currency_at(cluster.vision) == "CNY"
    entry = AuditEntry.objects.get(action="set currency")
    assert entry.changes == {"currency": ["USD", "CNY"]} and entry.username == "admin"
    detail = admin_client.get("/console/workspaces/vision-lab/").content.decode()
    assert 'data-currency="CNY"' in detail


def test_bad_currency_input_is_a_4xx_and_changes_nothing(admin_client, cluster, yuan, clock):
    audited = AuditEntry.objects.count()
    unknown = admin_client.post("/console/prices/currency/", {"workspace": "vision-lab", "currency": "XYZ"})
    assert unknown.status_code == 400 and "unknown currency" in unknown.content.decode()
    empty = admin_client.post("/console/prices/currency/", {"workspace": "vision-lab", "currency": ""})
    assert empty.status_code == 400
    assert admin_client.post("/console/prices/currency/", {"workspace": "nowhere", "currency": "CNY"}).status_code == 404
    assert admin_client.get("/console/prices/currency/").status_code == 405
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=WHOLE.format(name="open"))
    conflict = admin_client.post("/console/prices/currency/", {"workspace": "vision-lab", "currency": "CNY"})
    assert conflict.status_code == 409 and "have not finished" in conflict.content.decode()
    table = {"name": "Bad", "currency": "ZZZ", "effective_from": "2030-01-01 00:00", "cpu_core_hour": "0.1",
             "memory_gib_hour": "0.01", "priority_base": "1", "priority_step": "0.01",
             "offpeak_windows": "00:00-08:00", "offpeak_time_zone": "", "offpeak_discount": "0.4",
             "spot_discount": "0.6", "gpu_rates": "nvidia H100-80GB 3"}
    bad_table = admin_client.post("/console/prices/", table)
    assert bad_table.status_code == 400 and "unknown currency" in bad_table.content.decode()
    assert currency_at(cluster.vision) == "USD" and AuditEntry.objects.count() == audited
    assert not PriceTable.objects.filter(name="Bad").exists()
    admin_client.force_login(cluster.alice)  # a budget in an unknown currency, or another than the workspace's
    for code in ("XYZ", "CNY"):
        assert admin_client.post("/reports/budgets/vision-lab/", {"amount": "10", "currency": code}).status_code == 400
    assert not Budget.objects.exists()


def test_each_currency_is_a_timeline_of_its_own(admin_client, cluster, yuan, clock):
    later = {"name": "Next", "effective_from": "2030-01-01 00:00", "cpu_core_hour": "0.1",
             "memory_gib_hour": "0.01", "priority_base": "1", "priority_step": "0.01",
             "offpeak_windows": "23:00-07:00", "offpeak_time_zone": "Asia/Shanghai", "offpeak_discount": "0.5",
             "spot_discount": "0.6", "gpu_rates": "nvidia H100-80GB 22"}
    assert admin_client.post("/console/prices/", {**later, "currency": "usd"}).status_code == 302
    assert admin_client.post("/console/prices/", {**later, "currency": "CNY"}).status_code == 302  # same instant
    again = admin_client.post("/console/prices/", {**later, "currency": "CNY"})
    assert again.status_code == 400 and "another CNY version" in again.content.decode()
    assert sorted(PriceTable.objects.filter(name="Next").values_list("currency", flat=True)) == ["CNY", "USD"]
    page = admin_client.get("/console/prices/", {"currency": "CNY"}).content.decode()
    assert page.count('class="status-in-force"') == 2  # one version in force per currency
    assert 'value="CNY"' in page.split('id="price-form"')[1]  # the new version's form starts from CNY's table
    assert AuditEntry.objects.filter(action="create", target_type="billing.pricetable").count() == 2


# --------------------------------------------------------------------------- the scheduler's off-peak


@pytest.fixture
def run_cycle_now(clock):
    from django.test import TestCase

    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.cycle.run import run_scheduling_cycle

    backend = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)

    def cycle():
        with TestCase.captureOnCommitCallbacks(execute=True):
            return run_scheduling_cycle(backend, now=clock.now)

    return cycle


def test_a_reduce_cost_job_runs_in_its_own_currencys_valley_hours(cluster, yuan, clock, run_cycle_now):
    """16:00 UTC is midnight in Shanghai: inside the CNY table's 谷电 window (23:00-07:00 there), outside
    the USD table's 00:00-08:00 UTC. Each ReduceCost job is quoted on its own table (start now / wait
    for the window), and the scheduler lets the CNY one run now although the platform's window is shut."""
    spec = WHOLE.replace("name: {name}\n", "name: {name}\nreduceCost: true\n")
    clock.now = at(16)
    cny = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=spec.format(name="valley"))
    usd = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec.format(name="cheap-hours"))
    from scheduling.cycle.snapshot import build_snapshot

    told = build_snapshot(clock.now)
    assert (told.off_peak, told.job_off_peak) == (False, ((str(cny.pk), True, "16:00 UTC"),))
    run_cycle_now()
    cny.refresh_from_db()
    usd.refresh_from_db()
    assert cny.state == JobState.SCHEDULED, cny.pending_reason
    assert usd.state == JobState.PENDING and usd.pending_code == "waits_for_off_peak"

    clock.now = at(1, day=3)   # 09:00 in Shanghai: peak there, off-peak in UTC
    later = submit_quoted_job(user=cluster.bob, workspace=cluster.nlp, spec=spec.format(name="day"))
    run_cycle_now()
    later.refresh_from_db()
    usd.refresh_from_db()
    assert usd.state == JobState.SCHEDULED, usd.pending_reason
    assert later.state == JobState.PENDING and later.pending_code == "waits_for_off_peak"


def test_the_scheduler_asks_each_jobs_window_of_billing(cluster, yuan, clock):
    """What the snapshot is told: the CNY workspace's ReduceCost jobs have their own window, the others none."""
    from scheduling.offpeak_calendar import job_off_peak_at as jobs_off_peak_at

    found = jobs_off_peak_at(now=at(16), workspaces={1: cluster.nlp.pk, 2: cluster.vision.pk})
    assert set(found) == {1} and found[1].now
    day = jobs_off_peak_at(now=at(1, day=3), workspaces={1: cluster.nlp.pk})[1]
    assert not day.now and day.next_start == "15:00 UTC"   # 23:00 in Shanghai
