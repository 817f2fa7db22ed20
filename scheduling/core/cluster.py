"""What a session takes from a snapshot's pools, nodes and queues alone (`ClusterBase`), checked once
and kept while they stay the same objects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import placement as pl
from .fairshare import queue_children
from .model import MIG_PROFILES, Node, Pool, Queue, Snapshot
from .units import MILLI_PER_GPU


@dataclass
class ClusterBase:
    """What a session takes from a snapshot's pools, nodes and queues alone, checked once: kept
    (`BuildCache`) while a snapshot's pools, nodes and queues are the same objects. Nothing here is
    changed by a session (the free lists and arrays are copied)."""

    sources: tuple[tuple[Pool, ...], tuple[Node, ...], tuple[Queue, ...]]
    pools: dict[str, Pool]
    queues: dict[str, Queue]
    parents: set[str | None]
    nodes: list[Node]                          # ready nodes, one per row
    row_of: dict[str, int]
    node_pool: list[str]
    pool_mask: dict[str, np.ndarray]
    queue_path: dict[str, tuple[str, ...]]
    profile_ids: dict[str, int]
    gpu_count: list[int]
    free_milli: list[list[int]]                # per row and GPU, nothing running
    free_mem: list[list[int]]
    total_mem: list[int]
    cpu_total: list[int]
    mem_total: list[int]
    mig_free: np.ndarray
    mig_profile: np.ndarray
    ts_free: np.ndarray
    shape: tuple[int, int]                     # rows, most GPUs on one node
    fixed: dict[str, np.ndarray]               # ClusterArrays' columns that follow from the nodes alone
    model_names: tuple[str, ...]
    whole_only: bool                           # every pool's GPUs whole or fractional (no MIG, no time-slicing)
    names: tuple[str, ...] = ()                # the nodes' names, one per row

    def serves(self, snapshot: Snapshot) -> bool:
        pools, nodes, queues = self.sources
        return snapshot.pools is pools and snapshot.nodes is nodes and snapshot.queues is queues

    @classmethod
    def of(cls, snapshot: Snapshot) -> ClusterBase:
        pools = {p.name: p for p in snapshot.pools}
        if len(pools) != len(snapshot.pools):
            raise ValueError("snapshot: duplicate pool names")
        queue_children(snapshot.queues)            # validates the tree
        queues = {q.name: q for q in snapshot.queues}
        parents = {q.parent for q in snapshot.queues}
        for node in snapshot.nodes:
            if node.pool not in pools:
                raise ValueError(f"node {node.name!r}: unknown pool {node.pool!r}")
        names = [n.name for n in snapshot.nodes]
        if len(set(names)) != len(names):
            raise ValueError("snapshot: duplicate node names")
        nodes = [n for n in snapshot.nodes if n.ready]
        row_of = {n.name: i for i, n in enumerate(nodes)}

        n, g = len(nodes), max((len(x.gpus) for x in nodes), default=0)
        gpus = GpuTables.of(nodes, pools, snapshot.pools, n, g)
        node_pool = [x.pool for x in nodes]
        pool_arr = np.array(node_pool, dtype=object)
        schedulable = np.array([not x.cordoned for x in nodes], dtype=bool)
        pool_mask = {name: (pool_arr == name) & schedulable for name in pools}
        gpu_count = [len(x.gpus) for x in nodes]
        model_names, fixed = fixed_columns(nodes, pools, gpu_count, gpus.total_mem, n, g)
        return cls((snapshot.pools, snapshot.nodes, snapshot.queues), pools, queues, parents, nodes, row_of,
                   node_pool, pool_mask, queue_paths(snapshot.queues, queues), gpus.profile_ids, gpu_count,
                   gpus.free_milli, gpus.free_mem, gpus.total_mem, [x.cpu_milli for x in nodes],
                   [x.memory_mib for x in nodes], gpus.mig_free, gpus.mig_profile, gpus.ts_free, (n, g), fixed,
                   model_names, all(p.gpu_mode == "whole" for p in snapshot.pools), tuple(x.name for x in nodes))

    def arrays(self, free_milli: list[list[int]], free_mem: list[list[int]], cpu_free: list[int],
               mem_free: list[int], base: tuple | None = None, rows: set[int] = frozenset()) -> pl.ClusterArrays:
        """The session's placement arrays for these free figures. Any figure out of its node's range is
        refused by `placement.NodeCapacity`, which says which (as building the arrays through it would).
        `base`: the arrays of figures that differ from these only in `rows` (copied, those rows set)."""
        n, g = self.shape
        fixed = self.fixed
        if base is not None:
            milli, mem, cpu, memory = (x.copy() for x in base)
            gpu_count, total_mem = self.gpu_count, self.total_mem
            cpu_total, mem_total = self.cpu_total, self.mem_total
            for i in rows:
                count = gpu_count[i]
                row_milli, row_mem = free_milli[i], free_mem[i]
                if not (0 <= cpu_free[i] <= cpu_total[i] and 0 <= mem_free[i] <= mem_total[i]
                        and all(0 <= x <= MILLI_PER_GPU for x in row_milli)
                        and all(0 <= x <= total_mem[i] for x in row_mem)):
                    return self.arrays(free_milli, free_mem, cpu_free, mem_free)   # says which figure
                milli[i, :count] = row_milli
                mem[i, :count] = row_mem
                cpu[i] = cpu_free[i]
                memory[i] = mem_free[i]
            return pl.ClusterArrays(names=self.names, model_names=self.model_names,
                                    gpu_free_milli=milli, gpu_free_mem=mem, cpu_free=cpu, mem_free=memory,
                                    version=np.zeros(n, dtype=np.int64), **fixed)
        milli = np.zeros((n, g), dtype=np.int32)
        mem = np.zeros((n, g), dtype=np.int64)
        if all(count == g for count in self.gpu_count):
            if g:
                milli[:] = free_milli
                mem[:] = free_mem
        else:
            for i, count in enumerate(self.gpu_count):
                milli[i, :count] = free_milli[i]
                mem[i, :count] = free_mem[i]
        cpu = np.array(cpu_free, dtype=np.int64)
        memory = np.array(mem_free, dtype=np.int64)
        total = fixed["gpu_total_mem"]
        if not ((milli >= 0).all() and (milli <= MILLI_PER_GPU).all() and (mem >= 0).all()
                and (mem <= total[:, None]).all() and (cpu >= 0).all() and (cpu <= fixed["cpu_total"]).all()
                and (memory >= 0).all() and (memory <= fixed["mem_total"]).all()):
            for i, x in enumerate(self.nodes):       # raises, naming the node and the figure
                pool = self.pools[x.pool]
                pl.NodeCapacity(x.name, pool.gpu_model or pool.name, self.total_mem[i], len(x.gpus), x.cpu_milli,
                                x.memory_mib, tuple(free_milli[i]), tuple(free_mem[i]), cpu_free[i], mem_free[i])
        return pl.ClusterArrays(names=self.names, model_names=self.model_names,
                                gpu_free_milli=milli, gpu_free_mem=mem, cpu_free=cpu, mem_free=memory,
                                version=np.zeros(n, dtype=np.int64), **fixed)


class GpuTables(NamedTuple):
    """The GPUs of a cluster's ready nodes with nothing running: free milli and memory per row and GPU
    (MIG and time-sliced GPUs offer none to whole/fraction placement), each row's GPU memory, and the
    MIG instances and time-slice slots."""

    free_milli: list[list[int]]
    free_mem: list[list[int]]
    total_mem: list[int]
    profile_ids: dict[str, int]
    mig_free: np.ndarray
    mig_profile: np.ndarray
    ts_free: np.ndarray

    @classmethod
    def of(cls, nodes: list[Node], pools: dict[str, Pool], pool_list: tuple[Pool, ...], n: int, g: int) -> GpuTables:
        free_milli = [[MILLI_PER_GPU] * len(x.gpus) for x in nodes]
        free_mem = [[gpu.memory_mib or pools[x.pool].gpu_memory_mib for gpu in x.gpus] for x in nodes]
        total_mem = [free_mem[i][0] if free_mem[i] else pools[x.pool].gpu_memory_mib for i, x in enumerate(nodes)]
        layouts = {p.name: p.mig_layout for p in pool_list if p.gpu_mode == "mig"}
        k = max((len(lay) for lay in layouts.values()), default=0)
        profile_ids = {name: i for i, name in enumerate(sorted(MIG_PROFILES))}
        mig_free = np.zeros((n, g, k), dtype=bool)
        mig_profile = np.full((n, max(k, 0)), -1, dtype=np.int32)
        ts_free = np.zeros((n, g), dtype=np.int32)
        for i, x in enumerate(nodes):
            pool = pools[x.pool]
            if pool.gpu_mode == "mig":
                lay = pool.mig_layout
                mig_profile[i, : len(lay)] = [profile_ids[p] for p in lay]
                mig_free[i, : len(x.gpus), : len(lay)] = True
            elif pool.gpu_mode == "timeslice":
                ts_free[i, : len(x.gpus)] = pool.timeslice_replicas
            if pool.gpu_mode != "whole":
                # MIG and time-sliced GPUs are not offered to whole/fraction placement.
                free_milli[i] = [0] * len(x.gpus)
                free_mem[i] = [0] * len(x.gpus)
        return cls(free_milli, free_mem, total_mem, profile_ids, mig_free, mig_profile, ts_free)


def queue_paths(queue_list: tuple[Queue, ...], queues: dict[str, Queue]) -> dict[str, tuple[str, ...]]:
    """Each queue's path up the tree: itself first, the root last."""
    queue_path = {}
    for q in queue_list:
        path, cur = [], q.name
        while cur is not None:
            path.append(cur)
            cur = queues[cur].parent
        queue_path[q.name] = tuple(path)
    return queue_path


def fixed_columns(nodes: list[Node], pools: dict[str, Pool], gpu_count: list[int], total_mem: list[int], n: int,
                  g: int) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
    """The GPU model names, and the ClusterArrays columns that follow from the nodes alone."""
    models = [pools[x.pool].gpu_model or pools[x.pool].name for x in nodes]
    model_names = tuple(sorted(set(models)))
    index = {name: i for i, name in enumerate(model_names)}
    present = np.zeros((n, g), dtype=bool)
    for i, count in enumerate(gpu_count):
        present[i, :count] = True
    fixed = {
        "model_id": np.array([index[m] for m in models], dtype=np.int32),
        "gpu_present": present,
        "gpu_total_mem": np.array(total_mem, dtype=np.int64),
        "num_gpus": np.array(gpu_count, dtype=np.int32),
        "cpu_total": np.array([x.cpu_milli for x in nodes], dtype=np.int64),
        "mem_total": np.array([x.memory_mib for x in nodes], dtype=np.int64),
    }
    return model_names, fixed
