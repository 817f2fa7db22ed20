"""Building a session's state from a snapshot, in steps (`Session.build` runs them): the cluster's part
(`cluster_of`), the job states (`job_states`), the running replicas checked and taken (`take_replicas`),
and what a long-lived caller keeps from one build to the next (`BuildCache`)."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import and_, attrgetter, is_, not_
from typing import NamedTuple

from .cluster import ClusterBase
from .model import HeldReplica, Job, ReplicaKey, Request, Role, RunningReplica, Slice, Snapshot
from .state import Assignment, JobState
from .units import MILLI_PER_GPU

_ID, _JOB = attrgetter("id"), attrgetter("job")


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
_JOB_ID_OF = attrgetter("job.id")


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
                  per_roles: dict[int, list], strict_jobs: int,
                  weigh_roles: Callable[[tuple[Role, ...]], tuple]) -> int:
    """The last build's demand per queue and roles tuples (see `Session._weigh_jobs`) brought up to date
    with the jobs gone since (by object) and those that arrived (`weigh_roles`: `Session.weigh_roles`);
    returns the non-preemptible jobs."""
    last = cache.job_objects
    now = dict(zip(map(id, snapshot.jobs), snapshot.jobs, strict=True))
    gone = [last[k] for k in last.keys() - now.keys()]
    # what the next build compares with, made once (taken on when this build is kept, `Session._keep_for_next`)
    cache.next_job_objects = (snapshot, now)
    for job, sign in [(job, -1) for job in gone] + [(state.job, 1) for state in arrived]:
        roles = job.roles
        found = per_roles.get(id(roles))
        if found is None:
            found = per_roles[id(roles)] = [*weigh_roles(roles), 0]
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


def not_a_whole_gpu(key: ReplicaKey, s: Slice) -> ValueError:
    """The error for a whole-GPU slice that does not hold a whole GPU: evicting one that names no
    memory (or less compute) would give back less than it holds, so the GPU would never be free."""
    return ValueError(f"running replica {key}: a whole-GPU slice must hold {MILLI_PER_GPU} milli and the GPU's "
                      f"memory, got gpu_milli {s.gpu_milli} and gpu_mem_mib {s.gpu_mem_mib}")


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
    next_job_objects: tuple | None = None       # (snapshot, its jobs by id of the object) for the next build
    demand: tuple | None = None                 # the last build's `_weigh_jobs`, for `weighed_for`'s cluster


def cluster_of(snapshot: Snapshot, cache: BuildCache | None) -> ClusterBase:
    """The cache's cluster part while the snapshot's pools, nodes and queues are its sources, else a new one."""
    cluster = cache.cluster if cache is not None else None
    if cluster is None or not cluster.serves(snapshot):
        cluster = ClusterBase.of(snapshot)
        if cache is not None:
            cache.cluster = cluster
    return cluster


@dataclass
class JobStates:
    """A build's job states (`new_states`, `kept_states`): by job id; the reused states' jobs holding
    replicas (a callable); the new states of jobs the last build did not have; the ids of new states (None
    once every replica is to be counted again); whether they were kept from the cache's last build."""

    jobs: dict[str, JobState]
    holding: Callable[[], list[str]]
    arrived: list[JobState]
    fresh_ids: set[str] | None
    kept: bool


def job_states(snapshot: Snapshot, cluster: ClusterBase, cache: BuildCache | None) -> JobStates:
    """The last session's states of the same jobs (the same objects) that it did not touch (no replica
    of theirs was bound or evicted, `touched`) are what new states would be while their replicas are
    the last snapshot's (checked by `take_replicas`): made new again, what the actions noted forgotten."""
    last_touched = set(cache.touched) if cache is not None else set()
    found = None
    if cache is not None and cache.jobs_for is cluster and cache.jobs:
        found = kept_states(snapshot, cache, last_touched)
    if found is not None:
        return JobStates(*found, kept=True)
    found = new_states(snapshot, cache.jobs if cache is not None else {}, last_touched, cluster.queues,
                       cluster.parents)
    return JobStates(*found, kept=False)


