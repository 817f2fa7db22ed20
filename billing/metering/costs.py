"""What a placement held, as priced: each Replica row is one placement (node, GPUs, slice, start,
end), the exact history. Failed, cancelled and preempted placements pay for the time they held."""

from __future__ import annotations

from decimal import Decimal

from billing import pricing
from scheduling.api import DEFAULT_CPU_MILLI, DEFAULT_MEM_MIB
from scheduling.models import NodePool, Replica


def replica_allocation(replica: Replica, pool: NodePool, role: dict) -> pricing.Allocation:
    """The slice a placement held, as the priced allocation (share of a GPU model, CPU, memory)."""
    slice_ = replica.slice or {}
    slice_kind = slice_.get("kind", "whole")
    count = len(replica.gpu_indices)
    if count == 0:
        share = Decimal(0)
    elif slice_kind == "fraction":
        share = pricing.charged_gpu_share("fraction", gpu_milli=slice_.get("gpu_milli") or None,
                                          gpu_mem_mib=slice_.get("gpu_mem_mib") or None,
                                          gpu_total_mem_mib=pool.gpu_memory_mib)
    elif slice_kind == "mig":
        share = pricing.charged_gpu_share("mig", mig_profile=slice_["mig_profile"])
    elif slice_kind == "timeslice":
        share = pricing.charged_gpu_share("timeslice", num_gpus=count, timeslice_replicas=pool.timeslice_replicas)
    else:
        share = pricing.charged_gpu_share("exclusive", num_gpus=count)
    return pricing.Allocation.from_units(
        share, pool.vendor if share else None, pool.gpu_model if share else None,
        cpu_milli=role.get("cpu_milli", DEFAULT_CPU_MILLI), mem_mib=role.get("mem_mib", DEFAULT_MEM_MIB),
    )
