"""Reads for the operators' job pages: every workspace's jobs, filtered, sorted and paged; one job's
placement, cost and usage. For operators only: `get_job_for_operator` is the one way to fetch a job
here, and the views are staff-only (portal.console.views.operator_required)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import islice

from django.core.exceptions import PermissionDenied
from django.db.models import F, Q, QuerySet, Sum
from django.http import Http404

from billing import pricing
from billing.models import ChargeLine
from portal.console.selectors import PoolUsage, pool_usage
from portal.models import Workspace
from scheduling import clock
from scheduling.models import ACTIVE_STATES, Job, JobState, Node, NodePool, Queue, Replica
from scheduling.spec.model import SHARING_MODES

# sort key -> the column it orders by; `-key` sorts descending
SORTS = {
    "id": "id", "name": "name", "workspace": "workspace__slug", "queue": "queue__name", "state": "state",
    "submitter": "submitted_by__username", "priority": "priority", "submitted": "created", "started": "started",
    "finished": "finished", "cost": "final_cost",
}
DEFAULT_SORT = "-submitted"
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
CSV_CHUNK = 500


@dataclass(frozen=True)
class JobFilters:
    """What the operators' job list shows; every value already checked (JobFilterForm)."""

    q: str = ""
    workspace: str = ""
    queue: str = ""
    pool: str = ""
    node: str = ""
    state: str = ""
    submitter: str = ""
    gpu_model: str = ""
    sharing: str = ""
    min_age: timedelta | None = None  # submitted at least this long ago
    max_age: timedelta | None = None  # submitted at most this long ago
    sort: str = DEFAULT_SORT


def get_job_for_operator(user, job_id) -> Job:
    """The one way the console fetches a job: any workspace's, for operators (staff) only."""
    if not (user.is_authenticated and user.is_staff):
        raise PermissionDenied("the operator console is for operators (staff) only")
    try:
        return Job.objects.select_related("workspace", "queue", "submitted_by").get(pk=int(job_id))
    except (Job.DoesNotExist, ValueError, TypeError, OverflowError):
        raise Http404("No such job") from None


def _ran_on(**lookup) -> QuerySet:
    """Ids of the jobs one of whose replicas was placed as `lookup` says (any attempt)."""
    return Replica.objects.filter(**lookup).values("job_id")


def operator_jobs(filters: JobFilters, *, now: datetime | None = None) -> QuerySet[Job]:
    """Every workspace's jobs that match the filters, in the asked order (ties: newest first).

    Pool and GPU model: the ones the job was quoted for (its frozen option, else its spec's pin), or
    the ones a replica of it ran on. Sharing: the quoted mode, else its first role's."""
    jobs = Job.objects.select_related("workspace", "queue", "submitted_by")
    exact = {"workspace__slug": filters.workspace, "queue__name": filters.queue, "state": filters.state,
             "submitted_by__username": filters.submitter}
    jobs = jobs.filter(**{k: v for k, v in exact.items() if v})
    if filters.pool:
        jobs = jobs.filter(Q(quote__pool=filters.pool) | Q(quote__isnull=True, roles__0__pool=filters.pool)
                           | Q(pk__in=_ran_on(node__pool__name=filters.pool)))
    if filters.node:
        jobs = jobs.filter(pk__in=_ran_on(node__name=filters.node))
    if filters.gpu_model:
        jobs = jobs.filter(Q(quote__gpu_model=filters.gpu_model)
                           | Q(quote__isnull=True, roles__0__gpu_model=filters.gpu_model)
                           | Q(pk__in=_ran_on(node__pool__gpu_model=filters.gpu_model)))
    if filters.sharing:
        jobs = jobs.filter(Q(quote__sharing=filters.sharing) | Q(quote__isnull=True, roles__0__mode=filters.sharing))
    now = now or clock.now()
    if filters.min_age is not None:
        jobs = jobs.filter(created__lte=now - filters.min_age)
    if filters.max_age is not None:
        jobs = jobs.filter(created__gte=now - filters.max_age)
    if filters.q:
        q = filters.q.strip()
        match = (Q(name__icontains=q) | Q(workspace__slug__icontains=q) | Q(workspace__name__icontains=q)
                 | Q(submitted_by__username__icontains=q))
        number = q.removeprefix("#")
        if number.isdigit() and len(number) <= 18:
            match |= Q(pk=int(number))
        jobs = jobs.filter(match)
    column = F(SORTS[filters.sort.removeprefix("-")])
    order = column.desc(nulls_last=True) if filters.sort.startswith("-") else column.asc(nulls_last=True)
    return jobs.order_by(order, "-id")


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


# --------------------------------------------------------------------------- rows


@dataclass
class JobRow:
    """A job as the operators' list and CSV show it."""

    job: Job
    pool: str = ""
    gpu_model: str = ""
    sharing: str = ""
    nodes: list[str] = field(default_factory=list)  # now held (running), else where it last ran
    running_on: bool = False  # `nodes` are held now
    cost: Decimal | None = None  # final cost, else the sum of its ledger lines so far
    currency: str = ""

    @property
    def cost_final(self) -> bool:
        return self.job.final_cost is not None


def _asked(job: Job) -> tuple[str, str, str]:
    """Pool, GPU model and sharing mode the job was quoted for (else its first role's request)."""
    quote = job.quote if isinstance(job.quote, dict) else {}
    role = job.roles[0] if isinstance(job.roles, list) and job.roles and isinstance(job.roles[0], dict) else {}
    return (str(quote.get("pool") or role.get("pool") or ""), str(quote.get("gpu_model") or role.get("gpu_model") or ""),
            str(quote.get("sharing") or role.get("mode") or ""))


def job_rows(jobs: Iterable[Job]) -> list[JobRow]:
    """Rows for a page (or a chunk) of jobs: two queries for all of them, whatever their number."""
    rows = [JobRow(job, *_asked(job)) for job in jobs]
    ids = [r.job.pk for r in rows]
    placed: dict[int, list[tuple]] = defaultdict(list)
    for job_id, state, node, pool, model in (
            Replica.objects.filter(job_id__in=ids, node__isnull=False)
            .order_by("job_id", "-started", "-id")
            .values_list("job_id", "state", "node__name", "node__pool__name", "node__pool__gpu_model")):
        placed[job_id].append((state, node, pool, model))
    open_ids = [r.job.pk for r in rows if r.job.final_cost is None]
    sums: dict[int, tuple[Decimal, str]] = {}
    for job_id, currency, total in (ChargeLine.objects.filter(job_id__in=open_ids).order_by()
                                    .values_list("job_id", "currency").annotate(total=Sum("cost"))):
        # one currency per workspace; quantize drops the digits a database sum may add
        sums[job_id] = (pricing.quantize_money(Decimal(total or 0), currency), currency)
    for row in rows:
        held = placed.get(row.job.pk, [])
        active = [h for h in held if h[0] in ACTIVE_STATES]
        row.running_on = bool(active)
        shown = active or held
        row.nodes = sorted({h[1] for h in shown})
        if held:
            row.pool = row.pool or held[0][2]
            row.gpu_model = row.gpu_model or held[0][3]
        if row.job.final_cost is not None:
            row.cost, row.currency = row.job.final_cost, row.job.currency
        elif row.job.pk in sums:
            row.cost, row.currency = sums[row.job.pk]
    return rows


CSV_HEADER = ["id", "name", "workspace", "queue", "state", "submitter", "priority", "preemptible", "pool",
              "gpu_model", "sharing", "nodes", "submitted", "started", "finished", "pending_reason", "cost",
              "currency", "cost_is_final"]


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
