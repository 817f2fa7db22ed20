"""Placement-quality benchmark: replays the Alibaba GPU-2023 trace by the FGD paper's method.

    python -m bench.placement --nodes NODES.csv --pods PODS.csv --policy fgd --seeds 42-51 --json

Pods only arrive; each is placed once through `scheduling.core.placement.place()` (the code the
scheduling cycle uses) or fails.  The figure is the unallocated GPU % when arrivals reach 100 %
of the GPU capacity (the bin average of ../shared/traces/README.md), mean over the seeds.

Options: --online-shapes (learn typical shapes from the pods seen so far), --moves (consolidate
best-effort pods when a pod fits nowhere), --jobs N (seeds in parallel). Log: bench/PLACEMENT.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from bench.traces import TracePod, build_workload, gpu_capacity, load_nodes, load_pods, typical_shapes
from scheduling.core.fragmentation import MILLI, ShapeTracker
from scheduling.core.placement import (
    POLICIES,
    ClusterArrays,
    NodeCapacity,
    Placement,
    PlacementContext,
    allocate,
    feasible_nodes,
    place,
    release,
)

TARGET_BIN = 100  # arrival % at which the paper reads the allocation


# --------------------------------------------------------------------------- consolidation (--moves)
# When a pod fits nowhere, best-effort pods may be moved to make room, by the core's rule: only
# preemptible (qos BE) pods move, and a scenario is kept only when the pod fits and every moved
# pod fits again elsewhere; otherwise everything is put back. Moved pods are re-placed through
# place() with the same policy, never onto the node they leave (no ping-pong).

MOVABLE_QOS = "BE"


@dataclass
class Running:
    pod: TracePod
    placement: Placement
    allowed: np.ndarray | None


class Mover:
    """Tracks running pods per node and tries consolidation scenarios on the live arrays."""

    def __init__(self, arrays: ClusterArrays, policy: str, ctx: PlacementContext, candidates: int = 20) -> None:
        self.arrays = arrays
        self.policy = policy
        self.ctx = ctx
        self.candidates = candidates  # nodes tried per failing pod
        self.on_node: list[dict[int, Running]] = [{} for _ in range(arrays.size)]
        n, g = arrays.gpu_free_milli.shape
        self.fixed_milli = np.zeros((n, g), dtype=np.int64)  # milli held by pods that may not move
        self.moves = 0
        self._next = 0
        # movable pods as flat arrays (one row per pod and GPU), so candidates are found vectorised
        self._rows: dict[int, list[int]] = {}  # pod key -> its rows
        self._row_key: list[int] = []
        self._row_node: list[int] = []
        self._row_gpu: list[int] = []  # -1 for the CPU-only row
        self._row_milli: list[int] = []
        self._row_cpu: list[int] = []  # CPU and memory sit on the pod's first row only
        self._row_mem: list[int] = []
        self._row_alive: list[bool] = []
        self._row_kind: list[int] = []  # index into _kinds: (request, allowed GPU models)
        self._kinds: dict[tuple, int] = {}
        self._kind_allowed: list[np.ndarray | None] = []
        self._feasible: dict[tuple, np.ndarray] = {}

    def _key(self) -> int:
        self._next += 1
        return self._next

    def add(self, pod: TracePod, placement: Placement, allowed: np.ndarray | None, key: int | None = None) -> None:
        key = self._key() if key is None else key
        self.on_node[placement.node][key] = Running(pod, placement, allowed)
        if pod.qos != MOVABLE_QOS:
            self.fixed_milli[placement.node, list(placement.gpus)] += placement.gpu_milli
            return
        kind_key = (pod.request, pod.models)
        if kind_key not in self._kinds:
            self._kinds[kind_key] = len(self._kinds)
            self._kind_allowed.append(allowed)
        kind = self._kinds[kind_key]
        rows = []
        for i, gpu in enumerate(placement.gpus or (-1,)):
            rows.append(len(self._row_key))
            self._row_key.append(key)
            self._row_node.append(placement.node)
            self._row_gpu.append(gpu)
            self._row_milli.append(placement.gpu_milli if gpu >= 0 else 0)
            self._row_cpu.append(pod.request.cpu_milli if i == 0 else 0)
            self._row_mem.append(pod.request.mem_mib if i == 0 else 0)
            self._row_alive.append(True)
            self._row_kind.append(kind)
        self._rows[key] = rows

    def _remove(self, key: int, node: int) -> Running:
        running = self.on_node[node].pop(key)
        if running.pod.qos != MOVABLE_QOS:
            self.fixed_milli[node, list(running.placement.gpus)] -= running.placement.gpu_milli
        else:
            for row in self._rows.pop(key):
                self._row_alive[row] = False
        return running

    # ----------------------------------------------------------------- choosing victims

    def _movable_now(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per GPU: milli of movable pods that fit on another node now, and count of those that do
        not; per node: the CPU and memory of the ones that fit elsewhere."""
        a = self.arrays
        alive = np.array(self._row_alive, dtype=bool)
        node = np.array(self._row_node, dtype=np.int64)
        kind = np.array(self._row_kind, dtype=np.int64)
        ok = np.zeros(len(alive), dtype=bool)
        for (request, models), k in self._kinds.items():
            rows = alive & (kind == k)
            if rows.any():
                mask = self._feasible_mask(request, models, self._kind_allowed[k])
                ok[rows] = mask.sum() - mask[node[rows]] > 0  # fits on a node other than its own
        gpu = np.array(self._row_gpu, dtype=np.int64)
        milli = np.array(self._row_milli, dtype=np.int64)
        on_gpu = alive & (gpu >= 0)
        movable = np.zeros(a.gpu_free_milli.shape, dtype=np.int64)
        stuck = np.zeros(a.gpu_free_milli.shape, dtype=np.int64)
        np.add.at(movable, (node[on_gpu & ok], gpu[on_gpu & ok]), milli[on_gpu & ok])
        np.add.at(stuck, (node[on_gpu & ~ok], gpu[on_gpu & ~ok]), 1)
        free_ok = alive & ok
        cpu = np.bincount(node[free_ok], weights=np.array(self._row_cpu)[free_ok], minlength=a.size)
        mem = np.bincount(node[free_ok], weights=np.array(self._row_mem)[free_ok], minlength=a.size)
        return movable, stuck, cpu.astype(np.int64), mem.astype(np.int64)

    def _candidates(self, pod: TracePod, allowed: np.ndarray | None) -> np.ndarray:
        """Nodes where the pod would fit if the movable pods that fit elsewhere left; least to free first."""
        a, req = self.arrays, pod.request
        movable, stuck, cpu, mem = self._movable_now()
        ok = (a.cpu_free + cpu >= req.cpu_milli) & (a.mem_free + mem >= req.mem_mib)
        if allowed is not None:
            ok &= allowed
        if req.is_fraction:
            reachable = a.gpu_present & (a.gpu_free_milli + movable >= req.gpu_milli)
            ok &= reachable.any(axis=1)
            need = np.where(reachable, np.maximum(0, req.gpu_milli - a.gpu_free_milli), MILLI).min(axis=1)
        elif req.num_gpus > 0:
            clearable = a.gpu_present & (self.fixed_milli == 0) & (stuck == 0)
            ok &= clearable.sum(axis=1) >= req.num_gpus
            taken = np.sort(np.where(clearable, MILLI - a.gpu_free_milli, 2 * MILLI), axis=1)
            need = taken[:, : req.num_gpus].sum(axis=1)
        else:
            need = np.maximum(0, req.cpu_milli - a.cpu_free)
        cand = np.flatnonzero(ok)
        order = np.lexsort((self.ctx.rank(a.size)[cand], need[cand]))
        return cand[order[: self.candidates]]

    def _victims(self, node: int, pod: TracePod) -> list[int] | None:
        a, req = self.arrays, pod.request
        movable = {k: r for k, r in self.on_node[node].items() if r.pod.qos == MOVABLE_QOS}
        stuck = {k for k, r in movable.items() if not self._fits_elsewhere(r, node)}
        on_gpu: dict[int, list[int]] = {}
        for k, r in movable.items():
            for g in r.placement.gpus:
                on_gpu.setdefault(g, []).append(k)
        chosen: set[int] = set()
        if req.is_fraction:
            best: list[int] | None = None
            for g in np.flatnonzero(a.gpu_present[node] & (MILLI - self.fixed_milli[node] >= req.gpu_milli)):
                free, picked = int(a.gpu_free_milli[node, g]), []
                for k in sorted(set(on_gpu.get(int(g), [])) - stuck, key=lambda k: -movable[k].placement.gpu_milli):
                    if free >= req.gpu_milli:
                        break
                    picked.append(k)
                    free += movable[k].placement.gpu_milli
                if free >= req.gpu_milli and (best is None or len(picked) < len(best)):
                    best = picked
            if best is None:
                return None
            chosen.update(best)
        elif req.num_gpus > 0:
            gpus = [
                g for g in np.flatnonzero(a.gpu_present[node] & (self.fixed_milli[node] == 0)).tolist()
                if not stuck.intersection(on_gpu.get(g, []))
            ]
            if len(gpus) < req.num_gpus:
                return None
            for g in sorted(gpus, key=lambda g: len(on_gpu.get(g, [])))[: req.num_gpus]:
                chosen.update(on_gpu.get(g, []))
        movable = {k: r for k, r in movable.items() if k not in stuck}
        # then CPU and memory, biggest CPU users first
        cpu = a.cpu_free[node] + sum(movable[k].pod.request.cpu_milli for k in chosen)
        mem = a.mem_free[node] + sum(movable[k].pod.request.mem_mib for k in chosen)
        for k in sorted(set(movable) - chosen, key=lambda k: -movable[k].pod.request.cpu_milli):
            if cpu >= req.cpu_milli and mem >= req.mem_mib:
                break
            chosen.add(k)
            cpu += movable[k].pod.request.cpu_milli
            mem += movable[k].pod.request.mem_mib
        if cpu < req.cpu_milli or mem < req.mem_mib:
            return None
        return sorted(chosen, key=lambda k: -movable[k].pod.gpu_milli_total)

    def _feasible_mask(self, request, models: tuple[str, ...], allowed: np.ndarray | None) -> np.ndarray:
        key = (request, models)
        mask = self._feasible.get(key)
        if mask is None:
            mask = self._feasible[key] = feasible_nodes(self.arrays, request, allowed)
        return mask

    def _fits_elsewhere(self, running: Running, node: int) -> bool:
        """Could this pod be placed on some other node right now? (moving it must not fail)"""
        mask = self._feasible_mask(running.pod.request, running.pod.models, running.allowed)
        return bool(mask.sum() - mask[node] > 0)

    # ----------------------------------------------------------------- the transaction

    def make_room(self, pod: TracePod, allowed: np.ndarray | None) -> Placement | None:
        """Try nodes in turn; on success the pod is placed (and recorded) and pods were moved."""
        self._feasible = {}  # per attempt: the arrays change after it
        for node in self._candidates(pod, allowed):
            victims = self._victims(int(node), pod)
            if victims:
                placement = self._try(int(node), victims, pod, allowed)
                if placement is not None:
                    return placement
        return None

    def _try(self, node: int, victims: list[int], pod: TracePod, allowed: np.ndarray | None) -> Placement | None:
        a = self.arrays
        evicted = [(k, self._remove(k, node)) for k in victims]
        for _, r in evicted:
            release(a, r.pod.request, r.placement)
        only_here = np.zeros(a.size, dtype=bool)
        only_here[node] = True
        placement = place(a, pod.request, self.policy, only_here, self.ctx)
        moved: list[tuple[int, Running, Placement]] = []
        if placement is not None:
            allocate(a, pod.request, placement)
            for k, r in evicted:
                elsewhere = ~only_here if r.allowed is None else r.allowed & ~only_here
                new = place(a, r.pod.request, self.policy, elsewhere, self.ctx)
                if new is None:
                    break
                allocate(a, r.pod.request, new)
                moved.append((k, r, new))
        if placement is None or len(moved) < len(evicted):  # roll back: everything as it was
            for _, r, new in moved:
                release(a, r.pod.request, new)
            if placement is not None:
                release(a, pod.request, placement)
            for k, r in evicted:
                allocate(a, r.pod.request, r.placement)
                self.add(r.pod, r.placement, r.allowed, k)
            return None
        for k, r, new in moved:
            self.add(r.pod, new, r.allowed, k)
        self.moves += len(moved)
        self.add(pod, placement, allowed)
        return placement



