"""Job lists, the tenants' (`/jobs/`) and the operators' (`/console/jobs/`): filters, search, order and
the rows a page shows. Callers scope first: the tenant list passes the caller's jobs of one workspace
(portal.selectors.jobs_for), the console every job. Reads only."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import F, Q, QuerySet
from django.utils.translation import gettext, gettext_lazy

from billing.api import job_totals
from scheduling.api import SHARING_MODES, clock, formats
from scheduling.models import ACTIVE_STATES, Job, JobState, NodePool, Queue, Replica

# sort key -> the column it orders by; `-key` sorts descending
SORTS = {
    "id": "id", "name": "name", "workspace": "workspace__slug", "queue": "queue__name", "state": "state",
    "submitter": "submitted_by__username", "priority": "priority", "submitted": "created", "started": "started",
    "finished": "finished", "cost": "final_cost",
}
DEFAULT_SORT = "-submitted"
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


@dataclass(frozen=True)
class JobFilters:
    """What a job list shows; every value already checked (the console's JobFilterForm, or the tenant
    list's form built on it)."""

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


def _ran_on(**lookup) -> QuerySet:
    """Ids of the jobs one of whose replicas was placed as `lookup` says (any attempt)."""
    return Replica.objects.filter(**lookup).values("job_id")


def filter_jobs(jobs: QuerySet[Job], filters: JobFilters, *, now: datetime | None = None) -> QuerySet[Job]:
    """The jobs of `jobs` (already scoped by the caller) that match the filters, in the asked order
    (ties: newest first).

    Pool and GPU model: the ones the job was quoted for (its frozen option, else its spec's pin), or
    the ones a replica of it ran on. Sharing: the quoted mode, else its first role's."""
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


# --------------------------------------------------------------------------- rows


@dataclass
class JobRow:
    """A job as the lists and the console's CSV show it."""

    job: Job
    pool: str = ""
    gpu_model: str = ""
    sharing: str = ""
    nodes: list[str] = field(default_factory=list)  # now held (running), else where it last ran
    running_on: bool = False  # `nodes` are held now
    cost: Decimal | None = None  # final cost, else the sum of its ledger lines so far
    currency: str = ""
    timing: str = ""  # waiting, running, ran, waited
    duration: timedelta | None = None  # how long it has been (or was) so

    @property
    def timing_label(self) -> str:
        """timing in the reader's language (timing itself is the page's data-timing value)."""
        return str(TIMING_LABELS.get(self.timing, self.timing))

    @property
    def cost_final(self) -> bool:
        return self.job.final_cost is not None

    @property
    def gpus(self) -> str:
        """What the job asks for, per role: "2 GPUs", "2 × 0.5 GPU", "MIG 3g.40gb", "1–4 × 1 GPU"."""
        return " + ".join(filter(None, (_role_gpus(role) for role in _roles(self.job)))) or gettext("no GPU")

    @property
    def duration_text(self) -> str:
        """"3 d 4 h", "2 h 05 min", "12 min", "40 s", in the reader's language."""
        return "–" if self.duration is None else formats.duration(self.duration.total_seconds())


TIMING_LABELS = {"waiting": gettext_lazy("waiting"), "running": gettext_lazy("running"), "ran": gettext_lazy("ran"),
                 "waited": gettext_lazy("waited")}


def _timing(job: Job, now: datetime) -> tuple[str, timedelta | None]:
    """Waiting since submitted, running since started, ran from start to end; a job that ended
    without starting waited until it ended."""
    if job.is_final:
        if job.started and job.finished:
            return "ran", job.finished - job.started
        return "waited", (job.finished - job.created) if job.finished else None
    if job.started:
        return "running", now - job.started
    return "waiting", now - job.created


def _roles(job: Job) -> list[dict]:
    return [r for r in job.roles if isinstance(r, dict)] if isinstance(job.roles, list) else []


def _role_gpus(role: dict) -> str:
    """One role's ask: what each replica holds, times its replicas when more than one."""
    count = int(role.get("num_gpus") or 0)
    if not count:
        return ""
    mode = role.get("mode") or "exclusive"
    if mode == "fraction":
        each = f"{int(role.get('gpu_milli') or 0) / 1000:g} GPU"
    elif mode == "mig":
        each = f"MIG {role.get('mig_profile') or ''}".strip()
    else:
        each = f"{count} GPU{'s' if count > 1 else ''}"
    if mode in ("fraction", "mig") and count > 1:
        each = f"{count} × {each}"
    low = int(role.get("min_replicas") or 1)
    high = int(role.get("max_replicas") or low)
    replicas = f"{low}" if low == high else f"{low}–{high}"
    return each if replicas == "1" else f"{replicas} × {each}"


def _asked(job: Job) -> tuple[str, str, str]:
    """Pool, GPU model and sharing mode the job was quoted for (else its first role's request)."""
    quote = job.quote if isinstance(job.quote, dict) else {}
    roles = _roles(job)
    role = roles[0] if roles else {}
    return (str(quote.get("pool") or role.get("pool") or ""), str(quote.get("gpu_model") or role.get("gpu_model") or ""),
            str(quote.get("sharing") or role.get("mode") or ""))


# What a row never shows: left unread, the spec above all (a list decoded each job's JSON columns).
NOT_LISTED = ("spec_text", "spec", "topology", "after", "array", "end_params")


def job_rows(jobs: Iterable[Job], *, now: datetime | None = None) -> list[JobRow]:
    """Rows for a page (or a chunk) of jobs: two queries for all of them, whatever their number. Cost:
    the final cost once the job ended, else the sum of its ledger lines so far (billing's job_totals)."""
    now = now or clock.now()
    rows = []
    for job in jobs:
        timing, duration = _timing(job, now)
        rows.append(JobRow(job, *_asked(job), timing=timing, duration=duration))
    ids = [r.job.pk for r in rows]
    placed: dict[int, list[tuple]] = defaultdict(list)
    for job_id, state, node, pool, model in (
            Replica.objects.filter(job_id__in=ids, node__isnull=False)
            .order_by("job_id", "-started", "-id")
            .values_list("job_id", "state", "node__name", "node__pool__name", "node__pool__gpu_model")):
        placed[job_id].append((state, node, pool, model))
    sums = job_totals(r.job.pk for r in rows if r.job.final_cost is None)
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


def workspace_filter_choices(workspace) -> dict[str, list[str]]:
    """The values the tenant list's selects offer for one workspace: its queues (open to it now, or
    holding its jobs), the cluster's pools and GPU models, and the people who submitted its jobs (a member
    who never submitted would only ever filter to an empty list)."""
    jobs = Job.objects.filter(workspace=workspace).order_by()
    queues = set(Queue.objects.filter(queueaccess__workspace=workspace).values_list("name", flat=True))
    queues |= set(jobs.values_list("queue__name", flat=True).distinct())
    people = {name for name in jobs.values_list("submitted_by__username", flat=True).distinct() if name}
    return {
        "queue": sorted(queues),
        "pool": list(NodePool.objects.order_by("name").values_list("name", flat=True)),
        "gpu_model": sorted(set(NodePool.objects.values_list("gpu_model", flat=True))),
        "state": list(JobState.values),
        "sharing": list(SHARING_MODES),
        "submitter": sorted(people),
    }


# --------------------------------------------------------------------------- links


def list_query(params, *, drop: Iterable[str] = ("page", "partial"), **changes) -> str:
    """The list's query string without `drop` (paging, the live partial) and with `changes`."""
    query = params.copy()
    for key in drop:
        query.pop(key, None)
    for key, value in changes.items():
        query[key] = value
    return query.urlencode()


def sort_links(params, current: str) -> dict[str, dict[str, str]]:
    """Per column: the link that sorts by it (again: the other way) and the way it sorts now."""
    links = {}
    for name in SORTS:
        way = "asc" if current == name else "desc" if current == f"-{name}" else ""
        links[name] = {"url": "?" + list_query(params, sort=f"-{name}" if way == "asc" else name), "way": way}
    return links
