"""The console's writes. Each checks its input (ConsoleError names the field), changes the
database in one transaction, and records who changed what in the audit log."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils.translation import gettext

from billing.api import create_node_token as _new_token
from billing.api import currency as billing_currency
from billing.api import currency_at
from billing.forms import PriceTableForm
from billing.models import PRICE_FIELDS, Budget, GpuRate, NodeToken, PriceTable, StorageRate
from portal import history_catalogue as texts
from portal.console import audit, selectors
from portal.console.models import AuditEntry, QueueAllocationSample
from portal.models import Membership, Role, ServiceAccount, Workspace
from scheduling.api import DomainError, clock, record_event, requeue_job, said, storage
from scheduling.forms import NewNodeForm, NewPoolForm, NodeLabelsForm, PoolPolicyForm, QueueByNameForm
from scheduling.models import (
    ACTIVE_STATES,
    Gpu,
    Job,
    JobState,
    Node,
    NodePool,
    Queue,
    QueueAccess,
    Replica,
)

QUEUE_FIELDS = ("name", "parent", "deserved_gpus", "over_quota_weight", "limit_gpus", "priority", "preemptible_only",
                "default_max_runtime_s", "max_runtime_s", "max_termination_grace_s")
POOL_FIELDS = ("placement", "sharing", "timeslice_replicas", "mig_layout", "spot", "topology_levels",
               "bucket_csi_driver", "deadline_discount")
POOL_LAYOUT_FIELDS = ("sharing", "timeslice_replicas", "mig_layout")



class ConsoleError(DomainError):
    """Bad console input: errors by field name ("" for the whole form). Nothing was changed."""

    @classmethod
    def of_form(cls, form) -> ConsoleError:
        """A bound, invalid Django form's errors, every one of them, by field."""
        return cls({"" if k == "__all__" else k: list(v) for k, v in form.errors.items()})


# --------------------------------------------------------------------------- queues


@transaction.atomic
def save_queue(user, queue: Queue | None, data: Mapping[str, Any]) -> Queue:
    """Create (queue None) or change a queue; Queue.clean() keeps the whole tree valid."""
    before = audit.snapshot(queue, QUEUE_FIELDS) if queue else {}
    form = QueueByNameForm(data, instance=queue)
    if not form.is_valid():
        raise ConsoleError.of_form(form)
    created = queue is None
    queue = form.save()
    changes = audit.diff(before, audit.snapshot(queue, QUEUE_FIELDS))
    audit.record(user, "create" if created else "change", queue, changes=changes)
    return queue


@transaction.atomic
def delete_queue(user, queue: Queue) -> None:
    """Delete a queue that has no sub-queues and never held a job; workspaces that submit to it lose it."""
    queue = Queue.objects.select_for_update().get(pk=queue.pk)
    deletion = selectors.queue_deletion(queue)
    if deletion.refusals:
        raise ConsoleError({"": [gettext("queue '%(queue)s' cannot be deleted: %(why)s") % {"queue": queue.name, "why": r}
                                 for r in deletion.refusals]})
    message = (said(texts.QUEUE_DELETED, workspaces=", ".join(deletion.workspaces))
               if deletion.workspaces else "")
    audit.record(user, "delete", queue, changes={k: [v, None] for k, v in audit.snapshot(queue, QUEUE_FIELDS).items()},
                 message=message)
    queue.delete()


# --------------------------------------------------------------------------- node pools


@transaction.atomic
def save_pool(user, pool: NodePool, data: Mapping[str, Any]) -> NodePool:
    """Change a pool's policy, sharing mode, time-slice replicas, MIG layout, spot flag, topology levels, bucket
    CSI driver or deadline discount."""
    pool = NodePool.objects.select_for_update().get(pk=pool.pk)
    before = audit.snapshot(pool, POOL_FIELDS)
    form = PoolPolicyForm(data, instance=pool)
    if not form.is_valid():
        raise ConsoleError.of_form(form)
    pool = form.instance
    after = audit.snapshot(pool, POOL_FIELDS)
    relayout = [f for f in POOL_LAYOUT_FIELDS if before[f] != after[f]]
    running = Replica.objects.filter(node__pool=pool, state__in=ACTIVE_STATES).count()
    if relayout and running:
        raise ConsoleError({relayout[0]: gettext("%(running)s replicas hold slices of this pool's GPUs: drain its "
                                                 "nodes before changing %(fields)s") % {
            "running": running, "fields": ", ".join(relayout)}})
    form.save()
    audit.record(user, "change", pool, changes=audit.diff(before, after))
    return pool


