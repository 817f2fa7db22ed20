"""What a job asks for next (its plan), whether its queues let it take it, and placing it whole:
the helpers every action shares."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..model import Job, Request, Role
from ..reasons import Reason
from ..session import Session, request_milli
from ..state import JobState
from .topology import place_in_topology, topology_key

EPS = 1e-6               # slack of the comparisons of GPU milli with fair shares and quotas


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
        key = (id(roles), state.job.reduce_cost and reduce_cost_waits(s, state.job),
               None if state.job.topology is None else topology_key(s, state))
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
    topology = state.job.topology
    if topology is not None:
        # where a gang with topology fits depends on its level, and on the domain where it runs already
        sig = (*sig, topology_key(s, state), state.job.id if state.replicas else None)
    return Plan(missing, roles, pools, need, sig)


def missing_milli(s: Session, state: JobState) -> int:
    return plan(s, state).need


def quota_block(s: Session, job: Job, add: int) -> Reason | None:
    """Why `job` may not take `add` more milli-GPU now (limit, non-preemptible quota), or None."""
    return queue_quota_block(s, job.queue, add, non_preemptible_add(s, job, add))


def queue_quota_block(s: Session, queue: str, add: int, np_add: int) -> Reason | None:
    """Why `add` more milli-GPU in `queue`, `np_add` of it non-preemptible, may not start now: over the limit
    of the queue or of one above it, or over its deserved quota for non-preemptible work; None when all allow
    it. The cycle's check and the quotes' (`scheduling.starts.quota_block`) both, so they say the same."""
    for name in s.queue_path[queue]:
        q = s.queues[name]
        if q.limit_milli is not None and s.alloc[name] + add > q.limit_milli:
            return Reason("queue_over_limit", {"queue": name, "limit_milli": q.limit_milli,
                                               "used_milli": int(s.alloc[name]), "need_milli": int(add)})
        if np_add and s.np_alloc[name] + np_add > q.deserved_milli:
            return np_reason(s, name, np_add)
    return None


def non_preemptible_add(s: Session, job: Job, add: int) -> int:
    """What `add` more milli-GPU of `job` would count against its queues' non-preemptible quota."""
    if job.preemptible:
        return 0
    state = s.jobs[job.id]
    return state.np_milli(state.held + add) - state.np_milli(state.held)


def np_reason(s: Session, name: str, np_add: int) -> Reason:
    return Reason("queue_non_preemptible_quota", {"queue": name, "deserved_milli": s.queues[name].deserved_milli,
                                                  "used_milli": int(s.np_alloc[name]), "need_milli": int(np_add)})


def np_quota_block(s: Session, job: Job, add: int) -> Reason | None:
    """Why `job` may not take `add` more milli-GPU by its queues' non-preemptible quota alone (which
    evicting preemptible work never lifts), or None."""
    np_add = non_preemptible_add(s, job, add)
    if np_add:
        for name in s.queue_path[job.queue]:
            if s.np_alloc[name] + np_add > s.queues[name].deserved_milli:
                return np_reason(s, name, np_add)
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
    """Bind the replicas missing to reach the gang minimum: all of them or none; a job that asks for
    topology within its domains (`topology.place_in_topology`)."""
    p = plan(s, state)

    def on(within: np.ndarray | None) -> bool:
        def scenario() -> bool:
            for role in p.roles:
                pools = p.pools[role.name] if only is None else role_pools(s, state, role, only)
                for index in p.missing[role.name]:
                    spot = None
                    for pool in pools:
                        spot = s.find_spot(role.request, pool, within)
                        if spot is not None:
                            break
                    if spot is None:
                        return False
                    s.bind((state.job.id, role.name, index), spot)
            return True

        return s.transaction(scenario)

    if state.job.topology is not None:
        return place_in_topology(s, state, p, gang_pools(s, state, only), on)
    return on(None)


def gang_signature(s: Session, state: JobState) -> tuple:
    return plan(s, state).sig


def gang_pools(s: Session, state: JobState, only: set[str] | None = None) -> set[str]:
    p = plan(s, state)
    if only is None:
        return {pool for pools in p.pools.values() for pool in pools}
    return {pool for r in p.roles for pool in role_pools(s, state, r, only)}


def request_mask(s: Session, request: Request, pools: Iterable[str]) -> np.ndarray:
    """Nodes of `pools` a replica of `request` may use (whole GPUs: with enough GPU memory)."""
    mask = s.pools_mask(pools)
    if request.mode == "exclusive" and request.gpu_mem_mib:
        mask = mask & (s.arrays.gpu_total_mem >= request.gpu_mem_mib)
    return mask
