"""A job's GPU utilisation and memory over time, per placement, from its node agents' samples: what
the job page charts. The caller has already checked that the user may see the job
(portal.selectors.get_job_for_user)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Max, Min

from billing.models import UsageSample
from scheduling.models import Job

MAX_POINTS = 240  # per placement: enough for a chart, few enough for any job's length


@dataclass
class PlacementSeries:
    """One placement (a replica's attempt): its utilisation (mean over its GPUs, % of the device) and
    memory (sum over its GPUs, MiB) per bucket; None where no sample arrived (a gap in the line)."""

    replica_id: int
    label: str  # "main-0", "main-0 #2" for a later attempt
    node: str
    slice_label: str
    times: list[datetime] = field(default_factory=list)
    util: list[float | None] = field(default_factory=list)
    mem_mib: list[float | None] = field(default_factory=list)
    mean_util: float | None = None  # over every sample of the placement


@dataclass
class JobSeries:
    bucket_s: int  # seconds each point averages
    placements: list[PlacementSeries]


def job_usage_series(job: Job, *, max_points: int = MAX_POINTS) -> JobSeries:
    """Buckets of equal length from the job's first sample to its last (at most `max_points`, never
    shorter than the agents' longest interval, so a steady agent leaves no false gap)."""
    samples = UsageSample.objects.filter(replica__job=job)
    span = samples.aggregate(first=Min("ts"), last=Max("ts"), interval=Max("interval_s"))
    replicas = list(job.replicas.filter(started__isnull=False).select_related("node")
                    .order_by("role", "index", "attempt"))
    if span["first"] is None:
        return JobSeries(bucket_s=0, placements=[_placement(r) for r in replicas])
    first, last = span["first"], span["last"]
    seconds = (last - first).total_seconds()
    # the last sample starts a bucket of its own: `max_points - 1` buckets cover the span before it
    bucket_s = max(1, math.ceil(span["interval"] or 1), math.ceil(seconds / max(1, max_points - 1)))
    count = int(seconds // bucket_s) + 1
    # replica -> bucket -> [util sum, util count, {gpu: [mem sum, mem count]}]
    cells: dict[int, dict[int, list]] = defaultdict(dict)
    for replica_id, ts, gpu, util, mem in samples.order_by().values_list(
            "replica_id", "ts", "gpu_index", "gpu_util_pct", "mem_used_mib").iterator(chunk_size=5000):
        bucket = min(count - 1, int((ts - first).total_seconds() // bucket_s))
        cell = cells[replica_id].setdefault(bucket, [0.0, 0, defaultdict(lambda: [0, 0])])
        if util is not None:
            cell[0] += util
            cell[1] += 1
        cell[2][gpu][0] += mem
        cell[2][gpu][1] += 1
    placements = []
    for replica in replicas:
        series, mine = _placement(replica), cells.get(replica.pk, {})
        for b in range(min(mine), max(mine) + 1) if mine else ():
            cell = mine.get(b)
            series.times.append(first + timedelta(seconds=b * bucket_s))
            series.util.append(round(cell[0] / cell[1], 1) if cell and cell[1] else None)
            series.mem_mib.append(round(sum(m / n for m, n in cell[2].values()), 1) if cell else None)
        total, n = sum(c[0] for c in mine.values()), sum(c[1] for c in mine.values())
        series.mean_util = round(total / n, 1) if n else None
        placements.append(series)
    return JobSeries(bucket_s=bucket_s, placements=placements)


def _placement(replica) -> PlacementSeries:
    label = f"{replica.role}-{replica.index}" + (f" #{replica.attempt + 1}" if replica.attempt else "")
    return PlacementSeries(replica_id=replica.pk, label=label, node=replica.node.name if replica.node else "",
                           slice_label=replica.slice_label)
