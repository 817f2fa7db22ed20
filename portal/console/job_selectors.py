"""Reads for the operators' job pages: every workspace's jobs, filtered, sorted and paged; one job's
placement, cost and usage. For operators only: `get_job_for_operator` is the one way to fetch a job
here, and the views are staff-only (portal.console.views.operator_required)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import islice

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404
from django.utils.translation import gettext

from billing.api import pricing
from billing.models import ChargeLine
from portal.console.selectors import PoolUsage, pool_usage
from portal.job_lists import (  # noqa: F401 (the console's names for the shared list pieces)
    DEFAULT_PAGE_SIZE,
    DEFAULT_SORT,
    MAX_PAGE_SIZE,
    SORTS,
    JobFilters,
    JobRow,
    filter_jobs,
    job_rows,
)
from portal.models import Workspace
from scheduling.api import SHARING_MODES, clock
from scheduling.models import Job, JobState, Node, NodePool, Queue, Replica

CSV_CHUNK = 500


def get_job_for_operator(user, job_id) -> Job:
    """The one way the console fetches a job: any workspace's, for operators (staff) only."""
    if not (user.is_authenticated and user.is_staff):
        raise PermissionDenied(gettext("the operator console is for operators (staff) only"))
    try:
        return Job.objects.select_related("workspace", "queue", "submitted_by").get(pk=int(job_id))
    except (Job.DoesNotExist, ValueError, TypeError, OverflowError):
        raise Http404("No such job") from None


def operator_jobs(filters: JobFilters, *, now: datetime | None = None) -> QuerySet[Job]:
    """Every workspace's jobs that match the filters, in the asked order (portal.job_lists.filter_jobs)."""
    return filter_jobs(Job.objects.select_related("workspace", "queue", "submitted_by"), filters, now=now)


def filter_choices() -> dict[str, list[str]]:
    """The values the list's selects offer (the form refuses any other)."""
    return {
        "workspace": list(Workspace.objects.order_by("slug").values_list("slug", flat=True)),
        "queue": list(Queue.objects.filter(children__isnull=True).order_by("name").values_list("name", flat=True)),
        "pool": list(NodePool.objects.order_by("name").values_list("name", flat=True)),
        "gpu_model": sorted(set(NodePool.objects.values_list("gpu_model", flat=True))),
        "state": list(JobState.values),
        "sharing": list(SHARING_MODES),
    }


def node_exists(name: str) -> bool:
    return Node.objects.filter(name=name).exists()


# --------------------------------------------------------------------------- CSV


CSV_HEADER = ["id", "name", "workspace", "queue", "state", "submitter", "priority", "preemptible", "pool",
              "gpu_model", "sharing", "nodes", "submitted", "started", "finished", "pending_reason", "cost",
              "currency", "cost_is_final"]
CSV_NUMBER_COLUMNS = frozenset({"id", "priority", "cost"})  # the rest is text, made spreadsheet-safe


def _iso(at: datetime | None) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if at else ""


def csv_row(row: JobRow) -> list[str]:
    """Times ISO 8601 UTC (whoever asks), money with the currency's decimals."""
    job = row.job
    return [str(job.pk), job.name, job.workspace.slug, job.queue.name, job.state,
            job.submitted_by.get_username() if job.submitted_by else "", str(job.priority),
            "true" if job.preemptible else "false", row.pool, row.gpu_model, row.sharing, " ".join(row.nodes),
            _iso(job.created), _iso(job.started), _iso(job.finished), job.pending_reason,
            "" if row.cost is None else str(pricing.quantize_money(row.cost, row.currency or "USD")), row.currency,
            "true" if row.cost_final else "false"]


def csv_rows(jobs: QuerySet[Job], *, chunk_size: int = CSV_CHUNK) -> Iterator[list[str]]:
    """Every matching job as a CSV row, in the list's order, `chunk_size` jobs at a time."""
    ids = jobs.values_list("pk", flat=True).iterator(chunk_size=chunk_size)
    while chunk := list(islice(ids, chunk_size)):
        by_id = Job.objects.select_related("workspace", "queue", "submitted_by").in_bulk(chunk)
        for row in job_rows(by_id[pk] for pk in chunk if pk in by_id):
            yield csv_row(row)


# --------------------------------------------------------------------------- one job


def job_replicas(job: Job) -> QuerySet[Replica]:
    return job.replicas.select_related("node__pool").order_by("role", "index", "attempt")


def job_usage(job: Job, *, now: datetime | None = None) -> list[PoolUsage]:
    """GPU-hours the job held (allocated) and used, per hour and pool, from its ledger lines: the
    dashboard's allocation-vs-utilisation chart for one job."""
    lines = list(ChargeLine.objects.filter(job=job, category=ChargeLine.Category.USAGE).order_by("hour").values_list(
        "hour", "pool", "allocated_gpu_hours", "used_gpu_hours", "cost", "currency"))
    if not lines:
        return []
    last = lines[-1][0]
    if not job.is_final:
        last = max(last, (now or clock.now()).astimezone(UTC).replace(minute=0, second=0, microsecond=0))
    hours, h = [], lines[0][0]
    while h <= last:
        hours.append(h)
        h += timedelta(hours=1)
    return pool_usage(lines, hours)


def move_targets(job: Job) -> QuerySet[Queue]:
    """Queues a job may move to: leaf queues open to its workspace, other than its own."""
    return (Queue.objects.filter(queueaccess__workspace=job.workspace, children__isnull=True)
            .exclude(pk=job.queue_id).order_by("name").distinct())
