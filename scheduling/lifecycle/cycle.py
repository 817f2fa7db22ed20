"""What each scheduling cycle does for dependencies and arrays, before its snapshot: release or cancel blocked
jobs (`scheduling.lifecycle.chain`), make arrays' next children and move their parents' states
(`scheduling.lifecycle.arrays`). One transaction, batched as the evictions are: a handful of queries whatever the
number of jobs, rows written only when they change."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from scheduling import history_catalogue as texts
from scheduling import signals
from scheduling.bulk import update_rows
from scheduling.core.arrays import next_indices, parse_indices
from scheduling.history_texts import joined, said
from scheduling.lifecycle.arrays import child_job, counts_by_parent, window_fields
from scheduling.lifecycle.chain import MET, NEVER, WAITS_CODE, waits_params
from scheduling.models import ACTIVE_STATES, FINAL_STATES, Job, JobState
from scheduling.reasons import reason_text
from scheduling.services import record_events

OPEN_STATES = (JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING)


@transaction.atomic
def advance(now: datetime) -> tuple[int, int]:
    """(blocked jobs released or cancelled, array children made)."""
    return advance_blocked(now), advance_arrays(now)


def advance_blocked(now: datetime) -> int:
    """Release or cancel the blocked jobs whose dependencies decided; returns how many changed state. In the
    caller's transaction; queries do not grow with the number of blocked jobs."""
    blocked = list(Job.objects.filter(state=JobState.BLOCKED).values_list("pk", "after", "pending_params"))
    if not blocked:
        return 0
    states = dict(
        Job.objects.filter(pk__in={e["job"] for _, after, _ in blocked for e in after}).values_list(
            "pk", "state"
        )
    )
    released, doomed, waiting = [], {}, {}
    for pk, after, held in blocked:
        broken = next(
            (
                e
                for e in after
                if states.get(e["job"], JobState.CANCELLED) in NEVER[e["condition"]] or e["job"] not in states
            ),
            None,
        )
        if broken is not None:
            doomed[pk] = broken
        elif all(states.get(e["job"]) in MET[e["condition"]] for e in after):
            released.append(pk)
        else:
            params = waits_params(after, states)
            if params != held:
                waiting[pk] = params
    if not (released or doomed or waiting):
        return 0
    jobs = (
        Job.objects.select_related("workspace")
        .defer("spec_text", "spec")
        .in_bulk([*released, *doomed, *waiting])
    )
    events: list[tuple[Job, str, Any, dict | None]] = []
    changed = []
    for pk in released:
        job = jobs[pk]
        job.state = JobState.PENDING
        job.pending_code, job.pending_params = "waiting_for_cycle", {}
        job.pending_reason = reason_text("waiting_for_cycle", {})
        names = ", ".join(f"{e['name']} #{e['job']}" for e in job.after)
        events.append((job, "released", said(texts.RELEASED_AFTER, jobs=names), None))
        changed.append(job)
    for pk, params in waiting.items():
        job = jobs[pk]
        job.pending_code, job.pending_params, job.pending_reason = (
            WAITS_CODE,
            params,
            reason_text(WAITS_CODE, params),
        )
        changed.append(job)
    update_rows(changed, ["state", "pending_code", "pending_params", "pending_reason"])
    record_events(events)
    for (
        pk,
        entry,
    ) in doomed.items():  # each ends as a cancel does: billing is told (it holds nothing, so pays nothing)
        job = jobs[pk]
        job.state, job.finished = JobState.CANCELLED, now
        job.pending_code, job.pending_params, job.pending_reason = "", {}, ""
        job.save(update_fields=["state", "finished", "pending_code", "pending_params", "pending_reason"])
        why = said(
            texts.DEPENDENCY_NOT_MET,
            job=f"{entry['name']} #{entry['job']}",
            state=states.get(entry["job"], "deleted"),
            condition=entry["condition"],
        )
        notes = signals.finish_notes(job)
        record_events([(job, "cancelled", joined([why, *notes]), {"after": entry})])
    return len(released) + len(doomed)


def _end_state(counts: dict[str, int]) -> str:
    if counts.get(JobState.FAILED):
        return JobState.FAILED
    if counts.get(JobState.CANCELLED):
        return JobState.CANCELLED
    return JobState.SUCCEEDED


def advance_arrays(now: datetime) -> int:
    """Make the next children of every open array and move the parents' states; returns the children made."""
    parents = list(Job.objects.filter(array_size__gt=0, state__in=OPEN_STATES))   # their children copy the spec
    if not parents:
        return 0
    counts = counts_by_parent([p.pk for p in parents])
    children: list[Job] = []
    changed, started, ended = [], [], []
    for parent in parents:
        by_state = counts.get(parent.pk, {})
        unfinished = sum(n for state, n in by_state.items() if state not in FINAL_STATES)
        array = parent.array
        indices = parse_indices(array["indices"])
        cancelled = set(array.get("cancelled", ()))
        made = array["made"]
        before = (parent.state, made, parent.pending_code, parent.pending_params)
        # indices cancelled before they were made become cancelled children at once, taking no room
        while batch := next_indices(indices, made, array["parallelism"], unfinished):
            for index in batch:
                if index in cancelled:
                    children.append(child_job(parent, index, now, JobState.CANCELLED))
                    by_state[JobState.CANCELLED] = by_state.get(JobState.CANCELLED, 0) + 1
                else:
                    children.append(child_job(parent, index, now))
                    unfinished += 1
                made += 1
        array["made"] = made
        placed = any(by_state.get(s) for s in (*ACTIVE_STATES, JobState.SUCCEEDED, JobState.FAILED))
        if made >= parent.array_size and unfinished == 0:
            parent.state, parent.finished = _end_state(by_state), now
            parent.pending_code, parent.pending_params, parent.pending_reason = "", {}, ""
            ended.append((parent, dict(by_state)))
        elif placed and parent.state == JobState.PENDING:
            parent.state, parent.started = JobState.RUNNING, parent.started or now
            parent.pending_code, parent.pending_params, parent.pending_reason = "", {}, ""
            started.append(parent)
        elif parent.state == JobState.PENDING:
            for key, value in window_fields(array, parent.array_size).items():
                setattr(parent, key, value)
        if (parent.state, made, parent.pending_code, parent.pending_params) != before:
            changed.append(parent)
    if children:
        made_rows = Job.objects.bulk_create(children, batch_size=2000)
        by_pk = {p.pk: p for p in parents}
        record_events(
            [
                (
                    child,
                    "submitted" if child.state == JobState.PENDING else "cancelled",
                    said(
                        texts.ARRAY_INDEX_SUBMITTED,
                        index=child.array_index,
                        parent=f"{by_pk[child.array_parent_id].name} #{child.array_parent_id}",
                    ),
                    None,
                )
                for child in made_rows
            ]
        )
    update_rows(
        changed, ["state", "started", "finished", "array", "pending_code", "pending_params", "pending_reason"]
    )
    record_events([(p, "running", "", None) for p in started])
    for (
        parent,
        by_state,
    ) in ended:  # billing fixes its cost (its children carry the lines; the parent holds none)
        notes = signals.finish_notes(parent)
        summary = ", ".join(f"{n} {state}" for state, n in sorted(by_state.items()))
        record_events(
            [
                (
                    parent,
                    parent.state.lower(),
                    joined([said(texts.ARRAY_ENDED, count=parent.array_size, counts=summary), *notes]),
                    None,
                )
            ]
        )
    return len(children)
