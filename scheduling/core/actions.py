"""The scheduling actions, run in this order: allocate, consolidate, reclaim, preempt, elastic.

Each action walks the jobs that want replicas in fair order (`fair_walk`: the queue tree from the
top, weighed as KAI-Scheduler's proportion plugin weighs it) and tries a scenario in a session
transaction; a scenario is kept only if what the job asks for gets placed whole: its gang minimum,
or one elastic replica above it (and, for consolidation, every moved replica fits again). Victims
are never replicas bound in this cycle, so nothing is bound and evicted in the same cycle, and
every eviction buys a placement: no ping-pong. A victim's replicas that are not in the way stay; one
that is in the way moves when the whole victim fits elsewhere.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import placement as pl
from .fit import Reason
from .model import EvictCause, Job, ReplicaKey, Request, Role, Slice
from .repack import Steps
from .room import MovableSet, Resident, plan_room
from .session import Assignment, JobState, Session, request_milli
from .units import MILLI_PER_GPU

# Scenarios that evict are costly; a cycle tries at most this many per action, and gives up on the
# action after MAX_FAILED_SCENARIOS of them failed (the rest wait for the next cycle).
MAX_EVICTION_SCENARIOS = 64
MAX_FAILED_SCENARIOS = 16
# Consolidation looks at this many nodes per pending job.
MAX_CONSOLIDATION_NODES = 4
# Consolidation scenarios per cycle (each looks at up to MAX_CONSOLIDATION_NODES nodes).
MAX_CONSOLIDATION_SCENARIOS = 8
EPS = 1e-6
STOP = object()          # returned by a fair_walk visitor that wants no more jobs
AGAIN = object()         # returned by a fair_walk visitor whose job grew and asks for more


# ---------------------------------------------------------------------- shared helpers


def job_order(state: JobState) -> tuple:
    """A job's place in its queue (KAI-Scheduler's job order): higher priority first; then jobs below
    their gang minimum, then elastic jobs with the fewest replicas above it (so that spare room is
    shared round-robin); then the job submitted first."""
    job = state.job
    return (-job.priority, 0 if state.pending else 1 + state.extra, job.created, job.id)


def queue_weights(s: Session, queue: str) -> tuple[float, float, int, float]:
    """What `queue_order` weighs a queue's usage against: its fair share and deserved quota (each
    with EPS), minus its priority, and its allocatable share (`Session.allocatable`). Fixed for a
    session."""
    q = s.queues[queue]
    return s.fair_share.get(queue, 0.0) + EPS, q.deserved_milli + EPS, -q.priority, s.allocatable[queue]


def queue_order(alloc: float, need: float, weights: tuple[float, float, int, float], job: Job) -> tuple:
    """Where a queue holding `alloc` stands among its siblings for placing `job` (the first job under
    it, asking `need`), as KAI-Scheduler's proportion plugin orders queues: within its fair share
    before over it; within its deserved quota with the job added before not; higher queue priority;
    a queue with no allocatable share last; the smaller share of its allocatable share with the job
    added, then without it; the smaller allocatable share; then the job submitted first."""
    fair, deserved, rank, cap = weights
    with_job = alloc + need
    if cap > EPS:
        return alloc > fair, with_job > deserved, rank, False, with_job / cap, alloc / cap, cap, job.created, job.id
    return alloc > fair, with_job > deserved, rank, with_job > EPS, with_job, alloc, cap, job.created, job.id


def pending_by_queue(s: Session, kinds: Iterable[str | None] | None = None) -> dict[str, list[JobState]]:
    """Jobs that want replicas (whose last failure is of one of `kinds`, if given) per queue: those below
    their gang minimum and elastic jobs below their maximum. A job evicted in this cycle waits for the
    next one."""
    out: dict[str, list[JobState]] = {}
    allowed = set(kinds) if kinds is not None else None
    for state in s.wanting:
        if (state.pending or state.grows) and not state.evicted and (
                allowed is None or (state.fail[0] if state.fail else None) in allowed):
            jobs = out.get(state.job.queue)
            if jobs is None:
                jobs = out[state.job.queue] = []
            jobs.append(state)
    return out


def fair_walk(s: Session, by_queue: dict[str, list[JobState]], visit: Callable[[JobState], object],
              quiet: Quiet | None = None) -> None:
    """Visit jobs in fair order, as KAI-Scheduler pops them: from the top of the queue tree down, at
    each level the queue that comes first by `queue_order` (weighed with the first job under it),
    then that leaf's first job by `job_order`. After each visit the queues on its path are weighed
    again; after an eviction, all of them. `visit` returns STOP to end the walk, or AGAIN to put the
    job back in its queue (it grew by a replica and asks for another). With `quiet` (not in an exact
    session) the walk ends as soon as no job left to visit could change anything: `quiet` then does
    for those jobs what their visits would have done."""
    if s.exact:
        quiet = None
    queued: dict[str, list[JobState]] = {}    # leaf -> its jobs by job_order, from head[leaf] on
    head: dict[str, int] = {}
    for q, states in by_queue.items():
        if states:
            # the lists come in `Session.order`, which is job_order for jobs below their minimum;
            # the others (elastic jobs that may grow) are put in their places
            entries = [st for st in states if st.pending]
            if len(entries) < len(states):
                for st in sorted((st for st in states if not st.pending), key=job_order):
                    bisect.insort(entries, st, key=job_order)
            queued[q], head[q] = entries, 0
    if not queued:
        return
    if quiet is not None:
        quiet.add_all(queued.values())
    kids: dict[str | None, list[str]] = {None: []}
    for leaf in queued:
        path = s.queue_path[leaf]
        for child, parent in zip(path, (*path[1:], None), strict=True):
            siblings = kids.setdefault(parent, [])
            if child in siblings:
                break
            siblings.append(child)
    # parents deepest first, the root (None) last: a node's key needs its children's heaps
    parents = sorted(kids, key=lambda p: -len(s.queue_path[p]) if p is not None else 0)
    weights = {q: queue_weights(s, q) for q in (*queued, *(p for p in kids if p is not None))}
    heaps: dict[str | None, list] = {}
    alloc = s.alloc

    def weighed(name: str) -> tuple | None:
        """(queue_order key, name) for a node's heap entry; None when nothing is left under it."""
        leaf = name
        while leaf not in queued:
            below = heaps.get(leaf)
            if not below:
                return None
            leaf = below[0][1]
        entries, at = queued[leaf], head[leaf]
        if at >= len(entries):
            return None
        state = entries[at]
        need = state.plan.need if state.plan_version == state.version else plan(s, state).need
        return queue_order(alloc[name], need, weights[name], state.job), name

    def rebuild() -> None:
        for parent in parents:
            heap = [entry for entry in map(weighed, kids[parent]) if entry is not None]
            heapq.heapify(heap)
            heaps[parent] = heap

    version = None
    while True:
        if version != s.freed:
            rebuild()
            version = s.freed
        heap = heaps[None]
        if not heap:
            return
        if quiet is not None and quiet.due() and quiet.settled():
            quiet.finish()
            return
        path = []
        while True:
            name = heapq.heappop(heap)[1]
            path.append((heap, name))
            if name in queued:
                break
            heap = heaps[name]
        entries, at = queued[name], head[name]
        state = entries[at]
        head[name] = at + 1
        if quiet is not None:
            quiet.remove(state)
        result = visit(state)
        if result is STOP:
            return
        if result is AGAIN:
            bisect.insort(entries, state, lo=at + 1, key=job_order)
            if quiet is not None:
                quiet.add(state)
        for heap, node in reversed(path):
            entry = weighed(node)
            if entry is not None:
                heapq.heappush(heap, entry)


