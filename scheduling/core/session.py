"""One scheduling session: the mutable state the actions work on, with transactions.

The session turns a Snapshot into numpy free-capacity arrays (placement.ClusterArrays for whole
and fractional GPUs, plus MIG-instance and time-slice-slot arrays), keeps every replica's current
assignment and every queue's usage, and records each change in an undo journal. An action tries a
scenario inside `transaction()`; if the scenario does not fully hold it is rolled back, which is
the same as having tried it on a copy, without copying 10,000 assignments each time.

Decisions are the difference between the snapshot's assignments and the session's at the end.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress, repeat
from operator import and_, attrgetter, is_, itemgetter, not_, or_
from typing import NamedTuple

import numpy as np

from . import placement as pl
from .fairshare import fair_shares, queue_children
from .fit import PoolTraits, Reason, Unfit, check_pool, check_pools
from .fragmentation import Shape, ShapeTable
from .model import (
    MIG_PROFILES,
    Bind,
    Decisions,
    Evict,
    EvictCause,
    Job,
    Node,
    Pool,
    Queue,
    ReplicaKey,
    Request,
    Role,
    RunningReplica,
    Slice,
    Snapshot,
    mig_milli,
)
from .units import MILLI_PER_GPU


class Assignment(NamedTuple):
    """Where one replica runs and what it holds there. (A named tuple: a cycle makes tens of
    thousands, and a frozen dataclass costs three times as much to make.)"""

    row: int                                  # row in the session's arrays
    gpus: tuple[int, ...]
    slice: Slice
    cpu_milli: int
    mem_mib: int

    @property
    def gpu_milli(self) -> int:
        """The GPU share this replica holds, for queue accounting."""
        return self.slice.gpu_milli * len(self.gpus)


@dataclass(slots=True)
class JobState:
    job: Job
    running: dict[str, set[int]]              # role name -> replica indices assigned now
    min_milli: int                            # GPU milli of the gang minimum
    fail: tuple[str, Reason | None] | None = None   # (kind, reason) of the last failed attempt
    version: int = 0                          # bumped whenever a replica of the job is (un)bound
    plan: object = None                       # actions' cached view of what is missing
    plan_version: int = -1                    # the version `plan` was made for
    pending: bool = True                      # below the gang minimum
    elastic: bool = False                     # some role runs above its minimum
    grows: bool = False                       # at its minimum or above, and some role below its maximum
    extra: int = 0                            # replicas running above the minimums
    evicted: int = 0                          # replicas of the snapshot evicted in this session
    held: int = 0                             # GPU milli its replicas hold now
    replicas: int = 0                         # replicas assigned now (kept by `refresh`)
    units: tuple | None = None                # actions.evicting.victim_units' for it: (version, reason, rank, units)

    def np_milli(self, held: int) -> int:
        """What `held` milli count against non-preemptible quota: a non-preemptible job's gang
        minimum; the elastic replicas above it may be reclaimed, so they count as preemptible."""
        return 0 if self.job.preemptible else min(held, self.min_milli)

    def missing(self) -> dict[str, list[int]]:
        """Per role, the replica indices still needed to reach the gang minimum."""
        out = {}
        for role in self.job.roles:
            have = self.running[role.name]
            need = role.min_replicas - len(have)
            if need > 0:
                free = [i for i in range(role.max_replicas) if i not in have]
                out[role.name] = free[:need]
        return out

    def wanted(self) -> dict[str, list[int]]:
        """What the job asks for next: the replicas missing to its gang minimum, or else one replica
        above it (of the role with the fewest above its minimum, its lowest free index); {} at the
        maximum. Elastic replicas are placed one at a time, as KAI-Scheduler allocates them."""
        if self.pending:
            return self.missing()
        if not self.grows:
            return {}
        best = None
        for role in self.job.roles:
            have = self.running[role.name]
            if len(have) < role.max_replicas and (best is None or len(have) - role.min_replicas < best[0]):
                best = (len(have) - role.min_replicas, role)
        role = best[1]
        have = self.running[role.name]
        return {role.name: [next(i for i in range(role.max_replicas) if i not in have)]}

    def wants(self) -> bool:
        """Below its gang minimum, or elastic with room to grow."""
        return self.pending or self.grows

    def is_pending(self) -> bool:
        """Below the gang minimum (kept up to date by the session on every bind and unbind)."""
        return self.pending

    def refresh(self) -> None:
        pending = elastic = room = False
        extra = total = 0
        for r in self.job.roles:
            n = len(self.running[r.name])
            total += n
            if n < r.min_replicas:
                pending = True
            elif n > r.min_replicas:
                elastic = True
                extra += n - r.min_replicas
            if n < r.max_replicas:
                room = True
        self.pending, self.elastic, self.grows, self.extra = pending, elastic, room and not pending, extra
        self.replicas = total

    def extras(self) -> list[tuple[str, int]]:
        """Running replicas above each role's minimum, highest index first (shrunk first)."""
        out: list[tuple[str, int]] = []
        if not self.elastic:
            return out
        for role in self.job.roles:
            have = sorted(self.running[role.name], reverse=True)
            out += [(role.name, i) for i in have[: max(0, len(have) - role.min_replicas)]]
        return out