@dataclass(frozen=True)
class ReplayResult:
    seed: int
    unallocated_at_100: float
    pods: int
    failed: int
    seconds: float
    moves: int = 0
    placed: int = 0


def _round_half_up(x: float, digits: int = 0) -> float:
    scale = 10.0**digits
    return math.floor(x * scale + 0.5) / scale


def allocation_at(arrived: np.ndarray, allocated: np.ndarray, capacity: int, target: int = TARGET_BIN) -> float:
    """Mean allocated % (2 decimals per event) over the pod events whose arrived % rounds to `target`.

    On clusters too small for every 1 % bin to get an event, the nearest bin below is used.
    """
    arrived_pct = np.floor(arrived * 100.0 / capacity + 0.5)
    allocated_pct = np.floor(allocated * 100.0 / capacity * 100 + 0.5) / 100
    reached = arrived_pct[arrived_pct <= target]
    if len(reached) == 0 or arrived_pct.max() < target:
        raise ValueError(f"arrivals never reach {target} % of capacity; is the workload inflated?")
    return float(allocated_pct[arrived_pct == reached.max()].mean())


def replay(
    nodes: list[NodeCapacity],
    pods: list[TracePod],
    policy: str,
    seed: int,
    online_shapes: bool = False,
    moves: bool = False,
) -> ReplayResult:
    """One seed of the paper's experiment."""
    started = time.perf_counter()
    capacity = gpu_capacity(nodes)
    if capacity == 0:
        raise ValueError("the node list has no GPUs")
    workload = build_workload(pods, len(nodes), capacity, seed)
    arrays = ClusterArrays.build(nodes)
    ctx = PlacementContext(node_order=workload.node_order, seed=seed)
    if online_shapes:
        ctx.tracker = ShapeTracker()
    else:
        ctx.shapes = typical_shapes(pods)
    masks: dict[tuple[str, ...], np.ndarray | None] = {(): None}
    mover = Mover(arrays, policy, ctx) if moves else None
    arrived = np.zeros(len(workload.pods), dtype=np.int64)
    allocated = np.zeros(len(workload.pods), dtype=np.int64)
    total_arrived = total_allocated = failed = 0
    for i, pod in enumerate(workload.pods):
        if pod.models not in masks:
            masks[pod.models] = arrays.model_mask(pod.models)
        if ctx.tracker is not None:
            ctx.tracker.observe(pod.request.shape(pod.models))
        total_arrived += pod.gpu_milli_total
        allowed = masks[pod.models]
        placement = place(arrays, pod.request, policy, allowed, ctx)
        if placement is not None:
            allocate(arrays, pod.request, placement)
            if mover is not None:
                mover.add(pod, placement, allowed)
        elif mover is not None:
            placement = mover.make_room(pod, allowed)  # allocated and recorded when it succeeds
        if placement is None:
            failed += 1
        else:
            total_allocated += pod.gpu_milli_total
        arrived[i] = total_arrived
        allocated[i] = total_allocated
    value = 100.0 - allocation_at(arrived, allocated, capacity)
    return ReplayResult(
        seed, round(value, 4), len(workload.pods), failed, time.perf_counter() - started,
        mover.moves if mover else 0, len(workload.pods) - failed,
    )


