"""Writes for jobs: submit and cancel, each recorded as a JobEvent and published live."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils.translation import gettext as _

from scheduling import (
    buckets,
    clock,
    deadlines,
    formats,
    history_texts,
    kinds,
    secrets,
    selectors,
    signals,
    storage,
)
from scheduling import history_catalogue as texts
from scheduling.bulk import insert_rows, update_rows
from scheduling.core.units import MILLI_PER_GPU
from scheduling.errors import Conflict, DomainError, Forbidden
from scheduling.history_texts import joined, said
from scheduling.lifecycle import arrays, attempts, chain, checkpoints, ends, runtime
from scheduling.models import (
    ACTIVE_STATES,
    FINAL_STATES,
    UNSCHEDULED_STATES,
    Job,
    JobEvent,
    JobState,
)
from scheduling.reasons import english as reason_text
from scheduling.spec import (
    JobSpec,
    SpecError,
    SpecIssue,
    SpecNeverRuns,
    parse_job_spec,
    parse_job_spec_obj,
    spec_from_image_form,
    spec_to_dict,
)
from scheduling.spec.requests import job_topology, role_requests
from scheduling.spec.templates import SpecTemplates


def _queue_error(message: str) -> SpecError:
    return SpecError([SpecIssue(line=None, column=None, field="queue", message=message)])


class SubmitReads:
    """What every spec a workspace submits is checked against, read once: its queues (and their ancestors,
    for the limits), its secrets and the cluster's pools. A batch of submits shares one."""

    def __init__(self, workspace):
        self.workspace = workspace
        self.queues = {queue.name: queue for queue in selectors.queues_for_workspace(workspace)}
        self._parents: dict[int, Any] = {queue.pk: queue for queue in self.queues.values()}
        self._default: list = []
        self._spreads: dict[str, float] = {}

    def queue(self, name: str | None):
        """The named queue open to the workspace (None: not open), or its default queue when `name` is empty."""
        if name:
            return self.queues.get(name)
        if not self._default:
            self._default.append(selectors.default_queue(self.workspace))
        return self._default[0]

    def parent(self, queue):
        if queue.parent_id is None:
            return None
        if queue.parent_id not in self._parents:
            self._parents[queue.parent_id] = queue.parent
        return self._parents[queue.parent_id]

    @cached_property
    def cluster(self):
        return selectors.cluster_info()

    @cached_property
    def secret_names(self) -> list[str]:
        return secrets.secret_names(self.workspace)

    def runtime_spread(self, queue_name: str) -> float:
        """The queue's run-time spread for deadline jobs' latest starts, read once per queue for a batch."""
        if queue_name not in self._spreads:
            self._spreads[queue_name] = deadlines.runtime_spread(queue_name)
        return self._spreads[queue_name]

    @cached_property
    def templates(self) -> SpecTemplates:
        """The batch's specs read so far: one alike but for its name is not read again."""
        return SpecTemplates()

    def parse(self, spec: str | bytes | Mapping[str, Any]) -> JobSpec:
        kwargs = {"cluster": self.cluster, "workspace_queues": list(self.queues),
                  "workspace_secrets": self.secret_names}
        if isinstance(spec, Mapping):
            return self.templates.parse(spec, lambda obj: parse_job_spec_obj(obj, **kwargs))
        return parse_job_spec(spec, **kwargs)


def read_spec(workspace, spec: str | bytes | Mapping[str, Any], *, reads: SubmitReads | None = None) -> JobSpec:
    """Parse and check a spec against the cluster, and the queues and secrets of the workspace (`reads`: those
    already read, for a batch)."""
    reads = reads or SubmitReads(workspace)
    parsed = reads.parse(spec)
    _check_queue_limit(reads, parsed)  # a gang bigger than its queue's limit would wait for ever
    storage.check_mounts(workspace, parsed)  # the volumes and dataset versions it mounts are the workspace's
    buckets.check_spec(workspace, parsed)  # and the buckets it reads
    checkpoints.check_submit(workspace, parsed)  # and the volume it checkpoints to
    deadlines.check_submit(parsed, clock.now())  # and a deadline it can make, not too far ahead
    kinds.kind_of(parsed).check_submit(workspace, parsed)  # and what its kind checks (a notebook's home)
    return parsed


