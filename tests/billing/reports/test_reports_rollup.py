"""Daily rollups: they agree with the hourly ones, split by node, and re-run without doubling."""

from datetime import date
from decimal import Decimal

from tests_reports_helpers import DAY, at, place, submit

from billing.models import UsageDay, UsageHour
from billing.reports.services import rollup_day


def _rows(day):
    return sorted(UsageDay.objects.filter(day=day).values_list(
        "job_id", "node", "gpu_model", "sharing", "allocated_gpu_hours", "used_gpu_hours", "cpu_core_hours",
        "memory_gib_hours", "estimated_cost", "cost", "on_demand_cost", "currency"))


def test_daily_rows_match_the_hourly_rollups(usage):
    for day in (DAY, date(2026, 3, 3)):
        hours = UsageHour.objects.filter(hour__gte=at(day, 0), hour__lt=at(day, 23, 59))
        days = UsageDay.objects.filter(day=day)
        for field in ("allocated_gpu_hours", "cpu_core_hours", "memory_gib_hours"):
            assert sum(getattr(r, field) for r in days) == sum(getattr(r, field) for r in hours), field
        assert sum(r.cost for r in days).quantize(Decimal("0.000001")) == \
            sum(r.cost for r in hours).quantize(Decimal("0.000001"))


def test_row_values_worked_out_by_hand(usage):
    """vision-train: 1 H100 07-10 = 3 GPU-hours; 07-08 off-peak 1.824 + 2 x 3.04 peak = 7.904.
    The half A100 on a spot node, 22:00-24:00 on DAY: 1 GPU-hour allocated, on 1 whole GPU 2 h."""
    row = UsageDay.objects.get(day=DAY, job=usage.vision_job)
    assert (row.node, row.gpu_model, row.sharing, row.workspace.slug) == ("h100-01", "H100-80GB", "exclusive",
                                                                         "vision-lab")
    assert row.allocated_gpu_hours == 3 and row.cpu_core_hours == 3 and row.memory_gib_hours == 12
    assert row.cost.quantize(Decimal("0.001")) == Decimal("7.904")
    assert row.estimated_cost == Decimal(usage.vision_job.quote["estimate_low"])
    frac = UsageDay.objects.get(day=DAY, job=usage.frac_job)
    assert frac.sharing == "fraction" and frac.allocated_gpu_hours == 1 and frac.exclusive_gpu_hours == 2
    assert frac.on_demand_cost > frac.cost > 0  # a whole GPU at peak, no spot discount, costs more
    assert frac.idle_gpu_hours == frac.allocated_gpu_hours  # no samples: nothing used
    nxt = UsageDay.objects.get(day=date(2026, 3, 3), job=usage.frac_job)
    assert nxt.allocated_gpu_hours == 1 and nxt.estimated_cost == 0  # the estimate sits on the start day


def test_rerun_of_a_past_day_gives_the_same_rows(usage):
    before = _rows(DAY)
    assert rollup_day(DAY) == len(before) == 3
    rollup_day(DAY)
    assert _rows(DAY) == before and UsageDay.objects.filter(day=DAY).count() == 3


def test_a_job_on_two_nodes_gets_a_row_per_node_with_used_hours_split(cluster):
    job = submit(cluster.alice, cluster.vision, "two-nodes")
    place(job, at(DAY, 9), at(DAY, 11), node="h100-01", index=0)
    place(job, at(DAY, 9), at(DAY, 10), node="h100-02", index=1)
    UsageHour.objects.create(hour=at(DAY, 9), job=job, workspace=cluster.vision, queue=job.queue.name,
                             gpu_model="H100-80GB", sharing="whole", allocated_gpu_hours=2, used_gpu_hours=Decimal("1.5"))
    rollup_day(DAY)
    rows = {r.node: r for r in UsageDay.objects.filter(job=job)}
    assert set(rows) == {"h100-01", "h100-02"}
    assert rows["h100-01"].allocated_gpu_hours == 2 and rows["h100-02"].allocated_gpu_hours == 1
    assert rows["h100-01"].used_gpu_hours == 1 and rows["h100-02"].used_gpu_hours == Decimal("0.5")
    assert rows["h100-02"].idle_gpu_hours == Decimal("0.5")
    estimate = Decimal(job.quote["estimate_low"])
    assert sum(r.estimated_cost for r in rows.values()) == estimate
