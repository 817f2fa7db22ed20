"""Reads of idle GPU slices: every one for operators, one job's for its workspace's members."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from billing.idle.services import may_stop, stop_at
from scheduling.models import ACTIVE_STATES, Job, Replica


@dataclass(frozen=True)
class IdlePlacement:
    replica: Replica
    since: datetime
    notified: datetime | None
    stop_at: datetime | None  # None: its policy only notifies


def _idle(rows) -> list[IdlePlacement]:
    return [IdlePlacement(r, r.idle_since, r.idle_notified, stop_at(r)) for r in rows]


def idle_placements() -> list[IdlePlacement]:
    """Every placement held but idle now, longest idle first (operators: all workspaces)."""
    rows = (Replica.objects.filter(state__in=ACTIVE_STATES, idle_since__isnull=False, node__isnull=False)
            .select_related("node__pool", "job__workspace", "job__submitted_by").order_by("idle_since", "pk"))
    return _idle(rows)


@dataclass(frozen=True)
class JobIdle:
    since: datetime
    replicas: list[IdlePlacement]
    stop_at: datetime | None
    may_stop: bool


def job_idle(job: Job) -> JobIdle | None:
    """The job's idle spell, if any of its running placements is idle. The caller has already checked
    that the user may see the job (portal.selectors.get_job_for_user)."""
    placements = _idle(job.replicas.filter(state__in=ACTIVE_STATES, idle_since__isnull=False, node__isnull=False)
                       .select_related("node__pool", "job").order_by("idle_since", "pk"))
    if not placements:
        return None
    pool = placements[0].replica.node.pool
    stops = [p.stop_at for p in placements]
    return JobIdle(since=min(p.since for p in placements), replicas=placements,
                   stop_at=max(stops) if stops and all(stops) else None, may_stop=may_stop(job, pool))