@transaction.atomic
def create_pool(user, data: Mapping[str, Any]) -> NodePool:
    form = NewPoolForm(data)
    if not form.is_valid():
        raise ConsoleError.of_form(form)
    pool = form.save()
    audit.record(user, "create", pool, changes={k: [None, v] for k, v in audit.snapshot(
        pool, ("name", "vendor", "gpu_model", "gpu_memory_mib", *POOL_FIELDS)).items()})
    return pool


@transaction.atomic
def delete_pool(user, pool: NodePool) -> None:
    """Delete a pool no node has joined (so no replica runs in it); one with nodes is refused."""
    pool = NodePool.objects.select_for_update().get(pk=pool.pk)
    refusals = pool_deletion_refusals(pool)
    if refusals:
        raise ConsoleError({"": refusals})
    audit.record(user, "delete", pool, changes={k: [v, None] for k, v in audit.snapshot(
        pool, ("name", "vendor", "gpu_model", "gpu_memory_mib", *POOL_FIELDS)).items()})
    pool.delete()


def pool_deletion_refusals(pool: NodePool) -> list[str]:
    """Why the pool cannot be deleted now (nothing: it can)."""
    refusals = []
    running = Replica.objects.filter(node__pool=pool, state__in=ACTIVE_STATES).count()
    if running:
        refusals.append(gettext("%(running)s replicas run in it: drain its nodes first") % {"running": running})
    nodes = pool.nodes.count()
    if nodes:
        refusals.append(gettext("%(nodes)s nodes belong to it: remove them first") % {"nodes": nodes})
    return refusals


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
    # Replicas on other nodes stopped too: their job would fall below its minimum replicas, so the
    # whole job goes back to its queue rather than run (and be billed) short of what it needs.
    also_stopped: list[DrainItem] = field(default_factory=list)
    requeued: list[int] = field(default_factory=list)      # jobs that go back to their queue whole
    shrunk: list[int] = field(default_factory=list)        # elastic jobs that keep running on fewer replicas

    @property
    def jobs_moving(self) -> list[int]:
        return sorted({i.job_id for i in self.moves})


def _drain_item(r: Replica) -> DrainItem:
    return DrainItem(r.job_id, r.job.name, r.job.workspace.slug, f"{r.role}-{r.index}", r.slice_label, r.state)


def _falls_below_minimum(job: Job, remaining: list[Replica]) -> bool:
    """Whether the replicas left after the drain are fewer than some role's minimum (or none at all)."""
    if not remaining:
        return True
    left = {}
    for r in remaining:
        left[r.role] = left.get(r.role, 0) + 1
    return any(left.get(role["name"], 0) < max(1, int(role.get("min_replicas", 1))) for role in job.roles)


def drain_preview(node: Node) -> DrainPreview:
    """What a drain would do, without doing it; `drain` does exactly this."""
    preview = DrainPreview(node)
    replicas = Replica.objects.filter(node=node, state__in=ACTIVE_STATES).select_related("job__workspace")
    for r in replicas.order_by("job_id", "role", "index"):
        (preview.moves if r.job.preemptible else preview.stays).append(_drain_item(r))
    elsewhere = (Replica.objects.filter(job_id__in=preview.jobs_moving, state__in=ACTIVE_STATES)
                 .exclude(node=node).select_related("job__workspace").order_by("job_id", "role", "index"))
    by_job: dict[int, list[Replica]] = {job_id: [] for job_id in preview.jobs_moving}
    for r in elsewhere:
        by_job[r.job_id].append(r)
    for job in Job.objects.filter(pk__in=preview.jobs_moving).order_by("pk"):
        if _falls_below_minimum(job, by_job[job.pk]):
            preview.requeued.append(job.pk)
            preview.also_stopped.extend(_drain_item(r) for r in by_job[job.pk])
        else:
            preview.shrunk.append(job.pk)
    return preview


