"""Preempt: higher priority evicts lower priority within a queue; ReduceCost jobs on borrowed
capacity yield."""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import chain, compress, repeat
from operator import attrgetter, gt

from ..model import EvictCause, Job
from ..session import Session
from ..state import JobState
from .evicting import Unit, live_keys, merged, run_eviction_action, victim_units
from .gang import missing_milli, np_quota_block, reduce_cost_waits, within_quota

_PREEMPTIBLE, _REDUCE_COST, _QUEUE = attrgetter("preemptible"), attrgetter("reduce_cost"), attrgetter("queue")
_PRIORITY = attrgetter("priority")


def preempt(s: Session) -> None:
    """Higher priority evicts lower priority within a queue. ReduceCost jobs running on-peak on
    non-spot capacity (it was idle when they started) yield to any pending job."""
    if not preempt_may_help(s):
        return
    units = victim_units(s, "preempt")
    lowest = {q: min(u.job.priority for u in lst) for q, lst in units.items() if lst}
    borrowed = [u for lst in units.values() for u in lst
                if reduce_cost_waits(s, u.job) and on_borrowed_capacity(s, u)]

    def prepare(state: JobState):
        job = state.job
        if reduce_cost_waits(s, job) or np_quota_block(s, job, missing_milli(s, state)):
            return None             # evicting preemptible work never lifts a non-preemptible quota
        same = job.priority > lowest.get(job.queue, job.priority)
        if not same and not borrowed:
            return None
        lower = (u for u in units.get(job.queue, []) if u.job.priority < job.priority) if same else iter(())
        others = [u for u in borrowed if u.job.id != job.id]
        return merged([others, list(lower)]), preempt_causes(job), lambda: within_quota(s, job)

    def never(state: JobState) -> bool:
        # what `prepare` reads does not change during the walk: `lowest` and `borrowed` are fixed
        job = state.job
        return (job.reduce_cost and reduce_cost_waits(s, job)) or (
            not borrowed and job.priority <= lowest.get(job.queue, job.priority))

    # one scenario per job, as KAI-Scheduler preempts: an elastic job gets its minimum (or its next
    # replica) here, and what it asks for next waits for the next cycle
    run_eviction_action(s, {"capacity", "quota"}, prepare, never, again=False)


def preempt_may_help(s: Session) -> bool:
    """Whether some job may preempt: one that wants replicas with a higher priority than some preemptible
    job of its queue, or a preemptible ReduceCost job on-peak (it may have to yield). When none may, every
    visit of `preempt`'s walk would pass, so the walk is left out (a cheap scan instead)."""
    jobs = s.snapshot.jobs          # the session's jobs, those `s.jobs` holds
    preemptible = list(compress(jobs, map(_PREEMPTIBLE, jobs)))
    if any(map(_REDUCE_COST, preemptible)) and any(
            reduce_cost_waits(s, job) for job in preemptible if job.reduce_cost):
        return True
    # only a job that wanted replicas when the session was built, or whose replicas changed since, can want
    # them now
    highest: dict[str, int] = {}
    states = s.jobs
    for state in chain(s.wanting, map(states.__getitem__, s.touched)):
        if state.pending or state.grows:
            job = state.job
            high = highest.get(job.queue)
            if high is None or job.priority > high:
                highest[job.queue] = job.priority
    if not highest:
        return False
    # some queue's highest wanting job above the lowest preemptible job of its queue (C loops: a queue with
    # no wanting job stands at minus infinity)
    tops = map(highest.get, map(_QUEUE, preemptible), repeat(-math.inf))
    return any(map(gt, tops, map(_PRIORITY, preemptible)))


def preempt_causes(job: Job) -> Callable[[Unit], EvictCause]:
    """Why a unit makes way for `job`: a lower priority in its queue, or else a ReduceCost job
    giving back borrowed capacity."""
    by_priority = EvictCause(job.id, job.queue, job.queue, "priority")
    by_cost = EvictCause(job.id, job.queue, "", "reduce-cost")

    def cause_of(unit: Unit) -> EvictCause:
        return by_priority if unit.queue == job.queue and unit.job.priority < job.priority else by_cost

    return cause_of


def on_borrowed_capacity(s: Session, unit: Unit) -> bool:
    return any(not s.pools[s.node_pool[s.assign[k].row]].spot for k in live_keys(s, unit))
