"""Consolidation: moves of running best-effort pods that make room for a request that fits nowhere.

`plan_room` decides the moves; the scheduling cycle (actions.consolidate) and the trace benchmark
(bench.placement --moves) both call it, so they move exactly the same pods. A plan is tried on
the live arrays with an undo log and leaves them as they were; the caller carries it out.

Scenarios, cheapest first:
1. clear a node of residents that fit elsewhere right now;
2. repack (`repack.py`): empty the target GPUs by re-packing their residents, together with the
   residents of a few GPUs with the largest gaps, into those GPUs (an exact small bin packing);
   once one is found, a few more targets are searched and the repack with the fewest moves is
   tried first; then, with the steps the repacks left, cascades (`displace.py`): the fewest moves in which each
   lifted pod takes a gap or the place of smaller pods, which move on in turn;
3. chain moves: swap a smaller resident out of a GPU, which is in turn placed the same way.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from scheduling.core import displace, repack
from scheduling.core.placement import (
    ClusterArrays,
    Placement,
    PlacementContext,
    PlacementRequest,
    allocate,
    feasible_nodes,
    place,
    release,
)
from scheduling.core.units import MILLI_PER_GPU

ROOM_NODES = 20  # nodes tried for the waiting request
ROOM_NODES_NESTED = 4  # nodes tried for each pod a move displaces (chain moves)
ROOM_ATTEMPTS = 120  # placements one plan may try, so a plan costs a bounded time
ROOM_DEPTH = 5  # a displaced pod may displace others, this many levels deep


class Resident(NamedTuple):
    """A running pod consolidation may move: what it asks, where it is, where it may go. (A named
    tuple: the scheduling cycle makes one per movable replica, and a frozen dataclass costs three
    times as much to make.)"""

    key: object  # the caller's id for the pod
    request: PlacementRequest
    placement: Placement
    allowed: np.ndarray | None = None  # nodes it may run on (None: all)


@dataclass(frozen=True)
class RoomPlan:
    """Where the waiting request goes and which residents move where.

    Carry it out by releasing every moved resident's old placement, then allocating the request,
    then the moved residents' new placements in this order (`apply_room_plan`).
    """

    placement: Placement
    moves: tuple[tuple[Resident, Placement], ...]


class MovableSet:
    """The residents consolidation may move, per node, with their GPU milli / CPU / memory summed.

    Residents are also kept by kind (request and allowed nodes), so which of them could be placed
    elsewhere right now is found with one feasibility mask per kind.
    """

    def __init__(self, arrays: ClusterArrays) -> None:
        self.on_node: list[dict[object, Resident]] = [{} for _ in range(arrays.size)]
        self.milli = np.zeros(arrays.gpu_free_milli.shape, dtype=np.int64)  # [N, G]
        self.cpu = np.zeros(arrays.size, dtype=np.int64)
        self.mem = np.zeros(arrays.size, dtype=np.int64)
        self.kinds: dict[tuple, dict[object, Resident]] = {}  # (request, id(allowed)) -> residents
        # fractions by GPU slot, for finding swap partners vectorised: [N, G, S] milli (0: empty)
        self.slot_milli = np.zeros((*arrays.gpu_free_milli.shape, 4), dtype=np.int64)
        self.slot_cpu = np.zeros_like(self.slot_milli)
        self.slot_mem = np.zeros_like(self.slot_milli)
        self.slot_key: dict[tuple[int, int, int], object] = {}
        self._slot_of: dict[object, tuple[int, int, int]] = {}
        # requests no plan was found for since pods last moved: a request that needs at least
        # as much finds none either (placements since then only took capacity)
        self.no_room: list[tuple[PlacementRequest, bytes | None, int]] = []  # request, allowed, depth

    @classmethod
    def of(cls, arrays: ClusterArrays, residents: Iterable[Resident]) -> MovableSet:
        """A set holding `residents`, built in bulk (the scheduling cycle builds one per cycle)."""
        out = cls(arrays)
        rows: list[tuple[int, int, int, int, int]] = []  # node, gpu, milli, cpu, mem per GPU held
        slots: list[tuple[int, int, int, int, int, int]] = []
        count: dict[tuple[int, int], int] = {}
        cpu, mem = [0] * arrays.size, [0] * arrays.size
        buckets: dict[tuple[int, int], dict] = {}  # (id(request), id(allowed)) -> its kind's residents
        for r in residents:
            p = r.placement
            on = out.on_node[p.node]
            if r.key in on:
                raise ValueError(f"resident {r.key!r} is listed twice")
            on[r.key] = r
            bucket = buckets.get((id(r.request), id(r.allowed)))
            if bucket is None:
                bucket = buckets[(id(r.request), id(r.allowed))] = out.kinds.setdefault(_kind(r), {})
            bucket[r.key] = r
            cpu[p.node] += r.request.cpu_milli
            mem[p.node] += r.request.mem_mib
            if len(p.gpus) == 1:
                rows.append((p.node, p.gpus[0], p.gpu_milli))
            else:
                rows += [(p.node, g, p.gpu_milli) for g in p.gpus]
            if r.request.is_fraction:
                k = count.get((p.node, p.gpus[0]), 0)
                count[(p.node, p.gpus[0])] = k + 1
                slots.append((p.node, p.gpus[0], k, p.gpu_milli, r.request.cpu_milli, r.request.mem_mib))
                out.slot_key[(p.node, p.gpus[0], k)] = r.key
                out._slot_of[r.key] = (p.node, p.gpus[0], k)
        out.cpu += np.array(cpu, dtype=np.int64)
        out.mem += np.array(mem, dtype=np.int64)
        if rows:
            n, g, milli = np.array(rows, dtype=np.int64).T
            np.add.at(out.milli, (n, g), milli)
        if slots:
            n, g, k, milli, cpu, mem = np.array(slots, dtype=np.int64).T
            width = int(k.max()) + 1
            if width > out.slot_milli.shape[2]:
                out.slot_milli, out.slot_cpu, out.slot_mem = (
                    np.zeros((*out.milli.shape, width), dtype=np.int64) for _ in range(3))
            out.slot_milli[n, g, k], out.slot_cpu[n, g, k], out.slot_mem[n, g, k] = milli, cpu, mem
        return out

    def __len__(self) -> int:
        return sum(len(d) for d in self.on_node)

    def add(self, resident: Resident) -> None:
        p = resident.placement
        if resident.key in self.on_node[p.node]:
            raise ValueError(f"resident {resident.key!r} is already on node {p.node}")
        self.on_node[p.node][resident.key] = resident
        self.kinds.setdefault(_kind(resident), {})[resident.key] = resident
        self._count(resident, +1)

    def remove(self, key: object, node: int) -> Resident:
        resident = self.on_node[node].pop(key)
        del self.kinds[_kind(resident)][key]
        self._count(resident, -1)
        return resident

    def _count(self, r: Resident, sign: int) -> None:
        p = r.placement
        self.milli[p.node, list(p.gpus)] += sign * p.gpu_milli
        self.cpu[p.node] += sign * r.request.cpu_milli
        self.mem[p.node] += sign * r.request.mem_mib
        if r.request.is_fraction:
            self._slot(r, sign)

    def _slot(self, r: Resident, sign: int) -> None:
        n, g = r.placement.node, r.placement.gpus[0]
        if sign < 0:
            slot = self._slot_of.pop(r.key)
            del self.slot_key[slot]
            values = (0, 0, 0)
        else:
            free = np.flatnonzero(self.slot_milli[n, g] == 0)
            if len(free) == 0:  # more fractions on one GPU than slots: widen
                grow = np.zeros_like(self.slot_milli)
                self.slot_milli, self.slot_cpu, self.slot_mem = (
                    np.concatenate([x, grow], axis=2) for x in (self.slot_milli, self.slot_cpu, self.slot_mem))
                free = np.flatnonzero(self.slot_milli[n, g] == 0)
            slot = (n, g, int(free[0]))
            self._slot_of[r.key] = slot
            self.slot_key[slot] = r.key
            values = (r.placement.gpu_milli, r.request.cpu_milli, r.request.mem_mib)
        self.slot_milli[slot], self.slot_cpu[slot], self.slot_mem[slot] = values

    def swap_partners(
        self, arrays: ClusterArrays, request: PlacementRequest, mask: np.ndarray, rank: np.ndarray, limit: int
    ) -> list[Resident]:
        """For a fraction: residents smaller than it whose leaving makes room for it on their GPU
        (with CPU and memory), the tightest fit first, then node order. Moving such a resident
        for the request moves free milli between GPUs; chains of them gather it where needed."""
        m = self.slot_milli
        gap = arrays.gpu_free_milli.astype(np.int64)[:, :, None]
        ok = (m > 0) & (m < request.gpu_milli) & (gap + m >= request.gpu_milli)
        ok &= mask[:, None, None]
        ok &= arrays.cpu_free[:, None, None] + self.slot_cpu >= request.cpu_milli
        ok &= arrays.mem_free[:, None, None] + self.slot_mem >= request.mem_mib
        n, g, k = np.nonzero(ok)
        if len(n) == 0:
            return []
        left = gap[n, g, 0] + m[n, g, k] - request.gpu_milli
        order = np.lexsort((rank[n], left))[:limit]
        out = []
        for i in order.tolist():
            key = self.slot_key[(int(n[i]), int(g[i]), int(k[i]))]
            out.append(self.on_node[int(n[i])][key])
        return out

    def placeable(self, arrays: ClusterArrays) -> tuple[set, np.ndarray, np.ndarray, np.ndarray]:
        """The residents that fit somewhere now besides where they are (another node, or another
        GPU of theirs): their keys, and their GPU milli [N, G], CPU [N] and memory [N] per node."""
        keys: set = set()
        milli, cpu, mem = np.zeros_like(self.milli), np.zeros_like(self.cpu), np.zeros_like(self.mem)
        for residents in self.kinds.values():
            if not residents:
                continue
            first = next(iter(residents.values()))
            if not feasible_nodes(arrays, first.request, first.allowed).any():
                continue
            for r in residents.values():
                p = r.placement
                keys.add(r.key)
                milli[p.node, list(p.gpus)] += p.gpu_milli
                cpu[p.node] += r.request.cpu_milli
                mem[p.node] += r.request.mem_mib
        return keys, milli, cpu, mem


def _kind(r: Resident) -> tuple:
    return (r.request, id(r.allowed))


def plan_room(
    arrays: ClusterArrays,
    request: PlacementRequest,
    policy: str,
    movable: MovableSet,
    allowed: np.ndarray | None = None,
    ctx: PlacementContext | None = None,
    nodes: int = ROOM_NODES,
    depth: int = ROOM_DEPTH,
    steps: repack.Steps | None = None,
) -> RoomPlan | None:
    """Moves of residents after which `request` fits, or None. `arrays` and `movable` are left as
    they were (the plan is tried on them and undone).

    A node is tried when the request would fit there if its residents left (least GPU milli to
    move first, then node order). On it the fewest residents that make room are chosen (on one
    GPU for a fraction: the set that frees the least milli that is enough); the request is placed
    there, then each displaced resident is placed again anywhere it may run (not where it was) by
    the same policy. A displaced resident that fits nowhere may in turn displace smaller ones
    (`depth` levels, `ROOM_NODES_NESTED` nodes each): chain moves, which also swap pods between
    GPUs. With two levels or more, repacks (`repack.py`) are tried between the first scenario and
    the chains; they spend `steps` (a fresh `repack.Steps()` when None: one plan's worth; the
    cycle shares one among its plans). The plan holds only if the request and every displaced
    resident are placed.
    """
    ctx = ctx if ctx is not None else PlacementContext()
    mask = np.ones(arrays.size, dtype=bool) if allowed is None else allowed
    if int(arrays.gpu_free_milli[mask].sum()) < request.total_gpu_milli:
        return None  # not a fragmentation problem: moving cannot help
    where = None if allowed is None else allowed.tobytes()
    if any(_needs_as_much(request, done) and done_where == where and done_depth >= depth
           for done, done_where, done_depth in movable.no_room):
        return None
    planner = _RoomPlanner(arrays, policy, movable, ctx, steps if steps is not None else repack.Steps())
    try:
        placement = planner.make_room(request, mask, depth, nodes, top=True)
        if placement is None:
            movable.no_room.append((request, where, depth))
            return None
        return RoomPlan(placement, tuple((r, new) for r, new in planner.moved if new != r.placement))
    finally:
        planner.undo_all()


def apply_room_plan(arrays: ClusterArrays, request: PlacementRequest, plan: RoomPlan, movable: MovableSet) -> None:
    """Carry out a plan on `arrays` and keep `movable` in step (the request itself is not added)."""
    movable.no_room.clear()
    for r, _ in plan.moves:
        movable.remove(r.key, r.placement.node)
        release(arrays, r.request, r.placement)
    allocate(arrays, request, plan.placement)
    for r, new in plan.moves:
        allocate(arrays, r.request, new)
        movable.add(Resident(r.key, r.request, new, r.allowed))


class _RoomPlanner:
    """Tries a plan on the live arrays with an undo log."""

    def __init__(self, arrays: ClusterArrays, policy: str, movable: MovableSet, ctx: PlacementContext,
                 steps: repack.Steps) -> None:
        self.arrays, self.policy, self.movable, self.ctx = arrays, policy, movable, ctx
        self.log: list[Callable[[], None]] = []
        self.moved: list[tuple[Resident, Placement]] = []
        self.failed: set[tuple] = set()  # (request, allowed, depth) that found no room in this plan
        self.budget = ROOM_ATTEMPTS  # placements tried in one plan, chains included
        self.repack_steps = steps  # search steps left to repacks (shared by the plans of one cycle)
        self.bins: list[tuple[int, int]] | None = None  # GPUs repacks may open
        self.table: displace.Table | None = None  # what each GPU can give up, for cascades

    def undo_to(self, mark: int) -> None:
        while len(self.log) > mark:
            self.log.pop()()

    def undo_all(self) -> None:
        self.undo_to(0)

    def _take(self, request: PlacementRequest, placement: Placement) -> None:
        allocate(self.arrays, request, placement)
        self.log.append(lambda: release(self.arrays, request, placement))

    def _evict(self, r: Resident) -> None:
        self.movable.remove(r.key, r.placement.node)
        release(self.arrays, r.request, r.placement)

        def undo() -> None:
            allocate(self.arrays, r.request, r.placement)
            self.movable.add(r)

        self.log.append(undo)

    def _record(self, r: Resident, new: Placement) -> None:
        self.moved.append((r, new))
        self.log.append(self.moved.pop)

    def make_room(
        self, request: PlacementRequest, mask: np.ndarray, depth: int, nodes: int, top: bool = False
    ) -> Placement | None:
        if self.budget <= 0:
            return None
        self.budget -= 1
        placement = place(self.arrays, request, self.policy, mask, self.ctx)
        if placement is not None:
            self._take(request, placement)
            return placement
        if depth <= 0:
            return None
        memo = (request, mask.tobytes(), depth)  # by content: a freed mask's id can be reused
        if memo in self.failed:
            return None
        for attempt in self._scenarios(request, mask, depth, nodes, top):
            mark = len(self.log)
            placement = attempt()
            if placement is not None:
                return placement
            self.undo_to(mark)
        self.failed.add(memo)
        return None

    def _scenarios(
        self, request: PlacementRequest, mask: np.ndarray, depth: int, nodes: int, top: bool
    ) -> Iterator[Callable[[], Placement | None]]:
        """Attempts to try in turn, each changing the arrays through the undo log. For the waiting
        request: nodes cleared of residents that fit elsewhere now, then repacks around target
        GPUs. For a fraction (at any level): one smaller resident swapped out of a GPU, which a
        chain of such swaps places in turn. For the waiting request, with levels to spare: nodes
        cleared of any residents, each then placed by such chains."""
        tried = set()
        if top:
            keys, milli, cpu, mem = self.movable.placeable(self.arrays)
            for node in self._candidates(request, mask, nodes, milli, cpu, mem).tolist():
                tried.add(node)
                victims = self._victims(node, request, keys)
                if victims:
                    yield functools.partial(self._clear, request, node, victims, depth)
            for node, moves in self._repacks(request, mask) if depth >= 2 else ():
                yield functools.partial(self._carry_out, request, node, moves)
            if depth >= 2 and request.num_gpus == 1 and self._cascade_steps():  # with the steps repacks left
                for node, gpus, lifted in self._repack_targets(request, mask, displace.DISPLACE_TARGETS):
                    yield functools.partial(self._displace, request, node, gpus, lifted)
        if request.is_fraction:
            for r in self.movable.swap_partners(self.arrays, request, mask, self.ctx.rank(self.arrays.size), nodes):
                if r.key in self.movable.on_node[r.placement.node]:  # not moved by an earlier try
                    yield functools.partial(self._clear, request, r.placement.node, [r], depth)
        if top and depth >= 2:
            m = self.movable
            for node in self._candidates(request, mask, nodes, m.milli, m.cpu, m.mem).tolist():
                if node not in tried:
                    victims = self._victims(node, request, None)
                    if victims:
                        yield functools.partial(self._clear, request, node, victims, depth)

    def _place_on(self, request: PlacementRequest, node: int) -> Placement | None:
        only = np.zeros(self.arrays.size, dtype=bool)
        only[node] = True
        placement = place(self.arrays, request, self.policy, only, self.ctx)
        if placement is not None:
            self._take(request, placement)
        return placement

    def _clear(self, request: PlacementRequest, node: int, victims: list[Resident], depth: int) -> Placement | None:
        """Evict `victims` from `node`, place the request there, then place each victim again."""
        for r in victims:
            self._evict(r)
        placement = self._place_on(request, node)
        if placement is not None and all(self._move(r, depth - 1) for r in victims):
            return placement
        return None

    def _repack_targets(
        self, request: PlacementRequest, mask: np.ndarray, cascades: int = 0
    ) -> Iterator[tuple[int, tuple, list]]:
        """(node, GPUs, residents to lift) for repacks, easiest first: the smallest biggest pod to
        lift, then the least milli, then node order; at most `REPACK_SAME_TARGETS` of one kind. None
        once the cycle's repack steps are spent: `repack.search` would then find nothing. With `cascades`, that
        many targets for `displace.search`, the fewest pods to lift first (each is a move at least)."""
        if request.num_gpus == 0 or self.repack_steps.left <= 0:
            return
        a = self.arrays
        find = repack.fraction_targets if request.is_fraction else repack.whole_targets
        rank = self.ctx.rank(a.size)
        ranked = []
        for node, gpus in find(a, self.movable, request, mask):
            if request.is_fraction:
                found = _smallest_room(repack.fractions_on(self.movable, node, gpus[0]),
                                       int(a.gpu_free_milli[node, gpus[0]]), request.gpu_milli)
                lifted = found[1] if found is not None else ()
            else:
                lifted = tuple(r for g in gpus for r in repack.fractions_on(self.movable, node, g))
            if lifted:
                sizes = sorted((r.placement.gpu_milli for r in lifted), reverse=True)
                order = (len(sizes), rank[node]) if cascades else (sizes[0], sum(sizes), rank[node])
                ranked.append((order, tuple(sizes), node, gpus, list(lifted)))
        ranked.sort(key=lambda t: t[0])
        kinds: dict[tuple, int] = {}
        tried = 0
        for _, kind, node, gpus, lifted in ranked:
            if self.repack_steps.left <= 0:
                return
            if kinds.get(kind, 0) < repack.REPACK_SAME_TARGETS and tried < (cascades or repack.REPACK_TARGETS):
                kinds[kind] = kinds.get(kind, 0) + 1
                tried += 1
                yield node, gpus, lifted

    def _repacks(self, request: PlacementRequest, mask: np.ndarray) -> Iterator[tuple[int, list]]:
        """(node, moves) of repacks that empty target GPUs (`_repack_targets`) for the request, the
        fewest moves first: once one is found, `repack.REPACK_CHOICES` more targets are searched for
        a repack with fewer moves (a plan's moves are the cost of consolidation)."""
        a = self.arrays
        found: list[tuple[int, list]] = []
        left = None  # targets still searched once a repack is found
        for node, gpus, lifted in self._repack_targets(request, mask):
            if left is not None:
                if left <= 0:
                    break
                left -= 1
            if self.bins is None:  # every repack of a plan starts from the same state
                self.bins = repack.bin_candidates(a, self.movable, self.ctx.rank(a.size))
            limit = len(found[-1][1]) if found else None
            moves = repack.search(a, self.movable, node, gpus, lifted, request.cpu_milli, request.mem_mib,
                                  self.bins, self.repack_steps, limit)
            if moves is not None:
                found.append((node, moves))
                if left is None:
                    left = repack.REPACK_CHOICES
                if len(moves) == len(lifted):
                    break  # only the lifted pods move: none fewer
        yield from reversed(found)

    def _displace(self, request: PlacementRequest, node: int, gpus: tuple[int, ...], lifted: list) -> Placement | None:
        """Move `lifted` off `gpus` of `node` by the cascade of the fewest moves; then place the
        request there."""
        if not self._cascade_steps():
            return None
        if self.table is None:  # every attempt of a plan starts from the same state
            self.table = displace.Table(self.arrays, self.movable)
        moves = displace.search(self.arrays, self.table, node, gpus, lifted, request.cpu_milli, request.mem_mib,
                                self.repack_steps)
        return self._carry_out(request, node, moves)

    def _cascade_steps(self) -> bool:
        """Steps enough left for one full cascade search: its table costs as much as many steps."""
        return self.repack_steps.left >= displace.DISPLACE_STEPS * displace.DISPLACE_STEP_COST

    def _carry_out(self, request: PlacementRequest, node: int, moves: list | None) -> Placement | None:
        if moves is None:
            return None
        for r, _, _ in moves:
            self._evict(r)
        for r, n, g in moves:
            new = Placement(n, (g,), r.placement.gpu_milli, r.placement.gpu_mem_mib)
            self._take(r.request, new)
            self._record(r, new)
        return self._place_on(request, node)

    def _move(self, r: Resident, depth: int) -> bool:
        """Place an evicted resident again (not on the GPUs it left), displacing others if allowed."""
        mask = np.ones(self.arrays.size, dtype=bool) if r.allowed is None else r.allowed
        new = self.make_room(r.request, mask, depth, ROOM_NODES_NESTED)
        if new is None:
            return False
        self._record(r, new)
        return True

    def _candidates(
        self, request: PlacementRequest, mask: np.ndarray, limit: int, milli: np.ndarray, cpu: np.ndarray,
        mem: np.ndarray,
    ) -> np.ndarray:
        """Nodes where the request fits if their residents that fit elsewhere left (`milli`, `cpu`,
        `mem` per node); least GPU milli to move first, then node order."""
        a = self.arrays
        ok = mask & (a.cpu_free + cpu >= request.cpu_milli) & (a.mem_free + mem >= request.mem_mib)
        ok &= milli.any(axis=1) | (a.cpu_free < request.cpu_milli) | (a.mem_free < request.mem_mib)
        fixed = MILLI_PER_GPU - a.gpu_free_milli - milli  # milli held by pods that cannot move now
        if request.is_fraction:
            reachable = a.gpu_present & (MILLI_PER_GPU - fixed >= request.gpu_milli)
            ok &= reachable.any(axis=1)
            need = np.where(reachable, np.maximum(0, request.gpu_milli - a.gpu_free_milli), 2 * MILLI_PER_GPU).min(axis=1)
        elif request.num_gpus > 0:
            clearable = a.gpu_present & (fixed == 0)
            ok &= clearable.sum(axis=1) >= request.num_gpus
            taken = np.sort(np.where(clearable, MILLI_PER_GPU - a.gpu_free_milli, 2 * MILLI_PER_GPU), axis=1)
            need = taken[:, : request.num_gpus].sum(axis=1)
        else:
            need = np.maximum(0, request.cpu_milli - a.cpu_free)
        cand = np.flatnonzero(ok)
        order = np.lexsort((self.ctx.rank(a.size)[cand], need[cand]))
        return cand[order[:limit]]

    def _victims(self, node: int, request: PlacementRequest, keys: set | None) -> list[Resident]:
        """The residents (among `keys`; None: any) to evict from `node` so the request fits there,
        biggest first; [] if none do."""
        a = self.arrays
        here = [r for r in self.movable.on_node[node].values() if keys is None or r.key in keys]
        chosen: list[Resident] = []
        if request.is_fraction:
            best: tuple | None = None
            for g in np.flatnonzero(a.gpu_present[node]).tolist():
                on_gpu = [r for r in here if g in r.placement.gpus]
                found = _smallest_room(on_gpu, int(a.gpu_free_milli[node, g]), request.gpu_milli)
                if found is not None and (best is None or (*found[0], g) < best[0]):
                    best = ((*found[0], g), found[1])
            if best is None:
                return []
            chosen = list(best[1])
        elif request.num_gpus > 0:
            found = fewest_to_clear(a, node, [(r, r.placement.gpus, r.placement.gpu_milli) for r in here],
                                    request.num_gpus)
            if found is None:
                return []
            chosen = found
        # then CPU and memory: the biggest CPU users first
        cpu = a.cpu_free[node] + sum(r.request.cpu_milli for r in chosen)
        mem = a.mem_free[node] + sum(r.request.mem_mib for r in chosen)
        for r in sorted((r for r in here if r not in chosen), key=lambda r: -r.request.cpu_milli):
            if cpu >= request.cpu_milli and mem >= request.mem_mib:
                break
            chosen.append(r)
            cpu += r.request.cpu_milli
            mem += r.request.mem_mib
        if cpu < request.cpu_milli or mem < request.mem_mib:
            return []
        return sorted(chosen, key=lambda r: -r.request.total_gpu_milli)


def fewest_to_clear(arrays: ClusterArrays, node: int, holders: list[tuple[object, tuple[int, ...], int]],
                    count: int) -> list | None:
    """The holders to move off `node` so that `count` of its GPUs are whole and free, moving the least
    GPU milli (then the fewest holders, then the lowest GPUs); None when they cannot. `holders` are
    (holder, its GPUs, milli on each) for the movable ones; a GPU that holds anything else stays.
    A holder of several GPUs frees them all, so those GPUs are taken or left together."""
    gpus = np.flatnonzero(arrays.gpu_present[node]).tolist()
    on: dict[int, list[int]] = {g: [] for g in gpus}
    for i, (_, held, _) in enumerate(holders):
        for g in held:
            on[g].append(i)
    # GPUs that only leave together (linked by a holder of several), each set with what it takes
    group = {g: g for g in gpus}

    def top(g: int) -> int:
        while group[g] != g:
            g = group[g]
        return g

    for _, held, _ in holders:
        for g in held[1:]:
            group[top(g)] = top(held[0])
    units: dict[int, list[int]] = {}
    for g in gpus:
        units.setdefault(top(g), []).append(g)
    options = []
    for members in units.values():
        idx = sorted({i for g in members for i in on[g]})
        held = sum(holders[i][2] * len(holders[i][1]) for i in idx)
        if any(int(arrays.gpu_free_milli[node, g]) + sum(holders[i][2] for i in on[g]) != MILLI_PER_GPU
               for g in members):
            continue                       # something that cannot move holds part of it
        options.append((held, len(idx), min(members), len(members), idx))
    options.sort()
    # the cheapest choice of sets reaching `count` GPUs (a small knapsack: a node has few GPUs)
    best: list[tuple | None] = [None] * (count + 1)
    best[0] = (0, 0, ())
    for k, (held, moved, _, size, _) in enumerate(options):
        for have in range(count, -1, -1):
            if best[have] is None:
                continue
            reach = min(count, have + size)
            cand = (best[have][0] + held, best[have][1] + moved, best[have][2] + (k,))
            if reach != have and (best[reach] is None or cand[:2] < best[reach][:2]):
                best[reach] = cand
    if best[count] is None:
        return None
    return [holders[i][0] for k in best[count][2] for i in options[k][4]]


def _subsets(items: list[Resident], limit: int = 6) -> Iterator[tuple[Resident, ...]]:
    """Non-empty subsets of a GPU's residents (the first `limit` of them), smallest first."""
    items = items[:limit]
    for k in range(1, len(items) + 1):
        yield from itertools.combinations(items, k)


def _smallest_room(on_gpu: list[Resident], free: int, need: int) -> tuple[tuple[int, int], tuple] | None:
    """((milli freed, pods), pods) for the subset of a GPU's residents whose leaving frees `need`
    milli with the least to spare, then the fewest pods; None when even all of them are not enough."""
    best: tuple | None = None
    for subset in _subsets(on_gpu):
        freed = free + sum(r.placement.gpu_milli for r in subset)
        if freed >= need and (best is None or (freed, len(subset)) < best[0]):
            best = ((freed, len(subset)), subset)
    return best


def _needs_as_much(request: PlacementRequest, other: PlacementRequest) -> bool:
    """`request` asks the same GPUs as `other` and at least its CPU and memory."""
    return (request.gpu_milli, request.num_gpus) == (other.gpu_milli, other.num_gpus) and (
        request.gpu_mem_mib >= other.gpu_mem_mib and request.cpu_milli >= other.cpu_milli
        and request.mem_mib >= other.mem_mib)