@transaction.atomic
def drain(user, node: Node, now: datetime | None = None) -> DrainPreview:
    """Cordon the node and evict its preemptible replicas (Preempted, end reason "drain"). An elastic
    job that keeps at least its minimum replicas elsewhere runs on, shrunk; any other job goes back to
    its queue whole (its replicas elsewhere stopped too), as the preview says. Non-preemptible work
    finishes where it is. The next scheduling cycle stops the evicted pods (reconcile), exactly as after
    a cancel, and places the requeued jobs elsewhere."""
    now = now or clock.now()
    node = Node.objects.select_for_update().get(pk=node.pk)
    preview = drain_preview(node)
    node.cordoned = True
    node.save(update_fields=["cordoned"])
    for job in Job.objects.filter(pk__in=preview.jobs_moving).select_related("workspace"):
        evicted = job.replicas.filter(node=node, state__in=ACTIVE_STATES).update(
            state=JobState.PREEMPTED, ended=now, end_reason="drain")
        if job.pk in preview.shrunk:
            record_event(job, "shrunk", reason=said(texts.DRAIN_SHRUNK, count=evicted, node=node.name),
                         data={"reason": "drain", "node": node.name})
            continue
        job.replicas.filter(state__in=ACTIVE_STATES).update(state=JobState.PREEMPTED, ended=now, end_reason="drain")
        requeue_job(job, said(texts.DRAIN_EVICTED, node=node.name), "drain",
                    pending=("node_drained", {"node": node.name}), details={"node": node.name})
    audit.record(user, "drain", node, changes={"cordoned": [False, True]},
                 message=said(texts.NODE_DRAINED, moves=len(preview.moves),
                              jobs=", ".join(map(str, preview.jobs_moving)) or said(texts.NONE),
                              stays=len(preview.stays)))
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
            raise ConsoleError({"gpu_rates": gettext("line %(line)s: write `vendor gpu_model price`, got %(got)s") % {
                "line": n, "got": repr(line.strip())}})
        vendor, model, raw = parts
        if vendor not in ("nvidia", "amd"):
            raise ConsoleError({"gpu_rates": gettext("line %(line)s: vendor %(vendor)s is not nvidia or amd") % {
                "line": n, "vendor": repr(vendor)}})
        try:
            price = Decimal(raw)
        except InvalidOperation:
            raise ConsoleError({"gpu_rates": gettext("line %(line)s: price %(price)s is not a number") % {
                "line": n, "price": repr(raw)}}) from None
        if not price.is_finite() or price < 0:
            raise ConsoleError({"gpu_rates": gettext("line %(line)s: price must be 0 or more") % {"line": n}})
        if (vendor, model) in seen:
            raise ConsoleError({"gpu_rates": gettext("line %(line)s: %(vendor)s %(model)s is listed twice") % {
                "line": n, "vendor": vendor, "model": model}})
        seen.add((vendor, model))
        rates.append((vendor, model, price))
    if not rates:
        raise ConsoleError({"gpu_rates": gettext("give at least one GPU rate")})
    return rates


def parse_storage_rates(text: str) -> list[tuple[str, Decimal]]:
    """One rate a line: `storage_class price_per_gib_month` (e.g. `standard 0.10`); none: storage is not billed."""
    rates, seen = [], set()
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise ConsoleError({"storage_rates": gettext("line %(line)s: write `storage_class price`, got %(got)s") % {
                "line": n, "got": repr(line.strip())}})
        storage_class, raw = parts
        if not storage.STORAGE_CLASS_RE.fullmatch(storage_class):
            raise ConsoleError({"storage_rates": gettext(
                "line %(line)s: storage class %(storage_class)s must be lowercase letters, digits and '-'") % {
                "line": n, "storage_class": repr(storage_class)}})
        try:
            price = Decimal(raw)
        except InvalidOperation:
            raise ConsoleError({"storage_rates": gettext("line %(line)s: price %(price)s is not a number") % {
                "line": n, "price": repr(raw)}}) from None
        if not price.is_finite() or price < 0:
            raise ConsoleError({"storage_rates": gettext("line %(line)s: price must be 0 or more") % {"line": n}})
        if price != price.quantize(Decimal("0.0001")):
            raise ConsoleError({"storage_rates": gettext("line %(line)s: at most 4 decimal places") % {"line": n}})
        if storage_class in seen:
            raise ConsoleError({"storage_rates": gettext("line %(line)s: %(storage_class)s is listed twice") % {
                "line": n, "storage_class": storage_class}})
        seen.add(storage_class)
        rates.append((storage_class, price))
    return rates


