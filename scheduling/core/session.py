"""One scheduling session: the mutable state the actions work on, with transactions.

The session turns a Snapshot into numpy free-capacity arrays (placement.ClusterArrays for whole
and fractional GPUs, plus MIG-instance and time-slice-slot arrays), keeps every replica's current
assignment and every queue's usage, and records each change in an undo journal. An action tries a
scenario inside `transaction()`; if the scenario does not fully hold it is rolled back, which is
the same as having tried it on a copy, without copying 10,000 assignments each time.

Decisions are the difference between the snapshot's assignments and the session's at the end.
`Session.build` runs the steps of `build` (the cluster's part is `cluster.ClusterBase`; what a job
and a replica hold, `state`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress
from operator import attrgetter, itemgetter, or_

import numpy as np

from . import placement as pl
from .build import (
    BuildCache,
    JobStates,
    Replicas,
    cluster_of,
    job_order,
    job_states,
    renew_states,
    take_replicas,
    weigh_changes,
)
from .cluster import ClusterBase
from .fairshare import fair_shares
from .fit import PoolTraits, Reason, Unfit, check_pool, check_pools
from .fragmentation import Shape, ShapeTable
from .model import (
    MIG_PROFILES,
    Bind,
    Decisions,
    Evict,
    EvictCause,
    Node,
    Pool,
    Queue,
    ReplicaKey,
    Request,
    Role,
    Slice,
    Snapshot,
    mig_milli,
)
from .state import Assignment, JobState
from .topology import Domains, build_domains
from .units import MILLI_PER_GPU

_FIRST = itemgetter(0)
_PENDING, _GROWS = attrgetter("pending"), attrgetter("grows")

NO_CAUSE = EvictCause()
NODE_LOST = EvictCause(rule="node-lost")
MOVED = EvictCause(rule="consolidation")     # goes with decisions()' default reason, "consolidate"


def request_milli(request: Request, pool: Pool | None) -> int:
    """GPU share one replica of `request` holds (per replica, all its GPUs)."""
    if request.mode == "exclusive":
        return MILLI_PER_GPU * request.num_gpus
    if request.mode == "fraction":
        return request.gpu_milli
    if request.mode == "mig":
        return mig_milli(request.mig_profile)
    replicas = pool.timeslice_replicas if pool is not None else 1
    return request.num_gpus * (MILLI_PER_GPU // replicas)


@dataclass
class Session:
    snapshot: Snapshot
    pools: dict[str, Pool]
    nodes: list[Node]                          # ready nodes, one per array row
    node_pool: list[str]
    arrays: pl.ClusterArrays
    pool_mask: dict[str, np.ndarray]           # schedulable rows (in pool, not cordoned)
    mig_free: np.ndarray                       # bool [N, G, K]: instance k of GPU g is free
    mig_profile: np.ndarray                    # int  [N, K]: profile id of layout slot k (-1 none)
    ts_free: np.ndarray                        # int  [N, G]: free time-slice slots
    ts_used: list[dict[int, set[int]]]         # per row: GPU -> slots in use
    ctx: pl.PlacementContext
    queues: dict[str, Queue]
    jobs: dict[str, JobState]
    queue_path: dict[str, tuple[str, ...]]     # leaf first, root last
    fair_share: dict[str, float]
    deserved: dict[str, float]                 # min(deserved, demand), what reclaim never goes under
    alloc: dict[str, int]                      # queue -> GPU milli held by its subtree
    np_alloc: dict[str, int]                   # same, non-preemptible jobs only
    initial: dict[ReplicaKey, Assignment]
    lost: dict[ReplicaKey, str]                # replicas on nodes gone or not ready -> node name
    assign: dict[ReplicaKey, Assignment] = field(default_factory=dict)
    new: set[ReplicaKey] = field(default_factory=set)   # bound during this session
    evict_reason: dict[ReplicaKey, str] = field(default_factory=dict)
    evict_cause: dict[ReplicaKey, EvictCause] = field(default_factory=dict)   # set with evict_reason
    journal: list[Callable[[], None]] = field(default_factory=list)
    depth: int = 0
    freed: int = 0                             # bumped by every eviction
    returned: int = 0                          # bumped whenever capacity comes back (evictions, rollbacks)
    profile_ids: dict[str, int] = field(default_factory=dict)
    order: list[JobState] = field(default_factory=list)   # jobs by (-priority, created, id)
    # the jobs of `order` below their gang minimum or able to grow when the session was built: a job
    # not among them wants nothing unless it loses a replica (and a job evicted in a cycle waits)
    wanting: list[JobState] = field(default_factory=list)
    memo: dict = field(default_factory=dict)   # what actions keep while `stamp` says it holds
    roles_ids: Iterable[int] = ()              # id of every job's roles (a set view)
    _pools_for: dict[tuple, list[str]] = field(default_factory=dict)
    _masks: dict[frozenset, np.ndarray] = field(default_factory=dict)
    _no_room: dict[tuple, int] = field(default_factory=dict)   # (shape, pool) -> `returned` when it failed
    _preq: dict[tuple, pl.PlacementRequest] = field(default_factory=dict)
    _free_milli: dict[frozenset, tuple[int, int]] = field(default_factory=dict)   # pools -> (stamp, free)
    _whole_free: tuple[int, np.ndarray] | None = None     # (stamp, `whole_free_per_node`)
    # what a queue's usage is weighed against when ordering queues: max(deserved, fair share), within
    # its limit (KAI-Scheduler's allocatable share)
    allocatable: dict[str, float] = field(default_factory=dict)
    stamp: int = 0                             # bumped whenever capacity is taken or given back
    touched: list[str] = field(default_factory=list)   # ids of jobs whose replicas changed, in order
    # visit every job the actions walk, one by one (the reference for tests); when False a walk stops
    # once no job left could change anything (`actions.walk.Quiet`)
    exact: bool = False
    # actions' plans of jobs with nothing running, by (id of the job's roles, waits for off-peak) ->
    # (roles, plan); a memo may carry them from cycle to cycle
    plans: dict[tuple, tuple] = field(default_factory=dict)
    _domains: dict[tuple, Domains] = field(default_factory=dict)   # by the levels' label keys
    # backfill reservations made this cycle: job id -> the rows held for it (`actions.reserve`)
    reserved: dict[str, tuple[int, ...]] = field(default_factory=dict)

    # ------------------------------------------------------------------ building

    @classmethod
    def build(cls, snapshot: Snapshot, cache: BuildCache | None = None) -> Session:
        """The session of a snapshot. `cache` (kept by a long-lived caller, `cycle.CycleMemo`) keeps what
        depends only on the pools, nodes and queues while the snapshot's are the same objects."""
        cluster = cluster_of(snapshot, cache)
        states = job_states(snapshot, cluster, cache)
        replicas = take_replicas(snapshot, cluster, states.jobs, cache)
        renew_states(states, replicas)
        check = replicas.check
        base = cache.base if cache is not None and replicas.carried and cache.base_for is cluster else None
        arrays = cluster.arrays(*check.free, base, check.rows_changed)
        session = cls.of(snapshot, cluster, states.jobs, replicas, arrays, job_order(states, cache))
        weighed = session._count_and_weigh(states, cluster, cache)
        if cache is not None:
            session._keep_for_next(cache, cluster, replicas, weighed)
        return session

    @classmethod
    def of(cls, snapshot: Snapshot, cluster: ClusterBase, jobs: dict[str, JobState], replicas: Replicas,
           arrays: pl.ClusterArrays, order: list[JobState]) -> Session:
        """A session of a build's parts, the replicas assigned as in the snapshot (not counted yet)."""
        check = replicas.check
        session = cls(
            snapshot=snapshot, pools=cluster.pools, nodes=cluster.nodes, node_pool=cluster.node_pool, arrays=arrays,
            pool_mask=cluster.pool_mask, mig_free=check.mig_free, mig_profile=cluster.mig_profile,
            ts_free=check.ts_free, ts_used=check.ts_used, ctx=pl.PlacementContext(), queues=cluster.queues,
            jobs=jobs, queue_path=cluster.queue_path, fair_share={}, deserved={},
            alloc={q.name: 0 for q in snapshot.queues}, np_alloc={q.name: 0 for q in snapshot.queues},
            initial=replicas.initial, lost=replicas.lost, profile_ids=cluster.profile_ids, order=order,
        )
        session.assign = dict(replicas.initial)
        return session

    def _count_and_weigh(self, states: JobStates, cluster: ClusterBase, cache: BuildCache | None) -> tuple:
        """Every replica counted (per job and queue), the jobs that want replicas listed, the lost
        replicas' evictions noted, every job weighed and the fair shares computed. Returns the demand per
        queue, roles tuples and non-preemptible jobs (see `_weigh_jobs`)."""
        holders = self._count_initial(states.fresh_ids)
        order = self.order
        self.wanting = list(compress(order, map(or_, map(_PENDING, order), map(_GROWS, order))))
        for key in self.lost:
            self.evict_reason[key] = "node-lost"
            self.evict_cause[key] = NODE_LOST
        if cache is not None and cache.weighed_for is not cluster:
            cache.weighed, cache.weighed_for, cache.demand = {}, cluster, None
        weights = cache.weighed if cache is not None else {}
        if states.kept and cache.demand is not None and states.fresh_ids is not None:
            demand, per_roles, strict_jobs = cache.demand
            demand, per_roles = dict(demand), {k: list(v) for k, v in per_roles.items()}
            strict_jobs = weigh_changes(self.snapshot, cache, states.arrived, demand, per_roles, strict_jobs,
                                        self.weigh_roles)
            for job_id in states.fresh_ids:
                state = self.jobs[job_id]
                state.min_milli = per_roles[id(state.job.roles)][1]
        else:
            demand, per_roles, strict_jobs = self._weigh_jobs(weights)
        self._compute_fair_shares(demand, per_roles)
        if strict_jobs:
            self._count_initial_np(holders)   # needs each job's gang minimum
        return demand, per_roles, strict_jobs

    def _keep_for_next(self, cache: BuildCache, cluster: ClusterBase, replicas: Replicas, weighed: tuple) -> None:
        """What the next build may reuse of this one."""
        demand, per_roles, strict_jobs = weighed
        cache.placed_for, cache.placed = cluster, replicas.placed
        cache.free = replicas.check.free
        cache.jobs, cache.touched, cache.order = self.jobs, self.touched, self.order
        cache.jobs_for, cache.wanting = cluster, self.wanting
        made, cache.next_job_objects = cache.next_job_objects, None
        if made is not None and made[0] is self.snapshot:
            cache.job_objects = made[1]
        else:
            cache.job_objects = dict(zip(map(id, self.snapshot.jobs), self.snapshot.jobs, strict=True))
        cache.demand = (demand, {k: tuple(v) for k, v in per_roles.items()}, strict_jobs)
        weights = cache.weighed
        weights.clear()
        for key, found in per_roles.items():
            weights[key] = (found[0], found[1], found[2])
        # the free figures as arrays before the actions change them (4 small copies)
        arrays = self.arrays
        cache.base = (arrays.gpu_free_milli.copy(), arrays.gpu_free_mem.copy(), arrays.cpu_free.copy(),
                      arrays.mem_free.copy())
        cache.base_for = cluster
        if self.snapshot.held:   # free figures with stopping replicas taken: the next build counts them afresh
            cache.placed_for = cache.base_for = None

    def _count_initial(self, fresh: set[str] | None) -> set[str]:
        """`_count(key, a, +1)` for every replica of the snapshot, summed per queue once. Only the states
        of `fresh` (None: all) count their replicas: the others (reused, see `build`) have counted them.
        Returns the jobs holding replicas."""
        jobs = self.jobs
        held: dict[str, int] = {}
        counted = set()
        initial = self.initial
        holders = set(map(_FIRST, initial))
        keys = initial if fresh is None else compress(initial, map(fresh.__contains__, map(_FIRST, initial)))
        for key in keys:
            a = initial[key]
            job_id = key[0]
            state = jobs[job_id]
            state.version += 1
            state.running[key[1]].add(key[2])
            counted.add(job_id)
            state.held += a.slice.gpu_milli * len(a.gpus)
        for job_id in counted:
            jobs[job_id].refresh()
        for job_id in holders:
            state = jobs[job_id]
            queue = state.job.queue
            held[queue] = held.get(queue, 0) + state.held
        for leaf, milli in held.items():
            for q in self.queue_path[leaf]:
                self.alloc[q] += milli
        return holders

    def _count_initial_np(self, holders: set[str]) -> None:
        held_np: dict[str, int] = {}
        for job_id in holders:
            state = self.jobs[job_id]
            if state.held and not state.job.preemptible:
                held_np[state.job.queue] = held_np.get(state.job.queue, 0) + state.np_milli(state.held)
        for leaf, milli in held_np.items():
            for q in self.queue_path[leaf]:
                self.np_alloc[q] += milli

    def weigh_roles(self, roles: tuple[Role, ...]) -> tuple[int, int, tuple[Role, ...]]:
        """GPU milli a job of these roles asks for in all (its maxima) and at its gang minimum."""
        total = minimum = 0
        for role in roles:
            request = role.request
            pools = self._pools_for.get(request.shape())
            if pools is None:
                pools = self.pools_for(request)
            per = request_milli(request, self.pools[pools[0]] if pools else None)
            total += per * role.max_replicas
            minimum += per * role.min_replicas
        return total, minimum, roles

    def _weigh_jobs(self, weighed: dict[int, tuple]) -> tuple[dict[str, int], dict[int, list], int]:
        """Every job's demand per queue, its roles tuples ([total, minimum, roles, jobs] by id) and the
        number of non-preemptible jobs; each job's gang minimum set. `weighed`: what roles ask for, by id
        of the roles, kept while the pools are."""
        demand: dict[str, int] = {}
        # many jobs share their roles: each distinct tuple of them is weighed once
        per_roles: dict[int, list] = {}
        strict_jobs = 0
        for state in self.jobs.values():
            job = state.job
            roles = job.roles
            found = per_roles.get(id(roles))
            if found is None:
                kept = weighed.get(id(roles))
                if kept is None or kept[2] is not roles:
                    kept = self.weigh_roles(roles)
                found = per_roles[id(roles)] = [*kept, 0]
            found[3] += 1
            state.min_milli = found[1]
            demand[job.queue] = demand.get(job.queue, 0) + found[0]
            if not job.preemptible:
                strict_jobs += 1
        return demand, per_roles, strict_jobs

    def _compute_fair_shares(self, demand: dict[str, int], per_roles: dict[int, list]) -> None:
        """Fair shares from every job's demand (per queue; `per_roles`: see `_weigh_jobs`); on the way,
        the typical request shapes (pending and running, by replica count) that the fragmentation-aware
        policy scores against."""
        shape_counts: dict[tuple, int] = {}
        representative: dict[tuple, Request] = {}
        self.roles_ids = per_roles.keys()
        for _, _, roles, count in per_roles.values():
            for role in roles:
                request = role.request
                if request.mode in ("exclusive", "fraction"):
                    key = request.shape()
                    shape_counts[key] = shape_counts.get(key, 0) + role.max_replicas * count
                    representative.setdefault(key, request)
        capacity = sum(len(x.gpus) for x in self.nodes) * MILLI_PER_GPU
        self.fair_share = fair_shares(self.snapshot.queues, capacity, demand, dict(self.snapshot.queue_usage),
                                      self.snapshot.usage_k)
        queues = self.queues
        subtree = {name: 0.0 for name in queues}
        for leaf, amount in demand.items():
            for name in self.queue_path[leaf]:
                subtree[name] += amount
        self.deserved = {name: min(float(q.deserved_milli), subtree[name]) for name, q in queues.items()}
        for name, q in queues.items():
            most = max(float(q.deserved_milli), self.fair_share.get(name, 0.0))
            self.allocatable[name] = most if q.limit_milli is None else min(most, float(q.limit_milli))

        shapes: dict[Shape, float] = {}
        for key, n in shape_counts.items():
            shape = self.placement_request(representative[key]).shape()
            shapes[shape] = shapes.get(shape, 0) + n
        if shapes:
            self.ctx = pl.PlacementContext(shapes=ShapeTable.from_counts(shapes))

    # ------------------------------------------------------------------ lookups

    def pools_for(self, request: Request) -> list[str]:
        """Pools that can serve `request`, in snapshot order."""
        key = request.shape()
        found = self._pools_for.get(key)
        if found is None:
            found = [p.name for p in self.snapshot.pools if check_pool(PoolTraits.of(p), request) is None]
            self._pools_for[key] = found
        return found

    def no_pool_reason(self, request: Request) -> Unfit:
        """Why no pool serves `request`: the constraint no pool meets, naming what is on offer."""
        pools = [PoolTraits.of(p) for p in self.snapshot.pools]
        found = check_pools(pools, request)
        if found is None:   # every constraint is met by some pool, but never all by one
            found = next(u for u in (check_pool(p, request) for p in pools) if u is not None)
        return found

    def placement_request(self, request: Request) -> pl.PlacementRequest:
        key = request.shape()
        preq = self._preq.get(key)
        if preq is None:
            if request.mode == "fraction":
                preq = pl.PlacementRequest(request.gpu_milli, 1, request.gpu_mem_mib, request.cpu_milli, request.mem_mib)
            else:
                n = request.num_gpus
                preq = pl.PlacementRequest(MILLI_PER_GPU if n else 0, n, 0, request.cpu_milli, request.mem_mib)
            self._preq[key] = preq
        return preq

    def role(self, job_id: str, role_name: str):
        return next(r for r in self.jobs[job_id].job.roles if r.name == role_name)

    def row_name(self, row: int) -> str:
        return self.nodes[row].name

    def pools_mask(self, pools: Iterable[str]) -> np.ndarray:
        key = frozenset(pools)
        mask = self._masks.get(key)
        if mask is None:
            mask = np.zeros(self.arrays.size, dtype=bool)
            for p in key:
                mask |= self.pool_mask[p]
            self._masks[key] = mask
        return mask

    def pool_free_milli(self, pools: Iterable[str]) -> int:
        """GPU milli free on schedulable whole/fraction GPUs of these pools."""
        key = frozenset(pools)
        found = self._free_milli.get(key)
        if found is not None and found[0] == self.stamp:
            return found[1]
        free = int(self.arrays.gpu_free_milli[self.pools_mask(key)].sum())
        self._free_milli[key] = (self.stamp, free)      # good until capacity is taken or given back
        return free

    def whole_free_per_node(self) -> np.ndarray:
        """Whole GPUs free per row (all their milli and memory free). Good until capacity is taken or given
        back (`stamp`); callers must not change it."""
        found = self._whole_free
        if found is not None and found[0] == self.stamp:
            return found[1]
        arr = self.arrays
        per_node = ((arr.gpu_free_milli == MILLI_PER_GPU) & (arr.gpu_free_mem == arr.gpu_total_mem[:, None])
                    & arr.gpu_present).sum(axis=1)
        self._whole_free = (self.stamp, per_node)
        return per_node

    def row_fits(self, row: int, request: Request) -> bool:
        """Whether one replica of `request` fits on node `row` now (pool rules aside)."""
        arr = self.arrays
        if arr.cpu_free[row] < request.cpu_milli or arr.mem_free[row] < request.mem_mib:
            return False
        if request.mode == "exclusive":
            whole = (arr.gpu_free_milli[row] == MILLI_PER_GPU) & (arr.gpu_free_mem[row] == arr.gpu_total_mem[row])
            return int((whole & arr.gpu_present[row]).sum()) >= request.num_gpus
        if request.mode == "fraction":
            return bool(((arr.gpu_free_milli[row] >= request.gpu_milli)
                         & (arr.gpu_free_mem[row] >= request.gpu_mem_mib) & arr.gpu_present[row]).any())
        if request.mode == "mig":
            pid = self.profile_ids[request.mig_profile]
            return bool((self.mig_free[row] & (self.mig_profile[row] == pid)[None, :]).any())
        return int((self.ts_free[row] > 0).sum()) >= request.num_gpus

    # ------------------------------------------------------------------ finding room

    def all_fit(self, requests: list[Request], pool_name: str) -> bool:
        """Whether every request (one replica each) finds room in `pool_name` together now; each spot is
        held while the next ones look, and all are given back (nothing is changed)."""
        taken: list[Assignment] = []
        try:
            for request in requests:
                spot = self.find_spot(request, pool_name)
                if spot is None:
                    return False
                self._take(spot, -1)
                taken.append(spot)
            return True
        finally:
            for spot in reversed(taken):
                self._take(spot, +1)

    def find_spot(self, request: Request, pool_name: str, within: np.ndarray | None = None) -> Assignment | None:
        """Where one replica of `request` would go in `pool_name` now, on the rows of `within` (bool [N])
        if given (nothing is changed)."""
        key = (request.shape(), pool_name)
        if self._no_room.get(key) == self.returned:
            return None                      # failed before, and no capacity came back since
        if within is not None:               # no room in a part of the pool says nothing of the rest
            return self._find_spot(request, pool_name, within)
        spot = self._find_spot(request, pool_name)
        if spot is None:
            self._no_room[key] = self.returned
        return spot

    def domains(self, keys: tuple[str, ...]) -> Domains:
        """The topology domains of the session's rows for these levels (`topology.build_domains`)."""
        found = self._domains.get(keys)
        if found is None:
            found = self._domains[keys] = build_domains(self.nodes, keys)
        return found

    def _find_spot(self, request: Request, pool_name: str, within: np.ndarray | None = None) -> Assignment | None:
        pool = self.pools[pool_name]
        mask = self.pool_mask[pool_name]
        if within is not None:
            mask = mask & within
        if request.mode in ("exclusive", "fraction"):
            preq = self.placement_request(request)
            allowed = mask
            if request.mode == "exclusive" and request.gpu_mem_mib:
                allowed = mask & (self.arrays.gpu_total_mem >= request.gpu_mem_mib)
            spot = pl.place(self.arrays, preq, pool.placement, allowed, self.ctx)
            if spot is None:
                return None
            kind = "fraction" if request.mode == "fraction" else "whole"
            sl = Slice(kind, spot.gpu_milli, spot.gpu_mem_mib)
            return Assignment(spot.node, spot.gpus, sl, request.cpu_milli, request.mem_mib)
        node_ok = mask & (self.arrays.cpu_free >= request.cpu_milli) & (self.arrays.mem_free >= request.mem_mib)
        spread = pool.placement == "spread"
        if request.mode == "mig":
            return self._find_mig(request, node_ok, spread)
        return self._find_timeslice(request, pool, node_ok, spread)

    def _find_mig(self, request: Request, node_ok: np.ndarray, spread: bool) -> Assignment | None:
        pid = self.profile_ids[request.mig_profile]
        cand = self.mig_free & (self.mig_profile == pid)[:, None, :] & node_ok[:, None, None]
        has = cand.any(axis=2)                               # [N, G]
        if not has.any():
            return None
        free_gpu = self.mig_free.sum(axis=2).astype(np.int64)   # instances still free per GPU
        free_node = free_gpu.sum(axis=1)
        # binpack: the most used node, then its most used GPU, that has the profile free;
        # spread: the least used node, then GPU. Ties go to the lowest index.
        lexical = free_node[:, None] * (free_gpu.shape[1] * self.mig_free.shape[2] + 1) + free_gpu
        big = np.iinfo(np.int64).max
        score = np.where(has, -lexical if spread else lexical, big)
        row, gpu = divmod(int(np.argmin(score)), has.shape[1])
        inst = int(np.flatnonzero(cand[row, gpu])[0])
        sl = Slice("mig", mig_milli(request.mig_profile), MIG_PROFILES[request.mig_profile][1],
                   request.mig_profile, inst)
        return Assignment(row, (gpu,), sl, request.cpu_milli, request.mem_mib)

    def _find_timeslice(self, request: Request, pool: Pool, node_ok: np.ndarray, spread: bool) -> Assignment | None:
        k = request.num_gpus
        has = (self.ts_free > 0) & node_ok[:, None]
        enough = has.sum(axis=1) >= k
        if not enough.any():
            return None
        total = np.where(has, self.ts_free, 0).sum(axis=1)
        big = np.iinfo(np.int64).max
        score = np.where(enough, -total if spread else total, big)
        row = int(np.argmin(score))
        free = np.where(has[row], self.ts_free[row].astype(np.int64), big if not spread else -1)
        order = np.argsort(-free if spread else free, kind="stable")[:k]
        gpus = tuple(sorted(int(x) for x in order))
        used = self.ts_used[row]
        # all listed GPUs share one slot number: the lowest free on every one of them
        slot = next((s for s in range(pool.timeslice_replicas) if all(s not in used.get(gi, ()) for gi in gpus)), None)
        if slot is None:
            return None
        sl = Slice("timeslice", MILLI_PER_GPU // pool.timeslice_replicas, 0, timeslice_slot=slot)
        return Assignment(row, gpus, sl, request.cpu_milli, request.mem_mib)

    def fits(self, a: Assignment) -> bool:
        """Whether assignment `a` could be taken again as it is (used to undo needless evictions)."""
        arr = self.arrays
        if arr.cpu_free[a.row] < a.cpu_milli or arr.mem_free[a.row] < a.mem_mib:
            return False
        return self._gpus_free(a)            # a cordoned node may take back what ran there

    def _gpus_free(self, a: Assignment) -> bool:
        s, gpus = a.slice, list(a.gpus)
        if s.kind == "mig":
            return bool(self.mig_free[a.row, gpus, s.mig_instance].all())
        if s.kind == "timeslice":
            used = self.ts_used[a.row]
            return all(s.timeslice_slot not in used.get(g, ()) for g in gpus)
        free_milli, free_mem = self.arrays.gpu_free_milli, self.arrays.gpu_free_mem
        return all(free_milli[a.row, g] >= s.gpu_milli and free_mem[a.row, g] >= s.gpu_mem_mib for g in gpus)

    # ------------------------------------------------------------------ changing state

    def _take(self, a: Assignment, sign: int) -> None:
        """Take (sign -1) or give back (+1) the capacity of an assignment."""
        arr, s, row = self.arrays, a.slice, a.row
        self.stamp += 1
        if sign > 0:
            self.returned += 1
        arr.cpu_free[row] += sign * a.cpu_milli
        arr.mem_free[row] += sign * a.mem_mib
        if s.kind == "mig":
            self.mig_free[row, list(a.gpus), s.mig_instance] = sign > 0
        elif s.kind == "timeslice":
            used = self.ts_used[row]
            for g in a.gpus:
                (used.setdefault(g, set()).discard if sign > 0 else used.setdefault(g, set()).add)(s.timeslice_slot)
            self.ts_free[row, list(a.gpus)] += sign
        else:
            # one scalar update per GPU: numpy's fancy indexing costs twenty times as much
            milli, mem = sign * s.gpu_milli, sign * s.gpu_mem_mib
            free_milli, free_mem = arr.gpu_free_milli, arr.gpu_free_mem
            for g in a.gpus:
                free_milli[row, g] += milli
                free_mem[row, g] += mem
        arr.version[row] += 1

    def _count(self, key: ReplicaKey, a: Assignment, sign: int) -> None:
        state = self.jobs[key[0]]
        job = state.job
        state.version += 1
        self.touched.append(key[0])
        (state.running[key[1]].add if sign > 0 else state.running[key[1]].discard)(key[2])
        state.refresh()
        milli = a.gpu_milli * sign
        before = state.held
        state.held += milli
        np_change = 0 if job.preemptible else state.np_milli(state.held) - state.np_milli(before)
        for q in self.queue_path[job.queue]:
            self.alloc[q] += milli
            if np_change:
                self.np_alloc[q] += np_change

    def bind(self, key: ReplicaKey, a: Assignment) -> None:
        self._take(a, -1)
        self._count(key, a, +1)
        self.assign[key] = a
        fresh = key not in self.new
        self.new.add(key)
        if self.depth:
            def undo() -> None:
                self._take(a, +1)
                self._count(key, a, -1)
                del self.assign[key]
                if fresh:
                    self.new.discard(key)
            self.journal.append(undo)

    def unbind(self, key: ReplicaKey, reason: str, cause: EvictCause = NO_CAUSE) -> None:
        a = self.assign.pop(key)
        self._take(a, +1)
        self._count(key, a, -1)
        self.freed += 1
        was_new = key in self.new
        self.new.discard(key)
        first = key in self.initial and key not in self.evict_reason
        state = self.jobs[key[0]]
        if first:
            self.evict_reason[key] = reason
            self.evict_cause[key] = cause
            state.evicted += 1
        if self.depth:
            def undo() -> None:
                self._take(a, -1)
                self._count(key, a, +1)
                self.assign[key] = a
                if was_new:
                    self.new.add(key)
                if first:
                    del self.evict_reason[key]
                    del self.evict_cause[key]
                    state.evicted -= 1
            self.journal.append(undo)

    def restore(self, key: ReplicaKey, a: Assignment) -> None:
        """Put an evicted snapshot replica back where it was: as if it had never been evicted."""
        self.bind(key, a)
        reason = self.evict_reason.pop(key, None)
        cause = self.evict_cause.pop(key, None)
        state = self.jobs[key[0]]
        if reason is not None:
            state.evicted -= 1
        self.new.discard(key)
        if self.depth:
            def undo() -> None:
                self.new.add(key)
                if reason is not None:
                    self.evict_reason[key] = reason
                    state.evicted += 1
                if cause is not None:
                    self.evict_cause[key] = cause
            self.journal.append(undo)

    def transaction(self, scenario: Callable[[], bool]) -> bool:
        """Run `scenario`; keep its changes only if it returns True."""
        mark = len(self.journal)
        self.depth += 1
        try:
            ok = scenario()
        except BaseException:
            ok = False
            raise
        finally:
            self.depth -= 1
            if not ok:
                while len(self.journal) > mark:
                    self.journal.pop()()
        if self.depth == 0:
            del self.journal[mark:]
        return ok

    # ------------------------------------------------------------------ results

    def decisions(self, pending: dict[str, Reason], late: tuple[str, ...] = ()) -> Decisions:
        evicts, binds = [], []
        # only the replicas of jobs bound or evicted in this session (`touched`) can have changed
        changed = set(self.touched)
        initial, assign = self.initial, self.assign
        # C loops pick the keys of those jobs
        for key in sorted([*compress(initial, map(changed.__contains__, map(_FIRST, initial))), *self.lost]):
            now = self.assign.get(key)
            before = self.initial.get(key)
            if now is not None and now == before:
                continue
            node = self.row_name(before.row) if before is not None else self.lost[key]
            cause = self.evict_cause.get(key, MOVED)
            evicts.append(Evict(key[0], key[1], key[2], node, self.evict_reason.get(key, "consolidate"),
                                cause.by_job, cause.by_queue, cause.level, cause.rule))
        for key in sorted(compress(assign, map(changed.__contains__, map(_FIRST, assign)))):
            now = self.assign[key]
            if self.initial.get(key) == now:
                continue
            binds.append(Bind(key[0], key[1], key[2], self.row_name(now.row), now.gpus, now.slice))
        codes = dict(sorted(pending.items()))
        return Decisions(tuple(evicts), tuple(binds), {job_id: r.text for job_id, r in codes.items()}, codes, late)

    @cached_property
    def job_off_peak(self) -> dict[str, tuple[bool, str]]:
        """The ReduceCost jobs with their own off-peak window: (open now, when it next opens) by job id."""
        return {job_id: (open_now, opens) for job_id, open_now, opens in self.snapshot.job_off_peak}
