"""The console's writes. Each checks its input (ConsoleError names the field), changes the
database in one transaction, and records who changed what in the audit log."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from billing import pricing
from billing.models import GpuRate, NodeToken, PriceTable
from billing.pricing import offpeak
from portal.api.agent import create_node_token as _new_token
from portal.console import audit
from portal.console.queue_tree import QueueRow, validate_queue
from portal.models import Membership, Role, Workspace
from scheduling import clock
from scheduling.core import MIG_PROFILES
from scheduling.cycle.snapshot import core_pool
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
from scheduling.services import record_event, requeue_job

QUEUE_FIELDS = ("name", "parent", "deserved_gpus", "over_quota_weight", "limit_gpus", "priority", "preemptible_only")
POOL_FIELDS = ("placement", "sharing", "timeslice_replicas", "mig_layout", "spot")
POOL_LAYOUT_FIELDS = ("sharing", "timeslice_replicas", "mig_layout")
PRICE_FIELDS = ("name", "currency", "effective_from", "cpu_core_hour", "memory_gib_hour", "priority_base",
                "priority_step", "offpeak_windows", "offpeak_discount", "spot_discount")
# MIG profiles by card size: 40 GB cards (A100-40GB) and 80 GB cards (A100/H100-80GB).
MIG_FAMILIES = {40 * 1024: ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
                80 * 1024: ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")}


class ConsoleError(ValueError):
    """Bad input: errors by field name ("" for the whole form). Nothing was changed."""

    def __init__(self, errors: Mapping[str, list[str] | str]):
        self.errors = {k: [v] if isinstance(v, str) else list(v) for k, v in errors.items()}
        super().__init__("; ".join(f"{k}: {m}" if k else m for k, ms in self.errors.items() for m in ms))


def _decimal(data: Mapping[str, Any], name: str, errors: dict, *, required: bool = True) -> Decimal | None:
    raw = data.get(name)
    if raw in (None, ""):
        if required:
            errors.setdefault(name, []).append("is required")
        return None
    try:
        value = Decimal(str(raw).strip())
    except (InvalidOperation, ValueError):
        errors.setdefault(name, []).append(f"{raw!r} is not a number")
        return None
    if not value.is_finite():
        errors.setdefault(name, []).append("must be a finite number")
        return None
    return value


# --------------------------------------------------------------------------- queues


def _busy_queue_ids() -> set[int]:
    """Queues that must stay leaves: they hold unfinished jobs, or workspaces submit to them."""
    jobs = Job.objects.exclude(state__in=FINAL_STATES).values_list("queue_id", flat=True).distinct()
    return set(jobs) | set(QueueAccess.objects.values_list("queue_id", flat=True).distinct())


def _queue_rows(exclude: int | None = None) -> list[QueueRow]:
    busy = _busy_queue_ids()
    names = dict(Queue.objects.values_list("pk", "name"))
    return [QueueRow(q.name, names.get(q.parent_id), q.deserved_gpus, q.over_quota_weight, q.limit_gpus,
                     q.pk in busy)
            for q in Queue.objects.exclude(pk=exclude)]


@transaction.atomic
def save_queue(user, queue: Queue | None, data: Mapping[str, Any]) -> Queue:
    """Create (queue None) or change a queue; the whole tree must stay valid."""
    errors: dict[str, list[str]] = {}
    name = str(data.get("name", queue.name if queue else "")).strip()
    if not name:
        errors["name"] = ["is required"]
    elif Queue.objects.filter(name=name).exclude(pk=getattr(queue, "pk", None)).exists():
        errors["name"] = [f"a queue named '{name}' exists"]
    parent_name = str(data.get("parent") or "").strip() or None
    parent = Queue.objects.filter(name=parent_name).first() if parent_name else None
    deserved = _decimal(data, "deserved_gpus", errors)
    weight = _decimal(data, "over_quota_weight", errors)
    limit = _decimal(data, "limit_gpus", errors, required=False)
    try:
        priority = int(str(data.get("priority") or 0))
    except ValueError:
        errors.setdefault("priority", []).append(f"{data.get('priority')!r} is not a whole number")
        priority = 0
    if errors:
        raise ConsoleError(errors)
    busy = bool(queue) and queue.pk in _busy_queue_ids()
    rows = _queue_rows(exclude=getattr(queue, "pk", None))
    if queue is not None:  # sub-queues point at the old name
        rows = [QueueRow(r.name, name if r.parent == queue.name else r.parent, r.deserved_gpus,
                         r.over_quota_weight, r.limit_gpus, r.has_jobs) for r in rows]
    rows.append(QueueRow(name, parent_name, deserved, weight, limit, busy))
    errors = validate_queue(rows, name)
    if errors:
        raise ConsoleError(errors)
    before = audit.snapshot(queue, QUEUE_FIELDS) if queue else {}
    queue = queue or Queue()
    queue.name, queue.parent, queue.deserved_gpus, queue.over_quota_weight = name, parent, deserved, weight
    queue.limit_gpus, queue.priority = limit, priority
    queue.preemptible_only = str(data.get("preemptible_only", "")).lower() in ("1", "true", "on", "yes")
    created = queue.pk is None
    queue.save()
    changes = audit.diff(before, audit.snapshot(queue, QUEUE_FIELDS))
    audit.record(user, "create" if created else "change", queue, changes=changes)
    return queue


@transaction.atomic
def delete_queue(user, queue: Queue) -> None:
    if queue.children.exists():
        raise ConsoleError({"": f"queue '{queue.name}' has sub-queues: move or delete them first"})
    if queue.jobs.exists():
        raise ConsoleError({"": f"queue '{queue.name}' has jobs (they keep it for billing): it cannot be deleted"})
    audit.record(user, "delete", queue, changes={k: [v, None] for k, v in audit.snapshot(queue, QUEUE_FIELDS).items()})
    queue.delete()


# --------------------------------------------------------------------------- node pools


def _mig_layout(raw: Any) -> list[str]:
    if isinstance(raw, list | tuple):
        return [str(p).strip() for p in raw if str(p).strip()]
    return [p.strip() for p in str(raw or "").split(",") if p.strip()]


def pool_errors(pool: NodePool) -> dict[str, list[str]]:
    """What the scheduler core would refuse in this pool, by field (pure check, nothing saved)."""
    errors: dict[str, list[str]] = {}
    if pool.sharing == "mig":
        if pool.vendor != "nvidia":
            errors["sharing"] = ["MIG is an NVIDIA feature"]
        family = MIG_FAMILIES.get(pool.gpu_memory_mib)
        unknown = [p for p in pool.mig_layout if p not in MIG_PROFILES]
        if unknown:
            errors["mig_layout"] = [f"unknown MIG profiles {', '.join(unknown)}; known: {', '.join(MIG_PROFILES)}"]
        elif family is None:
            errors["mig_layout"] = [f"{pool.gpu_model} ({pool.gpu_memory_mib // 1024} GiB) has no MIG profiles; "
                                    "MIG needs a 40 GB or 80 GB card"]
        elif any(p not in family for p in pool.mig_layout):
            wrong = [p for p in pool.mig_layout if p not in family]
            errors["mig_layout"] = [f"{', '.join(wrong)} are not profiles of a {pool.gpu_memory_mib // 1024} GB card "
                                    f"(those are {', '.join(family)})"]
    if not errors:
        try:
            core_pool(pool)
        except ValueError as error:
            text = str(error).split(": ", 1)[-1]
            where = ("mig_layout" if "mig" in text.lower() else "timeslice_replicas" if "timeslice" in text
                     else "sharing")
            errors[where] = [text]
    return errors


@transaction.atomic
def save_pool(user, pool: NodePool, data: Mapping[str, Any]) -> NodePool:
    """Change a pool's policy, sharing mode, time-slice replicas, MIG layout or spot flag."""
    pool = NodePool.objects.select_for_update().get(pk=pool.pk)
    before = audit.snapshot(pool, POOL_FIELDS)
    errors: dict[str, list[str]] = {}
    placement = data.get("placement", pool.placement)
    if placement not in dict(NodePool._meta.get_field("placement").choices):
        errors["placement"] = [f"{placement!r} is not a placement policy"]
    sharing = data.get("sharing", pool.sharing)
    if sharing not in dict(NodePool._meta.get_field("sharing").choices):
        errors["sharing"] = [f"{sharing!r} is not a sharing mode"]
    try:
        replicas = int(str(data.get("timeslice_replicas", pool.timeslice_replicas)))
        if not 1 <= replicas <= 64:
            raise ValueError
    except ValueError:
        errors["timeslice_replicas"] = ["must be a whole number from 1 to 64"]
        replicas = pool.timeslice_replicas
    if errors:
        raise ConsoleError(errors)
    pool.placement, pool.sharing, pool.timeslice_replicas = placement, sharing, replicas
    pool.mig_layout = _mig_layout(data.get("mig_layout", pool.mig_layout)) if sharing == "mig" else []
    pool.spot = str(data.get("spot", "")).lower() in ("1", "true", "on", "yes")
    errors = pool_errors(pool)
    if errors:
        raise ConsoleError(errors)
    after = audit.snapshot(pool, POOL_FIELDS)
    relayout = [f for f in POOL_LAYOUT_FIELDS if before[f] != after[f]]
    running = Replica.objects.filter(node__pool=pool, state__in=ACTIVE_STATES).count()
    if relayout and running:
        raise ConsoleError({relayout[0]: f"{running} replicas hold slices of this pool's GPUs: drain its nodes "
                                         f"before changing {', '.join(relayout)}"})
    pool.save()
    audit.record(user, "change", pool, changes=audit.diff(before, after))
    return pool