class Quiet:
    """When a walk may stop early. Most jobs an action walks cannot be served (the same shapes fail
    again and again), and visiting each in fair order costs more than the rest of the cycle; but the
    order matters only up to the last visit that changes something. So the jobs still to visit are
    counted by group (`group`: everything their visit depends on besides the session's state), and
    from time to time (`due`, at doubling gaps) `quiet` asks whether a visit of any group would now
    change anything but its own job's `fail`. When none would, nothing changes any more: the walk
    stops and `finish` records for each job left what its visit would have recorded. The decisions
    are those of visiting every job (`Session.exact`; tests compare the two)."""

    FIRST_GAP = 8

    def __init__(self, s: Session) -> None:
        self.s = s
        self.members: dict[tuple, dict[str, JobState]] = {}   # group -> its jobs left to visit, by id
        self.where: dict[str, tuple] = {}          # job id -> (group, job version) it is counted under
        self.seen = len(s.touched)
        self.wait = 0
        self.gap = self.FIRST_GAP

    def group(self, state: JobState) -> tuple:
        raise NotImplementedError

    def effective(self) -> bool:
        """Whether visiting some job left (of a group with a count) could change anything now."""
        raise NotImplementedError

    def record(self, g: tuple, states: Iterable[JobState]) -> None:
        """Do what visiting these jobs of group `g` now would do, knowing it changes nothing else."""

    def add(self, state: JobState) -> None:
        g = self.group(state)
        members = self.members.get(g)
        if members is None:
            members = self.members[g] = {}
            self.created(g, state)
        members[state.job.id] = state
        self.where[state.job.id] = (g, state.version)

    def add_all(self, lists: Iterable[list[JobState]]) -> None:
        """`add` for every job of these lists (the walk's start: thousands of jobs)."""
        members_of, where, group, created = self.members, self.where, self.group, self.created
        for states in lists:
            for state in states:
                g = group(state)
                members = members_of.get(g)
                if members is None:
                    members = members_of[g] = {}
                    created(g, state)
                job_id = state.job.id
                members[job_id] = state
                where[job_id] = (g, state.version)

    def remove(self, state: JobState) -> None:
        job_id = state.job.id
        g = self.where.pop(job_id)[0]
        members = self.members[g]
        del members[job_id]
        if not members:
            del self.members[g]
            self.forget(g)

    def created(self, g: tuple, state: JobState) -> None:
        """Group `g` was made for `state`, its first job."""

    def forget(self, g: tuple) -> None:
        """Group `g` has no job left (its key may be used again for another)."""

    def refresh(self) -> None:
        """Jobs left whose replicas changed since they were counted (victims) move to their group now."""
        touched, jobs, where = self.s.touched, self.s.jobs, self.where
        for job_id in touched[self.seen:]:
            found = where.get(job_id)
            if found is not None and found[1] != jobs[job_id].version:
                self.remove(jobs[job_id])
                self.add(jobs[job_id])
        self.seen = len(touched)

    def rep(self, g: tuple) -> JobState:
        """A job left in group `g`."""
        return next(iter(self.members[g].values()))

    def due(self) -> bool:
        if self.wait > 0:
            self.wait -= 1
            return False
        return True

    def settled(self) -> bool:
        self.refresh()
        if not self.effective():
            return True
        self.wait, self.gap = self.gap, self.gap * 2
        return False

    def finish(self) -> None:
        """Record for every job left what its visit would have recorded now."""
        for g, members in self.members.items():
            self.record(g, members.values())


@dataclass(frozen=True)
class Plan:
    """What a job asks for next (`JobState.wanted`: the replicas missing to its gang minimum, or its
    next elastic replica), cached until one of its replicas is bound or evicted. Jobs with nothing
    running and the same roles share one (`Session.plans`, kept from cycle to cycle by a memo)."""

    missing: dict[str, list[int]]             # role -> replica indices wanted
    roles: list[Role]                          # roles with something missing, biggest replica first
    pools: dict[str, list[str]]                # role -> candidate pools (home pool first)
    need: int                                  # GPU milli of the missing replicas
    sig: tuple                                 # identical signatures fit or fail together


def plan(s: Session, state: JobState) -> Plan:
    if state.plan_version == state.version:
        return state.plan
    if state.replicas:
        found = make_plan(s, state)
    else:
        roles = state.job.roles
        key = (id(roles), reduce_cost_waits(s, state.job))
        cached = s.plans.get(key)
        if cached is not None and cached[0] is roles:
            found = cached[1]
        else:
            found = make_plan(s, state)
            s.plans[key] = (roles, found)
    state.plan, state.plan_version = found, state.version
    return found


def make_plan(s: Session, state: JobState) -> Plan:
    missing = state.wanted()
    roles = sorted((r for r in state.job.roles if r.name in missing), key=lambda r: -request_milli(r.request, None))
    pools = {r.name: role_pools(s, state, r, None) for r in roles}
    need = 0
    for r in roles:
        serving = s.pools_for(r.request)
        need += len(missing[r.name]) * request_milli(r.request, s.pools[serving[0]] if serving else None)
    sig = (tuple((r.request.shape(), len(missing[r.name]), tuple(pools[r.name])) for r in roles),
           reduce_cost_waits(s, state.job))
    return Plan(missing, roles, pools, need, sig)


def missing_milli(s: Session, state: JobState) -> int:
    return plan(s, state).need


def quota_block(s: Session, job: Job, add: int) -> Reason | None:
    """Why `job` may not take `add` more milli-GPU now (limit, non-preemptible quota), or None."""
    np_add = 0
    if not job.preemptible:
        state = s.jobs[job.id]
        np_add = state.np_milli(state.held + add) - state.np_milli(state.held)
    for name in s.queue_path[job.queue]:
        queue = s.queues[name]
        if queue.limit_milli is not None and s.alloc[name] + add > queue.limit_milli:
            return Reason("queue_over_limit", {"queue": name, "limit_milli": queue.limit_milli,
                                               "used_milli": int(s.alloc[name]), "need_milli": int(add)})
        if np_add and s.np_alloc[name] + np_add > queue.deserved_milli:
            return Reason("queue_non_preemptible_quota", {"queue": name, "deserved_milli": queue.deserved_milli,
                                                          "used_milli": int(s.np_alloc[name]),
                                                          "need_milli": int(np_add)})
    return None


def within_quota(s: Session, job: Job) -> bool:
    return quota_block(s, job, 0) is None


def off_peak_of(s: Session, job: Job) -> tuple[bool, str]:
    """Whether the job's off-peak window is open now, and when it next opens (its own window where
    the snapshot names one: `Snapshot.job_off_peak`)."""
    own = s.job_off_peak.get(job.id) if s.job_off_peak else None
    return own if own is not None else (s.snapshot.off_peak, s.snapshot.next_off_peak)


def reduce_cost_waits(s: Session, job: Job) -> bool:
    """A ReduceCost job outside off-peak may use only spot pools (or idle capacity, in elastic)."""
    return job.reduce_cost and not off_peak_of(s, job)[0]