def _check_queue_limit(reads: SubmitReads, spec: JobSpec) -> None:
    """Refuse a job whose gang minimum is more than its queue's limit, or an ancestor's: it could never start."""
    queue = reads.queue(spec.queue)
    need = spec.min_gpu_milli
    seen = set()
    while queue is not None and queue.pk not in seen:
        seen.add(queue.pk)
        if queue.limit_gpus is not None and need > queue.limit_gpus * MILLI_PER_GPU:
            raise SpecNeverRuns([SpecIssue(None, None, "queue", _("the job needs %(need)s at once, more than queue %(queue)s's limit of %(limit)s: "
                                 "it could never start") % {
                "need": formats.gpus(need), "queue": queue.name, "limit": formats.gpus(queue.limit_gpus * MILLI_PER_GPU)})])
        queue = reads.parent(queue)


def spec_from_form(workspace, form: Mapping[str, Any]) -> JobSpec:
    """The image form, checked like a YAML spec (SpecError names the form fields)."""
    queue_names = list(selectors.queues_for_workspace(workspace).values_list("name", flat=True))
    return spec_from_image_form(form, cluster=selectors.cluster_info(), workspace_queues=queue_names,
                                workspace_secrets=secrets.secret_names(workspace))


def _resolve_queue(reads: SubmitReads, spec: JobSpec):
    queue = reads.queue(spec.queue)
    if queue is None and not spec.queue:
        raise _queue_error(_("workspace '%(workspace)s' has no default queue: name one with `queue:`") % {
            "workspace": reads.workspace.slug})
    if queue.preemptible_only and not spec.preemptible:
        raise _queue_error(_("queue '%(queue)s' accepts preemptible work only: set `preemptible: true`") % {
            "queue": queue.name})
    return queue


def record_event(job: Job, kind: str, *, reason: Any = "", data: dict | None = None) -> JobEvent:
    return record_events([(job, kind, reason, data)])[0]


def _event(job: Job, kind: str, reason: Any, data: dict | None) -> JobEvent:
    """`reason` is plain text or a history_texts value: stored as its English text and as said."""
    english = reason if isinstance(reason, str) else history_texts.english(reason)
    return JobEvent(job=job, kind=kind, state=job.state, reason=english, said=history_texts.stored(reason),
                    data=data or {})


def record_events(items: list[tuple[Job, str, Any, dict | None]]) -> list[JobEvent]:
    """Store job events (each with the job's current state) and publish them once committed."""
    events = [_event(*item) for item in items]
    return _store_events(events, [(job, job_event_message(job, event))
                                  for (job, *_), event in zip(items, events, strict=True)])


def _store_events(events: list[JobEvent], committed: list[tuple[Job, dict]]) -> list[JobEvent]:
    insert_rows(events)
    transaction.on_commit(lambda: signals.send_committed(committed))
    return events


def requeue_job(job: Job, reason: Any, kind: str, *, pending: tuple[str, dict] = ("requeued", {}),
                details: dict | None = None) -> None:
    """A job whose last replica was evicted: Preempted, then back in its queue as Pending, with
    `pending` as its reason code and params."""
    requeue_jobs([(job, reason, kind, details)], pending=pending)


def requeue_jobs(items: list[tuple[Job, Any, str, dict | None]], *,
                 pending: tuple[str, dict] = ("requeued", {})) -> None:
    """`requeue_job` for each (job, reason, kind, details), the rows written together: a cycle
    requeues dozens of jobs."""
    code, params = pending
    text = reason_text(code, params)
    back = said(texts.BACK_IN_ITS_QUEUE)
    events, committed = [], []

    def add(job: Job, kind: str, reason: Any, data: dict | None) -> None:
        event = _event(job, kind, reason, data)
        events.append(event)
        committed.append((job, job_event_message(job, event)))   # the job as it is at this event

    for job, reason, kind, details in items:
        job.state = JobState.PREEMPTED
        add(job, "preempted", reason, {"reason": kind, **(details or {})})
        job.state, job.pending_code, job.pending_params, job.pending_reason = JobState.PENDING, code, params, text
        job.deadline = None   # the next run has a deadline of its own
        add(job, "requeued", back, None)
    # their runs end as evicted (a lost node's too): neither counts against a retry limit
    attempts.end_attempts([attempts.AttemptEnd(job, ends.NODE_LOST if kind == "node-lost" else ends.PREEMPTED)
                           for job, _, kind, _ in items], clock.now(), create_missing=False)
    update_rows([job for job, *_ in items], ["state", "pending_reason", "pending_code", "pending_params", "deadline"])
    _store_events(events, committed)


