"""Reads for the operator console."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, Min, Q, QuerySet
from django.utils import translation
from django.utils.translation import gettext, ngettext

from billing.api import (
    QuoteError,
    exports,
    idle_cost,
    platform_tz,
    pool_offers,
    pool_problem_text,
    pool_problems,
    price_tables,
    quote,
    refusals_text,
    savings_by_period,
    tradeoff_text,
    workspace_currencies,
)
from billing.models import ChargeLine, NodeToken, PriceTable
from portal import history_catalogue as texts
from portal.console import advice as advice_rules
from portal.console.fragmentation import FreeGpu, PoolFragmentation, fragmentation
from portal.console.models import AuditEntry, QueueAllocationSample, action_label
from portal.models import Workspace
from scheduling.api import (
    MILLI_PER_GPU,
    GpuHolds,
    QueueShare,
    clock,
    cluster_view,
    job_reason,
    mode_of,
    queue_shares,
)
from scheduling.api import cluster_model as cm
from scheduling.forms import labels_text
from scheduling.models import (
    ACTIVE_STATES,
    FINAL_STATES,
    Job,
    JobState,
    Node,
    NodePool,
    Queue,
    QueueAccess,
    Replica,
)

ZERO = Decimal(0)


# --------------------------------------------------------------------------- cluster map


def heatmap(pools: list[dict]) -> dict:
    """Allocation of every GPU (0..1) as a plotly heatmap: one row per node, one column per GPU index."""
    rows = [(p["pool"].name, n) for p in pools for n in p["nodes"]]
    width = max((len(n["gpus"]) for _, n in rows), default=0)
    z, text, y = [], [], []
    for pool, node in rows:
        y.append(f"{pool} · {node['name']}{' ' + gettext('(cordoned)') if node['cordoned'] else ''}"
                 f"{' ' + gettext('(not ready)') if not node['ready'] else ''}")
        zr, tr = [], []
        for i in range(width):
            gpu = node["gpus"][i] if i < len(node["gpus"]) else None
            zr.append(None if gpu is None else gpu["used_milli"] / MILLI_PER_GPU)
            tr.append("" if gpu is None else "<br>".join(
                f"{h['workspace']}/{h['name']} #{h['job']} {h['mig'] or h['kind']} {h['milli']}m" for h in gpu["holders"]
            ) or gettext("free"))
        z.append(zr)
        text.append(tr)
    return {"z": z, "x": [f"GPU {i}" for i in range(width)], "y": y, "text": text}


def pool_problem_texts() -> dict[str, list[dict]]:
    """Per pool name, why quotes leave it out ({"code", "text"} in the reader's language)."""
    return {name: [{"code": n.code, "text": pool_problem_text(n.code, n.params, n.code)} for n in notes]
            for name, notes in pool_problems().items()}


def nodes_view() -> list[dict]:
    """cluster_view() with, per node, each job that holds GPUs there once (with its GPU indices)."""
    pools = cluster_view()
    labels = dict(Node.objects.values_list("name", "labels"))
    for p in pools:
        for node in p["nodes"]:
            node["labels"] = labels.get(node["name"]) or {}
            node["labels_text"] = labels_text(node["labels"])
            jobs: dict[int, dict] = {}
            for gpu in node["gpus"]:
                for h in gpu["holders"]:
                    entry = jobs.setdefault(h["job"], {**h, "gpus": []})
                    entry["gpus"].append(gpu["index"])
            node["jobs"] = sorted(jobs.values(), key=lambda j: j["job"])
    return pools


# --------------------------------------------------------------------------- queues


@dataclass(frozen=True)
class QueueLine:
    name: str
    parent: str | None
    depth: int
    deserved: Decimal
    limit: Decimal | None
    weight: Decimal
    priority: int
    fair_share: float          # GPUs
    allocated: float           # GPUs held by the queue's subtree
    pending_demand: float      # GPUs the subtree's pending jobs need to start (gang minimum)
    demand: float              # GPUs the subtree's jobs ask for at most (running + pending, elastic maxima)

    @property
    def borrowed(self) -> float:
        """Held above the deserved quota (over-quota, reclaimable)."""
        return max(0.0, self.allocated - float(self.deserved))

    @property
    def lent(self) -> float:
        """Deserved but unused, so others may borrow it."""
        return max(0.0, float(self.deserved) - self.allocated)


def queue_lines(now: datetime | None = None) -> list[QueueLine]:
    """Every queue in tree order with its fair share (water-filling over the cluster's capacity and
    the jobs' current demand, exactly as the scheduler computes it), allocation and demand."""
    shares = queue_shares(now or clock.now())
    none = QueueShare(0.0, 0.0, 0.0, 0.0)
    queues = {q.name: q for q in Queue.objects.select_related("parent")}
    children: dict[str | None, list[str]] = defaultdict(list)
    for q in queues.values():
        children[q.parent.name if q.parent else None].append(q.name)
    lines: list[QueueLine] = []

    def walk(parent: str | None, depth: int) -> None:
        for name in sorted(children.get(parent, [])):
            q, share = queues[name], shares.get(name, none)
            lines.append(QueueLine(
                name=name, parent=parent, depth=depth, deserved=q.deserved_gpus, limit=q.limit_gpus,
                weight=q.over_quota_weight, priority=q.priority, fair_share=share.fair_share,
                allocated=share.allocated, pending_demand=share.pending_demand, demand=share.demand,
            ))
            walk(name, depth + 1)

    walk(None, 0)
    return lines


# --------------------------------------------------------------------------- pending jobs, fragmentation


def pending_jobs(limit: int = 100) -> QuerySet[Job]:
    return Job.objects.filter(state=JobState.PENDING).select_related("workspace", "queue").order_by("created", "id")[:limit]


def _pending_requests() -> list[cm.Request]:
    fields = ("mode", "num_gpus", "gpu_milli", "gpu_mem_mib", "mig_profile", "cpu_milli", "mem_mib", "vendor",
              "gpu_model", "pool")
    out = []
    for roles in Job.objects.filter(state=JobState.PENDING).values_list("roles", flat=True):
        for role in roles or []:
            out.append(cm.Request(**{f: role[f] for f in fields if f in role}))
    return out


def free_gpus() -> tuple[list[cm.Pool], list[FreeGpu]]:
    pools = {p.pk: p for p in NodePool.objects.all()}
    core = {pk: p.as_core() for pk, p in pools.items()}
    held: dict[tuple[int, int], GpuHolds] = defaultdict(GpuHolds)
    for node_id, gpus, slice_ in Replica.objects.filter(state__in=ACTIVE_STATES, node__isnull=False).values_list(
            "node_id", "gpu_indices", "slice"):
        s = slice_ or {}
        mode = mode_of(s)
        for g in gpus:
            mode.tally(s, held[(node_id, g)])
    nodes = Node.objects.filter(ready=True, agent_silent=False, cordoned=False).prefetch_related("gpus")
    out = []
    for node in nodes:
        pool = core[node.pool_id]
        whole_free = sum(1 for g in node.gpus.all() if held[(node.pk, g.index)].milli == 0
                         and pool.gpu_mode == "whole")
        for g in node.gpus.all():
            on_gpu = held[(node.pk, g.index)]
            free_mig = list(pool.mig_layout) if pool.gpu_mode == "mig" else []
            for p in on_gpu.mig:
                if p in free_mig:
                    free_mig.remove(p)
            out.append(FreeGpu(
                pool=pool.name, node=node.name, index=g.index,
                free_milli=max(0, MILLI_PER_GPU - on_gpu.milli) if pool.gpu_mode == "whole" else 0,
                free_mem_mib=max(0, (g.memory_mib or pool.gpu_memory_mib) - on_gpu.mem_mib),
                free_mig=tuple(free_mig),
                free_slots=max(0, pool.timeslice_replicas - on_gpu.slots) if pool.gpu_mode == "timeslice" else 0,
                node_free_whole=whole_free,
            ))
    return list(core.values()), out


def fragmentation_report() -> list[PoolFragmentation]:
    pools, gpus = free_gpus()
    return fragmentation(sorted(pools, key=lambda p: p.name), gpus, _pending_requests())


# --------------------------------------------------------------------------- allocation vs utilisation


@dataclass
class PoolUsage:
    pool: str
    hours: list[datetime]
    allocated: list[float]
    used: list[float]
    allocated_total: Decimal
    used_total: Decimal
    waste_gpu_hours: Decimal
    waste_costs: dict[str, Decimal]  # currency -> cost of the idle share: a pool serves workspaces of several

    @property
    def waste_by_currency(self) -> list[tuple[str, Decimal]]:
        return sorted(self.waste_costs.items())

    @property
    def waste_cost(self) -> Decimal | None:
        """The idle share's cost where the pool's lines are in one currency (a job's are)."""
        return sum(self.waste_costs.values(), ZERO) if len(self.waste_costs) <= 1 else None

    @property
    def currency(self) -> str:
        return ", ".join(sorted(self.waste_costs))


def usage_by_pool(*, days: int = 2, now: datetime | None = None) -> list[PoolUsage]:
    """Allocated vs used GPU-hours per pool and hour (from the ledger's lines); the waste between them
    in GPU-hours and money (each line's cost x its idle share)."""
    now = now or clock.now()
    start = (now - timedelta(days=days)).replace(minute=0, second=0, microsecond=0)
    rows = list(ChargeLine.objects.filter(hour__gte=start, category=ChargeLine.Category.USAGE).values_list(
        "hour", "pool", "allocated_gpu_hours", "used_gpu_hours", "cost", "currency"))
    hours = []
    h = start
    while h <= now:
        hours.append(h)
        h += timedelta(hours=1)
    return pool_usage(rows, hours)


def pool_usage(rows, hours: list[datetime]) -> list[PoolUsage]:
    """(hour, pool, allocated, used, cost, currency) ledger rows summed per pool: per hour of `hours`
    (rows of other hours count in the totals only) and in total, with the idle share's cost."""
    index = {h: i for i, h in enumerate(hours)}
    result: dict[str, PoolUsage] = {}
    for hour, pool, alloc, used, cost, currency in rows:
        u = result.get(pool)
        if u is None:
            u = result[pool] = PoolUsage(pool, hours, [0.0] * len(hours), [0.0] * len(hours),
                                         ZERO, ZERO, ZERO, {})
        i = index.get(hour)
        if i is not None:
            u.allocated[i] += float(alloc)
            u.used[i] += float(used)
        u.allocated_total += alloc
        u.used_total += used
        idle = max(ZERO, alloc - used)
        u.waste_gpu_hours += idle
        u.waste_costs[currency] = u.waste_costs.get(currency, ZERO) + idle_cost(cost, alloc, idle)
    return [result[k] for k in sorted(result)]


# --------------------------------------------------------------------------- GPU selection advice


@dataclass(frozen=True)
class AdviceOption:
    pool: str
    gpu_model: str
    sharing: str
    spot: bool
    gpus: str                 # what it holds, in words
    price_per_hour: Decimal
    price_per_hour_offpeak: Decimal
    currency: str
    can_start_now: bool
    tradeoffs: tuple[str, ...]  # in the reader's language


def gpu_advice(params_b, task: str, precision: str, *, currency: str | None = None, now: datetime | None = None
               ) -> tuple[advice_rules.MemoryNeed, list[AdviceOption], list[str]]:
    """The memory the model needs, every pool / sharing mode that fits, cheapest first at the prices of
    `currency`'s table in force (default: the platform's), and why the other pools cannot ("pool: why"),
    in the reader's language. Raises ValueError naming the bad field."""
    need = advice_rules.memory_needed(params_b, task, precision)
    now = now or clock.now()
    tables = price_tables(currency)
    if not tables:
        return need, [], [gettext("no price table: nothing to compare")]
    from billing.api import table_in_force

    rates = table_in_force(tables, now).rates
    options, refused = [], []
    for offer in pool_offers():
        if offer.total_gpus == 0:
            continue
        spec = advice_rules.spec_for_pool(need, offer)
        try:
            q = quote(spec, [offer], rates, now=now, tz=platform_tz())
        except QuoteError as error:
            refused.append(f"{offer.name}: {refusals_text(error.refusals, pool=offer.name) or error}")
            continue
        except ValueError as error:
            refused.append(f"{offer.name}: {error}")
            continue
        for o in q.options:
            if o.when != "now":
                continue
            role = o.roles[0]
            held = (f"{role.num_gpus} × {role.min_replicas}" if role.sharing == "exclusive" and role.min_replicas > 1
                    else f"{role.gpu_share.normalize():f} GPU" + (f" ({role.mig_profile})" if role.mig_profile else ""))
            options.append(AdviceOption(o.pool, o.gpu_model, o.sharing, o.spot, held, o.price_per_hour,
                                        o.price_per_hour_offpeak, o.currency, o.can_start_now,
                                        tuple(tradeoff_text(n.code, n.params, n.text) for n in o.tradeoff_notes)))
    options.sort(key=lambda o: (o.price_per_hour, o.pool, o.sharing))
    return need, options, refused


# --------------------------------------------------------------------------- price tables, tokens, audit


def price_table_rows(now: datetime | None = None) -> list[dict]:
    """Every version, by currency (each currency is a timeline of its own), newest first."""
    now = now or clock.now()
    tables = list(PriceTable.objects.prefetch_related("gpu_rates", "storage_rates").order_by("currency", "-effective_from"))
    in_force = {}
    for t in tables:
        if t.effective_from <= now:
            in_force.setdefault(t.currency, t)
    return [{"table": t, "status": "scheduled" if t.effective_from > now else
             ("in force" if in_force.get(t.currency) == t else "past")} for t in tables]


def workspace_currency_rows(now: datetime | None = None) -> list[dict]:
    """Each currency with a timeline, and the workspaces billed in it now."""
    workspaces = list(Workspace.objects.order_by("slug"))
    billed_in = workspace_currencies(workspaces, at=now)
    currencies = sorted(set(PriceTable.objects.values_list("currency", flat=True)) | set(billed_in.values()))
    return [{"currency": c, "workspaces": [w for w in workspaces if billed_in[w.pk] == c]} for c in currencies]


def tokens_by_node() -> list[dict]:
    tokens = defaultdict(list)
    for t in NodeToken.objects.select_related("node"):
        tokens[t.node_id].append(t)
    return [{"node": n, "tokens": tokens[n.pk]} for n in Node.objects.select_related("pool")]


AUDIT_FILTERS = ("user", "action", "target", "source", "q", "start", "end")


def audit_entries(params) -> QuerySet[AuditEntry]:
    entries = AuditEntry.objects.all()
    if params.get("user"):
        entries = entries.filter(username=params["user"])
    if params.get("action"):
        entries = entries.filter(action=params["action"])
    if params.get("target"):
        entries = entries.filter(target_type=params["target"])
    if params.get("source"):
        entries = entries.filter(source=params["source"])
    if params.get("q"):
        q = params["q"]
        entries = entries.filter(Q(target_repr__icontains=q) | Q(message__icontains=q) | Q(target_id=q))
    for name, lookup in (("start", "time__date__gte"), ("end", "time__date__lte")):
        if params.get(name):
            try:
                entries = entries.filter(**{lookup: date.fromisoformat(params[name])})
            except ValueError:
                raise ValueError(gettext("%(field)s: %(value)s is not a date (YYYY-MM-DD)") % {
                    "field": name, "value": repr(params[name])}) from None
    return entries


AUDIT_CSV_HEADER = ("time_utc", "user", "source", "action", "target_type", "target_id", "target", "changes",
                    "message", "message_text")


def audit_csv_lines(entries: QuerySet[AuditEntry], language: str = "en") -> Iterator[str]:
    """CSV lines, header first, oldest entry first: `message` in English as recorded, `message_text` in
    `language` (the reader's, taken when asked: the lines are written after the view returned)."""
    buffer = io.StringIO()
    writer = exports.SafeCsvWriter(buffer, AUDIT_CSV_HEADER, numbers=())  # all of it text

    def line(row) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(row)
        return buffer.getvalue()

    yield line(AUDIT_CSV_HEADER)
    for e in entries.order_by("time", "pk").iterator(chunk_size=2000):
        with translation.override(language):
            message_text = e.message_text
        yield line((e.time.astimezone(UTC).isoformat(), e.username, e.source, e.action, e.target_type, e.target_id,
                    e.target_repr, json.dumps(e.changes, sort_keys=True, default=str) if e.changes else "",
                    e.message, message_text))


def audit_choices() -> dict[str, list]:
    """The filters' values; actions as (value, label in the active language)."""
    base = AuditEntry.objects.order_by()
    choices = {k: sorted(set(base.values_list(f, flat=True).distinct()))
               for k, f in (("users", "username"), ("actions", "action"), ("targets", "target_type"))}
    choices["actions"] = [(a, action_label(a)) for a in choices["actions"]]
    return choices


# --------------------------------------------------------------------------- queue tree editor


@dataclass(frozen=True)
class PendingReason:
    code: str       # a code of core.reasons.CODES; "" while no cycle has looked at the job
    jobs: int
    example: str    # one job's reason in the reader's language (the figures differ from job to job)


@dataclass(frozen=True)
class QueuePending:
    jobs: int = 0
    reasons: tuple[PendingReason, ...] = ()


def _reasons_read(pairs: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Each (code, stored English text) in the reader's language, from the figures of one job that waits so."""
    if not pairs:
        return {}
    first = (Job.objects.filter(state=JobState.PENDING, pending_reason__in={text for _, text in pairs}).order_by()
             .values("pending_code", "pending_reason").annotate(first=Min("id")).values_list("first", flat=True))
    jobs = Job.objects.filter(pk__in=list(first)).only("pending_code", "pending_params", "pending_reason")
    return {(j.pending_code, j.pending_reason): job_reason(j) for j in jobs}


def pending_by_queue(top: int = 3) -> dict[str, QueuePending]:
    """Per queue, the pending jobs of its subtree and their `top` most common reasons (by pending code)."""
    parents = dict(Queue.objects.values_list("name", "parent__name"))
    jobs: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    examples: dict[tuple[str, str], str] = {}
    rows = (Job.objects.filter(state=JobState.PENDING).order_by().values("queue__name", "pending_code")
            .annotate(jobs=Count("id"), example=Min("pending_reason")))
    for row in rows:
        code, name, seen = row["pending_code"], row["queue__name"], set()
        while name is not None and name not in seen:
            seen.add(name)
            jobs[name][code] += row["jobs"]
            example = row["example"] or texts.NOT_LOOKED_AT
            examples[(name, code)] = min(examples.get((name, code), example), example)
            name = parents.get(name)
    read = _reasons_read({(code, text) for (_, code), text in examples.items() if text != texts.NOT_LOOKED_AT})

    def shown(name: str, code: str) -> str:
        text = examples[(name, code)]
        return gettext(texts.NOT_LOOKED_AT) if text == texts.NOT_LOOKED_AT else read.get((code, text), text)

    out = {}
    for name, by_code in jobs.items():
        ranked = sorted(by_code.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        out[name] = QueuePending(sum(by_code.values()),
                                 tuple(PendingReason(code, n, shown(name, code)) for code, n in ranked))
    return out


@dataclass(frozen=True)
class QueueTreeRow:
    line: QueueLine
    pending: QueuePending
    sub_deserved: Decimal | None   # what its sub-queues deserve together; None for a leaf
    workspaces: tuple[str, ...]    # the workspaces that submit to it


def queue_tree(now: datetime | None = None) -> list[QueueTreeRow]:
    """The queue tree in order, each queue with its rules' figures, its share and allocation now (queue_lines)
    and its subtree's pending jobs with their main reasons. Raises ValueError for a tree the scheduler refuses."""
    lines = queue_lines(now)
    pending = pending_by_queue()
    sub_deserved: dict[str, Decimal] = defaultdict(Decimal)
    for line in lines:
        if line.parent is not None:
            sub_deserved[line.parent] += line.deserved
    access = defaultdict(list)
    for queue, workspace in QueueAccess.objects.values_list("queue__name", "workspace__slug").order_by("workspace__slug"):
        access[queue].append(workspace)
    return [QueueTreeRow(line, pending.get(line.name, QueuePending()), sub_deserved.get(line.name),
                         tuple(access[line.name])) for line in lines]


@dataclass(frozen=True)
class QueueDeletion:
    refusals: tuple[str, ...]        # why it cannot be deleted; empty: it can
    workspaces: tuple[str, ...]      # the workspaces that would lose it
    defaults: tuple[str, ...]        # ... of which it is the default queue


def queue_deletion(queue: Queue) -> QueueDeletion:
    """What deleting the queue would do, or why it is refused (sub-queues; jobs, which keep it for their costs)."""
    refusals = []
    children = sorted(queue.children.values_list("name", flat=True))
    if children:
        refusals.append(gettext("it has sub-queues (%(queues)s): move or delete them first") % {
            "queues": ", ".join(children)})
    jobs = queue.jobs.count()
    if jobs:
        unfinished = queue.jobs.exclude(state__in=FINAL_STATES).count()
        refusals.append(ngettext(
            "it holds %(jobs)s job (%(unfinished)s not finished); jobs keep their queue for their history and costs, "
            "so a queue that ever held one stays",
            "it holds %(jobs)s jobs (%(unfinished)s not finished); jobs keep their queue for their history and costs, "
            "so a queue that ever held one stays", jobs) % {"jobs": jobs, "unfinished": unfinished})
    access = list(QueueAccess.objects.filter(queue=queue).values_list("workspace__slug", "is_default")
                  .order_by("workspace__slug"))
    return QueueDeletion(tuple(refusals), tuple(s for s, _ in access), tuple(s for s, d in access if d))


# --------------------------------------------------------------------------- queue allocation history


@dataclass(frozen=True)
class AllocationHistory:
    queue: str
    start: datetime
    end: datetime
    samples: int
    times: list[datetime | None]   # None: a gap in the sampling (the chart breaks its lines there)
    allocated: list[float | None]
    deserved: list[float | None]
    fair_share: list[float | None]

    @property
    def peak(self) -> float:
        return max((a for a in self.allocated if a is not None), default=0.0)

    @property
    def average(self) -> float:
        held = [a for a in self.allocated if a is not None]
        return sum(held) / len(held) if held else 0.0


def queue_allocation_history(queue: Queue, *, days: int = 7, now: datetime | None = None,
                             interval_s: float | None = None) -> AllocationHistory:
    """The queue's samples of the last `days` days, oldest first; a silence longer than two sampling
    intervals becomes a gap."""
    now = now or clock.now()
    start = now - timedelta(days=days)
    gap = timedelta(seconds=2 * (interval_s or settings.QUEUE_HISTORY_INTERVAL_S))
    rows = QueueAllocationSample.objects.filter(queue=queue, time__gt=start, time__lte=now).order_by("time")
    history = AllocationHistory(queue.name, start, now, 0, [], [], [], [])
    last = None
    for time, allocated, deserved, fair_share in rows.values_list("time", "allocated_gpus", "deserved_gpus",
                                                                  "fair_share_gpus"):
        if last is not None and time - last > gap:
            for series in (history.times, history.allocated, history.deserved, history.fair_share):
                series.append(None)
        history.times.append(time)
        history.allocated.append(float(allocated))
        history.deserved.append(float(deserved))
        history.fair_share.append(float(fair_share))
        last = time
    return replace(history, samples=sum(1 for t in history.times if t is not None))


def platform_savings(months: int = 3) -> list[dict]:
    """Every workspace together, per month: billed against exclusive whole GPUs at list price."""
    first = clock.now().astimezone(platform_tz()).date().replace(day=1)
    for _ in range(months - 1):
        first = (first - timedelta(days=1)).replace(day=1)
    return list(reversed(savings_by_period(ChargeLine.objects.filter(period__gte=first), per_workspace=False)))