_ID, _JOB, _FIRST = attrgetter("id"), attrgetter("job"), itemgetter(0)
_PENDING, _GROWS = attrgetter("pending"), attrgetter("grows")


class _NoJob:
    roles = None


class _NoState:
    """A state no job has (`dict.get`'s default in C loops)."""

    job = _NoJob()


class _NoPlaced:
    """A replica no build checked (the same)."""

    rep = None
    roles = object()


NO_STATE, NO_PLACED = _NoState(), _NoPlaced()
_REP, _PLACED_ROLES, _KEY = attrgetter("rep"), attrgetter("roles"), attrgetter("key")
_ROLES, _JOB_ID = attrgetter("job.roles"), attrgetter("job_id")


def new_states(snapshot: Snapshot, before: dict[str, JobState], last_touched: set[str], queues: dict,
               parents: set) -> tuple[dict[str, JobState], Callable[[], list[str]], list[JobState], set[str]]:
    """The session's job states, each job checked: those of `before` (the last session's) for the same job
    objects that session did not touch, made new again, and new ones. Returns them, the reused states'
    jobs holding replicas (a callable), the new states of jobs `before` did not have, the ids of new states."""
    jobs: dict[str, JobState] = {}
    holding: list[str] = []
    arrived: list[JobState] = []
    fresh_ids: set[str] = set()
    for job in snapshot.jobs:
        job_id = job.id
        if job_id in jobs:
            raise ValueError(f"job {job_id!r}: duplicate job id")
        if job.queue not in queues:
            raise ValueError(f"job {job_id!r}: unknown queue {job.queue!r}")
        if job.queue in parents:
            raise ValueError(f"job {job_id!r}: queue {job.queue!r} has child queues; jobs go to leaf queues")
        state = before.get(job_id)
        if state is not None and state.job is job:
            if job_id not in last_touched:
                state.fail, state.plan, state.plan_version = None, None, -1
                jobs[job_id] = state
                if state.version:
                    holding.append(job_id)
                continue
        else:
            state = None
        jobs[job_id] = fresh = JobState(job, {r.name: set() for r in job.roles}, 0)
        fresh_ids.add(job_id)
        if state is None:
            arrived.append(fresh)
    return jobs, lambda: holding, arrived, fresh_ids


def kept_states(snapshot: Snapshot, cache: BuildCache, last_touched: set[str]
                ) -> tuple[dict[str, JobState], Callable[[], list[str]], list[JobState], set[str]] | None:
    """`new_states` for a cache whose last build had the same cluster (its jobs were checked against its
    queues then): only the jobs it did not have are checked, and the passes over every job are C loops.
    The last session set what its actions note (`fail`, `plan`) only on the jobs it walked, which wanted
    replicas (`Session.wanting`): those are made new again. None when ids repeat (`new_states` says which)."""
    before, job_list = cache.jobs, snapshot.jobs
    ids = list(map(_ID, job_list))
    states = list(map(before.get, ids, repeat(NO_STATE, len(ids))))
    jobs = dict(zip(ids, states, strict=True))
    if len(jobs) != len(ids):
        return None
    for state in cache.wanting:
        state.fail, state.plan, state.plan_version = None, None, -1
    by_id = None
    fresh_ids = set(compress(ids, map(not_, map(is_, map(_JOB, states), job_list))))
    arrived: list[JobState] = []
    if fresh_ids:
        queues, parents = cache.cluster.queues, cache.cluster.parents
        by_id = dict(zip(ids, job_list, strict=True))
        for job_id in fresh_ids:
            job = by_id[job_id]
            if job.queue not in queues or job.queue in parents:
                return None
            jobs[job_id] = state = JobState(job, {r.name: set() for r in job.roles}, 0)
            arrived.append(state)
    for job_id in last_touched:
        state = jobs.get(job_id)
        if state is not None and job_id not in fresh_ids:
            jobs[job_id] = JobState(state.job, {r.name: set() for r in state.job.roles}, 0)
            fresh_ids.add(job_id)

    def holding() -> list[str]:
        return [job_id for job_id, state in jobs.items() if state.version and job_id not in fresh_ids]

    return jobs, holding, arrived, fresh_ids


