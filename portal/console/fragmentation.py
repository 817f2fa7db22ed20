"""Fragmentation (pure): free GPU capacity that no pending job can use.

A GPU's free capacity counts as usable when at least one pending replica could be placed on it as
it is now (the pool serves the request, and the free share, memory, MIG instance or time-slice
slot is there; whole-GPU asks also need enough wholly free GPUs on the node). The rest is
stranded: idle capacity the waiting work cannot take. Free capacity on partly allocated GPUs
(the classic fragments) is counted beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduling.api import MILLI_PER_GPU, Pool, PoolTraits, Request, check_gpu, check_pool, mig_milli


@dataclass(frozen=True)
class FreeGpu:
    pool: str
    node: str
    index: int
    free_milli: int            # whole/fraction pools: unallocated compute
    free_mem_mib: int
    free_mig: tuple[str, ...] = ()  # MIG pools: profiles of the free instances
    free_slots: int = 0        # time-sliced pools: free slots
    node_free_whole: int = 0   # wholly free GPUs on this GPU's node (whole/fraction pools)

    def partly_used(self, pool: Pool) -> bool:
        if pool.gpu_mode == "mig":
            return 0 < len(self.free_mig) < len(pool.mig_layout)
        if pool.gpu_mode == "timeslice":
            return 0 < self.free_slots < pool.timeslice_replicas
        return 0 < self.free_milli < MILLI_PER_GPU

    def free_share(self, pool: Pool) -> int:
        """Free capacity in milli-GPU, whatever the pool's mode."""
        if pool.gpu_mode == "mig":
            return sum(mig_milli(p) for p in self.free_mig)
        if pool.gpu_mode == "timeslice":
            return self.free_slots * MILLI_PER_GPU // max(pool.timeslice_replicas, 1)
        return self.free_milli


@dataclass(frozen=True)
class PoolFragmentation:
    pool: str
    free_milli: int
    partial_milli: int          # free on GPUs that are partly allocated
    stranded_milli: int
    stranded_gpus: tuple[str, ...]  # "node/gpuN" with free capacity no pending job can use


def usable_by(gpu: FreeGpu, pool: Pool, r: Request) -> bool:
    if check_pool(PoolTraits.of(pool), r) is not None:
        return False
    return check_gpu(r, free_milli=gpu.free_milli, free_mem_mib=gpu.free_mem_mib, free_mig=gpu.free_mig,
                     free_slots=gpu.free_slots, node_free_whole=gpu.node_free_whole) is None


def fragmentation(pools: Sequence[Pool], gpus: Iterable[FreeGpu], pending: Sequence[Request]
                  ) -> list[PoolFragmentation]:
    by_name = {p.name: p for p in pools}
    free: dict[str, int] = {p.name: 0 for p in pools}
    stranded: dict[str, int] = {p.name: 0 for p in pools}
    partial: dict[str, int] = {p.name: 0 for p in pools}
    where: dict[str, list[str]] = {p.name: [] for p in pools}
    shapes = list({r.shape(): r for r in pending}.values())
    for gpu in gpus:
        pool = by_name[gpu.pool]
        share = gpu.free_share(pool)
        if share <= 0:
            continue
        free[pool.name] += share
        if gpu.partly_used(pool):
            partial[pool.name] += share
        if not any(usable_by(gpu, pool, r) for r in shapes):
            stranded[pool.name] += share
            where[pool.name].append(f"{gpu.node}/gpu{gpu.index}")
    return [PoolFragmentation(p.name, free[p.name], partial[p.name], stranded[p.name], tuple(where[p.name]))
            for p in pools]