def job_event_message(job: Job, event: JobEvent) -> dict:
    return {"job": job.pk, "name": job.name, "kind": event.kind, "state": job.state,
            "reason": event.reason, "said": event.said, "pending_reason": job.pending_reason,
            "time": event.time.isoformat()}


class NotSubmitter(Forbidden, PermissionDenied):
    """The user's role in the workspace may not submit or cancel jobs."""

    field = "workspace"


def require_submitter(user, workspace) -> None:
    membership = workspace.memberships.filter(user=user).first() if user.is_authenticated else None
    if membership is None or not membership.can_submit:
        raise NotSubmitter(f"your role in '{workspace.slug}' may not submit or cancel jobs")


def _pending_fields(code: str, params: dict) -> dict:
    return {"pending_code": code, "pending_params": params, "pending_reason": reason_text(code, params)}


@transaction.atomic
def submit_job(*, user, workspace, spec: str | bytes | Mapping[str, Any], quote: dict | None = None,
               parsed: JobSpec | None = None, not_before=None) -> Job:
    """Validate and store a job as Pending in its queue. Raises SpecError (nothing stored).

    `parsed` is the spec already read by the caller (who quoted it), to avoid reading it twice.
    """
    require_submitter(user, workspace)
    job = _new_job(user, workspace, SubmitItem(spec, quote, parsed, not_before), SubmitReads(workspace))
    job.save(force_insert=True)
    _store_submitted([job])
    return job


@dataclass(frozen=True)
class SubmitItem:
    """One job of a batch: its spec as sent, and what a quoting caller settled (see submit_job)."""

    spec: str | bytes | Mapping[str, Any]
    quote: dict | None = None
    parsed: JobSpec | None = None
    not_before: Any = None


@transaction.atomic
def submit_jobs(*, user, workspace, items: Sequence[SubmitItem | str | bytes | Mapping[str, Any]],
                reads: SubmitReads | None = None) -> list[Job | DomainError]:
    """Many submits at once (a job array by hand, a sweep): each item checked as submit_job checks it, with
    the workspace's queues, secrets and the cluster's pools read once, and the good ones stored together.
    Returns, in the items' order, each stored Job or the DomainError (SpecError, ...) that refused it: a bad
    item never keeps the others out. Raises NotSubmitter for the whole batch."""
    require_submitter(user, workspace)
    reads = reads or SubmitReads(workspace)
    out: list[Job | DomainError] = []
    named: set[tuple[str, str]] = set()   # the names the batch takes itself (_check_notebook_name reads them)
    for item in items:
        item = item if isinstance(item, SubmitItem) else SubmitItem(item)
        try:
            out.append(_new_job(user, workspace, item, reads, named))
        except DomainError as error:
            out.append(error)
    jobs = [job for job in out if isinstance(job, Job)]
    insert_rows(jobs, keys=True)
    _store_submitted(jobs)
    return out


