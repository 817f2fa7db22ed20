"""Why each job below its gang minimum waits, as reasons. Every reason is a code and JSON parameters
(see `fit.REASONS` for the texts), so it can be stored, compared by code and rendered in another
language later."""

from __future__ import annotations

from itertools import chain

import numpy as np

from ..deadline import waiting_reason
from ..model import Request
from ..reasons import Reason
from ..session import Session
from ..state import JobState
from .gang import EPS, gang_pools, off_peak_of, plan
from .topology import topology_reason, waits_for_one_domain


def capacity_reason(s: Session, state: JobState) -> Reason:
    """Why the gang does not fit, in numbers a person can check."""
    p = plan(s, state)
    topology = state.job.topology
    if topology is not None and (topology.required or waits_for_one_domain(s, state)):
        return topology_reason(s, state, p, gang_pools(s, state))
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
    """The reason of every job below its gang minimum, by job id."""
    reasons = PendingReasons(s)
    evicted_by_job: dict[str, set[str]] = {}
    for k, why in s.evict_reason.items():
        evicted_by_job.setdefault(k[0], set()).add(why)
    out: dict[str, Reason] = {}
    for job_id, state in s.jobs.items():
        if not state.pending:
            continue
        if state.fail is None or state.evicted:
            evicted = sorted(evicted_by_job.get(job_id, ()))
            reason = Reason("evicted_requeued", {"reasons": evicted}) if evicted else NEXT_CYCLE
        else:
            failure, reason = state.fail
            if failure == "capacity":
                reason = reasons.capacity(state)
            elif failure == "reduce-cost":
                reason = reasons.reduce_cost(off_peak_of(s, state.job)[1])
        rows = s.reserved.get(job_id)
        if rows is not None:
            reason = joined(reserved_reason(s, state, rows), reason)
        elif s.reserved and state.fail is not None and state.fail[0] == "capacity":
            held = reasons.held_for_others(state)
            if held is not None:
                reason = joined(reason, held)
        latest = state.job.latest_start
        if latest is not None and s.snapshot.now < latest:
            reason = reasons.deadline(latest, reason)
        out[job_id] = reason
    return out


def reserved_reason(s: Session, state: JobState, rows: tuple[int, ...]) -> Reason:
    """A job with nodes held for it: how many, and how much of its gang is free there so far."""
    _, per_node = whole_free(s)
    need = sum(len(v) * r.request.num_gpus for r in state.job.roles for k, v in state.missing().items()
               if k == r.name)
    return Reason("backfill_reserved", {"nodes": len(rows), "gpus": need,
                                        "free": int(per_node[list(rows)].sum())})


def late_jobs(s: Session) -> tuple[str, ...]:
    """The deadline jobs still below their gang minimum at or after their latest start, sorted."""
    now = s.snapshot.now
    # only a job that wanted replicas when the session was built, or whose replicas changed since, can be
    # pending now
    states = s.jobs
    found = set()
    for state in chain(s.wanting, map(states.__getitem__, s.touched)):
        if state.pending:
            job = state.job
            latest = job.latest_start
            if latest is not None and now >= latest:
                found.add(job.id)
    return tuple(sorted(found))


class PendingReasons:
    """The reasons of one session's pending jobs: thousands of them share a few, so each combination
    is built (and rendered) once."""

    def __init__(self, s: Session) -> None:
        self.s = s
        self.over_share = {q for q in s.queues if s.alloc[q] > s.fair_share.get(q, 0.0) + EPS}
        self.by_sig: dict[tuple, Reason] = {}        # capacity_reason by plan signature
        self.combined: dict[tuple, Reason] = {}
        self.held: dict[str, Reason] = {}
        self.by_plan: dict[tuple, Reason] = {}
        self.off_peak: dict[str, Reason] = {}   # by when the window opens: one per currency's window
        self.deadlines: dict[tuple, Reason] = {}   # by (latest start, the reason after it)
        self.reserved_pools: dict[str, int] | None = None   # pool -> nodes held for waiting gangs
        self.held_pools: dict[tuple, Reason] = {}

    def held_for_others(self, state: JobState) -> Reason | None:
        """Nodes of the job's pools held for gangs that waited past their patience (`actions.reserve`): what
        the job's capacity reason counted as taken."""
        s = self.s
        if self.reserved_pools is None:
            self.reserved_pools = {}
            for rows in s.reserved.values():
                for row in rows:
                    self.reserved_pools[s.node_pool[row]] = self.reserved_pools.get(s.node_pool[row], 0) + 1
        pools = sorted(gang_pools(s, state) & set(self.reserved_pools))
        if not pools:
            return None
        key = tuple(pools)
        if key not in self.held_pools:
            self.held_pools[key] = Reason("backfill_held", {"pools": pools,
                                                            "nodes": sum(self.reserved_pools[p] for p in pools)})
        return self.held_pools[key]

    def deadline(self, latest_start: float, reason: Reason) -> Reason:
        """A deadline job's reason before its latest start: it waits for idle GPUs until then, and why."""
        key = (latest_start, reason.text)
        found = self.deadlines.get(key)
        if found is None:
            found = self.deadlines[key] = joined(waiting_reason(latest_start), reason)
        return found

    def reduce_cost(self, next_off_peak: str) -> Reason:
        if next_off_peak not in self.off_peak:
            self.off_peak[next_off_peak] = reduce_cost_reason(next_off_peak)
        return self.off_peak[next_off_peak]

    def capacity(self, state: JobState) -> Reason:
        """Why a job whose gang did not fit waits: the shortage, whether its queue is held to its fair
        share while others lend, and whether it waits for off-peak."""
        s = self.s
        own = off_peak_of(s, state.job) if state.job.reduce_cost else None   # (window open, next opening)
        p = plan(s, state)
        queue = state.job.queue
        # all that decides the reason below (a plan is alive all cycle)
        reason = self.by_plan.get((id(p), queue, own))
        if reason is not None:
            return reason
        share = s.fair_share.get(queue, 0.0)
        # other queues over their fair shares lend: is there any?
        over_share = self.over_share
        holds = len(over_share) > (queue in over_share) and s.alloc[queue] + p.need > share + EPS
        waits = own is not None and not own[0]
        # by the plan itself: jobs with equal plans share one
        key = (id(p), queue if holds else None, own[1] if waits else None)
        reason = self.combined.get(key)
        if reason is None:
            sig = p.sig
            if sig not in self.by_sig:
                self.by_sig[sig] = capacity_reason(s, state)
            reason = self.by_sig[sig]
            if holds:
                reason = joined(reason, self.held_to_share(queue, share))
            if waits:
                reason = joined(self.reduce_cost(own[1]), reason)
            self.combined[key] = reason
        self.by_plan[(id(p), queue, own)] = reason
        return reason

    def held_to_share(self, queue: str, share: float) -> Reason:
        if queue not in self.held:
            self.held[queue] = Reason("fair_share_held", {"queue": queue, "held_milli": int(self.s.alloc[queue]),
                                                          "share_milli": float(share),
                                                          "lenders": sorted(self.over_share - {queue})})
        return self.held[queue]
