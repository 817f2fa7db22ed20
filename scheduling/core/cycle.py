"""One scheduling cycle: Snapshot in, Decisions out; and applying Decisions to a Snapshot."""

from __future__ import annotations

import gc
from dataclasses import replace

from . import actions
from .model import Decisions, RunningReplica, Snapshot
from .session import Session

ACTIONS = (actions.allocate, actions.consolidate, actions.reclaim, actions.preempt, actions.elastic)


def run_cycle(snapshot: Snapshot) -> Decisions:
    """Schedule once. Deterministic: the same snapshot always gives the same decisions.

    Replicas on nodes that are gone or not ready are evicted (node-lost) and their jobs
    requeued in the same cycle; then allocate, consolidate, reclaim, preempt and elastic run.
    """
    # A cycle allocates many short-lived small objects and creates no garbage cycles worth
    # collecting mid-way; the cyclic GC's full-heap passes would otherwise cost a third of it.
    collecting = gc.isenabled()
    gc.disable()
    try:
        session = Session.build(snapshot)
        for action in ACTIONS:
            action(session)
        return session.decisions(actions.pending_reasons(session))
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
