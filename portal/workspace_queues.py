"""Reads for a workspace's queues and waiting jobs (the workspace page and
`/api/v1/workspaces/<slug>/queues/`); the caller has already scoped the workspace.

The figures are the operator console's: fair share and allocation from `console.selectors.queue_lines`
(a core Session on the cycle's snapshot), the history from its `QueueAllocationSample`s. A queue open to
several workspaces shows the queue's figures, all workspaces together; only the jobs listed are the
workspace's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count

from portal.console.selectors import AllocationHistory, queue_allocation_history, queue_lines
from scheduling.api import (
    PositionNote,
    StartWindow,
    clock,
    pending_outlook,
    position_note,
    queues_for_workspace,
)
from scheduling.models import Job, JobState

HISTORY_DAYS = 7
MAX_PENDING_ROWS = 200


@dataclass(frozen=True)
class WorkspaceQueue:
    name: str
    deserved: float            # GPUs
    limit: float | None        # GPUs; None: no limit
    allocated: float           # GPUs held now by the queue and its sub-queues
    fair_share: float          # GPUs, as the scheduler computes it now
    pending: int               # jobs waiting in the queue (every workspace's)
    is_default: bool = False


def workspace_queues(workspace, now: datetime | None = None) -> list[WorkspaceQueue]:
    """The queues `workspace` may submit to, by name, with the scheduler's figures for each."""
    queues = list(queues_for_workspace(workspace).values_list("pk", "name", "deserved_gpus", "limit_gpus"))
    if not queues:
        return []
    lines = {line.name: line for line in queue_lines(now or clock.now())}
    waiting = dict(Job.objects.filter(queue_id__in=[pk for pk, *_ in queues], state=JobState.PENDING)
                   .values("queue_id").annotate(n=Count("id")).values_list("queue_id", "n"))
    default = set(workspace.queue_access.filter(is_default=True).values_list("queue_id", flat=True))
    out = []
    for pk, name, deserved, limit in queues:
        line = lines.get(name)
        out.append(WorkspaceQueue(
            name=name, deserved=float(deserved), limit=None if limit is None else float(limit),
            allocated=line.allocated if line else 0.0, fair_share=line.fair_share if line else 0.0,
            pending=waiting.get(pk, 0), is_default=pk in default,
        ))
    return out


def queue_histories(workspace, now: datetime | None = None) -> dict[str, AllocationHistory]:
    """The last HISTORY_DAYS of allocation samples of each of the workspace's queues."""
    return {q.name: queue_allocation_history(q, days=HISTORY_DAYS, now=now) for q in queues_for_workspace(workspace)}


@dataclass(frozen=True)
class WaitingJob:
    job: Job
    position: int | None
    expected_start: StartWindow | None
    note: PositionNote | None = None   # what its position means for it: backfill may pass it, GPUs reserved


def waiting_jobs(workspace, now: datetime | None = None) -> list[WaitingJob]:
    """The workspace's pending jobs (at most MAX_PENDING_ROWS, oldest first) with their place in their
    queue and expected start, ordered by queue and position."""
    jobs = list(Job.objects.filter(workspace=workspace, state=JobState.PENDING).select_related("queue")
                .order_by("created", "id")[:MAX_PENDING_ROWS])
    outlook = pending_outlook(jobs, now)
    rows = [WaitingJob(job, outlook[job.pk].position if job.pk in outlook else None,
                       outlook[job.pk].expected_start if job.pk in outlook else None, position_note(job))
            for job in jobs]
    return sorted(rows, key=lambda r: (r.job.queue.name, r.position or 0, r.job.pk))
