"""What a placement held, as priced: each Replica row is one placement (node, GPUs, slice, start,
end), the exact history. Failed, cancelled and preempted placements pay for the time they held."""

from __future__ import annotations

from decimal import Decimal

from billing import pricing
from scheduling.api import DEFAULT_CPU_MILLI, DEFAULT_MEM_MIB, mode_of
from scheduling.models import NodePool, Replica


def replica_allocation(replica: Replica, pool: NodePool, role: dict) -> pricing.Allocation:
    """The slice a placement held, as the priced allocation (share of a GPU model, CPU, memory)."""
    slice_ = replica.slice or {}
    count = len(replica.gpu_indices)
    if count == 0:
        share = Decimal(0)
    else:
        mode = mode_of(slice_)
        share = pricing.charged_gpu_share(mode.sharing, **mode.charge_args(slice_, count, pool))
    return pricing.Allocation.from_units(
        share, pool.vendor if share else None, pool.gpu_model if share else None,
        cpu_milli=role.get("cpu_milli", DEFAULT_CPU_MILLI), mem_mib=role.get("mem_mib", DEFAULT_MEM_MIB),
    )