def weigh_changes(snapshot: Snapshot, cache: BuildCache, arrived: list[JobState], demand: dict[str, int],
                  per_roles: dict[int, list], strict_jobs: int, session: Session) -> int:
    """The last build's demand per queue and roles tuples (see `Session._weigh_jobs`) brought up to date
    with the jobs gone since (by object) and those that arrived; returns the non-preemptible jobs."""
    last = cache.job_objects
    gone = [last[k] for k in last.keys() - set(map(id, snapshot.jobs))]
    for job, sign in [(job, -1) for job in gone] + [(state.job, 1) for state in arrived]:
        roles = job.roles
        found = per_roles.get(id(roles))
        if found is None:
            found = per_roles[id(roles)] = [*session.weigh_roles(roles), 0]
        found[3] += sign
        if not found[3]:
            del per_roles[id(roles)]
        demand[job.queue] = demand.get(job.queue, 0) + sign * found[0]
        if not job.preemptible:
            strict_jobs += sign
    return strict_jobs


def order_key(state: JobState) -> tuple:
    """A job's place in `Session.order`: higher priority, then older."""
    job = state.job
    return -job.priority, job.created, job.id


NO_CAUSE = EvictCause()
NODE_LOST = EvictCause(rule="node-lost")
MOVED = EvictCause(rule="consolidation")     # goes with decisions()' default reason, "consolidate"


