"""Elastic: idle capacity nobody waits for goes to ReduceCost jobs, on-peak."""

from __future__ import annotations

from ..session import Session
from ..state import JobState
from .allocate import NoFitCache
from .gang import gang_pools, gang_signature, missing_milli, place_gang, plan, quota_block, reduce_cost_waits
from .walk import AGAIN, fair_walk


def wanted_pools(s: Session) -> set[str]:
    """Pools some still-pending (non-ReduceCost) job waits on for capacity."""
    wanted: set[str] = set()
    seen: set[int] = set()          # plans already counted (jobs share them)
    every = len(s.pools)
    for state in s.wanting:
        if state.pending and state.fail and state.fail[0] == "capacity" and not state.job.reduce_cost:
            p = plan(s, state)
            if id(p) not in seen:
                seen.add(id(p))
                wanted |= gang_pools(s, state)
                if len(wanted) == every:
                    break           # nothing more to add
    return wanted


def elastic(s: Session) -> None:
    """Idle capacity nobody waits for, on-peak: ReduceCost jobs (which may use only spot pools then)
    start there and grow into it, one replica at a time in fair order. Other elastic jobs grow in
    `allocate`, like any pending replica."""
    wanted = wanted_pools(s)
    idle = {p for p in s.pools if p not in wanted}
    cache = NoFitCache({})
    allowed = idle | {p for p in s.pools if s.pools[p].spot}

    def use_idle(state: JobState) -> object:
        block = quota_block(s, state.job, missing_milli(s, state))
        if block:
            state.fail = ("quota", block)
            return None
        sig = (gang_signature(s, state), "idle")
        if gang_pools(s, state, allowed) and not cache.known(s, sig):
            if place_gang(s, state, allowed):
                state.fail = None
                return AGAIN if state.grows else None
            cache.add(s, sig)
        return None

    waiting: dict[str, list[JobState]] = {}
    for state in s.wanting:
        # most jobs are not ReduceCost: their flag is read before the call
        if state.evicted or not state.job.reduce_cost or not reduce_cost_waits(s, state.job):
            continue
        if state.grows or (state.pending and state.fail is not None and state.fail[0] in ("reduce-cost", "capacity")):
            waiting.setdefault(state.job.queue, []).append(state)
    fair_walk(s, waiting, use_idle)
