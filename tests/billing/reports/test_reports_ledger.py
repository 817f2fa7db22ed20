"""The ledger lines behind the reports: one line per job, hour and node, each money column rounded to
cents; the daily grouping adds them up; posting again never doubles; a job on two nodes gets lines
per node with its used GPU-hours split by what each node's agent measured.

Prices (tests/world.py): H100 3.00 and A100 1.80 per GPU-hour, 0.02 per core-hour, 0.005 per
GiB-hour; off-peak (00:00-08:00) 40 % off, spot 60 % off. Priority 0: multiplier 1.
"""

import uuid
from datetime import date, timedelta
from decimal import Decimal

from tests_reports_helpers import DAY, at, place, submit

from billing.ledger.posting import post_ledger
from billing.models import ChargeLine, UsageSample
from billing.reports import selectors as reports

NEXT_DAY = date(2026, 3, 3)
COLUMNS = ("hour", "job_id", "node", "gpu_model", "sharing", "offpeak", "spot", "allocated_gpu_hours",
           "used_gpu_hours", "cpu_core_hours", "memory_gib_hours", "cost", "list_cost", "exclusive_cost",
           "provisional")


def _lines(**filters):
    return list(ChargeLine.objects.filter(**filters).order_by("hour", "job_id", "node").values_list(*COLUMNS))


def test_one_line_per_job_and_hour_each_rounded_to_cents(usage):
    """vision-train: 1 H100 + 1 core + 4 GiB = 3.04/h at peak; 07-08 off-peak 3.04 x 0.6 = 1.824 -> 1.82.
    The notebook: 0.5 A100 + 4 cores + 16 GiB = 0.90 + 0.08 + 0.08 = 1.06/h listed, on a spot node
    1.06 x 0.4 = 0.424 -> 0.42 (22:00, 23:00), off-peak too 1.06 x 0.4 x 0.6 = 0.2544 -> 0.25 (00:00,
    01:00); a whole A100 at peak would be 1.80 + 0.16 = 1.96/h."""
    train = ChargeLine.objects.filter(job=usage.vision_job).order_by("hour")
    assert [line.hour for line in train] == [at(DAY, 7), at(DAY, 8), at(DAY, 9)]
    assert [line.cost for line in train] == [Decimal("1.82"), Decimal("3.04"), Decimal("3.04")]
    assert [line.offpeak for line in train] == [True, False, False]
    first = train[0]
    assert (first.node, first.gpu_model, first.sharing, first.workspace.slug, first.day, first.period) == (
        "h100-01", "H100-80GB", "exclusive", "vision-lab", DAY, date(2026, 3, 1))
    assert (first.allocated_gpu_hours, first.cpu_core_hours, first.memory_gib_hours) == (1, 1, 4)
    assert first.list_cost == first.exclusive_cost == Decimal("3.04")  # the peak, on-demand price
    # Each line is rounded once: the job costs 1.82 + 2 x 3.04 = 7.90, not the unrounded 7.904.
    assert sum(line.cost for line in train) == Decimal("7.90")

    notebook = ChargeLine.objects.filter(job=usage.frac_job).order_by("hour")
    assert [(line.day, line.cost) for line in notebook] == [
        (DAY, Decimal("0.42")), (DAY, Decimal("0.42")), (NEXT_DAY, Decimal("0.25")), (NEXT_DAY, Decimal("0.25"))]
    assert all(line.spot and line.sharing == "fraction" for line in notebook)
    assert [line.offpeak for line in notebook] == [False, False, True, True]
    for line in notebook:
        assert line.allocated_gpu_hours == Decimal("0.5") and line.exclusive_gpu_hours == 1
        assert (line.list_cost, line.exclusive_cost) == (Decimal("1.06"), Decimal("1.96"))
        assert line.idle_gpu_hours == line.allocated_gpu_hours and line.used_gpu_hours == 0  # no samples
    assert sum(line.cost for line in notebook) == Decimal("1.34")  # 2 x 0.42 + 2 x 0.25, not 1.3568
    assert not ChargeLine.objects.filter(provisional=True).exists()  # every hour ended before the post