def not_a_whole_gpu(key: ReplicaKey, s: Slice) -> ValueError:
    """The error for a whole-GPU slice that does not hold a whole GPU: evicting one that names no
    memory (or less compute) would give back less than it holds, so the GPU would never be free."""
    return ValueError(f"running replica {key}: a whole-GPU slice must hold {MILLI_PER_GPU} milli and the GPU's "
                      f"memory, got gpu_milli {s.gpu_milli} and gpu_mem_mib {s.gpu_mem_mib}")


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
class ClusterBase:
    """What a session takes from a snapshot's pools, nodes and queues alone, checked once: kept
    (`BuildCache`) while a snapshot's pools, nodes and queues are the same objects. Nothing here is
    changed by a session (the free lists and arrays are copied)."""

    sources: tuple[tuple[Pool, ...], tuple[Node, ...], tuple[Queue, ...]]
    pools: dict[str, Pool]
    queues: dict[str, Queue]
    parents: set[str | None]
    nodes: list[Node]                          # ready nodes, one per row
    row_of: dict[str, int]
    node_pool: list[str]
    pool_mask: dict[str, np.ndarray]
    queue_path: dict[str, tuple[str, ...]]
    profile_ids: dict[str, int]
    gpu_count: list[int]
    free_milli: list[list[int]]                # per row and GPU, nothing running
    free_mem: list[list[int]]
    total_mem: list[int]
    cpu_total: list[int]
    mem_total: list[int]
    mig_free: np.ndarray
    mig_profile: np.ndarray
    ts_free: np.ndarray
    shape: tuple[int, int]                     # rows, most GPUs on one node
    fixed: dict[str, np.ndarray]               # ClusterArrays' columns that follow from the nodes alone
    model_names: tuple[str, ...]
    whole_only: bool                           # every pool's GPUs whole or fractional (no MIG, no time-slicing)
    names: tuple[str, ...] = ()                # the nodes' names, one per row

    def serves(self, snapshot: Snapshot) -> bool:
        pools, nodes, queues = self.sources
        return snapshot.pools is pools and snapshot.nodes is nodes and snapshot.queues is queues

    @classmethod
    def of(cls, snapshot: Snapshot) -> ClusterBase:
        pools = {p.name: p for p in snapshot.pools}
        if len(pools) != len(snapshot.pools):
            raise ValueError("snapshot: duplicate pool names")
        queue_children(snapshot.queues)            # validates the tree
        queues = {q.name: q for q in snapshot.queues}
        parents = {q.parent for q in snapshot.queues}
        for node in snapshot.nodes:
            if node.pool not in pools:
                raise ValueError(f"node {node.name!r}: unknown pool {node.pool!r}")
        names = [n.name for n in snapshot.nodes]
        if len(set(names)) != len(names):
            raise ValueError("snapshot: duplicate node names")
        nodes = [n for n in snapshot.nodes if n.ready]
        row_of = {n.name: i for i, n in enumerate(nodes)}

        n, g = len(nodes), max((len(x.gpus) for x in nodes), default=0)
        free_milli = [[MILLI_PER_GPU] * len(x.gpus) for x in nodes]
        free_mem = [[gpu.memory_mib or pools[x.pool].gpu_memory_mib for gpu in x.gpus] for x in nodes]
        total_mem = [free_mem[i][0] if free_mem[i] else pools[x.pool].gpu_memory_mib for i, x in enumerate(nodes)]
        layouts = {p.name: p.mig_layout for p in snapshot.pools if p.gpu_mode == "mig"}
        k = max((len(lay) for lay in layouts.values()), default=0)
        profile_ids = {name: i for i, name in enumerate(sorted(MIG_PROFILES))}
        mig_free = np.zeros((n, g, k), dtype=bool)
        mig_profile = np.full((n, max(k, 0)), -1, dtype=np.int32)
        ts_free = np.zeros((n, g), dtype=np.int32)
        for i, x in enumerate(nodes):
            pool = pools[x.pool]
            if pool.gpu_mode == "mig":
                lay = pool.mig_layout
                mig_profile[i, : len(lay)] = [profile_ids[p] for p in lay]
                mig_free[i, : len(x.gpus), : len(lay)] = True
            elif pool.gpu_mode == "timeslice":
                ts_free[i, : len(x.gpus)] = pool.timeslice_replicas
            if pool.gpu_mode != "whole":
                # MIG and time-sliced GPUs are not offered to whole/fraction placement.
                free_milli[i] = [0] * len(x.gpus)
                free_mem[i] = [0] * len(x.gpus)

        node_pool = [x.pool for x in nodes]
        pool_arr = np.array(node_pool, dtype=object)
        schedulable = np.array([not x.cordoned for x in nodes], dtype=bool)
        pool_mask = {name: (pool_arr == name) & schedulable for name in pools}
        queue_path = {}
        for q in snapshot.queues:
            path, cur = [], q.name
            while cur is not None:
                path.append(cur)
                cur = queues[cur].parent
            queue_path[q.name] = tuple(path)

        gpu_count = [len(x.gpus) for x in nodes]
        models = [pools[x.pool].gpu_model or pools[x.pool].name for x in nodes]
        model_names = tuple(sorted(set(models)))
        index = {name: i for i, name in enumerate(model_names)}
        present = np.zeros((n, g), dtype=bool)
        for i, count in enumerate(gpu_count):
            present[i, :count] = True
        fixed = {
            "model_id": np.array([index[m] for m in models], dtype=np.int32),
            "gpu_present": present,
            "gpu_total_mem": np.array(total_mem, dtype=np.int64),
            "num_gpus": np.array(gpu_count, dtype=np.int32),
            "cpu_total": np.array([x.cpu_milli for x in nodes], dtype=np.int64),
            "mem_total": np.array([x.memory_mib for x in nodes], dtype=np.int64),
        }
        return cls((snapshot.pools, snapshot.nodes, snapshot.queues), pools, queues, parents, nodes, row_of,
                   node_pool, pool_mask, queue_path, profile_ids, gpu_count, free_milli, free_mem, total_mem,
                   [x.cpu_milli for x in nodes], [x.memory_mib for x in nodes], mig_free, mig_profile, ts_free,
                   (n, g), fixed, model_names, all(p.gpu_mode == "whole" for p in snapshot.pools),
                   tuple(x.name for x in nodes))

    def arrays(self, free_milli: list[list[int]], free_mem: list[list[int]], cpu_free: list[int],
               mem_free: list[int], base: tuple | None = None, rows: set[int] = frozenset()) -> pl.ClusterArrays:
        """The session's placement arrays for these free figures. Any figure out of its node's range is
        refused by `placement.NodeCapacity`, which says which (as building the arrays through it would).
        `base`: the arrays of figures that differ from these only in `rows` (copied, those rows set)."""
        n, g = self.shape
        fixed = self.fixed
        if base is not None:
            milli, mem, cpu, memory = (x.copy() for x in base)
            gpu_count, total_mem = self.gpu_count, self.total_mem
            cpu_total, mem_total = self.cpu_total, self.mem_total
            for i in rows:
                count = gpu_count[i]
                row_milli, row_mem = free_milli[i], free_mem[i]
                if not (0 <= cpu_free[i] <= cpu_total[i] and 0 <= mem_free[i] <= mem_total[i]
                        and all(0 <= x <= MILLI_PER_GPU for x in row_milli)
                        and all(0 <= x <= total_mem[i] for x in row_mem)):
                    return self.arrays(free_milli, free_mem, cpu_free, mem_free)   # says which figure
                milli[i, :count] = row_milli
                mem[i, :count] = row_mem
                cpu[i] = cpu_free[i]
                memory[i] = mem_free[i]
            return pl.ClusterArrays(names=self.names, model_names=self.model_names,
                                    gpu_free_milli=milli, gpu_free_mem=mem, cpu_free=cpu, mem_free=memory,
                                    version=np.zeros(n, dtype=np.int64), **fixed)
        milli = np.zeros((n, g), dtype=np.int32)
        mem = np.zeros((n, g), dtype=np.int64)
        if all(count == g for count in self.gpu_count):
            if g:
                milli[:] = free_milli
                mem[:] = free_mem
        else:
            for i, count in enumerate(self.gpu_count):
                milli[i, :count] = free_milli[i]
                mem[i, :count] = free_mem[i]
        cpu = np.array(cpu_free, dtype=np.int64)
        memory = np.array(mem_free, dtype=np.int64)
        total = fixed["gpu_total_mem"]
        if not ((milli >= 0).all() and (milli <= MILLI_PER_GPU).all() and (mem >= 0).all()
                and (mem <= total[:, None]).all() and (cpu >= 0).all() and (cpu <= fixed["cpu_total"]).all()
                and (memory >= 0).all() and (memory <= fixed["mem_total"]).all()):
            for i, x in enumerate(self.nodes):       # raises, naming the node and the figure
                pool = self.pools[x.pool]
                pl.NodeCapacity(x.name, pool.gpu_model or pool.name, self.total_mem[i], len(x.gpus), x.cpu_milli,
                                x.memory_mib, tuple(free_milli[i]), tuple(free_mem[i]), cpu_free[i], mem_free[i])
        return pl.ClusterArrays(names=self.names, model_names=self.model_names,
                                gpu_free_milli=milli, gpu_free_mem=mem, cpu_free=cpu, mem_free=memory,
                                version=np.zeros(n, dtype=np.int64), **fixed)


