"""The demo month (portal.demo.usage): thirty days of both demo workspaces' jobs, played through the
live services, so that submitted/started/finished times, states, efficiency and costs agree.

The month is loaded once for the module (it takes a while: every event runs the real scheduling
cycle) and committed, as `make run` loads it; each test reads it inside its own transaction, and
the module's end empties the database again.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db.models import Sum
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from billing import chargeback
from billing.ledger.jobs import job_cost
from billing.ledger.posting import close_grace, hour_floor
from billing.ledger.selectors import ledger_cursor
from billing.models import ChargeLine, UsageSample
from billing.pricing import quantize_money
from billing.reports.selectors import ReportFilters, report_rows, totals
from billing.time_zone import platform_tz
from portal.demo import cluster, finance, prices, tenants
from portal.demo.history import DEMO_PREFIX
from portal.demo.usage import load_demo_usage
from portal.models import Membership, Role
from scheduling import clock
from scheduling.models import ACTIVE_STATES, FINAL_STATES, Job, JobState

pytestmark = pytest.mark.slow  # the month takes minutes to play

WORKSPACES = ("vision-lab", "nlp-group")
NOW = datetime(2026, 12, 1, 1, 19, 46, tzinfo=UTC)


@dataclass(frozen=True)
class Month:
    now: datetime
    made: int


@pytest.fixture(scope="module")
def month(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        tenants.load_tenants()
        cluster.load_cluster()
        cluster.load_queues()
        prices.load_prices()
        finance.load_chargeback_policies()
        # a fixed moment (the month is the same whenever the suite runs): one at which jobs of the month still
        # run, a pretrain among them, as `make run` may find at any hour
        now = NOW
        loaded = Month(now=now, made=load_demo_usage(now=now))
        yield loaded
        call_command("flush", interactive=False, verbosity=0)


def demo_jobs(slug: str | None = None):
    jobs = Job.objects.filter(name__startswith=DEMO_PREFIX)
    return jobs.filter(workspace__slug=slug) if slug else jobs


def used_gpu_hours(job: Job) -> Decimal:
    return ChargeLine.objects.filter(job=job).aggregate(s=Sum("used_gpu_hours"))["s"] or Decimal(0)


def test_both_workspaces_submit_over_the_whole_month_in_a_working_rhythm(db, month):
    assert month.made == demo_jobs().count() > 100
    tz = platform_tz()
    for slug in WORKSPACES:
        submitted = [job.created for job in demo_jobs(slug)]
        assert min(submitted) < month.now - timedelta(days=25), slug  # a quiet weekend may open the month
        assert max(submitted) > month.now - timedelta(days=4), slug
        assert len({at.astimezone(tz).date() for at in submitted}) >= 18, slug  # not all "now"
        assert max(submitted) < month.now
    days = Counter(job.created.astimezone(tz).weekday() >= 5 for job in demo_jobs())
    assert days[False] / 5 > 2 * days[True] / 2  # a weekday is busier than a weekend day


def test_finished_jobs_have_ordered_times_and_no_pending_reason(db, month):
    finished = demo_jobs().filter(state__in=FINAL_STATES)
    assert finished.count() >= 0.95 * month.made
    assert set(finished.values_list("state", flat=True)) == set(FINAL_STATES)  # some fail, some are cancelled
    for job in finished:
        assert job.finished is not None and job.created < job.finished <= month.now, job.name
        if job.started is not None:
            assert job.created <= job.started <= job.finished, job.name
    waiting = Job.objects.exclude(state=JobState.PENDING)
    assert not waiting.exclude(pending_reason="").exists()
    assert not waiting.exclude(pending_code="").exists()
    events = Counter(demo_jobs().filter(events__kind__in=["submitted", "scheduled", "running"])
                     .values_list("events__kind", flat=True))
    assert events["submitted"] == month.made and events["running"] >= 0.9 * month.made


def test_replicas_were_placed_by_the_scheduler_on_the_demo_pools(db, month):
    for job in demo_jobs().filter(started__isnull=False):
        replicas = list(job.replicas.select_related("node"))
        # a job still running at the month's end keeps its replicas on
        assert replicas and all(r.node is not None and r.started and (r.ended or r.state in ACTIVE_STATES)
                                for r in replicas), job.name
        assert all(job.started <= r.started + timedelta(seconds=1) for r in replicas), job.name
        assert job.events.filter(kind="scheduled").exists(), job.name
    pools = set(demo_jobs().values_list("replicas__node__pool__name", flat=True)) - {None}
    assert {"h100", "h100-mig", "a100-spot", "l40s-shared", "rtx4090", "mi300x"} <= pools


def test_efficiency_comes_from_the_agents_samples(db, month):
    ran = list(demo_jobs().filter(started__isnull=False))
    assert UsageSample.objects.filter(replica__job__in=ran).exists()
    with_usage = [job for job in ran if used_gpu_hours(job) > 0]
    assert len(with_usage) >= 0.9 * len(ran)

    def efficiency(kind: str) -> Decimal:
        lines = ChargeLine.objects.filter(job_name__startswith=f"{DEMO_PREFIX}{kind}-")
        sums = lines.aggregate(used=Sum("used_gpu_hours"), held=Sum("allocated_gpu_hours"))
        return sums["used"] / sums["held"]

    assert efficiency("notebook") < Decimal("0.15") < Decimal("0.5") < efficiency("finetune") < 1


def test_the_ledger_total_of_each_workspace_is_the_sum_of_its_job_costs(db, month):
    filters = {"start": (month.now - timedelta(days=31)).astimezone(platform_tz()).date(),
               "end": month.now.astimezone(platform_tz()).date()}
    for slug in WORKSPACES:
        owner = Membership.objects.get(workspace__slug=slug, role=Role.OWNER).user
        (total,) = totals(report_rows(owner, ReportFilters(workspace=slug, **filters)))
        jobs = list(demo_jobs(slug))
        cost = quantize_money(total.cost, total.currency)  # SQLite sums decimals as floats
        assert cost > 0
        assert cost == sum(job_cost(job).total for job in jobs), slug
        # final jobs at their final cost, the jobs still running at what they cost so far
        assert cost == sum(job.final_cost if job.is_final else job_cost(job).total for job in jobs), slug
        assert 0 < total.used_gpu_hours < total.allocated_gpu_hours, slug
    closed = ledger_cursor().closed_until  # final up to now, but for the hour that still takes late usage
    assert closed == hour_floor(month.now - close_grace())
    assert not ChargeLine.objects.filter(provisional=True, hour__lt=closed).exists()


def test_the_chargeback_invariant_holds_on_the_demo_month(db, month):
    months = sorted(set(ChargeLine.objects.values_list("period", flat=True)))
    assert months
    for period in months:
        figures = chargeback.chargeback(period)
        assert figures.pools and {p.policy for p in figures.pools} <= {"proportional", "by-quota"}
        for pool in figures.pools:
            assert pool.direct_cost + pool.idle_share == pool.capacity_cost > 0, (period, pool.pool)
        assert sum((r.total for r in figures.rows), Decimal(0)) == figures.capacity_cost, period


def test_loading_again_changes_nothing_and_the_clock_is_the_systems_again(db, month, monkeypatch):
    lines = set(ChargeLine.objects.values_list("id", "cost"))
    assert load_demo_usage() == 0
    assert set(ChargeLine.objects.values_list("id", "cost")) == lines
    system = datetime(2031, 7, 4, 9, 30, tzinfo=UTC)  # a system time no played hand could read
    monkeypatch.setattr(timezone, "now", lambda: system)
    assert clock.now() == system


def test_job_pages_show_no_pending_reason_for_a_finished_job(db, month):
    client = Client()
    client.force_login(Membership.objects.get(workspace__slug="vision-lab", role=Role.OWNER).user)
    job = demo_jobs("vision-lab").filter(state=JobState.SUCCEEDED).first()
    page = client.get(reverse("job", args=[job.pk])).content.decode()
    assert '<p id="pending-reason" hidden>' in page
    listing = client.get(reverse("jobs")).content.decode()
    assert listing.count('data-field="pending_reason"></div>') == listing.count('data-field="pending_reason"') > 0


def test_the_seven_day_charts_have_the_months_last_week_of_samples(db, month):
    from django.conf import settings

    from portal.console.models import QueueAllocationSample
    from portal.workspace_queues import HISTORY_DAYS, queue_histories
    from scheduling.models import Queue

    week = QueueAllocationSample.objects.filter(time__gt=month.now - timedelta(days=HISTORY_DAYS))
    every = timedelta(seconds=settings.QUEUE_HISTORY_INTERVAL_S)
    times = sorted(set(week.values_list("time", flat=True)))
    assert len(times) >= timedelta(days=HISTORY_DAYS) / every - 2  # a sample every interval, as the beat takes
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) == every
    assert week.values("queue").distinct().count() == Queue.objects.count()
    assert week.filter(allocated_gpus__gt=0).exists()  # the month's jobs held GPUs
    # the workspace page's chart draws them
    vision = Membership.objects.get(workspace__slug="vision-lab", role=Role.OWNER).workspace
    histories = queue_histories(vision, month.now)
    assert histories and all(h.samples > 0 for h in histories.values())
    assert any(any(a for a in h.allocated if a) for h in histories.values())
