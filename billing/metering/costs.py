"""What a job is charged: the slices its replicas held, for as long as they held them.

Each Replica row is one placement (node, GPUs, slice, start, end): the exact history. Failed,
cancelled and preempted placements pay for the time they held their slice.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction

from billing import pricing
from billing.selectors import price_tables
from billing.services import platform_tz
from scheduling import clock
from scheduling.models import Job, NodePool, Replica
from scheduling.spec.model import DEFAULT_CPU_MILLI, DEFAULT_MEM_MIB


def replica_allocation(replica: Replica, pool: NodePool, role: dict) -> pricing.Allocation:
    """The slice a placement held, as the priced allocation (share of a GPU model, CPU, memory)."""
    slice_ = replica.slice or {}
    kind = slice_.get("kind", "whole")
    count = len(replica.gpu_indices)
    if count == 0:
        share = Decimal(0)
    elif kind == "fraction":
        share = pricing.charged_gpu_share("fraction", gpu_milli=slice_.get("gpu_milli") or None,
                                          gpu_mem_mib=slice_.get("gpu_mem_mib") or None,
                                          gpu_total_mem_mib=pool.gpu_memory_mib)
    elif kind == "mig":
        share = pricing.charged_gpu_share("mig", mig_profile=slice_["mig_profile"])
    elif kind == "timeslice":
        share = pricing.charged_gpu_share("timeslice", num_gpus=count, timeslice_replicas=pool.timeslice_replicas)
    else:
        share = pricing.charged_gpu_share("exclusive", num_gpus=count)
    return pricing.Allocation.from_units(
        share, pool.vendor if share else None, pool.gpu_model if share else None,
        cpu_milli=role.get("cpu_milli", DEFAULT_CPU_MILLI), mem_mib=role.get("mem_mib", DEFAULT_MEM_MIB),
    )


def held_intervals(job: Job, *, until=None) -> list[pricing.HeldInterval]:
    """Every placement that ran, up to its end (or `until` for one still running)."""
    until = until or clock.now()
    roles = {r["name"]: r for r in job.roles}
    intervals = []
    for replica in job.replicas.filter(started__isnull=False).select_related("node__pool"):
        if replica.node is None:
            continue
        end = replica.ended or until
        if end <= replica.started:
            continue
        end = replica.started + (end - replica.started) * replica.clock_scale  # simulated time
        pool = replica.node.pool
        intervals.append(pricing.HeldInterval(
            start=replica.started, end=end, allocation=replica_allocation(replica, pool, roles.get(replica.role, {})),
            spot=pool.spot,
        ))
    return intervals


def job_cost(job: Job, *, until=None) -> pricing.MeteredCost:
    return pricing.cost_for_intervals(held_intervals(job, until=until), price_tables(),
                                      priority=job.priority, tz=platform_tz())


@transaction.atomic
def finalize_job_cost(job_id: int) -> Job:
    """Fix a finished job's final cost (idempotent: recomputed from the same placements)."""
    job = Job.objects.select_for_update().get(pk=job_id)
    cost = job_cost(job, until=job.finished)
    job.final_cost, job.currency = cost.total, cost.currency
    job.save(update_fields=["final_cost", "currency"])
    return job


def price_finished_job(sender, job, **kwargs) -> str:
    """Connected to scheduling's job_finished: the final cost, as a note for the job's last event."""
    priced = finalize_job_cost(job.pk)
    return f"final cost {priced.final_cost:.2f} {priced.currency}"
