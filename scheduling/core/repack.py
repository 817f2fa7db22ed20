"""Repack: empty target GPUs by re-packing fractional residents over a few GPUs at once.

Moves do not create free milli, they gather it: the residents of a target GPU can only go where
other GPUs have gaps, and the gaps on a saturated cluster are small (30-210 milli beside pods
that do not sum to 1000). One-pod swaps rarely end; re-packing the residents of several GPUs
together finds combinations that fill gaps exactly (550 + 230 + 220, 470 + 370 + 160, ...).

`search()` is pure: it reads the arrays and the movable set, and returns where every lifted
resident goes, or None. A bin is a GPU: its room for residents is its free milli plus the milli
of its lifted residents (pods that may not move stay and keep their share). Residents are packed
largest first by a bounded depth-first search that tries each one's own GPU first (no move),
then the fullest bin it fits (best fit); node CPU and memory, GPU memory and each resident's
allowed nodes are checked as it goes. With steps left after a packing is found, the search goes on
for one with fewer moves (branch and bound: a branch ends once the pods it has moved and the
target's pods still to place reach the best count).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from scheduling.core.units import MILLI_PER_GPU

REPACK_TARGETS = 24  # target GPU sets tried per request
REPACK_BINS = 24  # most GPUs opened around one target
REPACK_STEPS = 200  # search steps per packing attempt
REPACK_PLAN_STEPS = 10000  # search steps per cycle (about 0.1-0.2 s), all plans and targets together
REPACK_SAME = 2  # most bins of one kind opened around one target
REPACK_SAME_TARGETS = 1  # targets of one kind (the sizes of their pods) tried per request: another
# kind is likelier to pack than a second target like one that did not
REPACK_CHOICES = 4  # targets searched for fewer moves once a repack is found
REPACK_BRANCHES = 5  # bins tried per item in the search


@dataclass
class Bin:
    node: int
    gpu: int
    milli: int  # room left for residents
    mem: int  # GPU memory left


@dataclass(frozen=True)
class Item:
    resident: object  # room.Resident
    milli: int
    gpu_mem: int
    cpu: int
    mem: int
    home: tuple[int, int] | None  # (node, gpu) it sits on, None for residents of the targets


class Steps:
    """Search steps left to a plan."""

    def __init__(self, left: int | None = None) -> None:
        self.left = REPACK_PLAN_STEPS if left is None else left


class Packer:
    """Depth-first bin packing of items into bins, bounded by `REPACK_STEPS` and the plan's steps."""

    def __init__(self, items: list[Item], bins: list[Bin], cpu: dict[int, int], mem: dict[int, int],
                 budget: Steps, limit: int | None = None) -> None:
        self.items = sorted(items, key=lambda it: (-it.milli, it.home is None))
        self.bins = bins
        self.cpu, self.mem = cpu, mem  # node -> CPU / memory left
        self.budget = budget
        self.steps = min(REPACK_STEPS, budget.left)
        self.where: list[int] = [-1] * len(self.items)
        self.index = {(b.node, b.gpu): i for i, b in enumerate(bins)}
        self.by_room = sorted((b.milli, i) for i, b in enumerate(bins))  # kept sorted as bins fill
        # room left in a bin below the smallest item is lost for good; more lost than the slack
        # (room minus items) means this branch cannot succeed
        self.smallest = self.items[-1].milli if self.items else 0
        self.slack = sum(b.milli for b in bins) - sum(it.milli for it in self.items)
        self.lost = sum(b.milli for b in bins if b.milli < self.smallest)
        # moves: pods not packed on their own GPU; pods of the targets always move
        self.moved = 0
        self.best: int | None = limit  # only packings with fewer moves are wanted
        self.best_where: list[int] | None = None
        self.must_move = [0] * (len(self.items) + 1)  # pods of the targets from k on
        for k in range(len(self.items) - 1, -1, -1):
            self.must_move[k] = self.must_move[k + 1] + (self.items[k].home is None)

    def solve(self) -> list[int] | None:
        """The packing with the fewest moves found within the steps (the first one found need not
        be: a pod kept home early can force several others out)."""
        if self.slack < 0 or self.lost > self.slack:
            return None
        self._place(0)
        return self.best_where

    def _fits(self, it: Item, b: Bin) -> bool:
        allowed = it.resident.allowed
        return (b.milli >= it.milli and b.mem >= it.gpu_mem and self.cpu[b.node] >= it.cpu
                and self.mem[b.node] >= it.mem and (allowed is None or bool(allowed[b.node])))

    def _order(self, it: Item) -> list[int]:
        """Its own GPU first, then the fullest bins it fits, one per distinct state."""
        home = self.index.get(it.home, -1) if it.home is not None else -1
        bins, cpu, mem = self.bins, self.cpu, self.mem
        out = [home] if home >= 0 and self._fits(it, bins[home]) else []
        allowed = it.resident.allowed
        seen = set()
        by_room = self.by_room
        for j in range(bisect.bisect_left(by_room, (it.milli, -1)), len(by_room)):
            i = by_room[j][1]
            b = bins[i]
            node = b.node
            if (i == home or b.mem < it.gpu_mem or cpu[node] < it.cpu or mem[node] < it.mem
                    or (allowed is not None and not allowed[node])):
                continue
            state = (node, b.milli, b.mem)  # same node, same room: same outcome
            if state not in seen:
                seen.add(state)
                out.append(i)
                if len(out) >= REPACK_BRANCHES:
                    break
        return out

    def _place(self, k: int) -> bool:
        """Depth-first from item k; True once nothing better can be found (stop)."""
        if k == len(self.items):
            if self.best is None or self.moved < self.best:
                self.best, self.best_where = self.moved, list(self.where)
            return self.best <= self.must_move[0]  # every move forced: none better
        if self.best is not None and self.moved + self.must_move[k] >= self.best:
            return False
        if self.steps <= 0:
            return True
        self.steps -= 1
        self.budget.left -= 1
        it = self.items[k]
        smallest, slack = self.smallest, self.slack
        home = self.index.get(it.home, -1) if it.home is not None else -1
        for i in self._order(it):
            b = self.bins[i]
            after = b.milli - it.milli
            lost = after if after < smallest <= b.milli else 0
            if self.lost + lost > slack:
                continue
            move = int(i != home)
            self._put(it, i, +1)
            self.lost += lost
            self.moved += move
            self.where[k] = i
            stop = self._place(k + 1)
            self.moved -= move
            self.lost -= lost
            self._put(it, i, -1)
            if stop:
                self.where[k] = -1
                return True
        self.where[k] = -1
        return False

    def _put(self, it: Item, i: int, sign: int) -> None:
        b = self.bins[i]
        by_room = self.by_room
        del by_room[bisect.bisect_left(by_room, (b.milli, i))]
        b.milli -= sign * it.milli
        bisect.insort(by_room, (b.milli, i))
        b.mem -= sign * it.gpu_mem
        self.cpu[b.node] -= sign * it.cpu
        self.mem[b.node] -= sign * it.mem


