"""A quote option is "now" only when its queue's quota (deserved for non-preemptible work, the limit for all
work), its pool's free GPUs and the workspace's hard budget all allow it; otherwise it may queue, says why by
code, takes its expected start from the forecast and, where preemptible work would start now, offers that."""

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from billing.models import ChargeLine
from billing.services import submit_quoted_job
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, Queue

# the world's vision-lab deserves 16 GPUs: this fills them with non-preemptible work on the H100 nodes
FILLER = """\
name: filler
roles:
  - name: main
    image: busybox
    resources: {gpu: 8}
    replicas: {min: 2, max: 2}
    nodePool: h100
"""
ONE_RTX = """\
name: one-rtx
roles:
  - name: main
    image: busybox
    resources: {gpu: 1}
    nodePool: rtx4090
"""


@pytest.fixture
def alice(cluster, clock):
    api = APIClient()
    api.force_authenticate(cluster.alice)
    return api


def options(api, spec):
    response = api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": spec}, format="json")
    assert response.status_code == 200, response.json()
    return {o["id"]: o for o in response.json()["options"]}


def fill(cluster, clock, run):
    submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=FILLER, option="h100.exclusive.now")
    run(SimulatedBackend(speedup=1, failure_rate=0, clock=clock), clock)
    assert Job.objects.get(name="filler").state in ("Scheduled", "Running")


def test_d2_a_full_non_preemptible_quota_is_not_now(alice, cluster, clock, run):
    # before: RTX-4090 GPUs free and quota to spare: now
    before = options(alice, ONE_RTX)["rtx4090.exclusive.now"]
    assert before["starts_now"] and before["can_start_now"]
    fill(cluster, clock, run)
    found = options(alice, ONE_RTX)
    now = found["rtx4090.exclusive.now"]
    # D2: the quote said "now", the job went Pending at once: the free GPUs are not the queue's quota
    assert (now["starts_now"], now["can_start_now"]) == (False, False)
    assert now["tradeoff_codes"][0]["code"] == "queue_quota_full"
    assert now["tradeoff_codes"][0]["params"] == {"queue": "vision-lab", "deserved_milli": 16000,
                                                  "used_milli": 16000, "needed_milli": 1000}
    assert "may queue" in now["tradeoff_tags"]
    # its start is the forecast's: when the filler's quoted 2 h are over
    assert now["expected_start"] not in (None, "now")
    assert datetime.fromisoformat(now["expected_start"]) >= clock.now + timedelta(hours=2)
    # the preemptible variant starts now, at the same price
    variant = found["rtx4090.exclusive.now.preemptible"]
    assert variant["as_preemptible"] and variant["starts_now"] and variant["can_start_now"]
    assert variant["total"] == now["total"] and variant["tradeoff_codes"][0]["code"] == "as_preemptible"
    # and as the quote said: the plain option waits, the variant runs
    held = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=ONE_RTX,
                             option="rtx4090.exclusive.now")
    taken = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=ONE_RTX.replace("one-rtx", "other"),
                              option="rtx4090.exclusive.now.preemptible")
    assert taken.preemptible and not held.preemptible
    run(SimulatedBackend(speedup=1, failure_rate=0, clock=clock), clock)
    held.refresh_from_db()
    taken.refresh_from_db()
    assert held.state == "Pending" and held.pending_code == "queue_non_preemptible_quota"
    assert taken.state in ("Scheduled", "Running")


def test_a_preemptible_spec_is_held_only_by_the_limit(alice, cluster, clock, run):
    fill(cluster, clock, run)
    preemptible = ONE_RTX.replace("name: one-rtx\n", "name: one-rtx\npreemptible: true\n")
    now = options(alice, preemptible)["rtx4090.exclusive.now"]
    assert now["starts_now"] and "rtx4090.exclusive.now.preemptible" not in options(alice, preemptible)
    Queue.objects.filter(name="vision-lab").update(limit_gpus=Decimal(16))
    now = options(alice, preemptible)["rtx4090.exclusive.now"]
    assert not now["starts_now"] and now["tradeoff_codes"][0]["code"] == "queue_limit_full"
    assert now["tradeoff_codes"][0]["params"]["limit_milli"] == 16000


def test_a_blocking_spent_budget_is_not_now(alice, cluster, clock):
    from billing.reports.services import check_budget_allows_submit, set_budget

    assert options(alice, ONE_RTX)["rtx4090.exclusive.now"]["can_start_now"]
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=ONE_RTX.replace("one-rtx", "spent"))
    hour = clock.now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    ChargeLine.objects.create(
        hour=hour, day=hour.date(), period=hour.date(), charge_start=hour, charge_end=hour + timedelta(hours=1),
        workspace=cluster.vision, queue="vision-lab", job=job, job_name=job.name, gpu_model="RTX-4090-24GB",
        sharing="exclusive", allocated_gpu_hours=1, idle_gpu_hours=0, exclusive_gpu_hours=1, cost=Decimal("5"),
        list_cost=Decimal("5"), exclusive_cost=Decimal("5"), currency="USD", provisional=False, computed_at=hour)
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="2", block_at_limit=True)
    assert check_budget_allows_submit(cluster.vision) is not None
    now = options(alice, ONE_RTX)["rtx4090.exclusive.now"]
    assert not now["can_start_now"] and not now["starts_now"]
    assert now["tradeoff_codes"][0]["code"] == "budget_blocks" and "may queue" in now["tradeoff_tags"]
    # a budget that only warns stops nothing
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="2", block_at_limit=False)
    assert options(alice, ONE_RTX)["rtx4090.exclusive.now"]["can_start_now"]