def test_the_daily_grouping_adds_up_the_lines(usage):
    """DAY: vision 1.82 + 3.04 + 3.04 + 0.42 + 0.42 = 8.74, nlp 2 x 3.04 = 6.08; the next day: 0.50."""
    rows = reports.report_rows(usage.tenants.finance, reports.ReportFilters(start=DAY, end=DAY + timedelta(days=6)))
    days = {d["day"]: d for d in reports.by_day(rows)}
    assert set(days) == {DAY, NEXT_DAY}
    assert days[DAY]["cost"] == Decimal("14.82") and days[NEXT_DAY]["cost"] == Decimal("0.50")
    assert days[DAY]["rows"] == 7 and days[NEXT_DAY]["rows"] == 2
    assert days[DAY]["allocated_gpu_hours"] == Decimal("6")  # 3 + 1 (half an A100 for 2 h) + 2
    assert days[NEXT_DAY]["allocated_gpu_hours"] == 1 and days[NEXT_DAY]["cpu_core_hours"] == 8
    assert days[DAY]["exclusive_gpu_hours"] == 7  # the half A100 held a whole device
    for day in (DAY, NEXT_DAY):
        lines = ChargeLine.objects.filter(day=day)
        for field in ("cost", "allocated_gpu_hours", "cpu_core_hours", "memory_gib_hours", "exclusive_cost"):
            assert days[day][field] == sum(getattr(line, field) for line in lines), field
    (total,) = reports.totals(rows)
    assert total.cost == Decimal("15.32") and total.rows == 9
    by_workspace = {w["workspace__slug"]: w["cost"] for w in reports.by_workspace(rows)}
    assert by_workspace == {"vision-lab": Decimal("9.24"), "nlp-group": Decimal("6.08")}


def test_posting_again_gives_the_same_lines(usage):
    before = _lines()
    assert len(before) == 9
    post_ledger(now=at(date(2026, 3, 4), 0))
    post_ledger(now=at(date(2026, 3, 5), 0))
    assert _lines() == before


def test_an_open_hour_is_rewritten_not_added_to(cluster):
    job = submit(cluster.alice, cluster.vision, "running")
    place(job, at(DAY, 12), at(DAY, 14))
    post_ledger(now=at(DAY, 12, 30))
    (line,) = _lines(job=job)
    assert line[COLUMNS.index("provisional")] and line[COLUMNS.index("cost")] == Decimal("1.52")  # 0.5 h x 3.04
    post_ledger(now=at(DAY, 12, 45))
    (line,) = _lines(job=job)
    assert line[COLUMNS.index("cost")] == Decimal("2.28")  # 0.75 h, recomputed: not 1.52 + 2.28
    post_ledger(now=at(DAY, 15))
    assert [line[COLUMNS.index("cost")] for line in _lines(job=job)] == [Decimal("3.04")] * 2
    assert not any(line[COLUMNS.index("provisional")] for line in _lines(job=job))


def _sample(replica, at_, util_pct):
    UsageSample.objects.create(id=uuid.uuid4(), node=replica.node, ts=at_, gpu_uuid=f"GPU-{replica.node.name}-0",
                               gpu_index=0, replica=replica, gpu_util_pct=util_pct, interval_s=1800)


def test_a_job_on_two_nodes_gets_lines_per_node_with_used_hours_split(cluster):
    job = submit(cluster.alice, cluster.vision, "two-nodes")
    first = place(job, at(DAY, 9), at(DAY, 11), node="h100-01", index=0)
    second = place(job, at(DAY, 9), at(DAY, 10), node="h100-02", index=1)
    for minute in (0, 30):  # h100-01 busy all of 09:00-10:00 (1 GPU-hour), h100-02 at half (0.5)
        _sample(first, at(DAY, 9, minute), 100)
        _sample(second, at(DAY, 9, minute), 50)
    post_ledger(now=at(DAY, 12))
    lines = ChargeLine.objects.filter(job=job)
    assert sorted((line.node, line.hour) for line in lines) == [
        ("h100-01", at(DAY, 9)), ("h100-01", at(DAY, 10)), ("h100-02", at(DAY, 9))]
    nodes = {}
    for line in lines:
        node = nodes.setdefault(line.node, {"alloc": 0, "used": 0, "idle": 0, "cost": 0})
        node["alloc"] += line.allocated_gpu_hours
        node["used"] += line.used_gpu_hours
        node["idle"] += line.idle_gpu_hours
        node["cost"] += line.cost
    assert nodes["h100-01"] == {"alloc": 2, "used": 1, "idle": 1, "cost": Decimal("6.08")}
    assert nodes["h100-02"] == {"alloc": 1, "used": Decimal("0.5"), "idle": Decimal("0.5"), "cost": Decimal("3.04")}
    (row,) = reports.jobs_of(ChargeLine.objects.filter(job=job))
    assert row["cost"] == Decimal("9.12") and row["used_gpu_hours"] == Decimal("1.5")
    assert row["estimate_low"] == job.quote["estimate_low"]  # the quote stays on the job, not in the lines
