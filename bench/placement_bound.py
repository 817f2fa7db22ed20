"""Upper bound on what moving best-effort pods can win, for `bench.placement --moves`.

    make extras EXTRAS=bound   # scipy, the optional "bound" extra
    python -m bench.placement_bound --nodes NODES.csv --pods PODS.csv --seeds 42-51 --json

Replays a seed with the production policy until the first pod fails (from then on moves may
happen). From that state it solves, exactly (an integer program over packing patterns, HiGHS via
scipy), how many of the pods arriving from then until 100 % arrival could be placed if every
best-effort fractional pod could be re-packed anywhere for free, and reports the unallocated GPU %
that would leave at 100 % arrival. Pods that may not move (LS, Burstable, Guaranteed) keep their
GPUs; whole-GPU pods keep theirs (moving them frees nothing).

It is optimistic on purpose, so no consolidation can beat it: it ignores CPU, memory and GPU
models, lets a multi-GPU pod take GPUs on different nodes, knows every arrival in advance, and
counts no moves. The figure is read at the event where arrivals reach 100 %, not as the bin
average of bench.placement (they differ by a few hundredths).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

import numpy as np

from bench.placement import MOVABLE_QOS, parse_seeds
from bench.traces import build_workload, gpu_capacity, load_nodes, load_pods, typical_shapes
from scheduling.core.placement import ClusterArrays, PlacementContext, allocate, place
from scheduling.core.units import MILLI_PER_GPU


def state_at_first_failure(nodes, pods, seed: int, policy: str = "default") -> dict:
    """GPU rooms and movable fractions when the first pod fails, and what arrives until 100 %."""
    capacity = gpu_capacity(nodes)
    workload = build_workload(pods, len(nodes), capacity, seed)
    arrays = ClusterArrays.build(nodes)
    ctx = PlacementContext(node_order=workload.node_order, seed=seed, shapes=typical_shapes(pods))
    on_gpu: dict[tuple[int, int], list[tuple[int, bool]]] = {}
    arrived = allocated = 0
    failing = False
    window: Counter = Counter()  # GPU asks (milli per GPU) arriving from the first failure on
    for pod in workload.pods:
        arrived += pod.gpu_milli_total
        if not failing:
            allowed = arrays.model_mask(pod.models) if pod.models else None
            placement = place(arrays, pod.request, policy, allowed, ctx)
            if placement is None:
                failing = True
            else:
                allocate(arrays, pod.request, placement)
                allocated += pod.gpu_milli_total
                for g in placement.gpus:
                    on_gpu.setdefault((placement.node, g), []).append((placement.gpu_milli, pod.qos == MOVABLE_QOS))
        if failing and pod.request.num_gpus:
            window[pod.request.gpu_milli] += pod.request.num_gpus if pod.request.gpu_milli == MILLI_PER_GPU else 1
        if arrived >= capacity:
            break
    rooms: Counter = Counter()  # room for movable fractions -> GPUs
    movable: Counter = Counter()  # milli -> movable fractional pods
    for pods_here in on_gpu.values():
        if any(milli == MILLI_PER_GPU for milli, _ in pods_here):
            continue
        rooms[MILLI_PER_GPU - sum(m for m, moves in pods_here if not moves)] += 1
        movable.update(m for m, moves in pods_here if moves)
    rooms[MILLI_PER_GPU] += int(arrays.fully_free().sum())
    return {"capacity": capacity, "allocated": allocated, "rooms": rooms, "movable": movable, "window": window}


def best_gain(state: dict, time_limit: float = 600.0) -> int:
    """Most GPU milli of the window's pods placeable with every movable fraction re-packed."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    kinds = [(m, False) for m in state["movable"]] + [(m, True) for m in state["window"]]
    counts = [state["movable"][m] for m in state["movable"]] + [state["window"][m] for m in state["window"]]
    order = sorted(range(len(kinds)), key=lambda i: -kinds[i][0])

    def patterns(room: int) -> list[dict[int, int]]:
        out: list[dict[int, int]] = []

        def walk(j: int, left: int, chosen: dict[int, int]) -> None:
            if j == len(order):
                out.append(dict(chosen))
                return
            i = order[j]
            for k in range(min(counts[i], left // kinds[i][0]) + 1):
                if k:
                    chosen[i] = k
                walk(j + 1, left - k * kinds[i][0], chosen)
                chosen.pop(i, None)

        walk(0, room, {})
        return out

    columns, room_of = [], []
    for room in sorted(state["rooms"]):
        for p in patterns(room):
            columns.append(p)
            room_of.append(room)
    uses = np.zeros((len(kinds), len(columns)))
    for j, p in enumerate(columns):
        for i, k in p.items():
            uses[i, j] = k
    every_movable_placed = [c if not kinds[i][1] else 0 for i, c in enumerate(counts)]
    constraints = [LinearConstraint(uses, every_movable_placed, counts)]
    for room, gpus in state["rooms"].items():
        constraints.append(LinearConstraint(np.array([1.0 if r == room else 0.0 for r in room_of]), 0, gpus))
    value = np.array([sum(k * kinds[i][0] for i, k in p.items() if kinds[i][1]) for p in columns])
    result = milp(-value, constraints=constraints, integrality=np.ones(len(columns)), bounds=Bounds(0, np.inf),
                  options={"time_limit": time_limit})
    if result.x is None:
        raise RuntimeError(f"the solver found no solution: {result.message}")
    return int(round(-result.fun))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", required=True)
    parser.add_argument("--pods", required=True)
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("42-51"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    nodes, pods = load_nodes(args.nodes), load_pods(args.pods)
    per_seed = []
    for seed in args.seeds:
        state = state_at_first_failure(nodes, pods, seed)
        gain = best_gain(state)
        per_seed.append(round(100.0 - 100.0 * (state["allocated"] + gain) / state["capacity"], 3))
        if not args.json:
            print(f"seed {seed}: bound {per_seed[-1]:.3f} % unallocated at 100 % arrival", flush=True)
    out = {"pods_file": args.pods, "seeds": args.seeds, "bound_unallocated_at_100": round(float(np.mean(per_seed)), 3),
           "per_seed": per_seed}
    print(json.dumps(out) if args.json else f"mean bound: {out['bound_unallocated_at_100']:.3f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