class Placed(NamedTuple):
    """A running replica of a snapshot as a build checked it: its key and assignment (None: its node is
    gone or not ready), and the roles of its job then."""

    rep: RunningReplica
    roles: tuple[Role, ...]
    key: ReplicaKey
    assignment: Assignment | None


@dataclass
class BuildCache:
    """What `Session.build` may keep between the cycles of one long-lived caller: the cluster's part, the
    last build's running replicas (by object) with the free figures they left, and its job states."""

    cluster: ClusterBase | None = None
    placed_for: ClusterBase | None = None
    placed: dict[int, Placed] = field(default_factory=dict)     # id of the RunningReplica -> it, checked
    free: tuple = ()                                            # free milli, memory, CPU, memory per row
    jobs: dict[str, JobState] = field(default_factory=dict)     # the last session's job states
    touched: list[str] = field(default_factory=list)            # the last session's `touched` (its own list)
    order: list[JobState] = field(default_factory=list)         # the last session's `order`
    # what a job's roles ask for (`weigh_roles`), by id of the roles, for `weighed_for`'s cluster
    weighed: dict[int, tuple] = field(default_factory=dict)
    weighed_for: ClusterBase | None = None
    # the last build's free figures as arrays (`ClusterBase.arrays`' `base`), for `base_for`'s cluster
    base: tuple | None = None
    base_for: ClusterBase | None = None
    jobs_for: ClusterBase | None = None         # the cluster `jobs` were checked against
    wanting: list[JobState] = field(default_factory=list)       # the last session's `wanting`
    job_objects: dict[int, Job] = field(default_factory=dict)   # the last snapshot's jobs, by id of the object
    demand: tuple | None = None                 # the last build's `_weigh_jobs`, for `weighed_for`'s cluster