# --------------------------------------------------------------------------- nodes


@transaction.atomic
def set_cordoned(user, node: Node, cordoned: bool) -> Node:
    if node.cordoned != cordoned:
        Node.objects.filter(pk=node.pk).update(cordoned=cordoned)
        audit.record(user, "cordon" if cordoned else "uncordon", node, changes={"cordoned": [not cordoned, cordoned]})
        node.cordoned = cordoned
    return node


@dataclass(frozen=True)
class DrainItem:
    job_id: int
    job_name: str
    workspace: str
    replica: str
    slice: str
    state: str


@dataclass
class DrainPreview:
    node: Node
    moves: list[DrainItem] = field(default_factory=list)   # preemptible: evicted and requeued
    stays: list[DrainItem] = field(default_factory=list)   # not preemptible: finishes where it is

    @property
    def jobs_moving(self) -> list[int]:
        return sorted({i.job_id for i in self.moves})


def drain_preview(node: Node) -> DrainPreview:
    """What a drain would do, without doing it."""
    preview = DrainPreview(node)
    replicas = Replica.objects.filter(node=node, state__in=ACTIVE_STATES).select_related("job__workspace")
    for r in replicas.order_by("job_id", "role", "index"):
        item = DrainItem(r.job_id, r.job.name, r.job.workspace.slug, f"{r.role}-{r.index}", r.slice_label, r.state)
        (preview.moves if r.job.preemptible else preview.stays).append(item)
    return preview


