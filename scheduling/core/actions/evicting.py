"""What the actions that evict (reclaim, preempt; consolidate moves) share: the victims in the order
they go, a scenario that evicts until the job fits and keeps the victims it can, and the walk of an
evicting action. Victims are never replicas bound in this cycle, so nothing is bound and evicted in
the same cycle, and every eviction buys a placement: no ping-pong. A victim's replicas that are not
in the way stay; one that is in the way moves when the whole victim fits elsewhere."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator
from itertools import filterfalse
from operator import attrgetter, itemgetter
from typing import NamedTuple, TypeVar

import numpy as np

from ..model import EvictCause, Job, ReplicaKey
from ..session import Session
from ..state import Assignment, JobState
from ..units import MILLI_PER_GPU
from .gang import (
    Plan,
    gang_pools,
    gang_signature,
    missing_milli,
    place_gang,
    plan,
    reduce_cost_waits,
    request_mask,
)
from .topology import required_rows
from .walk import AGAIN, STOP, Quiet, fair_walk, pending_by_queue

T = TypeVar("T")

# Scenarios that evict are costly; a cycle tries at most this many per action, and gives up on the
# action after MAX_FAILED_SCENARIOS of them failed (the rest wait for the next cycle).
MAX_EVICTION_SCENARIOS = 64
MAX_FAILED_SCENARIOS = 16
_ORDER = attrgetter("order")
_FIRST = itemgetter(0)


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
    new = s.new
    # the jobs holding replicas not bound in this session, in the order of their first (C loops)
    holding = dict.fromkeys(map(_FIRST, filterfalse(new.__contains__, s.assign)))
    out: dict[str, list[Unit]] = {}
    jobs, queues = s.jobs, s.queues
    for job_id in holding:
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
        # one entry per reason: reclaim and preempt both ask each cycle, and would otherwise undo each other's
        kept = state.units
        if kept is not None:
            made = kept.get(reason)
            if made is not None and made[0] == state.version and made[1] == rank:
                units += made[2]
                continue
        # its replicas not bound in this session: those the session assigns it (`JobState.running`)
        keys = [k for k in ((job_id, role, i) for role, indices in state.running.items() for i in indices)
                if k not in new]
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
                             tuple(sorted(keys)), reason, job))
        if kept is None:
            kept = state.units = {}
        kept[reason] = (state.version, rank, made)
        units += made
    for units in out.values():
        units.sort(key=_ORDER)
    return out


def merged(lists: Iterable[list[Unit]], key: Callable[[Unit], tuple] = lambda u: u.order) -> Iterator[Unit]:
    """Several sorted unit lists as one, lazily (scenarios usually stop after a few units). `key`
    must keep each list's order."""
    return heapq.merge(*lists, key=key)


def live_keys(s: Session, unit: Unit) -> list[ReplicaKey]:
    return [k for k in unit.keys if k in s.assign and k not in s.new]


def evict_until_placed(s: Session, state: JobState, units: Iterable[Unit],
                       cause_of: Callable[[Unit], EvictCause | None], holds: Callable[[], bool],
                       asked_as: tuple | None = None) -> bool:
    """Scenario body: evict units in order until the job's gang fits and `holds()` (quotas, fair
    share) is true; then give back the evictions that were not needed and move the victims that can
    be moved (`keep_victims`). `cause_of(unit)` says why a unit may go now, or None when it may not.
    Where the job's pools hand out whole GPUs, the scenario first asks whether evicting every unit the
    loop would take could make room at all (`would_evict`, `fits_without`), and gives up at once when it could not:
    the same outcome, without evicting them one by one (most scenarios that fail, fail so).
    `asked_as`: what `cause_of` reads of the job besides the queues' usage (given only with `units` a list
    kept for the walk): that answer is then kept for other jobs of the same plan and need while no
    capacity is taken or given back (`Session.stamp`; walks try the same big gangs again and again), and
    which replicas would go, for other jobs asked as alike, whatever their plans, on the same pools."""
    def placed() -> bool:
        return s.transaction(lambda: place_gang(s, state) and holds())

    if placed():
        return True
    pools = gang_pools(s, state)
    need = missing_milli(s, state)
    whole_only = all(s.pools[p].gpu_mode == "whole" for p in pools)
    p = plan(s, state)
    single = p.roles[0].request if sum(len(v) for v in p.missing.values()) == 1 else None
    if whole_only:
        units = units if isinstance(units, list) else list(units)
        def hopeless() -> tuple[bool, int]:
            gone, bump = evicted_by(s, pools, units, cause_of, asked_as)
            return fits_without(s, p, gone), bump

        key = None if asked_as is None else ("hopeless", s.stamp, id(units), asked_as, need, p.sig)
        fits, bump = kept(s, key, units, hopeless)
        if not fits:
            # `freed` counts evictions, rolled back or not, and the walk's memory of failed scenarios is
            # keyed on it: count those the loop would have made before giving up, so the walk goes on alike
            s.freed += bump
            return False
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