def _checked_price_table(form: PriceTableForm, data: Mapping[str, Any]
                         ) -> tuple[list[tuple[str, str, Decimal]], list[tuple[str, Decimal]]]:
    """The form's and the rates' errors together, so each shows beside its field."""
    errors = {} if form.is_valid() else ConsoleError.of_form(form).errors
    rates, storage_rates = [], []
    try:
        rates = parse_gpu_rates(str(data.get("gpu_rates") or ""))
    except ConsoleError as error:
        errors.update(error.errors)
    try:
        storage_rates = parse_storage_rates(str(data.get("storage_rates") or ""))
    except ConsoleError as error:
        errors.update(error.errors)
    if errors:
        raise ConsoleError(errors)
    return rates, storage_rates


def _write_rates(table: PriceTable, rates, storage_rates) -> None:
    GpuRate.objects.bulk_create(GpuRate(table=table, vendor=v, gpu_model=m, per_gpu_hour=p) for v, m, p in rates)
    StorageRate.objects.bulk_create(StorageRate(table=table, storage_class=c, per_gib_month=p) for c, p in storage_rates)


def _price_state(table: PriceTable) -> dict[str, Any]:
    state = audit.snapshot(table, PRICE_FIELDS)
    state["gpu_rates"] = [f"{r.vendor} {r.gpu_model} {r.per_gpu_hour.normalize():f}" for r in table.gpu_rates.all()]
    state["storage_rates"] = [f"{r.storage_class} {r.per_gib_month.normalize():f}" for r in table.storage_rates.all()]
    return state


def _require_scheduled(table: PriceTable) -> None:
    if table.effective_from <= clock.now():
        raise ConsoleError({"": gettext("%(table)s is in force or past, so it is read-only: prices of the past never "
                                        "change. Create a new version instead.") % {"table": table.name}})


@transaction.atomic
def create_price_table(user, data: Mapping[str, Any]) -> PriceTable:
    """A new price-table version. It takes effect in the future: past charges never change."""
    form = PriceTableForm(data)
    rates, storage_rates = _checked_price_table(form, data)
    table = form.save()
    _write_rates(table, rates, storage_rates)
    audit.record(user, "create", table, changes={k: [None, v] for k, v in _price_state(table).items()})
    return table


@transaction.atomic
def update_price_table(user, table: PriceTable, data: Mapping[str, Any]) -> PriceTable:
    """Change a version that has not taken effect yet; nothing has been priced with it."""
    table = PriceTable.objects.select_for_update().get(pk=table.pk)
    _require_scheduled(table)
    before = _price_state(table)
    form = PriceTableForm(data, instance=table)
    rates, storage_rates = _checked_price_table(form, data)
    table = form.save()
    table.gpu_rates.all().delete()
    table.storage_rates.all().delete()
    _write_rates(table, rates, storage_rates)
    changes = audit.diff(before, _price_state(table))
    audit.record(user, "update", table, changes=changes)
    return table


@transaction.atomic
def withdraw_price_table(user, table: PriceTable) -> None:
    """Delete a version that has not taken effect yet; the one in force stays in force."""
    table = PriceTable.objects.select_for_update().get(pk=table.pk)
    _require_scheduled(table)
    audit.record(user, "delete", table, changes={k: [v, None] for k, v in _price_state(table).items()},
                 message=said(texts.PRICE_TABLE_WITHDRAWN,
                              table=table.name, when=f"{table.effective_from:%Y-%m-%d %H:%M}"))
    table.delete()