@transaction.atomic
def drain(user, node: Node, now: datetime | None = None) -> DrainPreview:
    """Cordon the node and evict its preemptible replicas (Preempted, end reason "drain"); their jobs
    go back to their queue. Non-preemptible work finishes where it is. The next scheduling cycle
    stops the evicted pods (reconcile), exactly as after a cancel, and places the jobs elsewhere."""
    now = now or clock.now()
    node = Node.objects.select_for_update().get(pk=node.pk)
    preview = drain_preview(node)
    node.cordoned = True
    node.save(update_fields=["cordoned"])
    for job in Job.objects.filter(pk__in=preview.jobs_moving).select_related("workspace"):
        evicted = job.replicas.filter(node=node, state__in=ACTIVE_STATES).update(
            state=JobState.PREEMPTED, ended=now, end_reason="drain")
        if job.replicas.filter(state__in=ACTIVE_STATES).exists():
            record_event(job, "shrunk", reason=f"{evicted} replicas evicted: node {node.name} is drained",
                         data={"reason": "drain", "node": node.name})
            continue
        requeue_job(job, f"evicted: node {node.name} is drained", "drain",
                    pending_reason=f"requeued: node {node.name} was drained", details={"node": node.name})
    audit.record(user, "drain", node, changes={"cordoned": [False, True]},
                 message=(f"evicted {len(preview.moves)} preemptible replicas of jobs "
                          f"{', '.join(map(str, preview.jobs_moving)) or 'none'}; "
                          f"{len(preview.stays)} non-preemptible replicas finish in place"))
    return preview