def _new_job(user, workspace, item: SubmitItem, reads: SubmitReads,
             named: set[tuple[str, str]] | None = None) -> Job:
    """The job a submit stores, every rule checked (raises a DomainError, nothing written), not yet saved.
    Its only write, a notebook's home volume, comes after every check."""
    spec = item.spec
    parsed = item.parsed or read_spec(workspace, spec, reads=reads)
    # again, locking the volumes it mounts until the job is stored: a delete meanwhile waits, then sees it
    storage.check_mounts(workspace, parsed, lock=True)
    buckets.check_spec(workspace, parsed, lock=True)
    queue = _resolve_queue(reads, parsed)
    checkpoints.check_submit(workspace, parsed, queue, lock=True)  # its checkpoint volume; a grace the queue allows
    _check_notebook_name(workspace, parsed, named)
    as_dict = spec_to_dict(parsed)
    text = spec if isinstance(spec, str) else (spec.decode() if isinstance(spec, bytes) else reads.templates.yaml(as_dict))
    not_before, quote = item.not_before, item.quote
    pending = (("waits_for_off_peak", {"not_before": f"{not_before:%Y-%m-%d %H:%M %Z}"}) if not_before
               else ("waiting_for_cycle", {}))
    now = clock.now()
    deadlines.check_submit(parsed, now)
    complete_by = deadlines.complete_by(parsed, now)
    # dependencies and arrays: a job that waits for others is Blocked; an array's parent places nothing itself
    after = chain.resolve_after(workspace, parsed)
    roles = buckets.apply_to_roles(workspace, parsed, role_requests(parsed, quote))
    lifecycle = {"after": after, "roles": roles, **arrays.parent_fields(parsed, roles, quote)}
    job = Job(
        workspace=workspace, queue=queue, submitted_by=user, name=parsed.name, job_type=parsed.type, kind=parsed.kind,
        priority=parsed.priority, preemptible=parsed.preemptible, reduce_cost=parsed.reduce_cost,
        expected_duration_s=parsed.expected_duration_s, spec_text=text, spec=as_dict,
        quote=quote,
        not_before=not_before,
        topology=job_topology(parsed, quote),
        max_runtime_s=runtime.max_runtime_for(parsed, queue),
        complete_by=complete_by,
        latest_start=deadlines.latest_start_at_submit(parsed, complete_by, lambda: reads.runtime_spread(queue.name)),
        **_pending_fields(*pending),
        **lifecycle,
    )
    if after:
        job.state = JobState.BLOCKED
        for key, value in chain.blocked_fields(after).items():
            setattr(job, key, value)
    elif job.array_size:
        for key, value in arrays.window_fields(job.array, job.array_size).items():
            setattr(job, key, value)
    kinds.kind_of(parsed).before_submit(workspace, parsed)  # a notebook's home volume
    if named is not None:  # every kind: only one whose names are taken reads them
        named.add((parsed.kind, parsed.name))
    return job


def _store_submitted(jobs: list[Job]) -> None:
    """After the jobs' rows: what each kind keeps beside them (a service's scale), and each submitted event."""
    for job in jobs:
        kinds.kind_of(job).after_submit(job)
    record_events([(job, "submitted", said(texts.SUBMITTED, queue=job.queue.name, user=job.submitted_by.username),
                    None) for job in jobs])


@transaction.atomic
def cancel_job(*, user, job: Job) -> Job:
    """A member who may submit in the job's workspace cancels it."""
    require_submitter(user, job.workspace)
    return _cancel(job, said(texts.CANCELLED_BY_USER, user=user.username))


def _cancel(job: Job, why: Any) -> Job:
    job = Job.objects.select_for_update().get(pk=job.pk)
    if job.is_final:
        raise Conflict(f"job {job.pk} is already {job.state}", field="state")
    now = clock.now()
    job.state = JobState.CANCELLED
    job.pending_reason, job.pending_code, job.pending_params = "", "", {}
    job.finished = now
    end_fields = ends.mark_end(job, ends.CANCELLED, why, now)
    job.save(update_fields=["state", "pending_reason", "pending_code", "pending_params", "finished", *end_fields])
    attempts.end_attempts([attempts.AttemptEnd(job, ends.CANCELLED)], now, create_missing=False)
    # The backend's pods are stopped by the next cycle's reconcile (they are no longer held).
    job.replicas.filter(state__in=ACTIVE_STATES).update(state=JobState.CANCELLED, ended=now, end_reason="cancelled")
    if job.array_size:   # an array's unfinished children end with it
        for child in arrays.cancel_children(job, now):
            record_event(child, "cancelled", reason=joined([why, said(texts.ARRAY_CANCELLED),
                                                            *signals.finish_notes(child)]))
    notes = signals.finish_notes(job)  # cancelled jobs pay for the time they held their GPUs
    record_event(job, "cancelled", reason=joined([why, *notes]))
    return job