@transaction.atomic
def add_node(user, data: Mapping[str, Any]) -> Node:
    """A node the operator adds before its agent reports: not ready (agent silent) until its first
    heartbeat, its GPUs (the pool's model and memory) under placeholder uuids the heartbeat replaces."""
    form = NewNodeForm(data)
    if not form.is_valid():
        raise ConsoleError.of_form(form)
    node = form.save(commit=False)
    node.labels = form.cleaned_data["labels"]
    node.agent_silent = True
    node.save()
    Gpu.objects.bulk_create(Gpu(node=node, index=i, uuid=f"pending-{node.pk}-{i}", memory_mib=node.pool.gpu_memory_mib)
                            for i in range(form.cleaned_data["gpus"]))
    audit.record(user, "create", node, changes={"name": [None, node.name], "pool": [None, node.pool.name],
                                                "gpus": [None, form.cleaned_data["gpus"]], "labels": [None, node.labels]})
    return node


@transaction.atomic
def set_node_labels(user, node: Node, data: Mapping[str, Any]) -> Node:
    form = NodeLabelsForm(data)
    if not form.is_valid():
        raise ConsoleError.of_form(form)
    node = Node.objects.select_for_update().get(pk=node.pk)
    before, node.labels = node.labels, form.cleaned_data["labels"]
    if before != node.labels:
        node.save(update_fields=["labels"])
        audit.record(user, "change", node, changes={"labels": [before, node.labels]})
    return node


def node_removal_refusals(node: Node) -> list[str]:
    """Why the node cannot be removed now: replicas run on it, or its usage samples (which go with it)
    are still kept for the jobs' usage figures."""
    running = Replica.objects.filter(node=node, state__in=ACTIVE_STATES).count()
    if running:
        return [gettext("%(running)s replicas run on it: drain it first, and remove it once they are gone") % {
            "running": running}]
    if node.usage_samples.exists():
        return [gettext("its agent's usage samples are kept %(days)s days for the jobs that ran there: cordon it "
                        "until then") % {"days": settings.USAGE_RETENTION_DAYS}]
    return []


@transaction.atomic
def remove_node(user, node: Node) -> None:
    """Remove a node nothing runs on (its GPUs and agent tokens go with it); one that runs replicas is
    refused: drain it first."""
    node = Node.objects.select_for_update().get(pk=node.pk)
    refusals = node_removal_refusals(node)
    if refusals:
        raise ConsoleError({"": refusals})
    NodeToken.objects.filter(node=node).delete()
    audit.record(user, "delete", node, changes={"name": [node.name, None], "pool": [node.pool.name, None]})
    node.delete()


# --------------------------------------------------------------------------- node agent tokens


@transaction.atomic
def create_node_token(user, node: Node) -> tuple[NodeToken, str]:
    """A new agent token for the node; the raw value is returned once and never stored."""
    token, raw = _new_token(node)
    audit.record(user, "create", token, message=said(texts.TOKEN_CREATED, hint=token.hint, node=node.name))
    return token, raw


def rotate_node_tokens(user, node: Node) -> int:
    """Revoke every live token of the node (before issuing its next one); how many were revoked."""
    tokens = list(NodeToken.objects.filter(node=node, revoked__isnull=True))
    for token in tokens:
        revoke_node_token(user, token)
    return len(tokens)


@transaction.atomic
def revoke_node_token(user, token: NodeToken) -> NodeToken:
    if token.revoked is None:
        token.revoked = clock.now()
        token.save(update_fields=["revoked"])
        audit.record(user, "revoke", token, message=said(texts.TOKEN_REVOKED, hint=token.hint, node=token.node.name))
    return token


# --------------------------------------------------------------------------- workspaces and members


