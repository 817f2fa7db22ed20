"""What the demo month holds: which jobs each workspace submits, when, and how busy they keep their
GPUs. Only the plan; portal.demo.usage plays it through the live services.

A working rhythm for believability: most jobs are submitted on weekdays in office hours, a few
long runs are started in the evening, weekends are quiet. Seeded, so every load is the same.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from scheduling.kinds import MASTER, WORKER, launch_type

DEMO_PREFIX = "report-demo-"
SETTLE = timedelta(minutes=30)  # planned runs end this long before now, queueing included


@dataclass(frozen=True)
class Kind:
    """A kind of job the demo tenants run, as in portal.demo.load's catalogue, on a named pool."""

    name: str
    job_type: str  # single | pytorch
    sharing: str
    resources: str
    pool: str
    hours: tuple[float, float]  # how long it runs
    busy: tuple[float, float]  # how much of its GPU share it keeps busy (efficiency)
    weight: int  # how often it is picked
    replicas: str = "{min: 1, max: 1}"
    queue: str = ""
    preemptible: bool = False
    vendor: str = "nvidia"


KINDS = (
    Kind("notebook", "single", "fraction", "{gpu: 0.3, gpuMemory: 12Gi, cpu: 2, memory: 8Gi}", "a100-spot",
         (1, 6), (0.02, 0.1), 4),
    Kind("finetune", "pytorch", "exclusive", "{gpu: 1, cpu: 8, memory: 32Gi}", "h100", (2, 8), (0.6, 0.95), 4,
         replicas="{min: 1, max: 2}"),
    Kind("sweep", "single", "exclusive", "{gpu: 1, cpu: 4, memory: 16Gi}", "rtx4090", (0.5, 2), (0.5, 0.9), 3,
         queue="community", preemptible=True),
    Kind("eval", "single", "exclusive", "{gpu: 1, cpu: 4, memory: 16Gi}", "a100-spot", (0.5, 3), (0.3, 0.7), 3),
    Kind("serve", "single", "mig", "{mig: 2g.20gb, cpu: 2, memory: 8Gi}", "h100-mig", (4, 12), (0.2, 0.5), 2),
    Kind("render", "single", "timeslice", "{gpu: 1, cpu: 2, memory: 8Gi}", "l40s-shared", (0.5, 2), (0.3, 0.7), 2),
    Kind("pretrain", "single", "exclusive", "{gpu: 8, cpu: 64, memory: 512Gi}", "mi300x", (6, 14), (0.8, 0.95), 1,
         vendor="amd"),
)
WEEKDAY_JOBS = (3, 7)  # per workspace and day
WEEKEND_JOBS = (0, 2)
CANCEL_SHARE = 0.04  # jobs their owner cancels part-way


@dataclass(frozen=True)
class PlannedJob:
    at: datetime
    workspace: str  # slug
    kind: Kind
    name: str
    duration: timedelta
    busy: float
    cancel_after: timedelta | None  # the owner cancels it this long after submitting

    @property
    def spec(self) -> str:
        kind = self.kind
        minutes = max(1, round(self.duration.total_seconds() / 60))
        lines = [f"name: {self.name}", f"type: {kind.job_type}", f"preemptible: {str(kind.preemptible).lower()}",
                 f"expectedDuration: {minutes}m"]
        if kind.queue:
            lines.append(f"queue: {kind.queue}")
        lines.append("roles:")
        # distributed: a master and elastic workers, each on its own GPUs
        roles = [(MASTER, "{min: 1, max: 1}"), (WORKER, kind.replicas)] if launch_type(kind.job_type).distributed \
            else [("main", kind.replicas)]
        for role, replicas in roles:
            lines += [f"  - name: {role}", "    image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
                      f"    replicas: {replicas}", f"    sharing: {kind.sharing}",
                      f"    resources: {kind.resources}", f"    vendor: {kind.vendor}", f"    nodePool: {kind.pool}"]
        return "\n".join(lines) + "\n"


def _submit_time(rng: random.Random, day: date, tz: ZoneInfo) -> datetime:
    """Office hours mostly; now and then an evening start (a long run left overnight)."""
    if rng.random() < 0.15:
        hour = rng.randint(18, 22)
    else:
        hour = min(18, max(8, round(rng.triangular(8, 18, 11))))
    return datetime.combine(day, time(hour, rng.randrange(0, 60)), tzinfo=tz)


def _jobs_on(rng: random.Random, day: date) -> int:
    low, high = WEEKEND_JOBS if day.weekday() >= 5 else WEEKDAY_JOBS
    return rng.randint(low, high)


def plan_month(workspaces: list[str], *, start: datetime, end: datetime, tz: ZoneInfo,
               seed: int = 30, queue: str = "", first: int = 1) -> list[PlannedJob]:
    """The jobs submitted from `start` to `end` by each workspace, in submit order; each one planned
    to end before `end`. `queue`: every job goes there, preemptible (a team whose only queue is the
    shared preemptible one); names are numbered from `first`."""
    rng = random.Random(seed)
    weights = [kind.weight for kind in KINDS]
    plans: list[PlannedJob] = []
    day, last = start.astimezone(tz).date(), end.astimezone(tz).date()
    while day <= last:
        for slug in workspaces:
            for _ in range(_jobs_on(rng, day)):
                kind = rng.choices(KINDS, weights)[0]
                if queue:
                    kind = replace(kind, queue=queue, preemptible=True)
                at = _submit_time(rng, day, tz)
                duration = timedelta(minutes=round(60 * rng.uniform(*kind.hours)))
                cancel = rng.random() < CANCEL_SHARE
                if start <= at and at + duration + SETTLE <= end:
                    plans.append(PlannedJob(at=at, workspace=slug, kind=kind, name="", duration=duration,
                                            busy=rng.uniform(*kind.busy),
                                            cancel_after=duration * rng.uniform(0.2, 0.7) if cancel else None))
        day += timedelta(days=1)
    plans.sort(key=lambda p: (p.at, p.workspace))
    return [replace(plan, name=f"{DEMO_PREFIX}{plan.kind.name}-{n:03d}") for n, plan in enumerate(plans, start=first)]