def bin_candidates(arrays, movable, rank: np.ndarray) -> list[tuple[int, int]]:
    """GPUs with a gap, as (node, gpu), for repacks to open: the largest gaps first (they hold the
    milli to gather), ties in node order, at most REPACK_SAME of one kind (same gap, same movable
    fractions) so the bins offer different sizes. A cluster has thousands of GPUs but a few
    hundred kinds; a few more than REPACK_BINS are kept for searches that may not use some."""
    gap = arrays.gpu_free_milli.astype(np.int64)
    n, g = np.nonzero(arrays.gpu_present & (gap > 0))
    if len(n) == 0:
        return []
    order = np.lexsort((g, rank[n], -gap[n, g]))
    n, g = n[order], g[order]
    kind = np.concatenate([gap[n, g][:, None], np.sort(movable.slot_milli[n, g], axis=1)], axis=1)
    inverse = np.unique(kind, axis=0, return_inverse=True)[1].reshape(-1)
    # each GPU's position among those of its kind, in the order above
    by_kind = np.argsort(inverse, kind="stable")
    grouped = inverse[by_kind]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    position = np.empty(len(n), dtype=np.int64)
    position[by_kind] = np.arange(len(n)) - np.repeat(starts, np.diff(np.r_[starts, len(n)]))
    take = np.flatnonzero(position < REPACK_SAME)[: 3 * REPACK_BINS]
    n, g = n[take], g[take]
    return list(zip(n.tolist(), g.tolist(), strict=True))


def item(resident, home: tuple[int, int] | None) -> Item:
    p = resident.placement
    return Item(resident, p.gpu_milli, p.gpu_mem_mib, resident.request.cpu_milli, resident.request.mem_mib, home)


def fractions_on(movable, node: int, gpu: int) -> list:
    """The movable fractional residents on one GPU."""
    return [r for r in movable.on_node[node].values() if r.request.is_fraction and r.placement.gpus[0] == gpu]


