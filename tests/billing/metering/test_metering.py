"""Final costs worked out by hand from the ledger's lines, and posts that can be re-run without double counting."""

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.ledger.jobs import finalize_job_cost
from billing.ledger.posting import post_ledger
from billing.metering.ingest import purge_samples
from billing.models import ChargeLine, GpuRate, PriceTable, UsageSample
from billing.services import submit_quoted_job
from scheduling.models import JobState, Node, Replica

SPEC = """name: metered
roles:
  - name: main
    image: busybox
    resources: {gpu: 1, cpu: 1, memory: 4Gi}
    nodePool: h100
"""
DAY = datetime(2026, 3, 2, tzinfo=UTC)  # TIME_ZONE is UTC; off-peak 00:00-08:00


@pytest.fixture
def job(cluster):
    return submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC)


def place(job, start, end, *, state=JobState.SUCCEEDED, attempt=0, node="h100-01", slice_=None):
    return Replica.objects.create(job=job, role="main", index=0, attempt=attempt, state=state,
                                  node=Node.objects.get(name=node), gpu_indices=[0],
                                  slice=slice_ or {"kind": "whole", "gpu_milli": 1000, "gpu_mem_mib": 81920},
                                  started=start, ended=end)


def finish(job, at):
    job.state, job.finished = JobState.SUCCEEDED, at
    job.save()
    return finalize_job_cost(job.pk)


def test_cost_across_an_off_peak_boundary(job):
    """1 H100 (3.00) + 1 CPU (0.02) + 4 GiB (0.02) = 3.04/h. 07:00-08:00 off-peak (x0.6) = 1.824,
    08:00-09:00 peak = 3.04: 4.864 -> 4.86."""
    place(job, DAY.replace(hour=7), DAY.replace(hour=9))
    job = finish(job, DAY.replace(hour=9))
    assert job.final_cost == Decimal("4.86") and job.currency == "USD"


def test_cost_across_a_price_table_change(job):
    """From 08:30 H100 costs 4.00: 07-08 1.824 + 08:00-08:30 1.52 + 08:30-09:00 (4.04 / 2) 2.02 = 5.364."""
    table = PriceTable.objects.create(name="raise", currency="USD", effective_from=DAY.replace(hour=8, minute=30),
                                      cpu_core_hour=Decimal("0.02"), memory_gib_hour=Decimal("0.005"))
    GpuRate.objects.create(table=table, vendor="nvidia", gpu_model="H100-80GB", per_gpu_hour=Decimal("4.00"))
    place(job, DAY.replace(hour=7), DAY.replace(hour=9))
    job = finish(job, DAY.replace(hour=9))
    assert job.final_cost == Decimal("5.36")


def test_preempted_placements_pay_for_the_time_they_held(job):
    """Preempted after 1 h at peak (3.04), rerun for 1 h at peak (3.04)."""
    place(job, DAY.replace(hour=10), DAY.replace(hour=11), state=JobState.PREEMPTED)
    place(job, DAY.replace(hour=12), DAY.replace(hour=13), attempt=1)
    assert finish(job, DAY.replace(hour=13)).final_cost == Decimal("6.08")


def test_fraction_and_priority_and_spot(cluster):
    """0.5 A100 (0.90) + 4 CPU (0.08) + 16 GiB (0.08) = 1.06 x 1.5 (priority 50) x 0.4 (spot) = 0.636/h:
    ten hourly lines of 0.64 each (a line is rounded once, when written), so 6.40, not 6.36."""
    spec = SPEC.replace("gpu: 1, cpu: 1, memory: 4Gi", "gpu: 0.5, gpuMemory: 10Gi, cpu: 4, memory: 16Gi").replace(
        "nodePool: h100", "nodePool: a100-spot").replace("name: metered", "name: frac\npriority: 50")
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec)
    place(job, DAY.replace(hour=10), DAY.replace(hour=20), node="a100-spot-01",
          slice_={"kind": "fraction", "gpu_milli": 500, "gpu_mem_mib": 10240})
    assert finish(job, DAY.replace(hour=20)).final_cost == Decimal("6.40")
    assert set(ChargeLine.objects.filter(job=job).values_list("cost", flat=True)) == {Decimal("0.64")}


def test_hourly_lines_add_up_to_the_final_cost_and_repost_cleanly(job):
    replica = place(job, DAY.replace(hour=7, minute=30), DAY.replace(hour=9, minute=30))
    for minute in range(0, 60, 10):  # samples at 50 % utilisation over the 08:00 hour
        UsageSample.objects.create(id=uuid.uuid4(), node=replica.node, ts=DAY.replace(hour=8, minute=minute),
                                   gpu_uuid="GPU-x", gpu_index=0, pod_uid=str(replica.uid), replica=replica,
                                   gpu_util_pct=50.0, mem_used_mib=100, interval_s=600)
    job = finish(job, DAY.replace(hour=9, minute=30))
    post_ledger(now=DAY.replace(hour=11))
    rows = {r.hour.hour: r for r in ChargeLine.objects.all()}
    assert sorted(rows) == [7, 8, 9]
    assert rows[7].allocated_gpu_hours == Decimal("0.5") and rows[8].allocated_gpu_hours == Decimal("1")
    assert rows[8].used_gpu_hours == Decimal("0.5") and rows[7].used_gpu_hours == 0
    assert rows[8].idle_gpu_hours == Decimal("0.5")
    total = sum(r.cost for r in rows.values())
    assert total == job.final_cost
    post_ledger(now=DAY.replace(hour=11, minute=30))  # again: same lines, nothing doubled
    assert ChargeLine.objects.count() == 3 and sum(r.cost for r in ChargeLine.objects.all()) == total


def test_raw_samples_are_purged_after_retention(job):
    node = Node.objects.get(name="h100-01")
    for age in (1, 40):
        UsageSample.objects.create(id=uuid.uuid4(), node=node, ts=DAY - timedelta(days=age), gpu_uuid="g",
                                   gpu_index=0, interval_s=10)
    assert purge_samples(35, now=DAY) == 1
    assert UsageSample.objects.count() == 1
