"""Array jobs: a parent that places nothing itself, and one child job per index, made lazily.

The parent (`Job.array_size` > 0, `roles` empty, so no snapshot reads it) keeps its indices, parallelism, how
many children it has made (in index order) and the roles and quote its children take. Each cycle,
`advance_arrays` makes the next children of every open array, so that at most `parallelism` of its children are
unfinished, and moves the parent's state with them (Pending, Running once one child was placed, and at the end
Succeeded, Failed if any index failed, Cancelled if any was cancelled and none failed). A child is a normal job
of the parent's queue (retries, logs, cost and cancel are its own) with ARRAY_INDEX in its environment. Three
queries whatever the number of arrays and children: the open parents, their children's counts by state, the
insert of the new children (and their events, and the parents' rows when they change).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db.models import Count

from scheduling.bulk import update_rows
from scheduling.core.arrays import parse_indices
from scheduling.errors import Conflict, DomainError
from scheduling.models import ACTIVE_STATES, FINAL_STATES, Job, JobState, Replica
from scheduling.reasons import reason_text
from scheduling.spec.model import JobSpec

WINDOW_CODE = "array_window"

INDEX_VARIABLE = "ARRAY_INDEX"
# the states an array's counts name, in the order pages show them
COUNTED_STATES = (
    JobState.BLOCKED,
    JobState.PENDING,
    JobState.SCHEDULED,
    JobState.RUNNING,
    JobState.PREEMPTED,
    JobState.SUCCEEDED,
    JobState.FAILED,
    JobState.CANCELLED,
)


class NoSuchIndex(DomainError):
    status = 404
    title = "No such array index"


def parent_fields(parsed: JobSpec, roles: list[dict[str, Any]], quote: dict | None) -> dict[str, Any]:
    """What an array parent stores at submit: no roles of its own (it is never placed), and what its children
    take. Empty for a job that is not an array."""
    if parsed.array is None:
        return {}
    array = {
        "indices": parsed.array.indices,
        "parallelism": parsed.array.parallelism,
        "made": 0,
        "cancelled": [],
        "roles": roles,
        "quote": per_index_quote(quote, parsed.array.count),
    }
    return {"array": array, "array_size": parsed.array.count, "roles": []}


def per_index_quote(quote: dict | None, count: int) -> dict | None:
    """The parent's quote is for every index (billing multiplies it); each child's is one index's share."""
    if not quote:
        return quote
    out = dict(quote)
    for key in ("estimate_low", "estimate_high", "total"):
        try:
            out[key] = str((Decimal(str(quote[key])) / count).quantize(Decimal("0.01")))
        except (KeyError, InvalidOperation):
            continue
    return out


def window_fields(array: dict[str, Any], size: int) -> dict[str, Any]:
    params = {"count": size, "made": array["made"], "parallelism": array["parallelism"]}
    return {
        "pending_code": WINDOW_CODE,
        "pending_params": params,
        "pending_reason": reason_text(WINDOW_CODE, params),
    }


def child_job(parent: Job, index: int, now: datetime, state: str = JobState.PENDING) -> Job:
    roles = [
        {**role, "env": {**role.get("env", {}), INDEX_VARIABLE: str(index)}} for role in parent.array["roles"]
    ]
    pending = (
        {
            "pending_code": "waiting_for_cycle",
            "pending_params": {},
            "pending_reason": reason_text("waiting_for_cycle", {}),
        }
        if state == JobState.PENDING
        else {}
    )
    return Job(
        workspace_id=parent.workspace_id,
        queue_id=parent.queue_id,
        submitted_by_id=parent.submitted_by_id,
        name=parent.name,
        job_type=parent.job_type,
        kind=parent.kind,
        priority=parent.priority,
        preemptible=parent.preemptible,
        reduce_cost=parent.reduce_cost,
        expected_duration_s=parent.expected_duration_s,
        spec_text=parent.spec_text,
        spec=parent.spec,
        roles=roles,
        quote=parent.array.get("quote"),
        topology=parent.topology,
        not_before=parent.not_before,
        created=now,
        state=state,
        finished=now if state == JobState.CANCELLED else None,
        array_parent_id=parent.pk,
        array_index=index,
        **pending,
    )


def counts_by_parent(parent_ids) -> dict[int, dict[str, int]]:
    counts: dict[int, dict[str, int]] = defaultdict(dict)
    for parent, state, n in (
        Job.objects.filter(array_parent_id__in=parent_ids)
        .values("array_parent", "state")
        .annotate(n=Count("pk"))
        .values_list("array_parent", "state", "n")
    ):
        counts[parent][state] = n
    return counts


def cancel_children(parent: Job, now: datetime) -> list[Job]:
    """The parent was cancelled: its unfinished children end too (at most `parallelism` of them), and no more are
    made. Their replicas stop at the next cycle's reconcile, as a cancelled job's do. The caller records their
    events (with `signals.finish_notes`)."""
    children = list(
        Job.objects.select_for_update().filter(array_parent=parent).exclude(state__in=FINAL_STATES)
    )
    for child in children:
        child.state, child.finished = JobState.CANCELLED, now
        child.pending_code, child.pending_params, child.pending_reason = "", {}, ""
    update_rows(children, ["state", "finished", "pending_code", "pending_params", "pending_reason"])
    Replica.objects.filter(job__in=children, state__in=ACTIVE_STATES).update(
        state=JobState.CANCELLED, ended=now, end_reason="cancelled"
    )
    return children


def index_job(parent: Job, index: int) -> Job | None:
    """The child of `index`, None while it is not made yet; NotFound for an index the array does not have."""
    if not parent.array_size:
        raise NoSuchIndex(f"job {parent.pk} is not an array", field="index")
    if index not in parse_indices(parent.array["indices"]):
        raise NoSuchIndex(f"array {parent.pk} has no index {index}", field="index")
    return Job.objects.filter(array_parent=parent, array_index=index).first()


def mark_index_cancelled(parent: Job, index: int) -> None:
    """An index not made yet: it will be made cancelled, taking no room."""
    parent = Job.objects.select_for_update().get(pk=parent.pk)
    if parent.is_final:
        raise Conflict(f"array {parent.pk} is already {parent.state}", field="state")
    cancelled = set(parent.array.get("cancelled", ()))
    if index in cancelled:
        raise Conflict(f"index {index} of array {parent.pk} is already cancelled", field="index")
    parent.array = {**parent.array, "cancelled": sorted(cancelled | {index})}
    parent.save(update_fields=["array"])


def array_detail(job: Job, counts: dict[str, int] | None = None) -> dict[str, Any] | None:
    """The API's `array` of a parent: {indices, parallelism, counts: {<state>: n}} (indices not made yet count as
    Pending, so the counts add up to the array's size)."""
    if not job.array_size:
        return None
    counts = dict(counts if counts is not None else counts_by_parent([job.pk]).get(job.pk, {}))
    waiting = job.array_size - sum(counts.values())
    if waiting > 0 and not job.is_final:
        counts[JobState.PENDING] = counts.get(JobState.PENDING, 0) + waiting
    return {
        "indices": job.array["indices"],
        "parallelism": job.array["parallelism"],
        "counts": {state: counts[state] for state in COUNTED_STATES if counts.get(state)},
    }


def array_children(parent: Job, *, limit: int = 200) -> list[Job]:
    """The indices made so far, in index order (the page lists at most `limit`)."""
    return list(
        Job.objects.filter(array_parent=parent)
        .order_by("array_index")
        .only("pk", "name", "state", "array_index", "started", "finished", "final_cost", "currency")[:limit]
    )
