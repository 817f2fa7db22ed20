"""Reads behind the notebook list, its API and the notebook proxy, each scoped to the caller's workspaces:
a workspace's notebooks with their slice, idle time, cost so far and the cost of their idle hours, and the
one live notebook a `/nb/<workspace>/<name>/` URL names."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404

from billing.api import idle_by_job, kept_alive, parse_until, set_keep_alive
from portal import job_lists
from portal import selectors as portal_selectors
from portal.console import audit
from portal.console.models import AuditEntry
from scheduling.api import base_url, clock, endpoint_of, read_activity
from scheduling.models import ACTIVE_STATES, Job, JobState, Replica

LIST_ACTIVITY_TIMEOUT_S = 1.0  # a page waits at most this long for each running notebook's server
MAX_LISTED = 200  # a workspace's newest notebooks on one page
MAX_ENDED = 20  # and its newest ended ones (their homes may still be kept)


def notebooks_for(user, workspace, *, ended: bool | None = None) -> QuerySet[Job]:
    """The workspace's notebooks, newest first (404 before this for a workspace that is not the user's);
    `ended` True: only those that ended (deleted, failed), False: only the others."""
    return portal_selectors.workloads_for(user, workspace, "notebooks", ended=ended)


def get_notebook_for_user(user, job_id) -> Job:
    """A notebook by id: 404 unless it is a notebook of one of the user's workspaces."""
    return portal_selectors.get_workload_for_user(user, job_id, "notebooks", "notebook")


def live_notebook(user, workspace_slug: str, name: str) -> Job:
    """The notebook `/nb/<workspace>/<name>/` names: the one not ended (the name is unique among those);
    404 for a workspace the user is not a member of, as for a name it has no live notebook of."""
    workspace = portal_selectors.get_workspace_for_user(user, workspace_slug)
    job = notebooks_for(user, workspace, ended=False).filter(name=name).order_by("-created", "-id").first()
    if job is None:
        raise Http404("No such notebook")
    return job


@dataclass
class NotebookRow:
    job: Job
    row: job_lists.JobRow  # cost so far (the ledger), timing
    url: str
    slice: str  # what it holds now, else what it asks for
    node: str
    idle_for: timedelta | None  # no kernel activity for this long (its placement's time); None: not known
    busy: bool
    idle_gpu_hours: Decimal | None
    idle_cost: Decimal | None
    kept_until: datetime | None = None  # kept alive until then: the idle rule skips it

    @property
    def idle_text(self) -> str:
        """"2 h 05 min", "12 min", "40 s"; "busy" while a kernel runs; "–" when not known."""
        if self.busy:
            return "busy"
        if self.idle_for is None:
            return "–"
        seconds = int(self.idle_for.total_seconds())
        hours, rest = divmod(seconds, 3600)
        minutes, seconds = divmod(rest, 60)
        if hours:
            return f"{hours} h {minutes:02d} min"
        return f"{minutes} min" if minutes else f"{seconds} s"

    @property
    def can_open(self) -> bool:
        return self.job.state == JobState.RUNNING

    @property
    def can_stop(self) -> bool:
        return self.job.state in (JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING, JobState.PREEMPTED)

    @property
    def can_start(self) -> bool:
        return self.job.state == JobState.STOPPED


def _idle(job: Job, replica: Replica | None, backend) -> tuple[timedelta | None, bool]:
    if backend is None or replica is None or replica.state != JobState.RUNNING:
        return None, False
    endpoint = endpoint_of(job, backend)
    activity = read_activity(endpoint, timeout=LIST_ACTIVITY_TIMEOUT_S) if endpoint else None
    if activity is None:
        return None, False
    busy = bool(activity.busy_kernels or activity.gpu_busy)
    return (timedelta(0) if busy else timedelta(seconds=activity.kernel_idle_s * (replica.clock_scale or 1.0))), busy


def notebook_rows(jobs, *, backend=None, now: datetime | None = None) -> list[NotebookRow]:
    """Rows for a page of notebooks: the list's cost and timing (portal.job_lists), the held slice, the idle
    figures from the ledger, and, given a backend, how long each running one has had no kernel activity
    (asked of its server)."""
    now = now or clock.now()
    base = job_lists.job_rows(jobs, now=now)
    ids = [r.job.pk for r in base]
    held: dict[int, Replica] = {}
    for replica in (Replica.objects.filter(job_id__in=ids, state__in=ACTIVE_STATES, node__isnull=False)
                    .select_related("node").order_by("job_id", "-attempt")):
        held.setdefault(replica.job_id, replica)
    idle = idle_by_job(ids)
    kept = kept_alive(ids, now)
    rows = []
    for row in base:
        job, replica = row.job, held.get(row.job.pk)
        idle_for, busy = _idle(job, replica, backend)
        figures = idle.get(job.pk)
        rows.append(NotebookRow(
            job=job, row=row, url=base_url(job.workspace.slug, job.name),
            slice=replica.slice_label if replica else row.gpus, node=replica.node.name if replica else "",
            idle_for=idle_for, busy=busy, idle_gpu_hours=figures.idle_gpu_hours if figures else None,
            idle_cost=figures.idle_cost if figures else None, kept_until=kept.get(job.pk)))
    return rows


@transaction.atomic
def keep_alive(user, job: Job, text: str | None, *, now: datetime | None = None):
    """Keep the notebook alive until `text` ("18:00" in the user's time zone, or a date and time; None or
    "": clear it), capped at its queue's maximum runtime; audited."""
    now = now or clock.now()
    zone = ZoneInfo(portal_selectors.time_zone_for(user))
    until = parse_until(text, zone, now) if text else None
    kept = set_keep_alive(user, job, until, now=now, zone=zone)
    message = (f"kept notebook {job.name} alive until {kept.until.astimezone(zone):%Y-%m-%d %H:%M %Z}" if kept
               else f"cleared notebook {job.name}'s keep-alive")
    audit.record(user, "keep alive", job, source=AuditEntry.Source.TENANT, message=message,
                 changes={"keep_alive_until": [None, kept.until.isoformat() if kept else None]})
    return kept
