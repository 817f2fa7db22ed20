"""Allocate: place what jobs ask for, in fair order, without evicting."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..reasons import Reason
from ..session import Session
from ..state import JobState
from .gang import place_gang, plan, quota_block, reduce_cost_waits
from .topology import topology_key
from .walk import AGAIN, Quiet, fair_walk, pending_by_queue


@dataclass
class NoFitCache:
    """Gang shapes that did not fit; valid until some capacity is given back."""

    seen: dict[tuple, int]

    def known(self, s: Session, sig: tuple) -> bool:
        return self.seen.get(sig) == s.freed

    def add(self, s: Session, sig: tuple) -> None:
        self.seen[sig] = s.freed


CAPACITY = ("capacity", None)


def allocate_block(s: Session, state: JobState, cache: NoFitCache) -> tuple[str, Reason | None] | None:
    """Why `try_allocate` fails for this job now without trying to place it (as `JobState.fail`),
    or None when only trying can tell."""
    p = plan(s, state)
    for role in p.roles:
        if not s.pools_for(role.request):
            return ("no-pool", Reason("role_no_pool", {"role": role.name,
                                                       "reason": s.no_pool_reason(role.request).as_part()}))
    block = quota_block(s, state.job, p.need)
    if block:
        return ("quota", block)
    if not all(p.pools.values()):
        return ("reduce-cost", None)
    if cache.known(s, p.sig):
        return CAPACITY
    return None


def try_allocate(s: Session, state: JobState, cache: NoFitCache) -> bool:
    fail = allocate_block(s, state, cache)
    if fail is None:
        if place_gang(s, state):
            state.fail = None
            return True
        cache.add(s, plan(s, state).sig)
        fail = CAPACITY
    state.fail = fail
    return False


def would_place(s: Session, state: JobState, only: set[str] | None = None) -> bool:
    """Whether `place_gang` would place the job now; nothing is kept."""
    placed = []

    def scenario() -> bool:
        placed.append(place_gang(s, state, only))
        return False

    s.transaction(scenario)
    return placed[0]


class AllocateQuiet(Quiet):
    """Allocate's jobs left, grouped by gang signature, then queue, need and preemptibility (what
    `allocate_block` reads). A signature known not to fit, or that no pool serves, changes nothing
    whatever the queue; otherwise a group within its quotas changes something if its gang places."""

    def __init__(self, s: Session, cache: NoFitCache) -> None:
        super().__init__(s)
        self.cache = cache
        self.tried: dict[tuple, tuple[int, int, bool]] = {}   # signature -> (stamp, freed, placed)
        self.sigs: dict[tuple, tuple] = {}                    # group -> its signature
        self.by_sig: dict[tuple, dict[tuple, None]] = {}      # signature -> its groups

    def group(self, state: JobState) -> tuple:
        job = state.job
        if state.replicas:
            return id(plan(self.s, state)), job.queue, job.preemptible
        # nothing running: the plan follows from the roles (see `plan`), no need to look it up
        topology = None if job.topology is None else topology_key(self.s, state)
        # `reduce_cost_waits` is False for most jobs (not ReduceCost): asked only of the others
        return id(job.roles), job.reduce_cost and reduce_cost_waits(self.s, job), topology, job.queue, job.preemptible

    def created(self, g: tuple, state: JobState) -> None:
        sig = self.sigs[g] = plan(self.s, state).sig
        groups = self.by_sig.get(sig)
        if groups is None:
            groups = self.by_sig[sig] = {}
        groups[g] = None

    def forget(self, g: tuple) -> None:
        sig = self.sigs.pop(g)
        groups = self.by_sig[sig]
        del groups[g]
        if not groups:
            del self.by_sig[sig]

    def effective(self) -> bool:
        s, cache = self.s, self.cache
        for sig, groups in self.by_sig.items():
            if cache.known(s, sig):
                continue
            free = next((g for g in groups if allocate_block(s, self.rep(g), cache) is None), None)
            if free is None:
                continue
            tried = self.tried.get(sig)
            if tried is None or tried[:2] != (s.stamp, s.freed):
                placed = would_place(s, self.rep(free))
                tried = self.tried[sig] = (s.stamp, s.freed, placed)
            if tried[2]:
                return True
        return False

    def record(self, g: tuple, states: Iterable[JobState]) -> None:
        fail = None
        for state in states:
            if fail is None:
                fail = allocate_block(self.s, state, self.cache) or CAPACITY
            state.fail = fail


def allocate(s: Session) -> None:
    """Place what jobs ask for, in fair order, without evicting: gang minimums whole, and elastic
    replicas above them one at a time (over quota too), each job put back in its queue after it grew."""
    cache = NoFitCache({})

    def visit(state: JobState) -> object:
        if try_allocate(s, state, cache) and state.grows:
            return AGAIN
        return None

    fair_walk(s, pending_by_queue(s), visit, AllocateQuiet(s, cache))
