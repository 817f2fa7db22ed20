"""Short constructors for snapshots, used by the tests, the benchmark and simulations."""

from __future__ import annotations

from dataclasses import replace

from .cycle import apply_decisions, run_cycle
from .model import Decisions, Job, Node, Request, Role, Snapshot, Topology


def nodes(pool: str, count: int, gpus: int, prefix: str | None = None, **kwargs) -> tuple[Node, ...]:
    """`count` nodes named <prefix>-0 .. with `gpus` GPUs each."""
    prefix = prefix or pool
    return tuple(Node.with_gpus(f"{prefix}-{i}", pool, gpus, **kwargs) for i in range(count))


def job(
    job_id: str,
    queue: str,
    gpus: int = 1,
    *,
    mode: str = "exclusive",
    milli: int = 1000,
    gpu_mem: int = 0,
    mig: str = "",
    replicas: int = 1,
    min_replicas: int | None = None,
    priority: int = 0,
    preemptible: bool = True,
    reduce_cost: bool = False,
    created: float = 0.0,
    cpu: int = 0,
    mem: int = 0,
    vendor: str = "nvidia",
    gpu_model: str = "",
    pool: str = "",
    topology: Topology | None = None,
    latest_start: float | None = None,
) -> Job:
    """A one-role job ("worker") of `replicas` identical replicas; gang minimum = min_replicas
    (default: all of them)."""
    request = Request(mode=mode, num_gpus=gpus, gpu_milli=milli, gpu_mem_mib=gpu_mem, mig_profile=mig,
                      cpu_milli=cpu, mem_mib=mem, vendor=vendor, gpu_model=gpu_model, pool=pool)
    low = replicas if min_replicas is None else min_replicas
    return Job(job_id, queue, (Role("worker", request, low, replicas),), priority=priority,
               preemptible=preemptible, reduce_cost=reduce_cost, created=created, topology=topology,
               latest_start=latest_start)


def with_jobs(snapshot: Snapshot, *jobs: Job) -> Snapshot:
    """The snapshot with more jobs submitted."""
    return replace(snapshot, jobs=snapshot.jobs + jobs)


def cycles(snapshot: Snapshot, count: int) -> tuple[Snapshot, list[Decisions]]:
    """Run `count` cycles, applying each one's decisions; returns the last snapshot and all decisions."""
    history = []
    for _ in range(count):
        decisions = run_cycle(snapshot)
        history.append(decisions)
        snapshot = apply_decisions(snapshot, decisions)
    return snapshot, history


def placed(snapshot: Snapshot) -> dict[str, int]:
    """Running replicas per job."""
    out: dict[str, int] = {}
    for r in snapshot.running:
        out[r.job_id] = out.get(r.job_id, 0) + 1
    return out