@transaction.atomic
def create_workspace(user, slug: str, name: str, *, queue: Queue | None = None) -> Workspace:
    from django.utils.text import slugify

    errors = {}
    slug = (slug or "").strip()
    if not slug or slugify(slug) != slug:
        errors["slug"] = [gettext("use lower-case letters, digits and hyphens")]
    elif Workspace.objects.filter(slug=slug).exists():
        errors["slug"] = [gettext("workspace '%(workspace)s' exists") % {"workspace": slug}]
    if not (name or "").strip():
        errors["name"] = [gettext("is required")]
    if errors:
        raise ConsoleError(errors)
    workspace = Workspace.objects.create(slug=slug, name=name.strip())
    if queue is not None:
        QueueAccess.objects.create(queue=queue, workspace=workspace, is_default=True)
    audit.record(user, "create", workspace, changes={"slug": [None, slug], "name": [None, workspace.name],
                                                     "default_queue": [None, queue.name if queue else None]})
    return workspace


@transaction.atomic
def set_workspace_currency(user, workspace: Workspace, currency: str) -> str:
    """Bill the workspace in `currency` (billing.currency's rule: CurrencyError for an unknown code,
    CurrencyChangeRefused, a 409, when it would mix currencies); audited. Returns what to tell the operator."""
    before = currency_at(workspace)
    row = billing_currency.set_workspace_currency(workspace, currency, user=user)
    if row is None:
        return f"{workspace.slug} is already billed in {before}."
    since = "its whole history" if row.period == billing_currency.EVER else f"{row.period:%Y-%m}"
    audit.record(user, "set currency", workspace, changes={"currency": [before, row.currency]},
                 message=said(texts.CURRENCY_SET, workspace=workspace.slug, currency=row.currency, before=before,
                              since=said(texts.WHOLE_HISTORY) if row.period == billing_currency.EVER
                              else f"{row.period:%Y-%m}"))
    note = f"{workspace.slug} is billed in {row.currency} from {since}."
    budget = Budget.objects.filter(workspace=workspace).first()
    if budget is not None and budget.currency != row.currency:
        note += f" Its {budget.currency} budget no longer applies: its owner sets one in {row.currency}."
    return note


@transaction.atomic
def set_member(user, workspace: Workspace, username: str, role: str, *,
               source: str = AuditEntry.Source.CONSOLE) -> Membership:
    """Add a member (named by username or e-mail) or change their role. `source`: where the change
    was made (the console, or the workspace's own Members page), for the audit log."""
    if role not in Role.values:
        raise ConsoleError({"role": gettext("%(role)s is not one of %(roles)s") % {
            "role": repr(role), "roles": ", ".join(Role.values)}})
    member = find_user(username)
    _not_a_service_account(member, "username")
    Workspace.objects.select_for_update().get(pk=workspace.pk)  # one owner change at a time
    membership, created = Membership.objects.get_or_create(user=member, workspace=workspace,
                                                           defaults={"role": role})
    old = None if created else membership.role
    if old == Role.OWNER and role != Role.OWNER:
        _keep_an_owner(membership, "role", gettext("%(user)s is the last owner of %(workspace)s: make another "
                                                   "member owner first") % {
            "user": member.username, "workspace": workspace.slug})
    if not created and membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    if created or old != role:
        audit.record(user, "create" if created else "change", membership, changes={"role": [old, role]},
                     source=source)
    return membership


def find_user(username_or_email: str):
    """The account with this username, else the one account with this e-mail."""
    name = (username_or_email or "").strip()
    users = get_user_model().objects
    member = users.filter(username=name).first()
    if member is None and "@" in name:
        matches = list(users.filter(email__iexact=name)[:2])
        if len(matches) > 1:
            raise ConsoleError({"username": gettext("several accounts have the e-mail %(email)s: give the username") % {
                "email": repr(name)}})
        member = matches[0] if matches else None
    if member is None:
        said = (gettext("no user named %(name)s and no account has that e-mail") if "@" in name
                else gettext("no user named %(name)s"))
        raise ConsoleError({"username": said % {"name": repr(name)}})
    return member