def search(arrays, movable, node: int, targets: tuple[int, ...], lifted: list, cpu_need: int, mem_need: int,
           candidates: list[tuple[int, int]], budget: Steps, limit: int | None = None) -> list | None:
    """Where each resident in `lifted` (all on `targets` of `node`) and the residents of the bins
    opened around them go, so that `targets` keep none of `lifted` and `node` keeps `cpu_need`
    CPU and `mem_need` memory for the request. Bins are the first REPACK_BINS `candidates`
    (from `bin_candidates`) the lifted pods may use. Returns [(resident, node, gpu)] for the
    residents that move (the fewest the search found, fewer than `limit` if given), or None."""
    if limit is not None and limit <= len(lifted):
        return None  # each lifted pod is a move
    need = sum(r.placement.gpu_milli for r in lifted)
    gap = arrays.gpu_free_milli
    masks = [r.allowed for r in lifted if r.allowed is not None]
    allowed = np.logical_or.reduce(masks) if masks else None
    usable = [(bn, bg) for bn, bg in candidates
              if not (bn == node and bg in targets) and (allowed is None or allowed[bn])][:REPACK_BINS]
    chosen = [(bn, bg, fractions_on(movable, bn, bg)) for bn, bg in usable]
    cpu = {node: int(arrays.cpu_free[node]) - cpu_need + sum(r.request.cpu_milli for r in lifted)}
    mem = {node: int(arrays.mem_free[node]) - mem_need + sum(r.request.mem_mib for r in lifted)}
    if cpu[node] < 0 or mem[node] < 0:
        return None
    items = [item(r, None) for r in lifted]
    bins: list[Bin] = []
    opened = 0
    checkpoint = 0  # pack when this many bins are open (doubling), and with all of them
    for bn, bg, residents in chosen:
        bins.append(Bin(bn, bg, int(gap[bn, bg]) + sum(r.placement.gpu_milli for r in residents),
                        int(arrays.gpu_free_mem[bn, bg]) + sum(r.placement.gpu_mem_mib for r in residents)))
        cpu.setdefault(bn, int(arrays.cpu_free[bn]))
        mem.setdefault(bn, int(arrays.mem_free[bn]))
        for r in residents:
            cpu[bn] += r.request.cpu_milli
            mem[bn] += r.request.mem_mib
            items.append(item(r, (bn, bg)))
        opened += int(gap[bn, bg])
        if opened < need or (len(bins) < checkpoint and len(bins) < len(chosen)):
            continue  # too little gap opened for packing to succeed, or not yet time to retry
        checkpoint = 2 * len(bins)
        if budget.left <= 0:
            return None
        packer = Packer(items, [Bin(b.node, b.gpu, b.milli, b.mem) for b in bins], dict(cpu), dict(mem), budget,
                        limit)
        where = packer.solve()
        if where is not None:
            out = []
            for it, b in zip(packer.items, where, strict=True):
                dest = (packer.bins[b].node, packer.bins[b].gpu)
                if dest != it.home:
                    out.append((it.resident, *dest))
            return out
    return None


def whole_targets(arrays, movable, request, mask: np.ndarray) -> list[tuple[int, tuple[int, ...]]]:
    """(node, GPUs) for whole-GPU requests: nodes with enough GPUs whose every holder is a
    movable fraction, and CPU and memory once the movable residents left; on each node the GPUs
    holding the least."""
    fixed = MILLI_PER_GPU - arrays.gpu_free_milli.astype(np.int64) - movable.milli
    whole_res = movable.milli - movable.slot_milli.sum(axis=2)  # milli held by whole-GPU residents
    clearable = arrays.gpu_present & (fixed == 0) & (whole_res == 0) & (arrays.gpu_free_milli < MILLI_PER_GPU)
    clearable &= mask[:, None]
    nodes = np.flatnonzero(clearable.sum(axis=1) >= request.num_gpus)
    # CPU and memory: the node must hold the request once its movable residents left
    nodes = nodes[(arrays.cpu_free[nodes] + movable.cpu[nodes] >= request.cpu_milli)
                  & (arrays.mem_free[nodes] + movable.mem[nodes] >= request.mem_mib)]
    out = []
    for node in nodes.tolist():
        gpus = np.flatnonzero(clearable[node])
        held = (MILLI_PER_GPU - arrays.gpu_free_milli[node, gpus]).astype(np.int64)
        pick = gpus[np.argsort(held, kind="stable")[: request.num_gpus]]
        out.append((node, tuple(sorted(int(x) for x in pick))))
    return out


def fraction_targets(arrays, movable, request, mask: np.ndarray) -> list[tuple[int, tuple[int, ...]]]:
    """(node, (GPU,)) for a fraction: GPUs where the movable fractions could make room."""
    fixed = MILLI_PER_GPU - arrays.gpu_free_milli.astype(np.int64) - movable.slot_milli.sum(axis=2)
    ok = arrays.gpu_present & (MILLI_PER_GPU - fixed >= request.gpu_milli) & mask[:, None]
    ok &= ((arrays.cpu_free + movable.cpu >= request.cpu_milli) & (arrays.mem_free + movable.mem >= request.mem_mib))[:, None]
    n, g = np.nonzero(ok)
    return [(int(a), (int(b),)) for a, b in zip(n.tolist(), g.tolist(), strict=True)]