def evicted_by(s: Session, pools: set[str], units: list[Unit], cause_of: Callable[[Unit], EvictCause | None],
               asked_as: tuple | None) -> tuple[set[ReplicaKey], int]:
    """`would_evict`'s replicas, and the evictions the loop would have made before asking whether it could
    succeed; kept while no capacity moves for jobs asked as alike (see `evict_until_placed`)."""
    def evicted() -> tuple[set[ReplicaKey], int]:
        gone, taken = would_evict(s, pools, units, cause_of)
        return gone, sum(taken[:HOPELESS_CHECK_AFTER])

    key = None if asked_as is None else ("would_evict", s.stamp, id(units), asked_as, frozenset(pools))
    return kept(s, key, units, evicted)


def kept(s: Session, key: tuple | None, units: list[Unit], compute: Callable[[], T]) -> T:
    """`compute()`, kept in `s.memo` under `key` (None: not kept) with the list it was asked of: the list is
    held, so its id is not another's, and a key whose id a later list reuses is worked out again."""
    found = None if key is None else s.memo.get(key)
    if found is None or found[0] is not units:
        found = (units, compute())
        if key is not None:
            s.memo[key] = found
    return found[1]


# evictions after which `evict_until_placed` used to ask whether going on could succeed at all; the
# scenarios that fail at once count that many in `Session.freed`
HOPELESS_CHECK_AFTER = 8


def would_evict(s: Session, pools: set[str], units: list[Unit],
                cause_of: Callable[[Unit], EvictCause | None]) -> tuple[set[ReplicaKey], list[int]]:
    """The replicas `evict_until_placed` would evict of `units`, were the gang never to fit on the way,
    and how many each unit taken holds, in order. Which those are follows the loop's own tests;
    `cause_of` reads the queues' usage, so each unit taken is counted off `Session.alloc` as its
    eviction would, and put back before returning. A unit refused (`cause_of` None) stands for its queue
    until the next unit is taken: whether a unit may go is read of its queue and the usage only."""
    alloc, path, assign, new, node_pool = s.alloc, s.queue_path, s.assign, s.new, s.node_pool
    gone: set[ReplicaKey] = set()
    taken: list[tuple[str, int]] = []
    counts: list[int] = []
    # whether a unit may go follows from its queue and the queues' usage, which changes only when a unit is
    # taken: until then a queue's answer is asked once (the tail of a long list is mostly refused units)
    refused: dict[str, int] = {}

    def may_go(unit: Unit) -> bool:
        if cause_of(unit) is None:
            refused[unit.queue] = len(taken)
            return False
        return True

    try:
        for unit in units:
            if refused.get(unit.queue) == len(taken):
                continue
            if len(unit.keys) == 1:            # most units: the same tests, one key
                key = unit.keys[0]
                a = assign.get(key)
                if a is None or key in new or key in gone or node_pool[a.row] not in pools or not may_go(unit):
                    continue
                gone.add(key)
                milli = a.slice.gpu_milli * len(a.gpus)
                counts.append(1)
            else:
                keys = [k for k in unit.keys if k in assign and k not in new and k not in gone]
                if not keys or not may_go(unit) or not any(node_pool[assign[k].row] in pools for k in keys):
                    continue
                gone.update(keys)
                milli = sum(assign[k].gpu_milli for k in keys)
                counts.append(len(keys))
            for q in path[unit.queue]:
                alloc[q] -= milli
            taken.append((unit.queue, milli))
    finally:
        for queue, milli in taken:
            for q in path[queue]:
                alloc[q] += milli
    return gone, counts


