"""Displace: the fewest moves that take a target GPU's lifted fractions elsewhere, by exact search.

A repack (`repack.py`) packs the residents of a few GPUs opened in advance; it misses room that
only a cascade reaches: a 470 takes the place of a 320 whose GPU then has room for it, the 320
takes the place of a 160 elsewhere, and the 160 drops into a gap. `search()` finds such cascades:
each homeless fraction (the largest first) goes into a GPU's gap or takes the place of movable
fractions of a GPU that are together smaller than it (so sizes fall along a cascade and it ends),
which become homeless in turn. The number of moves allowed grows one at a time, so the first plan
found moves the fewest pods; each step is charged `DISPLACE_STEP_COST` of the plan's (and the
cycle's) repack steps, so the cycle's time stays bounded.

`search()` is pure, like `repack.search`: it reads the arrays and the movable set and returns
where each moved resident goes, or None. A GPU that received or lost a pod in the search gives up
no further pods (its remaining gap still takes pods), which keeps the table of what each GPU can
give up fixed for the whole search.
"""

from __future__ import annotations

import itertools

import numpy as np

from scheduling.core.repack import Steps

DISPLACE_TARGETS = 8  # target GPUs tried per request
DISPLACE_EXTRA = 6  # moves allowed beyond the lifted pods themselves
DISPLACE_BRANCHES = 4  # places tried per homeless pod, tightest first, one per distinct kind
DISPLACE_STEPS = 300  # search steps per target
DISPLACE_SUBSET = 2  # most pods one GPU gives up for one homeless pod
DISPLACE_STEP_COST = 10  # repack steps one cascade step is charged: it scans every GPU's table rows


class Table:
    """What each GPU can give up: one row per (GPU, subset of its movable fractions of at most
    DISPLACE_SUBSET pods), the empty subset included. Built once per plan: every attempt of a
    plan starts from the same state."""

    def __init__(self, arrays, movable) -> None:
        present = arrays.gpu_present
        n_idx, g_idx = np.nonzero(present)
        self.shape = present.shape
        flat = n_idx * present.shape[1] + g_idx
        rows_gpu: list[int] = flat.tolist()
        rows: list[tuple] = [()] * len(rows_gpu)
        by_gpu: dict[tuple[int, int], list] = {}
        for (n, g, _), key in movable.slot_key.items():
            by_gpu.setdefault((n, g), []).append(movable.on_node[n][key])
        width = present.shape[1]
        for (n, g), residents in by_gpu.items():
            residents.sort(key=lambda r: -r.placement.gpu_milli)
            for k in range(1, min(DISPLACE_SUBSET, len(residents)) + 1):
                for subset in itertools.combinations(residents, k):
                    rows_gpu.append(n * width + g)
                    rows.append(subset)
        self.gpu = np.array(rows_gpu, dtype=np.int64)  # flat GPU index of each row
        self.node = self.gpu // width
        self.subsets = rows
        self.milli = np.array([sum(r.placement.gpu_milli for r in s) for s in rows], dtype=np.int64)
        self.gpu_mem = np.array([sum(r.placement.gpu_mem_mib for r in s) for s in rows], dtype=np.int64)
        self.cpu = np.array([sum(r.request.cpu_milli for r in s) for s in rows], dtype=np.int64)
        self.mem = np.array([sum(r.request.mem_mib for r in s) for s in rows], dtype=np.int64)
        self.size = len(rows)