def parse_seeds(text: str) -> list[int]:
    """'42-51' or '42,43,50' (or a mix)."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                if high < low:
                    raise ValueError
                seeds.extend(range(low, high + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must look like 42-51 or 42,43; got {text!r}") from None
    return seeds


def _run_one(args: tuple[str, str, str, int, bool, bool]) -> ReplayResult:
    nodes_path, pods_path, policy, seed, online, moves = args
    return replay(load_nodes(nodes_path), load_pods(pods_path), policy, seed, online, moves)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", required=True, help="openb_node_list_*.csv")
    parser.add_argument("--pods", required=True, help="openb_pod_list_*.csv")
    parser.add_argument("--policy", required=True, choices=POLICIES)
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-51"))
    parser.add_argument("--online-shapes", action="store_true",
                        help="learn typical shapes from the pods seen so far instead of the whole list")
    parser.add_argument("--moves", action="store_true",
                        help="when a pod fits nowhere, move best-effort (qos BE) pods to make room")
    parser.add_argument("--jobs", type=int, default=1, help="seeds replayed in parallel processes")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    tasks = [(args.nodes, args.pods, args.policy, seed, args.online_shapes, args.moves) for seed in args.seeds]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(_run_one, tasks))
    else:
        nodes, pods = load_nodes(args.nodes), load_pods(args.pods)
        results = [replay(nodes, pods, args.policy, seed, args.online_shapes, args.moves) for seed in args.seeds]
    per_seed = [r.unallocated_at_100 for r in results]
    out = {
        "policy": args.policy,
        "pods_file": args.pods,
        "nodes_file": args.nodes,
        "shapes": "online" if args.online_shapes else "workload",
        "seeds": args.seeds,
        "unallocated_at_100": round(float(np.mean(per_seed)), 2),
        "per_seed": per_seed,
        "failed_pods": [r.failed for r in results],
        "pods": [r.pods for r in results],
        "seconds": round(time.perf_counter() - started, 2),
        "seconds_per_seed": [round(r.seconds, 2) for r in results],
    }
    if args.moves:
        count = sum(r.moves for r in results)
        out["moves"] = {"count": count, "percent": round(100.0 * count / max(1, sum(r.placed for r in results)), 2),
                        "per_seed": [r.moves for r in results]}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{args.policy}: unallocated at 100 % arrival = {out['unallocated_at_100']:.2f} % "
              f"(seeds {args.seeds[0]}..{args.seeds[-1]}, {out['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