class ReplicaCheck:
    """The free figures of a build's nodes (from the cluster's, or the last build's when its replicas are
    carried), from which each running replica is checked and taken."""

    def __init__(self, cluster: ClusterBase, jobs: dict[str, JobState]) -> None:
        self.cluster, self.jobs = cluster, jobs
        self.start_over()
        self.mig_free = cluster.mig_free.copy()
        self.ts_free = cluster.ts_free.copy()
        self.ts_used: list[dict[int, set[int]]] = [{} for _ in cluster.nodes]
        self.rows_changed: set[int] = set()      # rows whose free figures differ from the last build's

    def start_over(self) -> None:
        """Free milli, memory, CPU and memory per row as on an empty cluster."""
        cluster = self.cluster
        self.free_milli = [row[:] for row in cluster.free_milli]
        self.free_mem = [row[:] for row in cluster.free_mem]
        self.cpu_free = list(cluster.cpu_total)
        self.mem_free = list(cluster.mem_total)

    def carry_from(self, free: tuple) -> None:
        """Free figures as the last build left them (`BuildCache.free`), copied."""
        self.free_milli = [row[:] for row in free[0]]
        self.free_mem = [row[:] for row in free[1]]
        self.cpu_free, self.mem_free = list(free[2]), list(free[3])

    @property
    def free(self) -> tuple:
        return self.free_milli, self.free_mem, self.cpu_free, self.mem_free

    def placed_of(self, rep: RunningReplica, known: Callable[[ReplicaKey], bool]) -> Placed:
        """A running replica checked and taken (`known(key)`: whether its key came before)."""
        key = (rep.job_id, rep.role, rep.index)
        state = self.jobs.get(rep.job_id)
        if state is None:
            raise ValueError(f"running replica {key}: job {rep.job_id!r} is not in the snapshot")
        roles = state.job.roles
        role = roles[0] if roles[0].name == rep.role else next((r for r in roles if r.name == rep.role), None)
        if role is None or not 0 <= rep.index < role.max_replicas:
            raise ValueError(f"running replica {key}: no such role or replica index out of range")
        if known(key):
            raise ValueError(f"running replica {key}: listed twice")
        row = self.cluster.row_of.get(rep.node)
        if row is None:
            return Placed(rep, roles, key, None)
        return Placed(rep, roles, key, self.take(rep, key, role, row))

    def take(self, rep: RunningReplica, key: ReplicaKey, role: Role, row: int) -> Assignment:
        """Check a running replica against what is free on its node and take it."""
        self.rows_changed.add(row)
        gpus = rep.gpus
        s = rep.slice
        req = role.request
        kind = s.kind
        if len(gpus) != 1 or kind not in ("whole", "fraction"):
            return self.take_gpus(rep, key, req, row)
        # the common case, checked as `take_gpus` checks any
        gi = gpus[0]
        if not 0 <= gi < self.cluster.gpu_count[row]:
            raise ValueError(f"running replica {key}: bad GPU indices {rep.gpus} on node {rep.node!r}")
        free_milli_row, free_mem_row = self.free_milli[row], self.free_mem[row]
        if kind == "whole":
            if s.gpu_milli != MILLI_PER_GPU or s.gpu_mem_mib <= 0:
                raise not_a_whole_gpu(key, s)
            milli, mem = MILLI_PER_GPU, free_mem_row[gi]
            if free_milli_row[gi] != MILLI_PER_GPU or mem != self.cluster.total_mem[row]:
                raise ValueError(f"running replica {key}: GPU {gi} of {rep.node!r} is not wholly free")
        else:
            milli, mem = s.gpu_milli, s.gpu_mem_mib
        if free_milli_row[gi] < milli or free_mem_row[gi] < mem:
            raise ValueError(f"running replica {key}: GPU {gi} of {rep.node!r} is over-committed")
        free_milli_row[gi] -= milli
        free_mem_row[gi] -= mem
        cpu_free, mem_free = self.cpu_free, self.mem_free
        cpu_free[row] -= req.cpu_milli
        mem_free[row] -= req.mem_mib
        if cpu_free[row] < 0 or mem_free[row] < 0:
            raise ValueError(f"running replica {key}: node {rep.node!r} has not enough CPU or memory for it")
        return Assignment(row, tuple(gpus), s, req.cpu_milli, req.mem_mib)

    def take_gpus(self, rep: RunningReplica, key: ReplicaKey, req: Request, row: int) -> Assignment:
        """`take` for any replica: several GPUs, MIG instances, time-slice slots."""
        gpus, s = rep.gpus, rep.slice
        node = self.cluster.nodes[row]
        pools, free_milli, free_mem = self.cluster.pools, self.free_milli, self.free_mem
        if gpus and (min(gpus) < 0 or max(gpus) >= len(node.gpus) or len(set(gpus)) != len(gpus)):
            raise ValueError(f"running replica {key}: bad GPU indices {rep.gpus} on node {rep.node!r}")
        if s.kind == "whole" and gpus and (s.gpu_milli != MILLI_PER_GPU or s.gpu_mem_mib <= 0):
            raise not_a_whole_gpu(key, s)
        for gi in rep.gpus:
            if s.kind == "mig":
                slot = s.mig_instance
                lay = pools[node.pool].mig_layout
                if not (0 <= slot < len(lay) and lay[slot] == s.mig_profile and self.mig_free[row, gi, slot]):
                    raise ValueError(f"running replica {key}: MIG instance {slot} ({s.mig_profile}) not free on GPU {gi}")
                self.mig_free[row, gi, slot] = False
            elif s.kind == "timeslice":
                used = self.ts_used[row].setdefault(gi, set())
                if s.timeslice_slot in used or not 0 <= s.timeslice_slot < pools[node.pool].timeslice_replicas:
                    raise ValueError(f"running replica {key}: time-slice slot {s.timeslice_slot} of GPU {gi} unavailable")
                used.add(s.timeslice_slot)
                self.ts_free[row, gi] -= 1
            else:
                milli = MILLI_PER_GPU if s.kind == "whole" else s.gpu_milli
                mem = free_mem[row][gi] if s.kind == "whole" else s.gpu_mem_mib
                if s.kind == "whole" and (free_milli[row][gi] != MILLI_PER_GPU or mem != self.cluster.total_mem[row]):
                    raise ValueError(f"running replica {key}: GPU {gi} of {rep.node!r} is not wholly free")
                if free_milli[row][gi] < milli or free_mem[row][gi] < mem:
                    raise ValueError(f"running replica {key}: GPU {gi} of {rep.node!r} is over-committed")
                free_milli[row][gi] -= milli
                free_mem[row][gi] -= mem
        self.cpu_free[row] -= req.cpu_milli
        self.mem_free[row] -= req.mem_mib
        if self.cpu_free[row] < 0 or self.mem_free[row] < 0:
            raise ValueError(f"running replica {key}: node {rep.node!r} has not enough CPU or memory for it")
        return Assignment(row, tuple(rep.gpus), s, req.cpu_milli, req.mem_mib)


