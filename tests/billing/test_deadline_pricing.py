"""Work priced "by the deadline": the quote's deadline option per sharing mode (its pool's discount, the
off-peak discount by default, its expected start and finish range), the ledger's lines at the rule in force each
hour, and the cap on the bill of a deadline the platform missed (a credit line that says so)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from billing.ledger.deadline_cap import DEADLINE_CAP_SKU
from billing.ledger.jobs import finalize_job_cost
from billing.ledger.posting import post_ledger
from billing.models import ChargeLine
from billing.pricing.rules import BY_DEADLINE, ByDeadline, PricedOption, PricedWorkspace, PriceWindow
from billing.services import submit_quoted_job
from scheduling.models import Job, JobState, Node, NodePool, Replica

pytestmark = pytest.mark.django_db
SPEC = """name: {name}
expectedDuration: 1h
{extra}roles:
  - name: main
    image: busybox
    resources: {{gpu: 1, cpu: 1, memory: 4Gi}}
    nodePool: h100
"""
NOON = datetime(2026, 3, 10, 12, tzinfo=UTC)


@pytest.fixture
def alice(cluster, clock):
    api = APIClient()
    api.force_authenticate(cluster.alice)
    return api


def options(api, spec, workspace="vision-lab"):
    response = api.post("/api/v1/quotes/", {"workspace": workspace, "spec": spec}, format="json")
    assert response.status_code == 200, response.json()
    return {o["id"]: o for o in response.json()["options"]}


def test_a_deadline_spec_is_quoted_a_deadline_option_per_sharing_mode_at_the_off_peak_discount(alice, clock):
    found = options(alice, SPEC.format(name="d", extra="completeWithin: 12h\n"))
    now, deadline = found["h100.exclusive.now"], found["h100.exclusive.deadline"]
    assert deadline["when"] == "deadline" and "by_deadline" in [c["code"] for c in deadline["tradeoff_codes"]]
    # 3.00 GPU + 0.02 CPU + 0.02 memory = 3.04 an hour; 40 % off (the table's off-peak discount)
    assert (now["price_per_hour"], deadline["price_per_hour"]) == ("3.0400", "1.8240")
    assert deadline["complete_by"] == (clock.now + timedelta(hours=12)).isoformat()
    assert deadline["finish"]["latest"] == deadline["complete_by"]
    assert deadline["expected_start"] is not None and deadline["finish"]["earliest"] is not None
    # one per sharing mode the pool offers the job
    modes = {o["sharing"] for o in found.values() if o["when"] == "now" and o["pool"] == "h100"}
    assert modes == {o["sharing"] for o in found.values() if o["when"] == "deadline" and o["pool"] == "h100"}
    # without a deadline: no such option
    assert not [o for o in options(alice, SPEC.format(name="p", extra="")).values() if o["when"] == "deadline"]


def test_the_operator_sets_a_pools_deadline_discount(alice):
    NodePool.objects.filter(name="h100").update(deadline_discount=Decimal("0.25"))
    found = options(alice, SPEC.format(name="d", extra="completeWithin: 12h\n"))
    assert found["h100.exclusive.deadline"]["price_per_hour"] == "2.2800"  # 3.04 x 0.75


def test_the_rule_applies_outside_off_peak_windows_only_and_never_stacks():
    from billing.pricing import Allocation, Rates

    rates = Rates(currency="USD", gpu={("nvidia", "H100-80GB"): Decimal("3")}, cpu_core_hour=Decimal(0),
                  memory_gib_hour=Decimal(0))
    option = PricedOption(Allocation(Decimal(1), "nvidia", "H100-80GB"), by_deadline=True)
    peak = ByDeadline().adjust(rates, option, PriceWindow(), PricedWorkspace())
    assert (peak.code, peak.factor) == (BY_DEADLINE, Decimal("0.60"))
    assert ByDeadline().adjust(rates, option, PriceWindow(offpeak=True), PricedWorkspace()) is None
    assert ByDeadline().adjust(rates, option._replace(by_deadline=False), PriceWindow(), PricedWorkspace()) is None
    chosen = option._replace(deadline_discount=Decimal("0.1"))
    assert ByDeadline().adjust(rates, chosen, PriceWindow(), PricedWorkspace()).factor == Decimal("0.9")


def running(user, workspace, name, start, *, extra="completeWithin: 3h\n", option="h100.exclusive.deadline"):
    job = submit_quoted_job(user=user, workspace=workspace, spec=SPEC.format(name=name, extra=extra), option=option)
    replica = Replica.objects.create(job=job, role="main", index=0, state=JobState.RUNNING,
                                     node=Node.objects.get(name="h100-01"), gpu_indices=[0],
                                     slice={"kind": "whole", "gpu_milli": 1000}, started=start)
    job.state, job.started = JobState.RUNNING, start
    job.save(update_fields=["state", "started"])
    return job, replica


def finish(job, replica, at):
    replica.state, replica.ended = JobState.SUCCEEDED, at
    replica.save(update_fields=["state", "ended"])
    job.state, job.finished = JobState.SUCCEEDED, at
    job.save(update_fields=["state", "finished"])
    return finalize_job_cost(job.pk)


def test_the_ledger_bills_each_hour_at_the_rule_in_force_then(cluster, clock):
    clock.now = NOON
    job, replica = running(cluster.alice, cluster.vision, "d", NOON)
    plain, _ = running(cluster.alice, cluster.vision, "p", NOON, extra="", option="h100.exclusive.now")
    clock.now = NOON + timedelta(hours=1)
    post_ledger(now=clock.now)
    [line] = ChargeLine.objects.filter(job=job)
    [full] = ChargeLine.objects.filter(job=plain)
    assert (line.cost, full.cost) == (Decimal("1.82"), Decimal("3.04"))
    assert line.list_cost == Decimal("3.04")  # the list price stays the peak, on-demand one


def test_a_deadline_missed_by_the_platform_is_billed_at_most_its_quoted_price(cluster, clock):
    clock.now = NOON
    job, replica = running(cluster.alice, cluster.vision, "late", NOON)
    cap = Decimal(job.quote["estimate_high"])
    assert cap == Decimal("1.82")
    # evicted and started again: it ran 1 h, but finished at 16:00, past its 15:00 deadline
    replica.state, replica.ended = JobState.PREEMPTED, NOON + timedelta(minutes=50)
    replica.save(update_fields=["state", "ended"])
    second = Replica.objects.create(job=job, role="main", index=0, attempt=1, state=JobState.RUNNING,
                                    node=Node.objects.get(name="h100-01"), gpu_indices=[0],
                                    slice={"kind": "whole", "gpu_milli": 1000}, started=NOON + timedelta(hours=3))
    clock.now = NOON + timedelta(hours=4)
    job = finish(job, second, clock.now)
    usage = sum(line.cost for line in ChargeLine.objects.filter(job=job, category=ChargeLine.Category.USAGE))
    assert usage == Decimal("3.34")  # 50 min and 1 h at 1.824
    [credit] = ChargeLine.objects.filter(job=job, sku_id=DEADLINE_CAP_SKU)
    assert credit.category == ChargeLine.Category.CREDIT and credit.cost == Decimal("-1.52")
    assert "deadline missed" in credit.reason and "billed at most its quoted 'by the deadline' price 1.82 USD" in (
        credit.reason)
    assert job.final_cost == cap
    # once: fixing the final cost again writes nothing more
    assert finalize_job_cost(job.pk).final_cost == cap
    assert ChargeLine.objects.filter(job=job, sku_id=DEADLINE_CAP_SKU).count() == 1


def test_no_cap_on_time_or_for_a_job_that_ran_longer_than_it_said(cluster, clock):
    clock.now = NOON
    on_time, replica = running(cluster.alice, cluster.vision, "ok", NOON)
    clock.now = NOON + timedelta(hours=2)
    assert finish(on_time, replica, clock.now).final_cost == Decimal("3.64")  # two hours at 1.82: in time, as it ran
    clock.now = NOON
    overran, replica = running(cluster.alice, cluster.vision, "long", NOON)
    clock.now = NOON + timedelta(hours=4)   # its 1 h declared, it ran 4: late by its own doing
    assert finish(overran, replica, clock.now).final_cost == Decimal("7.28")
    plain, replica = running(cluster.alice, cluster.vision, "plain", NOON, option="h100.exclusive.now")
    finish(plain, replica, NOON + timedelta(hours=4))   # a deadline job not priced "by the deadline"
    assert not ChargeLine.objects.filter(sku_id=DEADLINE_CAP_SKU).exists()
    assert Job.objects.filter(complete_by__isnull=False).count() == 3