# --------------------------------------------------------------------------- price tables


def parse_gpu_rates(text: str) -> list[tuple[str, str, Decimal]]:
    """One rate a line: `vendor gpu_model price_per_gpu_hour` (e.g. `nvidia H100-80GB 3.20`)."""
    rates, seen = [], set()
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 3:
            raise ConsoleError({"gpu_rates": f"line {n}: write `vendor gpu_model price`, got {line.strip()!r}"})
        vendor, model, raw = parts
        if vendor not in ("nvidia", "amd"):
            raise ConsoleError({"gpu_rates": f"line {n}: vendor {vendor!r} is not nvidia or amd"})
        try:
            price = Decimal(raw)
        except InvalidOperation:
            raise ConsoleError({"gpu_rates": f"line {n}: price {raw!r} is not a number"}) from None
        if not price.is_finite() or price < 0:
            raise ConsoleError({"gpu_rates": f"line {n}: price must be 0 or more"})
        if (vendor, model) in seen:
            raise ConsoleError({"gpu_rates": f"line {n}: {vendor} {model} is listed twice"})
        seen.add((vendor, model))
        rates.append((vendor, model, price))
    if not rates:
        raise ConsoleError({"gpu_rates": "give at least one GPU rate"})
    return rates


@transaction.atomic
def create_price_table(user, data: Mapping[str, Any], *, now: datetime | None = None) -> PriceTable:
    """A new price-table version. It takes effect in the future: past charges never change."""
    now = now or clock.now()
    errors: dict[str, list[str]] = {}
    effective = data.get("effective_from")
    if isinstance(effective, str):
        from django.utils.dateparse import parse_datetime

        effective = parse_datetime(effective.strip()) if effective.strip() else None
    if not isinstance(effective, datetime):
        errors["effective_from"] = ["is required (YYYY-MM-DD HH:MM)"]
    else:
        if timezone.is_naive(effective):
            effective = timezone.make_aware(effective)
        if effective <= now:
            errors["effective_from"] = [f"must be in the future (after {now:%Y-%m-%d %H:%M}): "
                                        "prices of the past never change"]
        elif PriceTable.objects.filter(effective_from=effective).exists():
            errors["effective_from"] = ["another version takes effect at that moment"]
    name = str(data.get("name") or "").strip()
    if not name:
        errors["name"] = ["is required"]
    currency = str(data.get("currency") or "USD").strip().upper()
    try:
        pricing.minor_unit(currency)
    except ValueError as error:
        errors["currency"] = [str(error)]
    amounts = {f: _decimal(data, f, errors) for f in ("cpu_core_hour", "memory_gib_hour", "priority_base",
                                                      "priority_step", "offpeak_discount", "spot_discount")}
    for f, value in amounts.items():
        if value is not None and value < 0:
            errors.setdefault(f, []).append("must be 0 or more")
        if f.endswith("discount") and value is not None and value > 1:
            errors.setdefault(f, []).append("is a fraction from 0 to 1 (0.40 = 40 % off)")
    windows = str(data.get("offpeak_windows") or "").strip()
    try:
        offpeak.parse_windows(windows)
    except ValueError as error:
        errors["offpeak_windows"] = [str(error)]
    try:
        rates = parse_gpu_rates(str(data.get("gpu_rates") or ""))
    except ConsoleError as error:
        errors.update(error.errors)
        rates = []
    if errors:
        raise ConsoleError(errors)
    table = PriceTable.objects.create(name=name, currency=currency, effective_from=effective,
                                      offpeak_windows=windows, **amounts)
    GpuRate.objects.bulk_create(GpuRate(table=table, vendor=v, gpu_model=m, per_gpu_hour=p) for v, m, p in rates)
    changes = {k: [None, v] for k, v in audit.snapshot(table, PRICE_FIELDS).items()}
    changes["gpu_rates"] = [None, [f"{v} {m} {p}" for v, m, p in rates]]
    audit.record(user, "create", table, changes=changes)
    return table