def role_pools(s: Session, state: JobState, role: Role, only: set[str] | None) -> list[str]:
    """Candidate pools for a role: where the job already runs first, then snapshot order."""
    pools = s.pools_for(role.request)
    if only is not None:
        pools = [p for p in pools if p in only]
    if reduce_cost_waits(s, state.job) and only is None:
        pools = [p for p in pools if s.pools[p].spot]
    if len(pools) < 2 or not state.replicas:
        return pools
    home = {s.node_pool[s.assign[(state.job.id, r.name, i)].row]
            for r in state.job.roles for i in state.running[r.name]}
    return sorted(pools, key=lambda p: p not in home)


def place_gang(s: Session, state: JobState, only: set[str] | None = None) -> bool:
    """Bind the replicas missing to reach the gang minimum: all of them or none."""
    p = plan(s, state)

    def scenario() -> bool:
        for role in p.roles:
            pools = p.pools[role.name] if only is None else role_pools(s, state, role, only)
            for index in p.missing[role.name]:
                spot = None
                for pool in pools:
                    spot = s.find_spot(role.request, pool)
                    if spot is not None:
                        break
                if spot is None:
                    return False
                s.bind((state.job.id, role.name, index), spot)
        return True

    return s.transaction(scenario)


def gang_signature(s: Session, state: JobState) -> tuple:
    return plan(s, state).sig


def gang_pools(s: Session, state: JobState, only: set[str] | None = None) -> set[str]:
    p = plan(s, state)
    if only is None:
        return {pool for pools in p.pools.values() for pool in pools}
    return {pool for r in p.roles for pool in role_pools(s, state, r, only)}


# ---------------------------------------------------------------------- allocate


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
        return id(job.roles), reduce_cost_waits(self.s, job), job.queue, job.preemptible

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


# ---------------------------------------------------------------------- evicting scenarios


class Unit(NamedTuple):
    """What one eviction takes: one elastic extra replica, or a whole job."""

    order: tuple
    queue: str
    keys: tuple[ReplicaKey, ...]
    reason: str
    job: Job


def victim_units(s: Session, reason: str) -> dict[str, list[Unit]]:
    """Evictable units per queue, cheapest first: the lowest job priority first (a higher priority
    would take back what a lower one kept, by preemption); within a priority, elastic extras (of the
    job with the most of them first), then ReduceCost jobs, then the newest. The queue's priority
    leads the order, so that where units of several queues are merged, lower-priority queues give
    first. Built once per action; units gone stale are skipped when used."""
    by_job: dict[str, list[ReplicaKey]] = {}
    new = s.new
    for key in s.assign:
        if key not in new:
            found = by_job.get(key[0])
            if found is None:
                by_job[key[0]] = [key]
            else:
                found.append(key)
    out: dict[str, list[Unit]] = {}
    jobs, queues = s.jobs, s.queues
    for job_id, keys in by_job.items():
        state = jobs[job_id]
        job = state.job
        if not job.preemptible and not state.elastic:
            continue   # a non-preemptible job gives up only its elastic replicas, above its minimum
        units = out.get(job.queue)
        if units is None:
            units = out[job.queue] = []
        rank = queues[job.queue].priority
        # a job's units follow from its replicas (`version`: none bound or evicted since), the reason and
        # its queue's priority: kept on its state, from cycle to cycle while the state is reused
        made = state.units
        if made is not None and made[0] == state.version and made[1] == reason and made[2] == rank:
            units += made[3]
            continue
        made = []
        base = (-job.created, job.id)
        # extras go the way they came: from the job with the most above its minimum first
        if state.elastic:
            above = state.extra
            for k, (role, index) in enumerate(state.extras()):
                if (job_id, role, index) in keys:
                    made.append(Unit((rank, job.priority, 0, k - above, *base, role, -index), job.queue,
                                     ((job_id, role, index),), "shrink", job))
        if job.preemptible:
            made.append(Unit((rank, job.priority, 1 if job.reduce_cost else 2, 0, *base, "", 0), job.queue,
                             tuple(keys) if len(keys) == 1 else tuple(sorted(keys)), reason, job))
        state.units = (state.version, reason, rank, made)
        units += made
    for units in out.values():
        units.sort(key=lambda u: u.order)
    return out


def merged(lists: Iterable[list[Unit]], key: Callable[[Unit], tuple] = lambda u: u.order) -> Iterator[Unit]:
    """Several sorted unit lists as one, lazily (scenarios usually stop after a few units). `key`
    must keep each list's order."""
    return heapq.merge(*lists, key=key)


def live_keys(s: Session, unit: Unit) -> list[ReplicaKey]:
    return [k for k in unit.keys if k in s.assign and k not in s.new]


def evict_until_placed(s: Session, state: JobState, units: Iterable[Unit],
                       cause_of: Callable[[Unit], EvictCause | None], holds: Callable[[], bool]) -> bool:
    """Scenario body: evict units in order until the job's gang fits and `holds()` (quotas, fair
    share) is true; then give back the evictions that were not needed and move the victims that can
    be moved (`keep_victims`). `cause_of(unit)` says why a unit may go now, or None when it may not.
    After a few evictions without success, the scenario gives up at once when evicting every unit the
    loop would still take could not make room (`could_still_fit`): the same outcome, without evicting
    them one by one."""
    def placed() -> bool:
        return s.transaction(lambda: place_gang(s, state) and holds())

    if placed():
        return True
    pools = gang_pools(s, state)
    need = missing_milli(s, state)
    whole_only = all(s.pools[p].gpu_mode == "whole" for p in pools)
    p = plan(s, state)
    single = p.roles[0].request if sum(len(v) for v in p.missing.values()) == 1 else None
    evicted: list[list[tuple[ReplicaKey, Assignment]]] = []
    left = iter(units)
    while (unit := next(left, None)) is not None:
        keys = live_keys(s, unit)
        if not keys:
            continue
        cause = cause_of(unit)
        if cause is None:
            continue
        if not any(s.node_pool[s.assign[k].row] in pools for k in keys):
            continue                                  # frees nothing this job can use
        evicted.append([(k, s.assign[k]) for k in keys])
        for k in keys:
            s.unbind(k, unit.reason, cause)
        if len(evicted) == HOPELESS_CHECK_AFTER and whole_only:
            rest = list(left)
            if not could_still_fit(s, p, pools, rest, cause_of):
                return False
            left = iter(rest)
        if single is not None:
            # one replica missing: only the nodes just freed can have become able to take it
            if not any(s.row_fits(row, single) for row in {a.row for _, a in evicted[-1]}):
                continue
        elif whole_only and s.pool_free_milli(pools) < need:
            continue
        if placed():
            keep_victims(s, evicted[::-1], holds)
            return True
    return False


# evictions after which `evict_until_placed` asks whether going on can succeed at all
HOPELESS_CHECK_AFTER = 8