@dataclass
class Replicas:
    """The snapshot's running replicas as a build took them: checked (by id of the RunningReplica), the
    free figures they leave (`check`), whether those of the last build were carried (else every one was
    checked), the jobs with replicas given back or taken since then, and the replicas by key: on a node
    (`initial`) or on one gone or not ready (`lost`, with the node's name)."""

    check: ReplicaCheck
    placed: dict[int, Placed]
    carried: bool
    changed: set[str]
    initial: dict[ReplicaKey, Assignment]
    lost: dict[ReplicaKey, str]


def take_replicas(snapshot: Snapshot, cluster: ClusterBase, jobs: dict[str, JobState],
                  cache: BuildCache | None) -> Replicas:
    """Every running replica checked and taken. While the cache's last build had this cluster (of whole and
    fractional GPUs only), its replicas still running (the same objects, of jobs with the same roles)
    keep their checked assignments, and the free figures are the last build's, give or take the others."""
    check = ReplicaCheck(cluster, jobs)
    placed = None
    changed: set[str] = set()
    if cache is not None and cache.placed_for is cluster and cluster.whole_only and not snapshot.held:
        check.carry_from(cache.free)
        try:
            placed = carry_replicas(snapshot, check, cache.placed, changed)
        except ValueError:
            placed = None              # the whole build below says what is wrong, as without a cache
        if placed is None:
            check.start_over()
    carried = placed is not None
    if placed is None:
        placed = {}
        seen: set[ReplicaKey] = set()

        def known(key: ReplicaKey) -> bool:
            if key in seen:
                return True
            seen.add(key)
            return False

        for rep in snapshot.running:
            placed[id(rep)] = check.placed_of(rep, known)
    for held in snapshot.held:                 # stopping after an eviction: taken, counted for no job
        take_held(check, held)
    initial: dict[ReplicaKey, Assignment] = {}
    lost: dict[ReplicaKey, str] = {}
    for rep in snapshot.running:
        p = placed[id(rep)]
        if p.assignment is None:
            lost[p.key] = rep.node
        else:
            initial[p.key] = p.assignment
    return Replicas(check, placed, carried, changed, initial, lost)


