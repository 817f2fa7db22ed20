"""Consolidate: move preemptible replicas between nodes so that a pending job fits, when every moved
one fits again."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .. import placement as pl
from ..model import EvictCause, Job, ReplicaKey, Request, Role, Slice
from ..repack import Steps
from ..room import MovableSet, Resident, fewest_to_clear, plan_room
from ..session import Session, request_milli
from ..state import Assignment, JobState
from ..units import MILLI_PER_GPU
from .evicting import EvictionQuiet, move_all, without_idle_branches
from .gang import gang_pools, gang_signature, missing_milli, place_gang, plan, request_mask
from .topology import required_rows
from .walk import AGAIN, STOP, fair_walk, pending_by_queue

# Consolidation looks at this many nodes per pending job.
MAX_CONSOLIDATION_NODES = 4
# Consolidation scenarios per cycle (each looks at up to MAX_CONSOLIDATION_NODES nodes).
MAX_CONSOLIDATION_SCENARIOS = 8


def consolidation_cause(job: Job) -> EvictCause:
    return EvictCause(job.id, job.queue, "", "consolidation")


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
    walk = ConsolidateWalk(s)
    by_queue = pending_by_queue(s, {"capacity"})
    if not s.exact:
        by_queue = without_idle_branches(s, by_queue, walk.never)
    fair_walk(s, by_queue, walk.visit, ConsolidateQuiet(s, walk.acts))


class ConsolidateWalk:
    """What consolidation's visits share: the scenarios left, the signatures that failed, and the
    replicas it may move (collected on first need, again after moves)."""

    def __init__(self, s: Session) -> None:
        self.s = s
        self.budget = MAX_CONSOLIDATION_SCENARIOS
        self.failed: dict[tuple, int] = {}
        self.movable: Movable | None = None
        self.residents: MovableSet | None = None
        self.steps = Steps()  # repack search steps, shared by this cycle's plans
        # moves keep what is free and placements take from it: a job asking more than is free in the whole
        # cluster now never finds room by moving in this walk
        self.free = int(s.arrays.gpu_free_milli.sum())

    def acts(self, state: JobState) -> bool:
        """Whether visiting the job now could do more than pass (see `visit`)."""
        s = self.s
        if self.budget <= 0 or not state.wants():
            return False
        pools = gang_pools(s, state)
        if not pools or any(s.pools[p].gpu_mode != "whole" for p in pools):
            return False
        return s.pool_free_milli(pools) >= missing_milli(s, state) and self.failed.get(gang_signature(s, state)) != s.freed

    def visit(self, state: JobState) -> object:
        s = self.s
        if self.budget <= 0:
            return STOP
        if not state.wants():
            return None
        pools = gang_pools(s, state)
        if not pools or any(s.pools[p].gpu_mode != "whole" for p in pools):
            return None
        if s.pool_free_milli(pools) < missing_milli(s, state):
            return None                 # not a fragmentation problem: moving cannot help
        sig = gang_signature(s, state)
        if self.failed.get(sig) == s.freed:
            return None
        one = single_missing(s, state)
        if self.moved_for_one(state, *one) if one is not None else self.moved_for_gang(state, pools):
            state.fail = None
            return AGAIN if state.grows else None
        self.failed[sig] = s.freed
        return None

    def moved_for_one(self, state: JobState, role: Role, index: int) -> bool:
        """The moves `plan_room` finds for the one replica the job misses, tried."""
        s = self.s
        if self.residents is None:
            self.residents = movable_set(s)
        residents = self.residents
        self.budget -= 1
        if s.transaction(lambda: room_for_one(s, state, role, index, residents, self.steps)):
            self.movable = None
            return True
        return False

    def moved_for_gang(self, state: JobState, pools: set[str]) -> bool:
        """Room made for a gang one replica at a time (`clear_per_replica`), else by clearing nodes
        (`consolidate_for`), tried when some nodes could host it."""
        s = self.s
        if self.movable is None:
            self.movable = Movable.collect(s)
        movable = self.movable
        rows = candidate_rows(s, state, pools, movable)
        if not len(rows):
            return False
        self.budget -= 1
        if (s.transaction(lambda: clear_per_replica(s, state, rows, movable))
                or s.transaction(lambda: consolidate_for(s, state, rows, movable))):
            self.movable = Movable.collect(s)
            self.residents = None
            return True
        return False

    def never(self, state: JobState) -> bool:
        if state.replicas:          # (`waits_whole` inline: a call per waiting job)
            return False
        p = state.plan if state.plan_version == state.version else plan(self.s, state)
        return p.need > self.free


class ConsolidateQuiet(EvictionQuiet):
    """Consolidation's jobs left, grouped by their plan's signature (pools, need, the failed-scenario
    check) and whether they want replicas."""

    def group(self, state: JobState) -> tuple:
        p = state.plan if state.plan_version == state.version else plan(self.s, state)   # a call per waiting job
        return p.sig, state.pending, state.grows


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
        if not job.preemptible or (job.topology is not None and job.topology.required):
            continue   # a replica of a required topology is not moved one by one: it could leave its domain
        kind = kinds.get((id(job.roles), key[1]))
        if kind is None:
            request = s.role(key[0], key[1]).request
            kind = kinds[(id(job.roles), key[1])] = (s.placement_request(request),
                                                     request_mask(s, request, s.pools_for(request)))
        residents.append(Resident(key, kind[0], Placement(a.row, a.gpus, sl.gpu_milli, sl.gpu_mem_mib), kind[1]))
    return MovableSet.of(s.arrays, residents)


def room_for_one(s: Session, state: JobState, role: Role, index: int, residents: MovableSet,
                 steps: Steps) -> bool:
    """Scenario body: the moves `plan_room` finds for one replica, carried out as evictions and binds."""
    pools = plan(s, state).pools[role.name]
    request = role.request
    # a job never moves its own replicas to make room for itself
    keys = [(state.job.id, name, i) for name, running in state.running.items() for i in running]
    own = [residents.remove(k, s.assign[k].row) for k in keys if k in residents.on_node[s.assign[k].row]]
    try:
        mask = request_mask(s, request, pools)
        within = required_rows(s, state, pools)
        room = plan_room(s.arrays, s.placement_request(request), s.pools[pools[0]].placement, residents,
                         mask if within is None else mask & within, s.ctx, steps=steps)
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


def clear_per_replica(s: Session, state: JobState, rows: np.ndarray, movable: Movable) -> bool:
    """Scenario body for a gang of whole GPUs: each missing replica in turn goes where it fits now,
    or else onto the first of `rows` where moving the fewest replicas off makes room for it; then
    the moved ones go back where they fit, the others elsewhere (`move_all`). Replicas not in the
    way stay where they are, as KAI-Scheduler leaves them."""
    p = plan(s, state)
    if any(r.request.mode != "exclusive" or r.request.num_gpus == 0 for r in p.roles):
        return False
    moved: list[tuple[ReplicaKey, Assignment]] = []
    for role in p.roles:
        request, pools = role.request, p.pools[role.name]
        for index in p.missing[role.name]:
            key = (state.job.id, role.name, index)
            spot = next((found for pool in pools if (found := s.find_spot(request, pool)) is not None), None)
            if spot is not None:
                s.bind(key, spot)
            elif not any(s.transaction(functools.partial(room_on_row, s, key, request, pools, row, movable, moved))
                         for row in rows.tolist()):
                return False
    return move_all(s, moved)


def room_on_row(s: Session, key: ReplicaKey, request: Request, pools: list[str], row: int, movable: Movable,
                moved: list[tuple[ReplicaKey, Assignment]]) -> bool:
    """Move the fewest replicas off node `row` so replica `key` (whole GPUs of one of `pools`) fits
    there, and bind it there; the moved ones are added to `moved` (to be placed again)."""
    pool = s.node_pool[row]
    if pool not in pools or not request_mask(s, request, [pool])[row]:
        return False
    holders = [(k, s.assign[k].gpus, s.assign[k].slice.gpu_milli) for k in movable.keys.get(row, [])
               if k in s.assign and k not in s.new and k[0] != key[0]]
    victims = fewest_to_clear(s.arrays, row, holders, request.num_gpus)
    if not victims:
        return False
    cause = consolidation_cause(s.jobs[key[0]].job)
    gone = [(k, s.assign[k]) for k in victims]
    for k in victims:
        s.unbind(k, "consolidate", cause)
    only = np.zeros(s.arrays.size, dtype=bool)
    only[row] = True
    spot = pl.place(s.arrays, s.placement_request(request), s.pools[pool].placement, only, s.ctx)
    if spot is None:
        return False
    s.bind(key, Assignment(spot.node, spot.gpus, Slice("whole", spot.gpu_milli, spot.gpu_mem_mib),
                           request.cpu_milli, request.mem_mib))
    moved.extend(gone)
    return True


def consolidate_for(s: Session, state: JobState, rows: np.ndarray, movable: Movable) -> bool:
    """Try nodes one at a time: move replicas off it until the job fits, then re-place them. A gang
    that needs room on several nodes then gets the nodes cleared together, one after the other."""
    lists = []
    for row in rows.tolist():
        keys = [k for k in movable.keys.get(row, []) if k in s.assign and k not in s.new and k[0] != state.job.id]
        keys.sort(key=lambda k: (s.assign[k].gpu_milli, k))
        if keys:
            lists.append(keys)
            if s.transaction(lambda keys=keys: move_until_placed(s, state, [[k] for k in keys])):
                return True
    if len(lists) > 1 and sum(len(v) for v in plan(s, state).missing.values()) > 1:
        return s.transaction(lambda: move_until_placed(s, state, lists))
    return False


def move_until_placed(s: Session, state: JobState, lists: list[list[ReplicaKey]]) -> bool:
    """Move replicas away, list after list (one replica, or a node's), until the gang fits; then the
    moved ones go back where they fit, the others elsewhere (`move_all`)."""
    moved: list[tuple[ReplicaKey, Assignment]] = []
    cause = consolidation_cause(state.job)
    for keys in lists:
        for key in keys:
            moved.append((key, s.assign[key]))
            s.unbind(key, "consolidate", cause)
        if place_gang(s, state):
            return move_all(s, moved)
    return False