class _Search:
    def __init__(self, arrays, table: Table, node: int, targets: tuple[int, ...], budget: Steps) -> None:
        width = arrays.gpu_present.shape[1]
        self.width = width
        self.table = table
        self.room = arrays.gpu_free_milli.astype(np.int64).reshape(-1).copy()
        self.gmem = arrays.gpu_free_mem.astype(np.int64).reshape(-1).copy()
        self.cpu = arrays.cpu_free.astype(np.int64).copy()
        self.mem = arrays.mem_free.astype(np.int64).copy()
        self.touched = np.zeros(len(self.room), dtype=bool)  # gives up no more pods
        self.closed = np.zeros(len(self.room), dtype=bool)  # takes no pods: the targets
        for g in targets:
            self.closed[node * width + g] = True
        self.budget = budget
        self.steps = min(DISPLACE_STEPS, budget.left // DISPLACE_STEP_COST)
        self.moves: list[tuple[object, int]] = []  # (resident, flat GPU)

    def options(self, r, origin: int) -> list[int]:
        """Rows of the table where `r` can go, tightest first, one per distinct kind."""
        t = self.table
        m = r.placement.gpu_milli
        room = self.room[t.gpu]
        ok = (t.milli < m) & (room + t.milli >= m) & ~self.closed[t.gpu] & (t.gpu != origin)
        ok &= (t.milli == 0) | ~self.touched[t.gpu]
        ok &= self.gmem[t.gpu] + t.gpu_mem >= r.placement.gpu_mem_mib
        ok &= (self.cpu[t.node] + t.cpu >= r.request.cpu_milli) & (
            self.mem[t.node] + t.mem >= r.request.mem_mib
        )
        if r.allowed is not None:
            ok &= r.allowed[t.node]
        rows = np.flatnonzero(ok)
        if len(rows) == 0:
            return []
        # tightest first, then the fewest and smallest pods given up, then the lowest GPU
        order = np.lexsort((t.gpu[rows], t.milli[rows], room[rows] + t.milli[rows] - m))
        out: list[int] = []
        seen = set()
        for i in rows[order].tolist():
            kind = (
                int(self.room[t.gpu[i]]),
                tuple(x.placement.gpu_milli for x in t.subsets[i]),
                int(self.cpu[t.node[i]]) // 1000,
            )
            if kind not in seen:
                seen.add(kind)
                out.append(i)
                if len(out) >= DISPLACE_BRANCHES:
                    break
        return out

    def place(self, homeless: list[tuple[object, int]], allowed: int) -> bool:
        if not homeless:
            return True
        if len(homeless) > allowed or self.steps <= 0:
            return False
        self.steps -= 1
        self.budget.left -= DISPLACE_STEP_COST
        k = max(range(len(homeless)), key=lambda i: homeless[i][0].placement.gpu_milli)
        r, origin = homeless[k]
        rest = homeless[:k] + homeless[k + 1 :]
        t = self.table
        for i in self.options(r, origin):
            gpu, node = int(t.gpu[i]), int(t.node[i])
            self._put(r, gpu, node, t.subsets[i], +1)
            touched = bool(self.touched[gpu])
            self.touched[gpu] = True
            self.moves.append((r, gpu))
            if self.place(rest + [(x, gpu) for x in t.subsets[i]], allowed - 1):
                return True
            self.moves.pop()
            self.touched[gpu] = touched
            self._put(r, gpu, node, t.subsets[i], -1)
        return False

    def _put(self, r, gpu: int, node: int, given_up: tuple, sign: int) -> None:
        self.room[gpu] -= sign * (r.placement.gpu_milli - sum(x.placement.gpu_milli for x in given_up))
        self.gmem[gpu] -= sign * (r.placement.gpu_mem_mib - sum(x.placement.gpu_mem_mib for x in given_up))
        self.cpu[node] -= sign * (r.request.cpu_milli - sum(x.request.cpu_milli for x in given_up))
        self.mem[node] -= sign * (r.request.mem_mib - sum(x.request.mem_mib for x in given_up))


def search(
    arrays,
    table: Table,
    node: int,
    targets: tuple[int, ...],
    lifted: list,
    cpu_need: int,
    mem_need: int,
    budget: Steps,
) -> list | None:
    """Where each resident in `lifted` (all on `targets` of `node`) and each resident it displaces
    go, in the fewest moves, so that `targets` keep none of `lifted` and `node` keeps `cpu_need`
    CPU and `mem_need` memory for the request. Returns [(resident, node, gpu)] or None."""
    if not lifted or budget.left < DISPLACE_STEP_COST:
        return None
    s = _Search(arrays, table, node, targets, budget)
    width = s.width
    for r in lifted:
        flat = r.placement.node * width + r.placement.gpus[0]
        s.room[flat] += r.placement.gpu_milli
        s.gmem[flat] += r.placement.gpu_mem_mib
        s.cpu[node] += r.request.cpu_milli
        s.mem[node] += r.request.mem_mib
    s.cpu[node] -= cpu_need
    s.mem[node] -= mem_need
    if s.cpu[node] < 0 or s.mem[node] < 0:
        return None
    homeless = [(r, -1) for r in lifted]
    for allowed in range(len(lifted), len(lifted) + DISPLACE_EXTRA + 1):
        if s.place(list(homeless), allowed):
            return [(r, gpu // width, gpu % width) for r, gpu in s.moves]
        if s.steps <= 0:
            return None
    return None
