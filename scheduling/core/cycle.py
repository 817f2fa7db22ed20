"""One scheduling cycle: Snapshot in, Decisions out; and applying Decisions to a Snapshot."""

from __future__ import annotations

import gc
from dataclasses import dataclass, field, replace

from .actions import ACTIONS
from .actions.pending import late_jobs, pending_reasons
from .build import BuildCache
from .deadline import Phases, phased
from .model import Decisions, Pool, RunningReplica, Snapshot
from .session import Session


@dataclass
class CycleMemo:
    """What one cycle leaves to the next in a long-lived process (the Celery worker): the plans of
    jobs with nothing running, by their roles (`Session.plans`). A plan depends only on the job's
    roles, whether it waits for off-peak and the pools, so the memo is dropped when the pools
    change, and keeps only what the last cycle used. Never changes a decision: a cycle with a memo
    decides as one without."""

    pools: tuple[Pool, ...] | None = None
    plans: dict[tuple, tuple] = field(default_factory=dict)
    # the last cycle's snapshot and decisions (and whether they give pending reasons): an unchanged
    # snapshot (its time aside, which the cycle does not read) decides the same again, so an idle
    # cluster's cycle costs a comparison
    last: tuple[Snapshot, Decisions, bool] | None = None
    # what building a session takes from the pools, nodes and queues alone, while they stay the same
    build: BuildCache = field(default_factory=BuildCache)
    # the deadline jobs as their phases made them last cycle, so that their objects stay the same
    phases: Phases = field(default_factory=Phases)

    def for_pools(self, pools: tuple[Pool, ...]) -> dict[tuple, tuple]:
        if self.pools != pools:
            self.pools, self.plans = pools, {}
        return self.plans

    def same_as_last(self, snapshot: Snapshot, reasons: bool = True) -> Decisions | None:
        if self.last is None or self.last[2] != reasons:
            return None
        before = self.last[0]
        if all(getattr(before, f) == getattr(snapshot, f) for f in INPUT_FIELDS) and not crossed_patience(
                before, snapshot):
            return self.last[1]
        return None


def crossed_patience(before: Snapshot, snapshot: Snapshot) -> bool:
    """Whether a job's backfill patience ran out between the two snapshots' times (it may now hold nodes)."""
    patience = snapshot.backfill_patience_s
    if patience is None:
        return False
    return any(before.now < job.created + patience <= snapshot.now for job in snapshot.jobs)


# what a cycle reads of a snapshot: all of it but `now` (which only a deadline job's phase reads, and
# the phased jobs are what is compared)
INPUT_FIELDS = ("pools", "nodes", "queues", "off_peak", "next_off_peak", "job_off_peak", "queue_usage", "usage_k",
                "running", "jobs", "held", "backfill_patience_s")


def run_cycle(snapshot: Snapshot, memo: CycleMemo | None = None, exact: bool = False,
              reasons: bool = True) -> Decisions:
    """Schedule once. Deterministic: the same snapshot always gives the same decisions.

    Replicas on nodes that are gone or not ready are evicted (node-lost) and their jobs
    requeued in the same cycle; then allocate, consolidate, reclaim, preempt and elastic run.
    A deadline job (`Job.latest_start`) is given to them as its phase at `snapshot.now` makes it
    (`deadline.phased`); those still pending from their latest start on are `Decisions.late`.
    `memo` carries what may be kept to the next cycle; `exact` visits every job each action
    walks, one by one (the reference the shortcuts are tested against: the same decisions).
    `reasons=False` leaves out the pending jobs' reasons (the evictions and binds are the same):
    a forward simulation reads no reasons.
    """
    if snapshot.blocked:
        snapshot = without_blocked(snapshot)
    snapshot = phased(snapshot, memo.phases if memo is not None else None)
    # A cycle allocates many short-lived small objects and creates no garbage cycles worth
    # collecting mid-way; the cyclic GC's full-heap passes would otherwise cost a third of it.
    if memo is not None and not exact:
        again = memo.same_as_last(snapshot, reasons)
        if again is not None:
            return again
    collecting = gc.isenabled()
    gc.disable()
    try:
        session = Session.build(snapshot, memo.build if memo is not None else None)
        session.exact = exact
        if memo is not None:
            kept = memo.for_pools(snapshot.pools)
            session.plans = dict(kept)
        for action in ACTIONS:
            action(session)
        decisions = session.decisions(pending_reasons(session) if reasons else {}, late_jobs(session))
        if memo is not None:
            live = session.roles_ids
            memo.plans = {key: found for key, found in session.plans.items() if key[0] in live}
            memo.last = (snapshot, decisions, reasons)
        return decisions
    finally:
        if collecting:
            gc.enable()


def apply_decisions(snapshot: Snapshot, decisions: Decisions) -> Snapshot:
    """The snapshot after the backend carried out `decisions` (evictions first, then binds)."""
    running = {(r.job_id, r.role, r.index): r for r in snapshot.running}
    for e in decisions.evicts:
        key = (e.job_id, e.role, e.replica)
        if key not in running:
            raise ValueError(f"evict {key}: replica is not running")
        del running[key]
    for b in decisions.binds:
        key = (b.job_id, b.role, b.replica)
        if key in running:
            raise ValueError(f"bind {key}: replica is already running")
        running[key] = RunningReplica(b.job_id, b.role, b.replica, b.node, b.gpus, b.slice)
    return replace(snapshot, running=tuple(running[k] for k in sorted(running)))


def without_jobs(snapshot: Snapshot, *job_ids: str) -> Snapshot:
    """The snapshot once these jobs have finished (they and their replicas are gone)."""
    gone = set(job_ids)
    return replace(
        snapshot,
        jobs=tuple(j for j in snapshot.jobs if j.id not in gone),
        running=tuple(r for r in snapshot.running if r.job_id not in gone),
    )


def without_blocked(snapshot: Snapshot) -> Snapshot:
    """The snapshot a cycle decides from: the blocked jobs left out (they are neither placed nor demand).
    A blocked job holds nothing: whatever runs of one is evicted as anything of a job gone would be."""
    blocked = snapshot.blocked
    return replace(snapshot, jobs=tuple(j for j in snapshot.jobs if j.id not in blocked), blocked=frozenset())
