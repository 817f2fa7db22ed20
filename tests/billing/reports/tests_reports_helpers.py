"""Helpers for the report tests. Usage in two workspaces: alice's vision-lab and bob's nlp-group, posted to the ledger."""

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from asgiref.sync import async_to_sync
from django.test import AsyncClient

from billing.ledger.posting import post_ledger
from billing.models import ChargeLine
from billing.services import submit_quoted_job
from billing.time_zone import platform_tz
from scheduling import clock
from scheduling.models import Job, JobState, Node, Replica

SPEC = """name: {name}
roles:
  - name: main
    image: busybox
    resources: {{gpu: 1, cpu: 1, memory: 4Gi}}
    nodePool: h100
"""
FRACTION_SPEC = """name: {name}
roles:
  - name: main
    image: busybox
    resources: {{gpu: 0.5, gpuMemory: 10Gi, cpu: 4, memory: 16Gi}}
    nodePool: a100-spot
"""
DAY = date(2026, 3, 2)  # a Monday; TIME_ZONE is UTC, off-peak 00:00-08:00


def at(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)


def place(job: Job, start, end, *, node="h100-01", index=0, slice_=None, state=JobState.SUCCEEDED) -> Replica:
    return Replica.objects.create(job=job, role="main", index=index, state=state, node=Node.objects.get(name=node),
                                  gpu_indices=[0], slice=slice_ or {"kind": "whole", "gpu_milli": 1000},
                                  started=start, ended=end)


def charge(job: Job, cost, *, when: datetime | None = None) -> ChargeLine:
    """A closed usage line of the job costing `cost`, in the hour of `when` (default: the first hour
    of the current month in the platform's time zone, so budgets count it)."""
    hour = when or clock.now().astimezone(platform_tz()).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    day = hour.astimezone(platform_tz()).date()
    return ChargeLine.objects.create(
        hour=hour, day=day, period=day.replace(day=1), charge_start=hour, charge_end=hour + timedelta(hours=1),
        workspace=job.workspace, queue=job.queue.name, job=job, job_name=job.name, gpu_model="H100-80GB",
        sharing="exclusive", allocated_gpu_hours=1, idle_gpu_hours=1, exclusive_gpu_hours=1, cost=Decimal(cost),
        list_cost=Decimal(cost), exclusive_cost=Decimal(cost), currency="USD", provisional=False, computed_at=hour)


def submit(user, workspace, name, spec=SPEC) -> Job:
    return submit_quoted_job(user=user, workspace=workspace, spec=spec.format(name=name))


@dataclass
class Usage:
    tenants: object
    vision_job: Job
    frac_job: Job
    nlp_job: Job


def make_usage(cluster) -> Usage:
    """vision: a whole H100 07:00-10:00 on DAY, and half an A100 (spot) 22:00 DAY to 02:00 the next
    day; nlp: a whole H100 on another node 12:00-14:00 on DAY."""
    vision_job = submit(cluster.alice, cluster.vision, "vision-train")
    place(vision_job, at(DAY, 7), at(DAY, 10))
    frac_job = submit(cluster.alice, cluster.vision, "vision-notebook", FRACTION_SPEC)
    place(frac_job, at(DAY, 22), at(date(2026, 3, 3), 2), node="a100-spot-01",
          slice_={"kind": "fraction", "gpu_milli": 500, "gpu_mem_mib": 10240})
    nlp_job = submit(cluster.bob, cluster.nlp, "nlp-finetune")
    place(nlp_job, at(DAY, 12), at(DAY, 14), node="h100-02")
    post_ledger(now=at(date(2026, 3, 4), 0))
    return Usage(cluster, vision_job, frac_job, nlp_job)


RANGE = {"start": "2026-03-01", "end": "2026-03-08"}


def csv_body(user, **params) -> str:
    """The report's CSV export for `user` over RANGE (and `params`), read from its stream."""
    client = AsyncClient()
    client.force_login(user)

    async def fetch():
        response = await client.get("/reports/export.csv", {**RANGE, **params})
        assert response.status_code == 200
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(fetch)().decode()
