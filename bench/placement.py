"""Placement-quality benchmark: replays the Alibaba GPU-2023 trace by the FGD paper's method.

    python -m bench.placement --nodes NODES.csv --pods PODS.csv --policy fgd --seeds 42-51 --json

Pods only arrive (until arrivals pass that bin: later pods cannot change it); each is placed once through `scheduling.core.placement.place()` (the code the
scheduling cycle uses) or fails.  The figure is the unallocated GPU % when arrivals reach 100 %
of the GPU capacity (the bin average: docs/developer/benchmarks.md), mean over the seeds.

Options: --online-shapes (learn typical shapes from the pods seen so far), --moves (consolidate
best-effort pods when a pod fits nowhere), --jobs N (seeds in parallel). Figures: bench/PLACEMENT.md.
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
from scheduling.core.fragmentation import ShapeTracker
from scheduling.core.placement import (
    POLICIES,
    ClusterArrays,
    NodeCapacity,
    PlacementContext,
    allocate,
    place,
)
from scheduling.core.room import MovableSet, Resident, apply_room_plan, plan_room

TARGET_BIN = 100  # arrival % at which the paper reads the allocation


# --------------------------------------------------------------------------- consolidation (--moves)
# When a pod fits nowhere, best-effort pods may be moved to make room. The moves are decided by
# the core's `plan_room`, the function the scheduling cycle's consolidate action calls.

MOVABLE_QOS = "BE"  # best-effort pods are the preemptible ones


@dataclass(frozen=True)
class ReplayResult:
    seed: int
    unallocated_at_100: float
    pods: int  # replayed: the replay stops once arrivals pass the bin the figure reads
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
    movable = MovableSet(arrays) if moves else None
    moved = 0
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
        elif movable is not None:
            plan = plan_room(arrays, pod.request, policy, movable, allowed, ctx)
            if plan is not None:
                apply_room_plan(arrays, pod.request, plan, movable)
                placement, moved = plan.placement, moved + len(plan.moves)
        if placement is not None and movable is not None and pod.qos == MOVABLE_QOS:
            movable.add(Resident(i, pod.request, placement, allowed))
        if placement is None:
            failed += 1
        else:
            total_allocated += pod.gpu_milli_total
        arrived[i] = total_arrived
        allocated[i] = total_allocated
        if 100.0 * total_arrived / capacity >= TARGET_BIN + 0.5:
            break  # past the bin the figure reads: later pods change nothing in it
    else:
        i = len(workload.pods) - 1
    arrived, allocated = arrived[: i + 1], allocated[: i + 1]
    value = 100.0 - allocation_at(arrived, allocated, capacity)
    return ReplayResult(
        seed, round(value, 4), i + 1, failed, time.perf_counter() - started, moved, i + 1 - failed,
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
