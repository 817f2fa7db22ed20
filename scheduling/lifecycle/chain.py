"""Dependencies: a job that waits (`Blocked`) for other jobs of its workspace to end, then queues or is cancelled.

At submit each `after` entry is resolved once to a job of the same workspace (by id, or by name: the latest
top-level job of that name), so the graph only ever points at jobs that existed before: no cycle can form
later. A job that names itself is the one cycle a spec can write, and is refused. Each cycle,
`advance_blocked` reads the blocked jobs and the states of what they wait for (two queries whatever their
number), releases those whose conditions all hold (Pending, back in their queue), cancels those one of whose
conditions can no longer hold, and keeps the others' reasons current (rows written only when they change):
that runs in `lifecycle.cycle`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.utils.translation import gettext as _

from scheduling.models import FINAL_STATES, Job, JobState
from scheduling.reasons import reason_text
from scheduling.spec.model import JobSpec, SpecError, SpecIssue

WAITS_CODE = "waits_for_jobs"
# what each condition needs, and the ends after which it can no longer hold
MET = {"succeeded": {JobState.SUCCEEDED}, "failed": {JobState.FAILED}, "finished": set(FINAL_STATES)}
NEVER = {
    "succeeded": {JobState.FAILED, JobState.CANCELLED},
    "failed": {JobState.SUCCEEDED, JobState.CANCELLED},
    "finished": set(),
}


def resolve_after(workspace, parsed: JobSpec) -> list[dict[str, Any]]:
    """The spec's `after` as stored on the job: [{job: id, name, condition}]. SpecError (at each entry's line and
    column) for a job this workspace does not have, or for the job itself. Two queries at most."""
    if not parsed.after:
        return []
    ids = [int(a.job) for a in parsed.after if a.job.isdigit()]
    names = [a.job for a in parsed.after if not a.job.isdigit()]
    # another workspace's job is not found: its id or name says nothing here
    by_id = dict(Job.objects.filter(workspace=workspace, pk__in=ids).values_list("pk", "name")) if ids else {}
    by_name: dict[str, int] = {}
    if names:
        for pk, name in (
            Job.objects.filter(workspace=workspace, name__in=names, array_parent__isnull=True)
            .order_by("-created", "-pk")
            .values_list("pk", "name")
        ):
            by_name.setdefault(name, pk)
    issues, out = [], []
    for entry in parsed.after:
        field, line, column = entry.where
        if entry.job == parsed.name:
            issues.append(
                SpecIssue(
                    line,
                    column,
                    field,
                    _("after: job %(job)s is this job itself; a job cannot wait for itself (a cycle)")
                    % {"job": entry.job},
                )
            )
            continue
        if entry.job.isdigit():
            pk, name = int(entry.job), by_id.get(int(entry.job))
            found = name is not None
        else:
            pk, name = by_name.get(entry.job), entry.job
            found = pk is not None
        if not found:
            issues.append(
                SpecIssue(
                    line, column, field, _("after: this workspace has no job %(job)s") % {"job": entry.job}
                )
            )
            continue
        out.append({"job": pk, "name": name, "condition": entry.condition})
    if issues:
        raise SpecError(issues)
    return out


def waits_params(after: list[dict[str, Any]], states: dict[int, str]) -> dict[str, Any]:
    """The reason's figures: the entries not met yet."""
    return {
        "jobs": [
            {"job": e["job"], "name": e["name"], "condition": e["condition"]}
            for e in after
            if states.get(e["job"]) not in MET[e["condition"]]
        ]
    }


def blocked_fields(after: list[dict[str, Any]]) -> dict[str, Any]:
    params = waits_params(after, {})
    return {
        "pending_code": WAITS_CODE,
        "pending_params": params,
        "pending_reason": reason_text(WAITS_CODE, params),
    }


def chain_of(job: Job, *, depth: int = 6) -> dict[str, list[dict[str, Any]]]:
    """A job's chain for its page: what it waits for (upstream, transitively) and what waits for it (downstream,
    the jobs of its workspace naming it, read from its 500 oldest jobs with an `after`), each node {id, name, state,
    condition, level}, `depth` levels at most. One query an upstream level, one for downstream."""
    upstream: list[dict[str, Any]] = []
    frontier, seen = list(job.after), {job.pk}
    for level in range(1, depth + 1):
        ids = [e["job"] for e in frontier if e["job"] not in seen]
        if not ids:
            break
        rows = {
            pk: (name, state, after)
            for pk, name, state, after in Job.objects.filter(
                workspace_id=job.workspace_id, pk__in=ids
            ).values_list("pk", "name", "state", "after")
        }
        next_frontier = []
        for e in frontier:
            if e["job"] in seen or e["job"] not in rows:
                continue
            seen.add(e["job"])
            name, state, after = rows[e["job"]]
            upstream.append(
                {"id": e["job"], "name": name, "state": state, "condition": e["condition"], "level": level}
            )
            next_frontier.extend(after)
        frontier = next_frontier
    downstream: list[dict[str, Any]] = []
    targets, seen = {job.pk: 1}, {job.pk}
    candidates = list(
        Job.objects.filter(workspace_id=job.workspace_id)
        .exclude(after=[])
        .order_by("created", "pk")
        .values_list("pk", "name", "state", "after")[:500]
    )
    by_target: dict[int, list] = defaultdict(list)
    for pk, name, state, after in candidates:
        for e in after:
            by_target[e["job"]].append((pk, name, state, e["condition"]))
    queue = [job.pk]
    while queue:
        target = queue.pop(0)
        for pk, name, state, condition in by_target.get(target, ()):
            if pk in seen or targets[target] > depth:
                continue
            seen.add(pk)
            targets[pk] = targets[target] + 1
            downstream.append(
                {"id": pk, "name": name, "state": state, "condition": condition, "level": targets[target]}
            )
            queue.append(pk)
    return {"upstream": upstream, "downstream": downstream}


def workspace_chains(workspace, *, limit: int = 20) -> list[dict[str, Any]]:
    """The workspace page's chains: its blocked jobs (oldest first, at most `limit`), each with the jobs it waits
    for and their states. Two queries."""
    blocked = list(
        Job.objects.filter(workspace=workspace, state=JobState.BLOCKED)
        .order_by("created", "pk")
        .values_list("pk", "name", "after")[:limit]
    )
    ids = {e["job"] for _, _, after in blocked for e in after}
    states = dict(Job.objects.filter(workspace=workspace, pk__in=ids).values_list("pk", "state"))
    return [
        {
            "id": pk,
            "name": name,
            "state": JobState.BLOCKED,
            "waits": [{**e, "state": states.get(e["job"], "")} for e in after],
        }
        for pk, name, after in blocked
    ]