def take_held(check: ReplicaCheck, held: HeldReplica) -> None:
    """What an evicted replica still stopping holds, taken from its node's free figures. One that no longer fits
    (its node changed meanwhile) is left out: it holds nothing the cluster still has."""
    row = check.cluster.row_of.get(held.node)
    if row is None:
        return
    key = (held.job_id, held.role, held.index)
    saved = (check.free_milli[row][:], check.free_mem[row][:], check.cpu_free[row], check.mem_free[row],
             check.mig_free[row].copy(), check.ts_free[row].copy(), {g: set(s) for g, s in check.ts_used[row].items()})
    try:
        check.take_gpus(held, key, Request(cpu_milli=held.cpu_milli, mem_mib=held.mem_mib), row)
    except ValueError:
        (check.free_milli[row], check.free_mem[row], check.cpu_free[row], check.mem_free[row], check.mig_free[row],
         check.ts_free[row], check.ts_used[row]) = saved


def renew_states(states: JobStates, replicas: Replicas) -> None:
    """Reused states keep their replicas' count only when those are the last build's (carried); the
    others are made new, and the replicas of new states counted."""
    jobs = states.jobs
    if replicas.carried:
        for job_id in replicas.changed:
            state = jobs.get(job_id)
            if state is not None and job_id not in states.fresh_ids:
                jobs[job_id] = JobState(state.job, {r.name: set() for r in state.job.roles}, 0)
                states.fresh_ids.add(job_id)
    else:
        for job_id in states.holding():
            job = jobs[job_id].job
            jobs[job_id] = JobState(job, {r.name: set() for r in job.roles}, 0)
        states.fresh_ids = None                # count every replica


def job_order(states: JobStates, cache: BuildCache | None) -> list[JobState]:
    """Every job, in the order actions visit a queue's jobs: higher priority, then older; the last
    build's order kept for the same jobs, those it did not have put in their places."""
    jobs, arrived = states.jobs, states.arrived
    if cache is not None and cache.order and len(arrived) * 8 < len(jobs):
        # C loops: the last order's states whose job is still here as the same object, in that order
        last = cache.order
        now = list(map(jobs.get, map(_JOB_ID_OF, last), repeat(NO_STATE)))
        order = list(compress(now, map(is_, map(_JOB, now), map(_JOB, last))))
        for st in sorted(arrived, key=order_key):
            bisect.insort(order, st, key=order_key)
        return order
    return sorted(jobs.values(), key=order_key)


def carry_replicas(snapshot: Snapshot, check: ReplicaCheck, before: dict[int, Placed],
                   changed: set[str]) -> dict[int, Placed] | None:
    """The snapshot's running replicas, those of the last build (`before`, whose free figures `check`
    holds) kept as they were checked when they are the same objects of jobs with the same roles; the others
    given back or checked and taken (`check.placed_of`). None when most are new (a whole build costs no
    more). Adds to `changed` the jobs with a replica given back or taken, to `check.rows_changed` the rows
    of those given back. Raises ValueError as soon as something is wrong; the caller then builds afresh,
    which says what."""
    jobs, placed_of, total_mem, rows = check.jobs, check.placed_of, check.cluster.total_mem, check.rows_changed
    free_milli, free_mem, cpu_free, mem_free = check.free
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