def could_still_fit(s: Session, p: Plan, pools: set[str], units: list[Unit],
                    cause_of: Callable[[Unit], EvictCause | None]) -> bool:
    """Whether the gang of plan `p` could fit once `evict_until_placed` evicted every unit of `units` it
    would evict, were the gang never to fit on the way (a necessary condition of its success). Which
    those are follows the loop's own tests; `cause_of` reads the queues' usage, so each unit taken is
    counted off `Session.alloc` as its eviction would, and put back before returning."""
    alloc, path, assign, new, node_pool = s.alloc, s.queue_path, s.assign, s.new, s.node_pool
    gone: set[ReplicaKey] = set()
    taken: list[tuple[str, int]] = []
    try:
        for unit in units:
            if len(unit.keys) == 1:            # most units: the same tests, one key
                key = unit.keys[0]
                a = assign.get(key)
                if a is None or key in new or key in gone or node_pool[a.row] not in pools or cause_of(unit) is None:
                    continue
                gone.add(key)
                milli = a.slice.gpu_milli * len(a.gpus)
            else:
                keys = [k for k in unit.keys if k in assign and k not in new and k not in gone]
                if not keys or cause_of(unit) is None or not any(node_pool[assign[k].row] in pools for k in keys):
                    continue
                gone.update(keys)
                milli = sum(assign[k].gpu_milli for k in keys)
            for q in path[unit.queue]:
                alloc[q] -= milli
            taken.append((unit.queue, milli))
    finally:
        for queue, milli in taken:
            for q in path[queue]:
                alloc[q] += milli
    return fits_without(s, p, gone)