def carry_replicas(snapshot: Snapshot, jobs: dict[str, JobState], before: dict[int, Placed],
                   placed_of: Callable[[RunningReplica, Callable[[ReplicaKey], bool]], Placed],
                   free_milli: list[list[int]], free_mem: list[list[int]], cpu_free: list[int],
                   mem_free: list[int], total_mem: list[int], changed: set[str],
                   rows: set[int]) -> dict[int, Placed] | None:
    """The snapshot's running replicas, those of the last build (`before`, whose free figures the lists
    hold) kept as they were checked when they are the same objects of jobs with the same roles; the others
    given back or checked and taken (`placed_of`). None when most are new (a whole build costs no more).
    Adds to `changed` the jobs with a replica given back or taken, to `rows` the rows of those given back.
    Raises ValueError as soon as something
    is wrong; the caller then builds afresh, which says what."""
    # C loops over the replicas: those carried are the same object as one `before` checked, of a job whose
    # roles are the same object as then
    running = snapshot.running
    ids = list(map(id, running))
    found = list(map(before.get, ids, repeat(NO_PLACED)))
    roles_now = map(_ROLES, map(jobs.get, map(_JOB_ID, running), repeat(NO_STATE)))
    carried = list(map(and_, map(is_, map(_REP, found), running), map(is_, roles_now, map(_PLACED_ROLES, found))))
    placed: dict[int, Placed] = dict(zip(compress(ids, carried), compress(found, carried), strict=True))
    added = list(compress(running, map(not_, carried)))
    if len(placed) + len(added) != len(running):
        return None                                # a replica listed twice: the whole build says so
    if len(added) > len(placed):
        return None
    for i in before.keys() - placed.keys():       # given back: sums, in any order
        p = before[i]
        changed.add(p.key[0])
        a = p.assignment
        if a is None:
            continue
        sl, row = a.slice, a.row
        if sl.kind == "whole":
            milli, mem = MILLI_PER_GPU, total_mem[row]          # what taking it took (a whole GPU)
        elif sl.kind == "fraction":
            milli, mem = sl.gpu_milli, sl.gpu_mem_mib
        else:
            return None
        for g in a.gpus:
            free_milli[row][g] += milli
            free_mem[row][g] += mem
        cpu_free[row] += a.cpu_milli
        mem_free[row] += a.mem_mib
        rows.add(row)
    if added:
        keys = set(map(_KEY, placed.values()))

        def known(key: ReplicaKey) -> bool:
            if key in keys:
                return True
            keys.add(key)
            return False

        for rep in added:
            changed.add(rep.job_id)
            placed[id(rep)] = placed_of(rep, known)
    return placed


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

    # ------------------------------------------------------------------ building

    @classmethod
    def build(cls, snapshot: Snapshot, cache: BuildCache | None = None) -> Session:
        """The session of a snapshot. `cache` (kept by a long-lived caller, `cycle.CycleMemo`) keeps what
        depends only on the pools, nodes and queues while the snapshot's are the same objects."""
        cluster = cache.cluster if cache is not None else None
        if cluster is None or not cluster.serves(snapshot):
            cluster = ClusterBase.of(snapshot)
            if cache is not None:
                cache.cluster = cluster
        pools, queues, parents, nodes, row_of = cluster.pools, cluster.queues, cluster.parents, cluster.nodes, cluster.row_of

        # The last session's states of the same jobs (the same objects) that it did not touch (no replica
        # of theirs was bound or evicted, `touched`) are what new states would be while their replicas are
        # the last snapshot's (checked below): made new again, what the actions noted forgotten.
        last_touched = set(cache.touched) if cache is not None else set()
        found = None
        if cache is not None and cache.jobs_for is cluster and cache.jobs:
            found = kept_states(snapshot, cache, last_touched)
        if found is None:
            found = new_states(snapshot, cache.jobs if cache is not None else {}, last_touched, queues, parents)
            fast = False
        else:
            fast = True
        jobs, holding, arrived, fresh_ids = found

        free_milli = [row[:] for row in cluster.free_milli]
        free_mem = [row[:] for row in cluster.free_mem]
        total_mem = cluster.total_mem
        cpu_free = list(cluster.cpu_total)
        mem_free = list(cluster.mem_total)
        profile_ids = cluster.profile_ids
        mig_free = cluster.mig_free.copy()
        mig_profile = cluster.mig_profile
        ts_free = cluster.ts_free.copy()
        ts_used: list[dict[int, set[int]]] = [{} for _ in nodes]

        gpu_count = cluster.gpu_count

        rows_changed: set[int] = set()      # rows whose free figures differ from the last build's

        def take(rep: RunningReplica, key: ReplicaKey, role: Role, row: int) -> Assignment:
            """Check a running replica against what is free on its node and take it."""
            rows_changed.add(row)
            gpus = rep.gpus
            s = rep.slice
            req = role.request
            kind = s.kind
            if len(gpus) == 1 and kind in ("whole", "fraction"):
                # the common case, checked as the general one below
                gi = gpus[0]
                if not 0 <= gi < gpu_count[row]:
                    raise ValueError(f"running replica {key}: bad GPU indices {rep.gpus} on node {rep.node!r}")
                free_milli_row, free_mem_row = free_milli[row], free_mem[row]
                if kind == "whole":
                    if s.gpu_milli != MILLI_PER_GPU or s.gpu_mem_mib <= 0:
                        raise not_a_whole_gpu(key, s)
                    milli, mem = MILLI_PER_GPU, free_mem_row[gi]
                    if free_milli_row[gi] != MILLI_PER_GPU or mem != total_mem[row]:
                        raise ValueError(f"running replica {key}: GPU {gi} of {rep.node!r} is not wholly free")
                else:
                    milli, mem = s.gpu_milli, s.gpu_mem_mib
                if free_milli_row[gi] < milli or free_mem_row[gi] < mem:
                    raise ValueError(f"running replica {key}: GPU {gi} of {rep.node!r} is over-committed")
                free_milli_row[gi] -= milli
                free_mem_row[gi] -= mem
                cpu_free[row] -= req.cpu_milli
                mem_free[row] -= req.mem_mib
                if cpu_free[row] < 0 or mem_free[row] < 0:
                    raise ValueError(f"running replica {key}: node {rep.node!r} has not enough CPU or memory for it")
                return Assignment(row, tuple(gpus), s, req.cpu_milli, req.mem_mib)
            node = nodes[row]
            if gpus and (min(gpus) < 0 or max(gpus) >= len(node.gpus) or len(set(gpus)) != len(gpus)):
                raise ValueError(f"running replica {key}: bad GPU indices {rep.gpus} on node {rep.node!r}")
            if s.kind == "whole" and gpus and (s.gpu_milli != MILLI_PER_GPU or s.gpu_mem_mib <= 0):
                raise not_a_whole_gpu(key, s)
            for gi in rep.gpus:
                if s.kind == "mig":
                    slot = s.mig_instance
                    lay = pools[node.pool].mig_layout
                    if not (0 <= slot < len(lay) and lay[slot] == s.mig_profile and mig_free[row, gi, slot]):
                        raise ValueError(f"running replica {key}: MIG instance {slot} ({s.mig_profile}) not free on GPU {gi}")
                    mig_free[row, gi, slot] = False
                elif s.kind == "timeslice":
                    used = ts_used[row].setdefault(gi, set())
                    if s.timeslice_slot in used or not 0 <= s.timeslice_slot < pools[node.pool].timeslice_replicas:
                        raise ValueError(f"running replica {key}: time-slice slot {s.timeslice_slot} of GPU {gi} unavailable")
                    used.add(s.timeslice_slot)
                    ts_free[row, gi] -= 1
                else:
                    milli = MILLI_PER_GPU if s.kind == "whole" else s.gpu_milli
                    mem = free_mem[row][gi] if s.kind == "whole" else s.gpu_mem_mib
                    if s.kind == "whole" and (free_milli[row][gi] != MILLI_PER_GPU or mem != total_mem[row]):
                        raise ValueError(f"running replica {key}: GPU {gi} of {rep.node!r} is not wholly free")
                    if free_milli[row][gi] < milli or free_mem[row][gi] < mem:
                        raise ValueError(f"running replica {key}: GPU {gi} of {rep.node!r} is over-committed")
                    free_milli[row][gi] -= milli
                    free_mem[row][gi] -= mem
            cpu_free[row] -= req.cpu_milli
            mem_free[row] -= req.mem_mib
            if cpu_free[row] < 0 or mem_free[row] < 0:
                raise ValueError(f"running replica {key}: node {rep.node!r} has not enough CPU or memory for it")
            return Assignment(row, tuple(rep.gpus), s, req.cpu_milli, req.mem_mib)

        def placed_of(rep: RunningReplica, known: Callable[[ReplicaKey], bool]) -> Placed:
            """A running replica checked and taken (`known(key)`: whether its key came before)."""
            key = (rep.job_id, rep.role, rep.index)
            state = jobs.get(rep.job_id)
            if state is None:
                raise ValueError(f"running replica {key}: job {rep.job_id!r} is not in the snapshot")
            roles = state.job.roles
            role = roles[0] if roles[0].name == rep.role else next((r for r in roles if r.name == rep.role), None)
            if role is None or not 0 <= rep.index < role.max_replicas:
                raise ValueError(f"running replica {key}: no such role or replica index out of range")
            if known(key):
                raise ValueError(f"running replica {key}: listed twice")
            row = row_of.get(rep.node)
            if row is None:
                return Placed(rep, roles, key, None)
            return Placed(rep, roles, key, take(rep, key, role, row))

        placed = None
        changed: set[str] = set()           # jobs with replicas given back or taken since the last build
        if cache is not None and cache.placed_for is cluster and cluster.whole_only:
            # the replicas of the last build still running (the same objects, of jobs with the same roles)
            # keep their checked assignments; the free figures are the last build's, give or take the others
            carried = (cache.placed, cache.free)
            free_milli = [row[:] for row in carried[1][0]]
            free_mem = [row[:] for row in carried[1][1]]
            cpu_free, mem_free = list(carried[1][2]), list(carried[1][3])
            try:
                placed = carry_replicas(snapshot, jobs, carried[0], placed_of, free_milli, free_mem, cpu_free,
                                        mem_free, total_mem, changed, rows_changed)
            except ValueError:
                placed = None              # the whole build below says what is wrong, as without a cache
            if placed is None:
                free_milli = [row[:] for row in cluster.free_milli]
                free_mem = [row[:] for row in cluster.free_mem]
                cpu_free = list(cluster.cpu_total)
                mem_free = list(cluster.mem_total)
        carried_all = placed is not None
        if placed is None:
            placed = {}
            seen: set[ReplicaKey] = set()

            def known(key: ReplicaKey) -> bool:
                if key in seen:
                    return True
                seen.add(key)
                return False

            for rep in snapshot.running:
                placed[id(rep)] = placed_of(rep, known)
        # reused states keep their replicas' count only when those are the last build's (carried); the
        # others are made new, and the replicas of new states counted
        if carried_all:
            for job_id in changed:
                state = jobs.get(job_id)
                if state is not None and job_id not in fresh_ids:
                    jobs[job_id] = JobState(state.job, {r.name: set() for r in state.job.roles}, 0)
                    fresh_ids.add(job_id)
        else:
            for job_id in holding():
                job = jobs[job_id].job
                jobs[job_id] = JobState(job, {r.name: set() for r in job.roles}, 0)
            fresh_ids = None                # count every replica
        initial: dict[ReplicaKey, Assignment] = {}
        lost: dict[ReplicaKey, str] = {}
        for rep in snapshot.running:
            p = placed[id(rep)]
            if p.assignment is None:
                lost[p.key] = rep.node
            else:
                initial[p.key] = p.assignment

        base = cache.base if cache is not None and carried_all and cache.base_for is cluster else None
        arrays = cluster.arrays(free_milli, free_mem, cpu_free, mem_free, base, rows_changed)
        node_pool, pool_mask, queue_path = cluster.node_pool, cluster.pool_mask, cluster.queue_path

        # every job, in the order actions visit a queue's jobs: higher priority, then older; the last
        # build's order kept for the same jobs, those it did not have put in their places
        if cache is not None and cache.order and len(arrived) * 8 < len(jobs):
            order = [now for st in cache.order
                     if (now := jobs.get(st.job.id)) is not None and now.job is st.job]
            for st in sorted(arrived, key=order_key):
                bisect.insort(order, st, key=order_key)
        else:
            order = sorted(jobs.values(), key=order_key)
        session = cls(
            snapshot=snapshot, pools=pools, nodes=nodes, node_pool=node_pool, arrays=arrays,
            pool_mask=pool_mask, mig_free=mig_free, mig_profile=mig_profile, ts_free=ts_free,
            ts_used=ts_used, ctx=pl.PlacementContext(), queues=queues, jobs=jobs, queue_path=queue_path,
            fair_share={}, deserved={}, alloc={q.name: 0 for q in snapshot.queues},
            np_alloc={q.name: 0 for q in snapshot.queues}, initial=initial, lost=lost,
            profile_ids=profile_ids, order=order,
        )
        session.assign = dict(initial)
        holders = session._count_initial(fresh_ids)
        session.wanting = list(compress(order, map(or_, map(_PENDING, order), map(_GROWS, order))))
        for key in lost:
            session.evict_reason[key] = "node-lost"
            session.evict_cause[key] = NODE_LOST
        if cache is not None and cache.weighed_for is not cluster:
            cache.weighed, cache.weighed_for, cache.demand = {}, cluster, None
        weights = cache.weighed if cache is not None else {}
        if fast and cache.demand is not None and fresh_ids is not None:
            demand, per_roles, strict_jobs = cache.demand
            demand, per_roles = dict(demand), {k: list(v) for k, v in per_roles.items()}
            strict_jobs = weigh_changes(snapshot, cache, arrived, demand, per_roles, strict_jobs, session)
            for job_id in fresh_ids:
                state = jobs[job_id]
                state.min_milli = per_roles[id(state.job.roles)][1]
        else:
            demand, per_roles, strict_jobs = session._weigh_jobs(weights)
        session._compute_fair_shares(demand, per_roles)
        if strict_jobs:
            session._count_initial_np(holders)   # needs each job's gang minimum
        if cache is not None:
            cache.placed_for, cache.placed = cluster, placed
            cache.free = (free_milli, free_mem, cpu_free, mem_free)
            cache.jobs, cache.touched, cache.order = jobs, session.touched, order
            cache.jobs_for, cache.wanting = cluster, session.wanting
            cache.job_objects = dict(zip(map(id, snapshot.jobs), snapshot.jobs, strict=True))
            cache.demand = (demand, {k: tuple(v) for k, v in per_roles.items()}, strict_jobs)
            weights.clear()
            for key, weighed in per_roles.items():
                weights[key] = (weighed[0], weighed[1], weighed[2])
            # the free figures as arrays before the actions change them (4 small copies)
            cache.base = (arrays.gpu_free_milli.copy(), arrays.gpu_free_mem.copy(), arrays.cpu_free.copy(),
                          arrays.mem_free.copy())
            cache.base_for = cluster
        return session

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

    def find_spot(self, request: Request, pool_name: str) -> Assignment | None:
        """Where one replica of `request` would go in `pool_name` now (nothing is changed)."""
        key = (request.shape(), pool_name)
        if self._no_room.get(key) == self.returned:
            return None                      # failed before, and no capacity came back since
        spot = self._find_spot(request, pool_name)
        if spot is None:
            self._no_room[key] = self.returned
        return spot

    def _find_spot(self, request: Request, pool_name: str) -> Assignment | None:
        pool = self.pools[pool_name]
        mask = self.pool_mask[pool_name]
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

    def decisions(self, pending: dict[str, Reason]) -> Decisions:
        evicts, binds = [], []
        # only the replicas of jobs bound or evicted in this session (`touched`) can have changed
        changed = set(self.touched)
        for key in sorted([k for k in self.initial if k[0] in changed] + list(self.lost)):
            now = self.assign.get(key)
            before = self.initial.get(key)
            if now is not None and now == before:
                continue
            node = self.row_name(before.row) if before is not None else self.lost[key]
            cause = self.evict_cause.get(key, MOVED)
            evicts.append(Evict(key[0], key[1], key[2], node, self.evict_reason.get(key, "consolidate"),
                                cause.by_job, cause.by_queue, cause.level, cause.rule))
        for key in sorted([k for k in self.assign if k[0] in changed]):
            now = self.assign[key]
            if self.initial.get(key) == now:
                continue
            binds.append(Bind(key[0], key[1], key[2], self.row_name(now.row), now.gpus, now.slice))
        codes = dict(sorted(pending.items()))
        return Decisions(tuple(evicts), tuple(binds), {job_id: r.text for job_id, r in codes.items()}, codes)

    @cached_property
    def job_off_peak(self) -> dict[str, tuple[bool, str]]:
        """The ReduceCost jobs with their own off-peak window: (open now, when it next opens) by job id."""
        return {job_id: (open_now, opens) for job_id, open_now, opens in self.snapshot.job_off_peak}