# --------------------------------------------------------------------------- node agent tokens


@transaction.atomic
def create_node_token(user, node: Node) -> tuple[NodeToken, str]:
    """A new agent token for the node; the raw value is returned once and never stored."""
    token, raw = _new_token(node)
    audit.record(user, "create", token, message=f"agent token {token.hint}… for node {node.name}")
    return token, raw


@transaction.atomic
def revoke_node_token(user, token: NodeToken) -> NodeToken:
    if token.revoked is None:
        token.revoked = clock.now()
        token.save(update_fields=["revoked"])
        audit.record(user, "revoke", token, message=f"agent token {token.hint}… of node {token.node.name}")
    return token


# --------------------------------------------------------------------------- workspaces and members


@transaction.atomic
def create_workspace(user, slug: str, name: str, *, queue: Queue | None = None) -> Workspace:
    from django.utils.text import slugify

    errors = {}
    slug = (slug or "").strip()
    if not slug or slugify(slug) != slug:
        errors["slug"] = ["use lower-case letters, digits and hyphens"]
    elif Workspace.objects.filter(slug=slug).exists():
        errors["slug"] = [f"workspace '{slug}' exists"]
    if not (name or "").strip():
        errors["name"] = ["is required"]
    if errors:
        raise ConsoleError(errors)
    workspace = Workspace.objects.create(slug=slug, name=name.strip())
    if queue is not None:
        QueueAccess.objects.create(queue=queue, workspace=workspace, is_default=True)
    audit.record(user, "create", workspace, changes={"slug": [None, slug], "name": [None, workspace.name],
                                                     "default_queue": [None, queue.name if queue else None]})
    return workspace


@transaction.atomic
def set_member(user, workspace: Workspace, username: str, role: str) -> Membership:
    """Add a member or change their role."""
    if role not in Role.values:
        raise ConsoleError({"role": f"{role!r} is not one of {', '.join(Role.values)}"})
    member = get_user_model().objects.filter(username=(username or "").strip()).first()
    if member is None:
        raise ConsoleError({"username": f"no user named {username!r}"})
    membership, created = Membership.objects.get_or_create(user=member, workspace=workspace,
                                                           defaults={"role": role})
    old = None if created else membership.role
    if not created and membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    if created or old != role:
        audit.record(user, "create" if created else "change", membership, changes={"role": [old, role]})
    return membership


@transaction.atomic
def remove_member(user, membership: Membership) -> None:
    audit.record(user, "delete", membership, changes={"role": [membership.role, None]})
    membership.delete()


@transaction.atomic
def grant_queue(user, workspace: Workspace, queue: Queue, *, is_default: bool = False) -> QueueAccess:
    if queue.children.exists():
        raise ConsoleError({"queue": f"'{queue.name}' has sub-queues; jobs go to leaf queues"})
    if is_default:
        QueueAccess.objects.filter(workspace=workspace, is_default=True).exclude(queue=queue).update(is_default=False)
    access, created = QueueAccess.objects.update_or_create(queue=queue, workspace=workspace,
                                                           defaults={"is_default": is_default})
    audit.record(user, "grant queue", workspace, changes={"queue": [None, queue.name], "default": [None, is_default]})
    return access
