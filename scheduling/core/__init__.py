"""The scheduler core: pure Python + numpy, no Django. Snapshot in, Decisions out.

Build a snapshot from plain dataclasses and run one cycle::

    from scheduling.core import Job, Node, Pool, Queue, Request, Role, Snapshot, run_cycle

    snapshot = Snapshot(
        pools=(Pool("h100", gpu_model="H100-80GB", placement="default"),),
        nodes=(Node.with_gpus("gpu-1", "h100", 8),),
        queues=(Queue("team-a", deserved_milli=4000), Queue("team-b", deserved_milli=4000)),
        jobs=(Job("train-1", "team-a", (Role("worker", Request(num_gpus=1), 2, 4),)),),
        running=(),            # RunningReplica(job_id, role, index, node, gpus, Slice) per bound replica
        off_peak=False, next_off_peak="00:00",
    )
    decisions = run_cycle(snapshot)
    decisions.evicts    # Evict(job_id, role, replica, node, reason, by_job, by_queue, level, rule), first
    decisions.binds     # Bind(job_id, role, replica, node, gpus, slice), then these
    decisions.pending   # {job_id: readable reason} for every job below its gang minimum
    decisions.pending_codes   # {job_id: reasons.Reason(code, params)}, the same reasons as data

`apply_decisions(snapshot, decisions)` gives the snapshot after the backend carried them out
(for simulations and multi-cycle tests); `scheduling.core.builders` has short constructors.
A job is pending while any role runs fewer than its min_replicas; replicas above the minimum are
elastic. The cycle runs allocate, consolidate, reclaim, preempt and elastic (see `actions`).
"""

from .model import (
    EVICT_REASONS,
    EVICT_RULES,
    MIG_PROFILES,
    SHARING_MODES,
    Bind,
    Decisions,
    Evict,
    EvictCause,
    Gpu,
    HeldReplica,
    Job,
    Node,
    Pool,
    Queue,
    Request,
    Role,
    RunningReplica,
    Slice,
    Snapshot,
    Topology,
)
from .reasons import Reason

__all__ = [
    "EVICT_REASONS", "EVICT_RULES", "MIG_PROFILES", "SHARING_MODES", "Bind", "Decisions", "Evict", "EvictCause",
    "Gpu", "HeldReplica", "Job", "Node", "Pool", "Queue", "Reason", "Request", "Role", "RunningReplica", "Slice", "Snapshot",
    "Topology", "apply_decisions", "run_cycle", "without_jobs",
]


def __getattr__(name: str):
    # The cycle (and numpy with it) loads on first use: web processes that only read the model
    # types, or never schedule, do not pay for it.
    if name in ("apply_decisions", "run_cycle", "without_jobs"):
        from . import cycle

        return getattr(cycle, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