@transaction.atomic
def cancel_array_index(*, user, job: Job, index: int) -> Job:
    """Cancel one index of an array: its child when made, else the index is made cancelled when its turn comes.
    Returns the array's parent."""
    require_submitter(user, job.workspace)
    child = arrays.index_job(job, index)
    if child is None:
        arrays.mark_index_cancelled(job, index)
        record_event(job, "index-cancelled", reason=said(texts.ARRAY_INDEX_CANCELLED, index=index,
                                                         user=user.username))
    else:
        _cancel(child, said(texts.CANCELLED_BY_USER, user=user.username))
    return job


# --------------------------------------------------------------------------- operators' actions
# Operators (staff) act on any workspace's job. These are a path of their own: the tenant rule
# (require_submitter) stays as it is. Each action records a job event the tenant sees.

MAX_PRIORITY = 100


class NotOperator(Forbidden, PermissionDenied):
    """Only operators (staff) act on jobs across workspaces."""


def require_operator(user) -> None:
    if not (user.is_authenticated and user.is_staff):
        raise NotOperator("only operators (staff) may act on other workspaces' jobs")


def _by_operator(user, reason: str):
    if reason:
        return said(texts.BY_OPERATOR_FOR_REASON, operator=user.username, reason=reason)
    return said(texts.BY_OPERATOR, operator=user.username)


@transaction.atomic
def cancel_job_as_operator(*, operator, job: Job, reason: str = "") -> Job:
    """Cancel any workspace's job; it pays for the time it held its GPUs, as a tenant's cancel."""
    require_operator(operator)
    return _cancel(job, said(texts.CANCELLED_BY, by=_by_operator(operator, reason)))


@transaction.atomic
def requeue_job_as_operator(*, operator, job: Job, reason: str = "") -> Job:
    """Stop a scheduled or running job's replicas and put it back in its queue (Pending), preemptible
    or not. The next cycle stops its pods (reconcile) and places it again."""
    require_operator(operator)
    job = Job.objects.select_for_update().get(pk=job.pk)
    if job.state not in ACTIVE_STATES:
        raise Conflict(f"job {job.pk} is {job.state}: only a scheduled or running job can be requeued",
                       field="state")
    now = clock.now()
    stopped = job.replicas.filter(state__in=ACTIVE_STATES).update(state=JobState.PREEMPTED, ended=now,
                                                                  end_reason="operator")
    requeue_job(job, said(texts.REQUEUED_BY, by=_by_operator(operator, reason)), "operator",
                details={"operator": operator.username, "replicas": stopped})
    return job


@transaction.atomic
def change_job_priority(*, operator, job: Job, priority: int, reason: str = "") -> tuple[Job, int]:
    """Set a job's priority (0-100) while it is not finished; returns the job and the old priority.
    The scheduler orders and preempts by it; the job stays billed at the priority it was quoted with."""
    require_operator(operator)
    job = Job.objects.select_for_update().get(pk=job.pk)
    if job.is_final:
        raise Conflict(f"job {job.pk} is already {job.state}", field="state")
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= MAX_PRIORITY:
        raise DomainError(f"must be a whole number from 0 to {MAX_PRIORITY}", field="priority")
    old = job.priority
    if priority == old:
        raise DomainError(f"the job's priority is already {old}", field="priority")
    job.priority = priority
    job.save(update_fields=["priority"])
    record_event(job, "priority-changed", reason=said(texts.PRIORITY_CHANGED, old=old,
                                                      new=priority, by=_by_operator(operator, reason)),
                 data={"from": old, "to": priority, "operator": operator.username})
    return job, old


