"""What capacity costs and who uses it, from ledger lines worked out by hand: idle allocated GPU-hours
and their cost, unallocated GPU-hours priced at list, usage by submitter, the month-end forecast."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from billing.models import Budget, ChargeLine
from billing.reports import capacity
from tests.factories import GpuRateFactory, PriceTableFactory

D = date(2026, 3, 10)  # TIME_ZONE is UTC here (tests/billing/conftest.py)


def at(day: date, hour: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC)


def line(workspace, hour: datetime, *, pool="h100", allocated="1", idle="0", cost="0", submitter="alice",
         category=ChargeLine.Category.USAGE):
    return ChargeLine.objects.create(
        category=category, hour=hour, day=hour.date(), period=hour.date().replace(day=1), charge_start=hour,
        charge_end=hour + timedelta(hours=1), workspace=workspace, pool=pool, submitter=submitter,
        allocated_gpu_hours=Decimal(allocated), used_gpu_hours=Decimal(allocated) - Decimal(idle),
        idle_gpu_hours=Decimal(idle), cost=Decimal(cost), currency="USD", provisional=False, computed_at=hour)


def test_idle_gpu_hours_and_their_cost_per_workspace_pool_and_day(cluster):
    line(cluster.vision, at(D, 9), allocated="2", idle="1", cost="6.00")        # half idle: 3.00
    line(cluster.vision, at(D, 10), allocated="1", idle="0.25", cost="3.00")    # a quarter: 0.75
    line(cluster.vision, at(D, 10), pool="a100-spot", allocated="1", idle="1", cost="0.73")
    line(cluster.nlp, at(D, 11), allocated="4", idle="0", cost="12.00")
    line(cluster.vision, at(D + timedelta(days=1), 1), allocated="1", idle="0.5", cost="1.00")
    line(cluster.vision, at(D, 12), allocated="0", cost="-5.00", category=ChargeLine.Category.CREDIT)
    rows = capacity.idle_by_workspace_pool_day(D, D)
    got = {(r.workspace, r.pool): (r.allocated_gpu_hours, r.idle_gpu_hours, r.idle_cost, r.idle_percent) for r in rows}
    assert got == {
        ("vision-lab", "h100"): (Decimal("3"), Decimal("1.25"), Decimal("3.75"), Decimal("41.7")),
        ("vision-lab", "a100-spot"): (Decimal("1"), Decimal("1"), Decimal("0.73"), Decimal("100.0")),
        ("nlp-group", "h100"): (Decimal("4"), Decimal("0"), Decimal("0.00"), Decimal("0.0")),
    }
    [total] = capacity.totals_by_currency(rows, "idle_gpu_hours", "idle_cost")
    assert (total["idle_gpu_hours"], total["idle_cost"]) == (Decimal("2.25"), Decimal("4.48"))
    assert [r.day for r in capacity.idle_by_workspace_pool_day(D, D + timedelta(days=1))].count(D + timedelta(days=1)) == 1


def test_unallocated_gpu_hours_are_capacity_minus_allocation_priced_at_list(cluster):
    # h100: 2 nodes x 8 GPUs = 16; allocation above capacity (a simulated clock) leaves nothing, never less
    line(cluster.vision, at(D, 10), allocated="4")
    line(cluster.nlp, at(D, 10), allocated="0.5")
    line(cluster.vision, at(D, 11), allocated="20")
    rows = {(r.pool, r.day): r for r in capacity.unallocated_by_pool_day(D, D, now=at(D + timedelta(days=5)))}
    h100 = rows[("h100", D)]
    assert (h100.gpus, h100.capacity_gpu_hours) == (16, Decimal(16 * 24))
    assert h100.allocated_gpu_hours == Decimal("20.5")  # 4.5 + 16 (clipped at capacity)
    assert h100.unallocated_gpu_hours == Decimal("363.5")  # 22 x 16 + 11.5 + 0
    assert h100.list_cost == Decimal("1090.50") and h100.currency == "USD"  # at 3.00 per GPU-hour
    rtx = rows[("rtx4090", D)]  # 4 x 2 GPUs, nothing allocated, at 0.40
    assert rtx.unallocated_gpu_hours == Decimal(8 * 24) and rtx.list_cost == Decimal("76.80")


def test_unallocated_capacity_takes_each_hours_price_and_stops_at_now(cluster):
    table = PriceTableFactory(name="Dearer", effective_from=at(D, 12))
    GpuRateFactory(table=table, vendor="nvidia", gpu_model="H100-80GB", per_gpu_hour=Decimal("4.00"))
    rows = {(r.pool, r.day): r for r in capacity.unallocated_by_pool_day(D, D, now=at(D, 18))}
    h100 = rows[("h100", D)]
    assert h100.capacity_gpu_hours == Decimal(16 * 18)  # 00:00-18:00 only
    assert h100.list_cost == Decimal(16 * 12 * 3 + 16 * 6 * 4)
    rtx = rows[("rtx4090", D)]  # the new table prices no RTX 4090: its hours count, without a price
    assert rtx.unallocated_gpu_hours == Decimal(8 * 18) and rtx.list_cost == Decimal("38.40")  # 8 x 12 x 0.40


def test_usage_by_submitter_stays_within_the_workspace(cluster):
    line(cluster.vision, at(D, 9), cost="6.00", allocated="2", idle="1", submitter="alice")
    line(cluster.vision, at(D, 10), cost="3.00", submitter="alice")
    line(cluster.vision, at(D, 10), cost="4.50", submitter="carol")
    line(cluster.nlp, at(D, 10), cost="99.00", submitter="bob")
    rows = capacity.usage_by_submitter(cluster.vision, D, D)
    assert [(r["submitted_by"], r["cost"], r["allocated_gpu_hours"]) for r in rows] == [
        ("alice", Decimal("9.00"), Decimal("3.000000000")), ("carol", Decimal("4.50"), Decimal("1.000000000"))]


@pytest.fixture
def mid_march(clock):
    clock.now = at(date(2026, 3, 15), 12)
    return clock


def test_the_forecast_adds_the_last_seven_days_rate_for_the_days_left(cluster, mid_march):
    line(cluster.vision, at(date(2026, 3, 1), 9), cost="30.00")
    for day in range(8, 15):  # 8..14 March: 10.00 a day
        line(cluster.vision, at(date(2026, 3, day), 9), cost="10.00")
    line(cluster.vision, at(date(2026, 3, 15), 9), cost="5.00")  # today: counted as spent, not in the rate
    line(cluster.nlp, at(date(2026, 3, 14), 9), cost="1000.00")
    Budget.objects.create(workspace=cluster.vision, amount=Decimal("200.00"))
    f = capacity.forecast(cluster.vision, now=mid_march.now)
    assert (f.spent, f.per_day, f.basis_days, f.days_left) == (Decimal("105.00"), Decimal("10.00"), 7, Decimal("16.5"))
    assert f.forecast == Decimal("270.00")  # 105 + 10 x 16.5
    assert f.over_budget and f.percent_of_budget == Decimal("135.0")


def test_a_new_workspace_is_forecast_from_the_days_it_has(cluster, mid_march):
    line(cluster.nlp, at(date(2026, 3, 13), 9), cost="12.00")
    line(cluster.nlp, at(date(2026, 3, 14), 9), cost="8.00")
    f = capacity.forecast(cluster.nlp, now=mid_march.now)
    assert (f.basis_days, f.per_day, f.forecast) == (2, Decimal("10.00"), Decimal("185.00"))
    assert f.budget is None and f.percent_of_budget is None and not f.over_budget
    empty = capacity.forecast(cluster.vision, now=mid_march.now)
    assert (empty.spent, empty.per_day, empty.forecast, empty.basis_days) == (Decimal("0"), Decimal("0"), Decimal("0"), 0)


def test_idle_gpu_hours_per_person_across_workspaces_most_idle_first(cluster):
    line(cluster.vision, at(D, 9), allocated="2", idle="1", cost="6.00")                      # alice: 1 h, 3.00
    line(cluster.nlp, at(D, 9), allocated="1", idle="1", cost="2.00")                         # alice: +1 h, 2.00
    line(cluster.vision, at(D, 10), allocated="4", idle="0.5", cost="4.00", submitter="carol")  # carol: 0.5 h, 0.50
    line(cluster.nlp, at(D + timedelta(days=1), 9), allocated="1", idle="1", cost="9.00", submitter="bob")  # not in range
    rows = capacity.idle_by_person(D, D)
    assert [(r.person, r.workspaces, r.idle_gpu_hours, r.idle_cost, r.idle_percent) for r in rows] == [
        ("alice", ("nlp-group", "vision-lab"), Decimal("2"), Decimal("5.00"), Decimal("66.7")),
        ("carol", ("vision-lab",), Decimal("0.5"), Decimal("0.50"), Decimal("12.5")),
    ]