def fits_without(s: Session, p: Plan, gone: set[ReplicaKey]) -> bool:
    """Whether the gang of plan `p` could fit were the replicas `gone` evicted (a necessary condition only:
    whole-GPU roles are counted by whole GPUs free per node, CPU and memory aside; other roles are not
    checked)."""
    roles = [r for r in p.roles if r.request.mode == "exclusive" and r.request.num_gpus > 0]
    if not roles:
        return True
    arr = s.arrays
    rows, gpus, milli, mem = [], [], [], []
    for k in gone:
        a = s.assign[k]
        sl = a.slice
        if sl.kind not in ("whole", "fraction"):
            continue
        for g in a.gpus:
            rows.append(a.row)
            gpus.append(g)
            milli.append(sl.gpu_milli)
            mem.append(sl.gpu_mem_mib)
    free_milli = arr.gpu_free_milli.astype(np.int64)
    free_mem = arr.gpu_free_mem.copy()
    if rows:
        np.add.at(free_milli, (rows, gpus), milli)
        np.add.at(free_mem, (rows, gpus), mem)
    whole = (free_milli == MILLI_PER_GPU) & (free_mem == arr.gpu_total_mem[:, None]) & arr.gpu_present
    per_node = whole.sum(axis=1)
    for role in roles:
        request = role.request
        mask = request_mask(s, request, p.pools[role.name])
        if int((per_node[mask] // request.num_gpus).sum()) < len(p.missing[role.name]):
            return False
    return True


def keep_victims(s: Session, groups: list[list[tuple[ReplicaKey, Assignment]]], holds: Callable[[], bool]) -> None:
    """Once the job is placed, its victims (each a unit's replicas; the last evicted first) that fit
    where they were go back there, as if never evicted. Each other one is kept whole if it can be:
    its replicas that fit stay, those in the way move where there is room, as KAI-Scheduler
    re-places its victims; only a victim that cannot be kept whole stays evicted. A victim is kept
    only if `holds()` still."""
    moving = [g for g in groups if not s.transaction(lambda g=g: restore_all(s, g) and holds())]
    for group in moving:
        s.transaction(lambda group=group: move_all(s, group) and holds())


def restore_all(s: Session, group: list[tuple[ReplicaKey, Assignment]]) -> bool:
    """Put a unit's replicas back where they were, all of them (a gang) or none."""
    for key, a in group:
        if not s.fits(a):
            return False
        s.restore(key, a)
    return True


def move_all(s: Session, group: list[tuple[ReplicaKey, Assignment]]) -> bool:
    """Put replicas back where they were when they fit there, and the others wherever their pools
    have room (their own pool first): all of them or none."""
    later = []
    for key, a in group:
        if s.fits(a):
            s.restore(key, a)
        else:
            later.append((key, a))
    return all(place_again(s, key, a) for key, a in later)


def place_again(s: Session, key: ReplicaKey, old: Assignment) -> bool:
    """Bind an evicted replica wherever its pools have room now, its own pool first (a ReduceCost job
    waiting for off-peak: its own pool or a spot pool)."""
    request = s.role(key[0], key[1]).request
    home = s.node_pool[old.row]
    pools = s.pools_for(request)
    if reduce_cost_waits(s, s.jobs[key[0]].job):
        pools = [p for p in pools if p == home or s.pools[p].spot]
    for pool in sorted(pools, key=lambda p: p != home):
        spot = s.find_spot(request, pool)
        if spot is not None:
            s.bind(key, spot)
            return True
    return False


def run_eviction_action(s: Session, kinds: set[str], prepare: Callable[[JobState], tuple | None],
                        never: Callable[[JobState], bool] | None = None) -> None:
    """Walk pending jobs fairly; `prepare` returns (units, cause_of, final_check) or None to skip.
    `never(job)`: the job's visit passes whatever happens in this walk (see `without_idle_branches`)."""
    budget, fails = [MAX_EVICTION_SCENARIOS], [0]
    failed: dict[tuple, int] = {}

    def acts(state: JobState) -> bool:
        """Whether visiting the job now would try a scenario (else the visit changes nothing)."""
        if budget[0] <= 0 or not state.wants() or prepare(state) is None:
            return False
        return failed.get((gang_signature(s, state), state.job.queue, state.job.priority,
                           state.job.preemptible)) != s.freed

    def visit(state: JobState) -> object:
        if budget[0] <= 0:
            return STOP
        if not state.wants():
            return None
        setup = prepare(state)
        if setup is None:
            return None
        units, cause_of, final_check = setup
        sig = (gang_signature(s, state), state.job.queue, state.job.priority, state.job.preemptible)
        if failed.get(sig) == s.freed:
            return None
        budget[0] -= 1

        if s.transaction(lambda: evict_until_placed(s, state, units, cause_of, final_check)):
            state.fail = None
            if state.grows:
                return AGAIN     # an elastic job may take its next replica the same way
        else:
            failed[sig] = s.freed
            fails[0] += 1
            if fails[0] >= MAX_FAILED_SCENARIOS:
                budget[0] = 0
        return None

    by_queue = pending_by_queue(s, kinds)
    if never is not None and not s.exact:
        by_queue = without_idle_branches(s, by_queue, never)
    fair_walk(s, by_queue, visit, EvictionQuiet(s, acts))


def without_idle_branches(s: Session, by_queue: dict[str, list[JobState]],
                          never: Callable[[JobState], bool]) -> dict[str, list[JobState]]:
    """`by_queue` without the branches of the queue tree's root none of whose jobs' visits could change
    anything in this walk (`never`). Their visits would pass, and a branch of the root weighs nothing in
    the order of the others (each is weighed by its own usage and first job), so the walk visits the
    rest in the same order and decides the same. An exact session keeps them (the reference)."""
    idle: dict[str, bool] = {}
    for queue, states in by_queue.items():
        top = s.queue_path[queue][-1]
        if idle.get(top, True):
            idle[top] = all(never(state) for state in states)
    if not any(idle.values()):
        return by_queue
    return {q: states for q, states in by_queue.items() if not idle[s.queue_path[q][-1]]}


def waits_whole(state: JobState) -> bool:
    """Nothing of the job runs: only its own visit can change what it asks for."""
    return not state.replicas


class EvictionQuiet(Quiet):
    """An evicting action's jobs left, grouped by what `prepare` and the failed-scenario check read of a
    job (its plan's signature, queue, priority, preemptibility, ReduceCost flag, whether evicting could
    lift its last failure, whether it wants replicas). `acts(job)` says whether its visit would try a
    scenario now; once no group's would, the rest of the walk would change nothing."""

    def __init__(self, s: Session, acts: Callable[[JobState], bool]) -> None:
        super().__init__(s)
        self.acts = acts

    def group(self, state: JobState) -> tuple:
        job = state.job
        return (plan(self.s, state).sig, job.queue, job.priority, job.preemptible, job.reduce_cost,
                reclaim_can_lift(state), state.pending, state.grows)

    def effective(self) -> bool:
        return any(self.acts(self.rep(g)) for g in self.members)


def reclaim(s: Session) -> None:
    """A queue within its fair share takes GPUs back from another queue, by one of two rules (those
    of KAI-Scheduler's proportion plugin), weighed where the two queues' branches of the tree meet:

    - fair-share: the other side holds more than its fair share (before this eviction; a job is
      never split, so the last one taken may leave it below);
    - reclaim-within-deserved: the other side holds more than its deserved quota and the taker's
      side stays within its own.

    The taker's queue and every ancestor must end within their fair shares (and limits) once the
    victims are gone; victims under an ancestor that would go over are the only ones that help it."""
    if not reclaim_may_help(s):
        return
    units = victim_units(s, "reclaim")
    over_own_share = {q for q in units if s.alloc[q] > s.fair_share.get(q, 0.0) + EPS}
    sides: dict[tuple[str, str], tuple[str, str]] = {}

    def victim_order(unit: Unit) -> tuple:
        # lower-priority queues first, then queues over their own share before those that are not
        return unit.order[0], unit.queue not in over_own_share, unit.order

    # the queues a leaf may take `need` from: the same for every job of that leaf and need until
    # some queue's usage changes (`Session.stamp`), so kept for that long
    found: dict[tuple, list[str]] = {}
    found_at = [None]

    def lenders_for(leaf: str, need: int, scope: str) -> list[str]:
        at = (s.stamp, s.freed)
        if found_at[0] != at:
            found.clear()
            found_at[0] = at
        key = (leaf, need, scope)
        lenders = found.get(key)
        if lenders is None:
            lenders = found[key] = [q for q in units if q != leaf and (scope == ANYWHERE or scope in s.queue_path[q])
                                    and reclaim_rule(s, sides, leaf, q, need) is not None]
        return lenders

    def prepare(state: JobState):
        job = state.job
        if not reclaim_can_lift(state):
            return None
        need = missing_milli(s, state)
        scope = victims_scope(s, job.queue, need)
        if scope is None:
            return None
        lenders = lenders_for(job.queue, need, scope)
        if not lenders:
            return None

        causes: dict[tuple[str, str], EvictCause] = {}

        def cause_of(unit: Unit) -> EvictCause | None:
            found = reclaim_rule(s, sides, job.queue, unit.queue, need)
            if found is None:
                return None
            cause = causes.get(found)
            if cause is None:
                cause = causes[found] = EvictCause(job.id, job.queue, found[1], found[0])
            return cause

        def final_check() -> bool:
            return within_quota(s, job) and all(s.alloc[q] <= s.fair_share.get(q, 0.0) + EPS
                                                for q in s.queue_path[job.queue])

        return merged((units[q] for q in lenders), victim_order), cause_of, final_check

    shares = s.fair_share

    def never(state: JobState) -> bool:
        if not waits_whole(state):
            return False
        if not reclaim_can_lift(state):
            return True
        # a queue's usage is never negative: a job asking more than its queue's fair share never reclaims
        p = state.plan if state.plan_version == state.version else plan(s, state)
        return p.need > shares.get(state.job.queue, 0.0) + EPS

    run_eviction_action(s, {"capacity", "quota"}, prepare, never)


def reclaim_may_help(s: Session) -> bool:
    """Whether some job `reclaim` walks may take anything: one whose last failure evicting could lift and
    whose queue could take what it asks for within its fair share (`victims_scope`). When none may, every
    visit would pass, so the action is left out (a scan of the jobs instead)."""
    kinds = ("capacity", "quota")
    scope: dict[tuple[str, int], bool] = {}
    for state in s.wanting:
        fail = state.fail
        if fail is None or fail[0] not in kinds or not (state.pending or state.grows) or state.evicted:
            continue
        if not reclaim_can_lift(state):
            continue
        key = (state.job.queue, missing_milli(s, state))
        found = scope.get(key)
        if found is None:
            found = scope[key] = victims_scope(s, key[0], key[1]) is not None
        if found:
            return True
    return False


def reclaim_can_lift(state: JobState) -> bool:
    """Whether evicting other queues' work could lift what holds the job: capacity, or the limit of
    a queue above its own (a non-preemptible quota is never lifted by evicting preemptible work)."""
    if state.fail is None or state.fail[0] != "quota":
        return True
    reason = state.fail[1]
    return reason is not None and reason.code == "queue_over_limit" and reason.params["queue"] != state.job.queue


ANYWHERE = ""   # a victims' scope that is no queue (queue names are never empty)


def victims_scope(s: Session, leaf: str, need: int) -> str | None:
    """The queue whose subtree the victims must come from: the nearest ancestor that would go over
    its fair share by taking `need` (only evictions under it bring it back), else ANYWHERE. None
    when the leaf itself would go over, or when evicting all other preemptible work under some
    ancestor could still not make room in its share."""
    if s.alloc[leaf] + need > s.fair_share.get(leaf, 0.0) + EPS:
        return None
    own_preemptible = s.alloc[leaf] - s.np_alloc[leaf]
    scope = ANYWHERE
    for q in s.queue_path[leaf][1:]:
        share = s.fair_share.get(q, 0.0)
        if s.alloc[q] + need <= share + EPS:
            continue
        freeable = s.alloc[q] - s.np_alloc[q] - own_preemptible
        if s.alloc[q] + need - freeable > share + EPS:
            return None
        scope = scope or q
    return scope


def split_sides(s: Session, cache: dict, mine: str, theirs: str) -> tuple[str, str]:
    """The two queues just below the closest common ancestor of leaves `mine` and `theirs` (the
    level at which their shares are weighed against each other)."""
    found = cache.get((mine, theirs))
    if found is None:
        a, b = s.queue_path[mine][::-1], s.queue_path[theirs][::-1]
        i = 0
        while a[i] == b[i]:
            i += 1
        found = cache[(mine, theirs)] = (a[i], b[i])
    return found


def reclaim_rule(s: Session, cache: dict, mine: str, theirs: str, need: int) -> tuple[str, str] | None:
    """(rule, level) by which leaf `mine` may take `need` from leaf `theirs` now, or None."""
    taker, giver = split_sides(s, cache, mine, theirs)
    held = s.alloc[giver]
    if held > s.fair_share.get(giver, 0.0) + EPS:
        return "fair-share", giver
    if held > s.deserved.get(giver, 0.0) + EPS and s.alloc[taker] + need <= s.deserved.get(taker, 0.0) + EPS:
        return "reclaim-within-deserved", giver
    return None


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
        if reduce_cost_waits(s, job):
            return None
        same = job.priority > lowest.get(job.queue, job.priority)
        if not same and not borrowed:
            return None
        lower = (u for u in units.get(job.queue, []) if u.job.priority < job.priority) if same else iter(())
        others = [u for u in borrowed if u.job.id != job.id]
        return merged([others, list(lower)]), preempt_causes(job), lambda: within_quota(s, job)

    def never(state: JobState) -> bool:
        # what `prepare` reads does not change during the walk: `lowest` and `borrowed` are fixed
        job = state.job
        return reduce_cost_waits(s, job) or (not borrowed and job.priority <= lowest.get(job.queue, job.priority))

    run_eviction_action(s, {"capacity", "quota"}, prepare, never)


def preempt_may_help(s: Session) -> bool:
    """Whether some job may preempt: one that wants replicas with a higher priority than some preemptible
    job of its queue, or a preemptible ReduceCost job on-peak (it may have to yield). When none may, every
    visit of `preempt`'s walk would pass, so the walk is left out (a cheap scan instead)."""
    lowest: dict[str, int] = {}
    highest: dict[str, int] = {}
    for state in s.jobs.values():
        job = state.job
        queue, priority = job.queue, job.priority
        if job.preemptible:
            if reduce_cost_waits(s, job):
                return True
            low = lowest.get(queue)
            if low is None or priority < low:
                lowest[queue] = priority
        if state.pending or state.grows:
            high = highest.get(queue)
            if high is None or priority > high:
                highest[queue] = priority
    return any(queue in lowest and top > lowest[queue] for queue, top in highest.items())


def preempt_causes(job: Job) -> Callable[[Unit], EvictCause]:
    """Why a unit makes way for `job`: a lower priority in its queue, or else a ReduceCost job
    giving back borrowed capacity."""
    by_priority = EvictCause(job.id, job.queue, job.queue, "priority")
    by_cost = EvictCause(job.id, job.queue, "", "reduce-cost")

    def cause_of(unit: Unit) -> EvictCause:
        return by_priority if unit.queue == job.queue and unit.job.priority < job.priority else by_cost

    return cause_of


def consolidation_cause(job: Job) -> EvictCause:
    return EvictCause(job.id, job.queue, "", "consolidation")


def on_borrowed_capacity(s: Session, unit: Unit) -> bool:
    return any(not s.pools[s.node_pool[s.assign[k].row]].spot for k in live_keys(s, unit))


# ---------------------------------------------------------------------- consolidate


@dataclass
class Movable:
    """Preemptible replicas that consolidation may move, and what they hold per GPU."""

    keys: dict[int, list[ReplicaKey]]      # row -> replicas
    milli: np.ndarray                      # [N, G] GPU milli held by movable replicas
    mem: np.ndarray                        # [N, G] GPU memory held by movable replicas

    @classmethod
    def collect(cls, s: Session) -> Movable:
        keys: dict[int, list[ReplicaKey]] = {}
        rows, gpus, milli_of, mem_of = [], [], [], []
        for key, a in s.assign.items():
            if key in s.new or a.slice.kind not in ("whole", "fraction") or not s.jobs[key[0]].job.preemptible:
                continue
            keys.setdefault(a.row, []).append(key)
            for g in a.gpus:
                rows.append(a.row)
                gpus.append(g)
                milli_of.append(a.slice.gpu_milli)
                mem_of.append(a.slice.gpu_mem_mib)
        milli = np.zeros_like(s.arrays.gpu_free_milli, dtype=np.int64)
        mem = np.zeros_like(s.arrays.gpu_free_mem)
        np.add.at(milli, (rows, gpus), milli_of)
        np.add.at(mem, (rows, gpus), mem_of)
        return cls(keys, milli, mem)


def consolidate(s: Session) -> None:
    """Move preemptible replicas between nodes so a pending job fits, if every moved one fits again.

    A job missing one replica (whole or fractional GPUs) gets its moves from `placement.plan_room`
    (chain moves included), the function the trace benchmark's --moves replays; a gang missing
    several replicas clears one node at a time (`consolidate_for`).
    """
    budget = [MAX_CONSOLIDATION_SCENARIOS]
    failed: dict[tuple, int] = {}
    movable: list[Movable] = []                 # collected on first need
    residents: list[MovableSet] = []
    steps = Steps()  # repack search steps, shared by this cycle's plans

    def acts(state: JobState) -> bool:
        """Whether visiting the job now could do more than pass (see `visit`)."""
        if budget[0] <= 0 or not state.wants():
            return False
        pools = gang_pools(s, state)
        if not pools or any(s.pools[p].gpu_mode != "whole" for p in pools):
            return False
        return s.pool_free_milli(pools) >= missing_milli(s, state) and failed.get(gang_signature(s, state)) != s.freed

    def visit(state: JobState) -> object:
        if budget[0] <= 0:
            return STOP
        if not state.wants():
            return None
        pools = gang_pools(s, state)
        if not pools or any(s.pools[p].gpu_mode != "whole" for p in pools):
            return None
        if s.pool_free_milli(pools) < missing_milli(s, state):
            return None                 # not a fragmentation problem: moving cannot help
        sig = gang_signature(s, state)
        if failed.get(sig) == s.freed:
            return None
        one = single_missing(s, state)
        if one is not None:
            if not residents:
                residents.append(movable_set(s))
            budget[0] -= 1
            if s.transaction(lambda: room_for_one(s, state, one[0], one[1], residents[0], steps)):
                state.fail = None
                movable.clear()
                return AGAIN if state.grows else None
            failed[sig] = s.freed
            return None
        if not movable:
            movable.append(Movable.collect(s))
        rows = candidate_rows(s, state, pools, movable[0])
        if not len(rows):
            failed[sig] = s.freed
            return None
        budget[0] -= 1
        if s.transaction(lambda: consolidate_for(s, state, rows, movable[0])):
            state.fail = None
            movable[0] = Movable.collect(s)
            residents.clear()
            return AGAIN if state.grows else None
        failed[sig] = s.freed
        return None

    # moves keep what is free and placements take from it: a job asking more than is free in the whole
    # cluster now never finds room by moving in this walk
    free = int(s.arrays.gpu_free_milli.sum())

    def never(state: JobState) -> bool:
        if not waits_whole(state):
            return False
        p = state.plan if state.plan_version == state.version else plan(s, state)
        return p.need > free

    by_queue = pending_by_queue(s, {"capacity"})
    if not s.exact:
        by_queue = without_idle_branches(s, by_queue, never)
    fair_walk(s, by_queue, visit, ConsolidateQuiet(s, acts))


class ConsolidateQuiet(EvictionQuiet):
    """Consolidation's jobs left, grouped by their plan's signature (pools, need, the failed-scenario
    check) and whether they want replicas."""

    def group(self, state: JobState) -> tuple:
        return plan(self.s, state).sig, state.pending, state.grows


def single_missing(s: Session, state: JobState) -> tuple[Role, int] | None:
    """The role and index of the one replica a job misses, when it is one of whole or fractional GPUs."""
    missing = plan(s, state).missing
    if sum(len(v) for v in missing.values()) != 1:
        return None
    role = next(r for r in state.job.roles if missing.get(r.name))
    if role.request.mode not in ("exclusive", "fraction") or role.request.num_gpus == 0:
        return None
    return role, missing[role.name][0]


def movable_set(s: Session) -> MovableSet:
    """The replicas consolidation may move (preemptible, whole or fractional GPUs, not bound this
    cycle) as placement residents, each allowed on the pools that serve it."""
    residents = []
    kinds: dict[tuple[int, str], tuple] = {}   # (id of the job's roles, role) -> placement request, mask
    new, jobs, Placement = s.new, s.jobs, pl.Placement
    for key, a in s.assign.items():
        sl = a.slice
        if key in new or sl.kind not in ("whole", "fraction"):
            continue
        job = jobs[key[0]].job
        if not job.preemptible:
            continue
        kind = kinds.get((id(job.roles), key[1]))
        if kind is None:
            request = s.role(key[0], key[1]).request
            kind = kinds[(id(job.roles), key[1])] = (s.placement_request(request),
                                                     request_mask(s, request, s.pools_for(request)))
        residents.append(Resident(key, kind[0], Placement(a.row, a.gpus, sl.gpu_milli, sl.gpu_mem_mib), kind[1]))
    return MovableSet.of(s.arrays, residents)


def request_mask(s: Session, request: Request, pools: Iterable[str]) -> np.ndarray:
    """Nodes of `pools` a replica of `request` may use (whole GPUs: with enough GPU memory)."""
    mask = s.pools_mask(pools)
    if request.mode == "exclusive" and request.gpu_mem_mib:
        mask = mask & (s.arrays.gpu_total_mem >= request.gpu_mem_mib)
    return mask


def room_for_one(s: Session, state: JobState, role: Role, index: int, residents: MovableSet,
                 steps: Steps) -> bool:
    """Scenario body: the moves `plan_room` finds for one replica, carried out as evictions and binds."""
    pools = plan(s, state).pools[role.name]
    request = role.request
    # a job never moves its own replicas to make room for itself
    keys = [(state.job.id, name, i) for name, running in state.running.items() for i in running]
    own = [residents.remove(k, s.assign[k].row) for k in keys if k in residents.on_node[s.assign[k].row]]
    try:
        room = plan_room(s.arrays, s.placement_request(request), s.pools[pools[0]].placement, residents,
                         request_mask(s, request, pools), s.ctx, steps=steps)
    finally:
        for r in own:
            residents.add(r)
    if room is None:
        return False
    cause = consolidation_cause(state.job)
    for r, _ in room.moves:
        s.unbind(r.key, "consolidate", cause)
    kind = "fraction" if request.mode == "fraction" else "whole"
    p = room.placement
    s.bind((state.job.id, role.name, index),
           Assignment(p.node, p.gpus, Slice(kind, p.gpu_milli, p.gpu_mem_mib), request.cpu_milli, request.mem_mib))
    for r, new in room.moves:
        moved = s.role(r.key[0], r.key[1]).request
        sl = Slice("fraction" if moved.mode == "fraction" else "whole", new.gpu_milli, new.gpu_mem_mib)
        s.bind(r.key, Assignment(new.node, new.gpus, sl, moved.cpu_milli, moved.mem_mib))
    for r, _ in room.moves:  # bound this cycle now: not moved again in it
        residents.remove(r.key, r.placement.node)
    residents.no_room.clear()  # pods moved: requests that found no room may find some now
    return True


def candidate_rows(s: Session, state: JobState, pools: set[str], movable: Movable) -> np.ndarray:
    """Nodes that could host the job's biggest replica if their movable replicas left, best first:
    the most free already, then the least to move."""
    arr = s.arrays
    missing = plan(s, state).missing
    role = max((r for r in state.job.roles if r.name in missing), key=lambda r: request_milli(r.request, None))
    req = role.request
    mask = np.zeros(arr.size, dtype=bool)
    for p in pools:
        mask |= s.pool_mask[p]
    mask &= movable.milli.sum(axis=1) > 0
    mask &= (arr.cpu_free >= req.cpu_milli) & (arr.mem_free >= req.mem_mib)  # moving frees CPU too, ignored
    milli = arr.gpu_free_milli + movable.milli
    mem = arr.gpu_free_mem + movable.mem
    if req.mode == "fraction":
        mask &= ((milli >= req.gpu_milli) & (mem >= req.gpu_mem_mib) & arr.gpu_present).any(axis=1)
    else:
        whole = (milli >= MILLI_PER_GPU) & (mem >= arr.gpu_total_mem[:, None]) & arr.gpu_present
        mask &= whole.sum(axis=1) >= req.num_gpus
    rows = np.flatnonzero(mask)
    free = arr.gpu_free_milli[rows].sum(axis=1)
    moving = movable.milli[rows].sum(axis=1)
    order = np.lexsort((rows, moving, -free))
    # a gang missing several replicas may need as many nodes cleared
    return rows[order][:MAX_CONSOLIDATION_NODES + sum(len(v) for v in missing.values()) - 1]


def consolidate_for(s: Session, state: JobState, rows: np.ndarray, movable: Movable) -> bool:
    """Try nodes one at a time: move replicas off it until the job fits, then re-place them. A gang
    that needs room on several nodes then gets the nodes cleared together, one after the other."""
    lists = []
    for row in rows.tolist():
        keys = [k for k in movable.keys.get(row, []) if k in s.assign and k not in s.new and k[0] != state.job.id]
        keys.sort(key=lambda k: (s.assign[k].gpu_milli, k))
        if keys:
            lists.append(keys)
            if s.transaction(lambda keys=keys: _move_from_node(s, state, keys)):
                return True
    if len(lists) > 1 and sum(len(v) for v in plan(s, state).missing.values()) > 1:
        return s.transaction(lambda: _move_from_nodes(s, state, lists))
    return False


def _move_from_node(s: Session, state: JobState, keys: list[ReplicaKey]) -> bool:
    moved: list[tuple[ReplicaKey, Assignment]] = []
    cause = consolidation_cause(state.job)
    for key in keys:
        moved.append((key, s.assign[key]))
        s.unbind(key, "consolidate", cause)
        if place_gang(s, state):
            return move_all(s, moved)
    return False


def _move_from_nodes(s: Session, state: JobState, lists: list[list[ReplicaKey]]) -> bool:
    """Clear node after node until the gang fits; the replicas it does not need back go back."""
    moved: list[tuple[ReplicaKey, Assignment]] = []
    cause = consolidation_cause(state.job)
    for keys in lists:
        for key in keys:
            moved.append((key, s.assign[key]))
            s.unbind(key, "consolidate", cause)
        if place_gang(s, state):
            return move_all(s, moved)
    return False


# ---------------------------------------------------------------------- elastic and idle capacity


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
        if state.evicted or not reduce_cost_waits(s, state.job):
            continue
        if state.grows or (state.pending and state.fail is not None and state.fail[0] in ("reduce-cost", "capacity")):
            waiting.setdefault(state.job.queue, []).append(state)
    fair_walk(s, waiting, use_idle)


# ---------------------------------------------------------------------- reasons
# Every reason is a code and JSON parameters (see `fit.REASONS` for the texts), so it can be
# stored, compared by code and rendered in another language later.


def capacity_reason(s: Session, state: JobState) -> Reason:
    """Why the gang does not fit, in numbers a person can check."""
    p = plan(s, state)
    parts: dict[str, Reason] = {}          # by text: the same shortage named once
    for role in p.roles:
        count = len(p.missing[role.name])
        for pool in p.pools[role.name]:
            reason = _role_pool_reason(s, role.request, count, pool)
            if reason is not None:
                if len(p.roles) > 1:
                    reason = Reason("role_short", {"role": role.name, "reason": reason.as_part()})
                parts.setdefault(reason.text, reason)
    if parts:
        return joined(*parts.values())
    pools = sorted({pool for pools in p.pools.values() for pool in pools})
    total = sum(len(v) for v in p.missing.values())
    return Reason("gang_does_not_fit", {"replicas": total, "pools": pools})


def joined(*reasons: Reason) -> Reason:
    """Several reasons as one ("A; B"); a single one as itself."""
    if len(reasons) == 1:
        return reasons[0]
    parts: list[dict] = []
    for r in reasons:
        if r.code == "several":
            parts.extend(r.params["parts"])
        else:
            parts.append(r.as_part())
    # the text of "several" is its parts' texts joined: reuse theirs, already rendered
    return Reason("several", {"parts": parts}, rendered="; ".join([r.text for r in reasons]))


def whole_free(s: Session) -> tuple[np.ndarray, np.ndarray]:
    """GPUs wholly free [N, G] and their count per node [N], until capacity is taken or given back."""
    found = s.memo.get("whole_free")
    if found is None or found[0] != s.stamp:
        whole = s.arrays.fully_free()
        found = s.memo["whole_free"] = (s.stamp, whole, whole.sum(axis=1))
    return found[1], found[2]


def _role_pool_reason(s: Session, r: Request, count: int, pool: str) -> Reason | None:
    """What is short in `pool` for `count` replicas of `r`; None when the numbers alone allow it."""
    mask = s.pool_mask[pool]
    if not mask.any():
        return Reason("pool_no_node", {"pool": pool})
    arr = s.arrays
    host = mask & (arr.cpu_free >= r.cpu_milli) & (arr.mem_free >= r.mem_mib)
    if r.mode == "exclusive":
        if r.num_gpus == 0:
            return None if host.any() else Reason("cpu_memory_short", {"cpu_milli": r.cpu_milli, "mem_mib": r.mem_mib,
                                                                       "pool": pool})
        whole, per_node = whole_free(s)
        free = int(whole[mask].sum())
        need = count * r.num_gpus
        if free < need:
            if count > 1:
                return Reason("gang_gpus_short", {"count": count, "gpus": r.num_gpus, "free": free, "pool": pool})
            return Reason("gpus_short", {"gpus": r.num_gpus, "free": free, "pool": pool})
        most = int(per_node[mask].max())
        if r.num_gpus > most:
            return Reason("gpus_not_on_one_node", {"gpus": r.num_gpus, "free": free, "most": most, "pool": pool})
        room = per_node >= r.num_gpus
    elif r.mode == "fraction":
        fit = (arr.gpu_free_milli >= r.gpu_milli) & (arr.gpu_free_mem >= r.gpu_mem_mib)
        n = int(fit[mask].sum())
        if n < count:
            return Reason("gpu_shares_short", {"count": count, "gpu_milli": r.gpu_milli, "gpu_mem_mib": r.gpu_mem_mib,
                                               "free": n, "pool": pool})
        room = fit.any(axis=1)
    elif r.mode == "mig":
        free_inst = s.mig_free & (s.mig_profile == s.profile_ids[r.mig_profile])[:, None, :]
        n = int(free_inst[mask].sum())
        if n == 0:
            return Reason("mig_none_free", {"profile": r.mig_profile, "pool": pool})
        if n < count:
            return Reason("gang_mig_short", {"count": count, "profile": r.mig_profile, "free": n, "pool": pool})
        room = free_inst.any(axis=(1, 2))
    else:
        n = int(s.ts_free[mask].sum())
        slots = count * r.num_gpus
        if n < slots:
            return Reason("timeslice_slots_short", {"slots": slots, "free": n, "pool": pool})
        room = (s.ts_free > 0).sum(axis=1) >= r.num_gpus
        if not (room & mask).any():
            return Reason("timeslice_not_on_one_node", {"gpus": r.num_gpus, "pool": pool})
    if not (room & host).any():
        return Reason("host_short", {"pool": pool})
    return None


def reduce_cost_reason(next_off_peak: str) -> Reason:
    return Reason("reduce_cost_off_peak", {"next_off_peak": next_off_peak})


NEXT_CYCLE = Reason("next_cycle")


def pending_reasons(s: Session) -> dict[str, Reason]:
    out: dict[str, Reason] = {}
    capacity_cache: dict[tuple, Reason] = {}
    # thousands of pending jobs share a few reasons: build (and render) each combination once
    combined: dict[tuple, Reason] = {}
    held: dict[str, Reason] = {}
    by_plan: dict[tuple, Reason] = {}
    off_peak_reasons: dict[str, Reason] = {}   # by when the window opens: one per currency's window

    def reduce_cost(next_off_peak: str) -> Reason:
        if next_off_peak not in off_peak_reasons:
            off_peak_reasons[next_off_peak] = reduce_cost_reason(next_off_peak)
        return off_peak_reasons[next_off_peak]

    over_share = {q for q in s.queues if s.alloc[q] > s.fair_share.get(q, 0.0) + EPS}
    evicted_by_job: dict[str, set[str]] = {}
    for k, why in s.evict_reason.items():
        evicted_by_job.setdefault(k[0], set()).add(why)
    for job_id, state in s.jobs.items():
        if not state.pending:
            continue
        if state.fail is None or state.evicted:
            evicted = sorted(evicted_by_job.get(job_id, ()))
            out[job_id] = Reason("evicted_requeued", {"reasons": evicted}) if evicted else NEXT_CYCLE
            continue
        kind, reason = state.fail
        own = off_peak_of(s, state.job) if state.job.reduce_cost else None   # (window open, next opening)
        if kind == "capacity":
            p = plan(s, state)
            queue = state.job.queue
            # all that decides the reason below (a plan is alive all cycle)
            reason = by_plan.get((id(p), queue, own))
            if reason is not None:
                out[job_id] = reason
                continue
            share = s.fair_share.get(queue, 0.0)
            # other queues over their fair shares lend: is there any?
            holds = len(over_share) > (queue in over_share) and s.alloc[queue] + p.need > share + EPS
            waits = own is not None and not own[0]
            # by the plan itself: jobs with equal plans share one
            key = (id(p), queue if holds else None, own[1] if waits else None)
            reason = combined.get(key)
            if reason is None:
                sig = p.sig
                if sig not in capacity_cache:
                    capacity_cache[sig] = capacity_reason(s, state)
                reason = capacity_cache[sig]
                if holds:
                    if queue not in held:
                        held[queue] = Reason("fair_share_held", {"queue": queue, "held_milli": int(s.alloc[queue]),
                                                                 "share_milli": float(share),
                                                                 "lenders": sorted(over_share - {queue})})
                    reason = joined(reason, held[queue])
                if waits:
                    reason = joined(reduce_cost(own[1]), reason)
                combined[key] = reason
            by_plan[(id(p), queue, own)] = reason
        elif kind == "reduce-cost":
            reason = reduce_cost(off_peak_of(s, state.job)[1])
        out[job_id] = reason
    return out