@transaction.atomic
def move_job_to_queue(*, operator, job: Job, queue, reason: str = "") -> tuple[Job, str]:
    """Move a pending job to another queue its workspace may use; returns the job and the old queue's name."""
    require_operator(operator)
    job = Job.objects.select_for_update().select_related("workspace", "queue").get(pk=job.pk)
    if job.state != JobState.PENDING:
        raise Conflict(f"job {job.pk} is {job.state}: only a pending job can move to another queue", field="state")
    if queue.pk == job.queue_id:
        raise DomainError(f"the job is already in queue '{queue.name}'", field="queue")
    if not selectors.queues_for_workspace(job.workspace).filter(pk=queue.pk).exists():
        raise DomainError(f"queue '{queue.name}' is not open to workspace '{job.workspace.slug}'", field="queue")
    if queue.children.exists():
        raise DomainError(f"'{queue.name}' has sub-queues; jobs wait in leaf queues", field="queue")
    if queue.preemptible_only and not job.preemptible:
        raise DomainError(f"queue '{queue.name}' accepts preemptible work only and this job is not preemptible",
                          field="queue")
    old = job.queue.name
    job.queue = queue
    job.save(update_fields=["queue"])
    record_event(job, "queue-changed", reason=said(texts.QUEUE_CHANGED,
                                                   old=old, new=queue.name, by=_by_operator(operator, reason)),
                 data={"from": old, "to": queue.name, "operator": operator.username})
    return job, old


@transaction.atomic
def suspend_jobs(jobs, *, until, reason: Any) -> list[Job]:
    """Stop the given running or waiting jobs and hold them as Pending until `until` (or until
    `release_suspended` lets them go). Their pods are stopped by the next cycle's reconcile."""
    now = clock.now()
    suspended = []
    for job in Job.objects.select_for_update().filter(pk__in=[j.pk for j in jobs]).exclude(
            state__in=UNSCHEDULED_STATES):  # a stopped notebook holds nothing and stays stopped
        job.replicas.filter(state__in=ACTIVE_STATES).update(state=JobState.PREEMPTED, ended=now, end_reason="budget")
        requeue_job(job, reason, "budget", pending=("budget_suspended", {"until": f"{until:%Y-%m-%d %H:%M %Z}"}))
        job.not_before = until
        job.save(update_fields=["not_before"])
        suspended.append(job)
    return suspended


def release_suspended(workspace) -> int:
    """A higher budget: the workspace's suspended jobs wait for the next cycle again."""
    return Job.objects.filter(workspace=workspace, state=JobState.PENDING, pending_code="budget_suspended").update(
        not_before=None, **_pending_fields("waiting_for_cycle", {}))


@transaction.atomic
def stop_job_by_policy(job: Job, reason: Any) -> Job:
    """The platform's own policy stops a job (GPUs left idle past their grace): no member asked, so no
    permission check; it pays for what it held, as a cancel does."""
    return _cancel(job, said(texts.STOPPED_BY_POLICY_FOR_REASON, reason=reason))


@transaction.atomic
def cancel_replaced_run(job: Job, schedule_name: str) -> Job:
    """A schedule whose concurrency is Replace ends its unfinished run for the next (scheduling.schedules): the
    schedule asked, not a member, so no permission check; it pays for what it held, as a cancel does."""
    return _cancel(job, said(texts.REPLACED_BY_SCHEDULE_RUN, schedule=schedule_name))


# --------------------------------------------------------------------------- stop and start
# Notebooks (and, later, services scaled to zero) stop without ending: their replicas end at once, so
# their slices are free for the next cycle, and nothing is billed while stopped; starting again puts
# them back in their queue as Pending, as a submitted job. A notebook's home volume stays.

def _check_notebook_name(workspace, parsed: JobSpec, named: set[tuple[str, str]] | None = None) -> None:
    """A notebook's or a service's name picks its URL (and a notebook's home volume) in the workspace: its
    kind refuses a name a live one has. `named`: the names a batch took before this item."""
    def live_state() -> str | None:
        if named is not None and (parsed.kind, parsed.name) in named:
            return JobState.PENDING
        return (Job.objects.filter(workspace=workspace, kind=parsed.kind, name=parsed.name)
                .exclude(state__in=FINAL_STATES).values_list("state", flat=True).first())

    message = kinds.kind_of(parsed).name_refusal(parsed, workspace, live_state)
    if message is not None:
        raise SpecError([SpecIssue(line=None, column=None, field="name", message=message)])