def fits_without(s: Session, p: Plan, gone: set[ReplicaKey]) -> bool:
    """Whether the gang of plan `p` could fit were the replicas `gone` evicted (a necessary condition only:
    whole-GPU roles are counted by whole GPUs free per node, CPU and memory aside; other roles are not
    checked)."""
    roles = [r for r in p.roles if r.request.mode == "exclusive" and r.request.num_gpus > 0]
    if not roles:
        return True
    arr = s.arrays
    back: dict[tuple[int, int], list[int]] = {}     # (row, GPU) -> the milli and MiB the evictions give back
    assign = s.assign
    for k in gone:
        a = assign[k]
        sl = a.slice
        if sl.kind not in ("whole", "fraction"):
            continue
        for g in a.gpus:
            found = back.get((a.row, g))
            if found is None:
                back[(a.row, g)] = [sl.gpu_milli, sl.gpu_mem_mib]
            else:
                found[0] += sl.gpu_milli
                found[1] += sl.gpu_mem_mib
    per_node = s.whole_free_per_node()
    if back:
        # only the GPUs evictions give back can change: counted again, as arrays of those GPUs
        rows = np.fromiter((row for row, _ in back), np.intp, len(back))
        gpus = np.fromiter((g for _, g in back), np.intp, len(back))
        gain = np.array(list(back.values()), dtype=np.int64)
        milli_now, mem_now, total = arr.gpu_free_milli[rows, gpus], arr.gpu_free_mem[rows, gpus], arr.gpu_total_mem[rows]
        was = (milli_now == MILLI_PER_GPU) & (mem_now == total)
        now = (milli_now + gain[:, 0] == MILLI_PER_GPU) & (mem_now + gain[:, 1] == total)
        per_node = per_node.copy()     # the session's is kept while its capacity stays the same
        np.add.at(per_node, rows, (now.astype(np.int64) - was) * arr.gpu_present[rows, gpus])
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
    within = required_rows(s, s.jobs[key[0]], pools, old.row)   # a required topology keeps its domain
    for pool in sorted(pools, key=lambda p: p != home):
        spot = s.find_spot(request, pool, within)
        if spot is not None:
            s.bind(key, spot)
            return True
    return False


def run_eviction_action(s: Session, kinds: set[str], prepare: Callable[[JobState], tuple | None],
                        never: Callable[[JobState], bool] | None = None, again: bool = True) -> None:
    """Walk pending jobs fairly; `prepare` returns (units, cause_of, final_check) or None to skip, or with
    a fourth item, what `cause_of` reads of the job (`evict_until_placed`'s `asked_as`).
    `never(job)`: the job's visit passes whatever happens in this walk (see `without_idle_branches`).
    `again`: an elastic job that got what it asked for is visited again for its next replica."""
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
        units, cause_of, final_check = setup[:3]
        asked_as = setup[3] if len(setup) > 3 else None
        sig = (gang_signature(s, state), state.job.queue, state.job.priority, state.job.preemptible)
        if failed.get(sig) == s.freed:
            return None
        budget[0] -= 1

        if s.transaction(lambda: evict_until_placed(s, state, units, cause_of, final_check, asked_as)):
            state.fail = None
            if again and state.grows:
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
            idle[top] = all(map(never, states))
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
        # `plan` and `reclaim_can_lift` with their common cases inline (a call per waiting job per walk)
        p = state.plan if state.plan_version == state.version else plan(self.s, state)
        return (p.sig, job.queue, job.priority, job.preemptible, job.reduce_cost,
                True if state.fail is None else reclaim_can_lift(state), state.pending, state.grows)

    def effective(self) -> bool:
        return any(self.acts(self.rep(g)) for g in self.members)


def reclaim_can_lift(state: JobState) -> bool:
    """Whether evicting other queues' work could lift what holds the job: capacity, or the limit of
    a queue above its own (a non-preemptible quota is never lifted by evicting preemptible work)."""
    if state.fail is None or state.fail[0] != "quota":
        return True
    reason = state.fail[1]
    return reason is not None and reason.code == "queue_over_limit" and reason.params["queue"] != state.job.queue