@transaction.atomic
def remove_member(user, membership: Membership, *, source: str = AuditEntry.Source.CONSOLE) -> None:
    """Remove a member; a workspace keeps at least one owner."""
    Workspace.objects.select_for_update().get(pk=membership.workspace_id)
    membership = Membership.objects.select_related("user", "workspace").get(pk=membership.pk)
    _not_a_service_account(membership.user, "")
    if membership.role == Role.OWNER:
        _keep_an_owner(membership, "", gettext("%(user)s is the last owner of %(workspace)s: make another member "
                                               "owner first") % {
            "user": membership.user.username, "workspace": membership.workspace.slug})
    audit.record(user, "delete", membership, changes={"role": [membership.role, None]}, source=source)
    membership.delete()


def _not_a_service_account(user, field: str) -> None:
    """A service account's one membership is made and removed with it (portal.service_accounts), so its
    role can never become owner nor the account join another workspace."""
    if ServiceAccount.objects.filter(user=user).exists():
        raise ConsoleError({field: [gettext("%(user)s is a service account: it is managed on its workspace's page, "
                                            "not as a member") % {"user": user.username}]})


def _keep_an_owner(membership: Membership, field: str, message: str) -> None:
    others = Membership.objects.filter(workspace_id=membership.workspace_id, role=Role.OWNER).exclude(pk=membership.pk)
    if not others.exists():
        raise ConsoleError({field: [message]})


@transaction.atomic
def grant_queue(user, workspace: Workspace, queue: Queue, *, is_default: bool = False) -> QueueAccess:
    if queue.children.exists():
        raise ConsoleError({"queue": gettext("'%(queue)s' has sub-queues; jobs go to leaf queues") % {"queue": queue.name}})
    if is_default:
        QueueAccess.objects.filter(workspace=workspace, is_default=True).exclude(queue=queue).update(is_default=False)
    access, created = QueueAccess.objects.update_or_create(queue=queue, workspace=workspace,
                                                           defaults={"is_default": is_default})
    audit.record(user, "grant queue", workspace, changes={"queue": [None, queue.name], "default": [None, is_default]})
    return access


# --------------------------------------------------------------------------- queue allocation history


@transaction.atomic
def record_queue_allocation(now: datetime | None = None) -> int:
    """One sample per queue: what its subtree holds, its deserved quota and its fair share now (as the
    console's queue tree shows them). None while the last sample is under half an interval old, so a
    beat that fires twice writes once. Returns the samples written."""
    now = now or clock.now()
    half = timedelta(seconds=settings.QUEUE_HISTORY_INTERVAL_S / 2)
    if QueueAllocationSample.objects.filter(time__gt=now - half, time__lte=now).exists():
        return 0
    ids = dict(Queue.objects.values_list("name", "pk"))
    samples = [QueueAllocationSample(queue_id=ids[line.name], time=now, allocated_gpus=_gpus(line.allocated),
                                     deserved_gpus=line.deserved, fair_share_gpus=_gpus(line.fair_share))
               for line in selectors.queue_lines(now) if line.name in ids]
    QueueAllocationSample.objects.bulk_create(samples)
    return len(samples)


def record_queue_allocation_through(times: Sequence[datetime]) -> int:
    """The samples of a state that held through all of `times` (read once, at the first): a past played
    event to event, as the demo's month is, gets the samples the beat would have taken. A time already
    sampled is left as it is. Returns the samples written."""
    if not times:
        return 0
    ids = dict(Queue.objects.values_list("name", "pk"))
    lines = [line for line in selectors.queue_lines(times[0]) if line.name in ids]
    samples = [QueueAllocationSample(queue_id=ids[line.name], time=at, allocated_gpus=_gpus(line.allocated),
                                     deserved_gpus=line.deserved, fair_share_gpus=_gpus(line.fair_share))
               for at in times for line in lines]
    return len(QueueAllocationSample.objects.bulk_create(samples, ignore_conflicts=True))


def _gpus(amount: float) -> Decimal:
    return Decimal(str(round(amount, 3)))


def purge_queue_allocation_samples(now: datetime | None = None) -> int:
    """Samples older than QUEUE_HISTORY_RETENTION_DAYS."""
    cutoff = (now or clock.now()) - timedelta(days=settings.QUEUE_HISTORY_RETENTION_DAYS)
    deleted, _ = QueueAllocationSample.objects.filter(time__lt=cutoff).delete()
    return deleted