def _locked_stoppable(job: Job) -> Job:
    job = Job.objects.select_for_update().select_related("workspace").get(pk=job.pk)
    kinds.kind_of(job).check_stop_start(job)
    return job


@transaction.atomic
def stop_workload(user, job: Job, reason: Any = "") -> Job:
    """Stop a notebook (or service): its replicas end now and free their slices for the next cycle (which
    stops the processes or pods), and it waits as Stopped, billed nothing, until started. `user` None is
    the platform itself (an idle policy): no permission check then."""
    if user is not None:
        require_submitter(user, job.workspace)
    job = _locked_stoppable(job)
    if job.is_final or job.state == JobState.STOPPED:
        raise Conflict(f"job {job.pk} is already {job.state}", field="state")
    now = clock.now()
    ended = job.replicas.filter(state__in=ACTIVE_STATES).update(state=JobState.STOPPED, ended=now,
                                                                end_reason="stopped")
    job.state, job.not_before = JobState.STOPPED, None
    job.pending_reason, job.pending_code, job.pending_params = "", "", {}
    job.save(update_fields=["state", "not_before", "pending_reason", "pending_code", "pending_params"])
    if user is not None:
        who = said(texts.STOPPED_BY_USER_FOR_REASON if reason else texts.STOPPED_BY_USER,
                   user=user.username, **({"reason": reason} if reason else {}))
    else:
        who = (said(texts.STOPPED_BY_POLICY_FOR_REASON, reason=reason) if reason
               else said(texts.STOPPED_BY_POLICY))
    record_event(job, "stopped", reason=who,
                 data={"replicas": ended, "by": user.username if user is not None else None})
    return job


@transaction.atomic
def start_workload(user, job: Job) -> Job:
    """Start a stopped notebook (or service) again: Pending in its queue, placed by the cycle like any job."""
    require_submitter(user, job.workspace)
    job = _locked_stoppable(job)
    if job.state != JobState.STOPPED:
        raise Conflict(f"job {job.pk} is {job.state}: only a stopped one can be started", field="state")
    kinds.kind_of(job).before_start(job)  # a service asks for its minimum again
    return resume_workload(job, said(texts.STARTED_BY_USER, user=user.username))


def resume_workload(job: Job, why: Any) -> Job:
    """A stopped notebook or service (locked by the caller) goes back in its queue as Pending."""
    job.state = JobState.PENDING
    job.started = None
    for name, value in _pending_fields("waiting_for_cycle", {}).items():
        setattr(job, name, value)
    job.save(update_fields=["state", "started", "pending_reason", "pending_code", "pending_params"])
    record_event(job, "start-requested", reason=said(texts.BACK_IN_QUEUE, why=why,
                                                     queue=job.queue.name))
    return job


@transaction.atomic
def delete_notebook(user, job: Job, *, delete_home: bool = False, backend=None) -> Job:
    """Delete a notebook: cancel it (billed for what it held, as any cancel) unless it already ended. Its home
    volume stays, so a new notebook of the same name finds its files, unless `delete_home`: then the
    volume goes too (its row, its folder or the cluster's claim)."""
    require_submitter(user, job.workspace)
    job = Job.objects.select_for_update().select_related("workspace").get(pk=job.pk)
    kinds.kind_of(job).check_home(job)
    if not job.is_final:
        job = _cancel(job, said(texts.DELETED_WITH_HOME if delete_home
                                else texts.DELETED_BY_USER, user=user.username))
    elif not delete_home:
        raise Conflict(f"notebook {job.pk} is already {job.state}", field="state")
    if delete_home:
        if backend is None:
            from scheduling.backends import get_backend

            backend = get_backend()
        if job.is_final and Job.objects.filter(workspace=job.workspace, kind=job.kind, name=job.name).exclude(
                state__in=FINAL_STATES).exists():
            raise Conflict(f"notebook '{job.name}' has a newer live notebook using its home volume", field="home")
        # inside the transaction: a backend that fails leaves the notebook as it was, and says why
        storage.delete_home(job.workspace, job.name, backend)
    return job
