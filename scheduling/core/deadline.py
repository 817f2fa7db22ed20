"""Work with a deadline: which phase a deadline job is in at a cycle, and how the cycle sees it.

A job with `latest_start` (the latest time it can start and still finish by its deadline, with a safety
margin; the scheduling layer computes it) has two phases:

- before its latest start it waits for idle GPUs: it is preemptible, whatever its own flag says, and it
  ranks just below the strict jobs of its priority (priority less a half). So it takes only what the
  strict work of its queue does not ask for, a strict job of its priority in its queue may preempt it,
  and any queue within its deserved quota may reclaim it, as best-effort work;
- from its latest start on (`now >= latest_start`) it is strict: non-preemptible at its own priority.
  It reclaims and preempts as such a job does, and is no preemptible victim. One still pending then can
  no longer be sure to meet its deadline: the cycle lists it in `Decisions.late` at once.

The cycle gives the actions each deadline job as this phase makes it (`phased`); the job objects are
kept from cycle to cycle while the phase holds (`Phases`), so the session build reuses what it knows.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import compress, repeat
from operator import attrgetter, is_not

from .model import Job, Snapshot
from .reasons import Reason

# how far below the strict jobs of its priority a deadline job waiting for idle GPUs ranks: less than one
# step, so it stays above every job of a lower priority
WAITING_RANK = 0.5
IDLE, STRICT = "idle", "strict"
_LATEST_START = attrgetter("latest_start")


def phase(job: Job, now: float) -> str | None:
    """A deadline job's phase at `now`: IDLE (before its latest start) or STRICT; None for a job without one."""
    if job.latest_start is None:
        return None
    return STRICT if now >= job.latest_start else IDLE


def next_turn(jobs, now: float) -> float | None:
    """The earliest latest start after `now` among `jobs`: when a cycle must run to turn a job strict."""
    later = [j.latest_start for j in jobs if j.latest_start is not None and j.latest_start > now]
    return min(later) if later else None


def as_phased(job: Job, now: float) -> Job:
    """The job as the actions see it at `now` (itself when it has no deadline)."""
    p = phase(job, now)
    if p is None:
        return job
    if p == STRICT:
        return job if not job.preemptible else replace(job, preemptible=False)
    return replace(job, preemptible=True, priority=job.priority - WAITING_RANK)


@dataclass
class Phases:
    """The phased objects of the last cycle's deadline jobs, by id of the job given: (job, phase, phased)."""

    kept: dict[int, tuple[Job, str, Job]] = field(default_factory=dict)


def phased(snapshot: Snapshot, phases: Phases | None = None) -> Snapshot:
    """The snapshot with each deadline job as its phase at `snapshot.now` makes it (the same snapshot
    when none has a deadline)."""
    jobs = snapshot.jobs
    starts = list(map(_LATEST_START, jobs))
    if starts.count(None) == len(starts):
        if phases is not None:
            phases.kept = {}
        return snapshot
    now = snapshot.now
    before = phases.kept if phases is not None else {}
    kept: dict[int, tuple[Job, str, Job]] = {}
    out = list(jobs)
    # the deadline jobs' places only (C loops pick them)
    for i in compress(range(len(starts)), map(is_not, starts, repeat(None))):
        job = out[i]
        p = STRICT if now >= starts[i] else IDLE
        found = before.get(id(job))
        if found is None or found[0] is not job or found[1] != p:
            found = (job, p, as_phased(job, now))
        kept[id(job)] = found
        out[i] = found[2]
    if phases is not None:
        phases.kept = kept
    return replace(snapshot, jobs=tuple(out))


def clock_text(epoch: float) -> str:
    """A time as reasons show it: UTC, to the minute."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")


def waiting_reason(latest_start: float) -> Reason:
    """Why a deadline job before its latest start waits: it takes idle GPUs only until then."""
    return Reason("deadline_waits_for_idle", {"until": clock_text(latest_start), "latest_start": latest_start})


__all__ = ["IDLE", "STRICT", "Phases", "as_phased", "clock_text", "next_turn", "phase", "phased", "waiting_reason"]
