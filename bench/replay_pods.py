"""What GPU fractions save: the Alibaba GPU-2023 pods replayed in time, exclusive against shared.

    python -m bench.replay --trace-format alibaba \\
        --trace openb_pod_list_gpushare40.csv [--find-min-gpus --p95-wait 60] --json

Each pod that ran (it has a `scheduled_time`) is a job submitted at its `creation_time` that holds its
GPUs until its `deletion_time`; CPU-only pods are left out. Two replays through the production core
(`scheduling/core/replay.py`), on the trace's own GPU nodes (`openb_node_list_gpu_node.csv` beside the pod
list, or `--nodes-file`; GPU models are not told apart, CPU and memory are): `exclusive`, where a pod asking
for a fraction of a GPU gets a whole one, and `shared`, where it gets its `gpu_milli` (the core's fraction
sharing). Pods are not preemptible, so each runs once, where it was first placed.

Figures per replay: waits, GPU-hours held (whole GPUs, or the fractions), GPU-hours of GPUs in use (a GPU with
any pod on it, what a cluster must own), and the most GPUs in use at once. `--find-min-gpus` adds, for both,
the fewest nodes of `--gpus-per-node` GPUs at which the p95 wait is within `--p95-wait` (CPU and memory
left aside there).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from bench.traces import _int, _read
from scheduling.core import Pool, Queue, Snapshot
from scheduling.core.builders import nodes as make_nodes
from scheduling.core.model import Node
from scheduling.core.replay import Replay, ReplayJob
from scheduling.core.units import MILLI_PER_GPU
from scheduling.traces import late_allowed, percentile

POOL = "gpu"
QUEUE = "pods"
MODES = ("exclusive", "shared")


@dataclass(frozen=True)
class Pod:
    name: str
    gpus: int
    milli: int               # per GPU; < 1000 is a fraction of one GPU
    cpu_milli: int
    mem_mib: int
    created: float
    deleted: float


def load_pods(path: Path) -> tuple[list[Pod], int]:
    """Pods that ran and ask for GPUs, by creation time; and how many were left out."""
    rows = _read(path, ("name", "cpu_milli", "memory_mib", "num_gpu", "creation_time", "deletion_time",
                        "scheduled_time"))
    pods, left_out = [], 0
    for row in rows:
        gpus = _int(row, "num_gpu", path)
        if gpus <= 0 or not (row.get("scheduled_time") or "").strip():
            left_out += 1
            continue
        milli = min(_int(row, "gpu_milli", path, default=MILLI_PER_GPU), MILLI_PER_GPU)
        created, deleted = _int(row, "creation_time", path), _int(row, "deletion_time", path)
        if milli <= 0 or deleted < created or (gpus > 1 and milli < MILLI_PER_GPU):
            left_out += 1
            continue
        pods.append(Pod(row["name"], gpus, milli, _int(row, "cpu_milli", path), _int(row, "memory_mib", path),
                        float(created), float(deleted)))
    pods.sort(key=lambda p: (p.created, p.name))
    return pods, left_out


def trace_nodes(path: Path) -> list[Node]:
    rows = _read(path, ("sn", "cpu_milli", "memory_mib", "gpu"))
    return [Node.with_gpus(row["sn"], POOL, _int(row, "gpu", path), cpu_milli=_int(row, "cpu_milli", path),
                           memory_mib=_int(row, "memory_mib", path)) for row in rows if _int(row, "gpu", path) > 0]


def replay_jobs(pods: list[Pod], mode: str, *, host: bool) -> list[ReplayJob]:
    out = []
    for p in pods:
        fraction = mode == "shared" and p.milli < MILLI_PER_GPU
        extra = {"cpu": p.cpu_milli, "mem": p.mem_mib} if host else {}
        if fraction:
            milli = min(990, max(10, math.ceil(p.milli / 10) * 10))
            out.append(ReplayJob.simple(p.name, QUEUE, 1, p.created, p.deleted - p.created, mode="fraction",
                                        milli=milli, preemptible=False, **extra))
        else:
            out.append(ReplayJob.simple(p.name, QUEUE, p.gpus, p.created, p.deleted - p.created, preemptible=False,
                                        **extra))
    return out


def replay_pods(pods: list[Pod], nodes: tuple[Node, ...], mode: str, *, host: bool, cycle_s: float,
                target_s: float | None = None) -> dict:
    """One replay; with `target_s`, given up once the p95 wait is out of reach (the answer then says so)."""
    wall, cpu = time.perf_counter(), time.process_time()
    capacity = sum(len(n.gpus) for n in nodes)
    snap = Snapshot(pools=(Pool(POOL),), nodes=nodes, queues=(Queue(QUEUE, deserved_milli=capacity * MILLI_PER_GPU),),
                    jobs=())
    placed: dict[str, tuple[str, tuple[int, ...], int]] = {}

    def seen(at, snapshot, decisions) -> None:
        for b in decisions.binds:
            placed[b.job_id] = (b.node, b.gpus, b.slice.gpu_milli)

    jobs = replay_jobs(pods, mode, host=host)
    engine = Replay(snap, jobs, start=pods[0].created if pods else 0.0, cycle_s=cycle_s, on_cycle=seen)
    allowed = late_allowed(len(pods))
    gave_up = False
    if target_s is None:
        engine.run()
    else:
        at = engine.start
        while not engine.finished():
            at += 6 * 3600
            engine.run(until=at)
            late = sum(1 for s in engine.jobs.values() if (s.result.start if s.result.start is not None else at)
                       - s.result.submit_time > target_s)
            if late > allowed:
                gave_up = True
                break
    results = {jid: s.result for jid, s in engine.jobs.items()}
    waits = [math.inf if r.wait_s is None else r.wait_s for r in results.values()]
    # GPUs in use: a GPU counts from the first pod placed on it to the moment its last pod leaves
    per_gpu: dict[tuple[str, int], list[tuple[float, int]]] = defaultdict(list)
    held = 0.0
    for p in pods:
        r = results[p.name]
        if r.start is None or r.end is None or p.name not in placed:
            continue
        node, gpus, milli = placed[p.name]
        held += (r.end - r.start) * milli * len(gpus) / MILLI_PER_GPU
        for g in gpus:
            per_gpu[(node, g)] += [(r.start, 1), (r.end, -1)]
    events = []
    for changes in per_gpu.values():
        changes.sort(key=lambda e: (e[0], e[1]))
        pods_on = 0
        for t, d in changes:
            before, pods_on = pods_on, pods_on + d
            if before == 0 and pods_on > 0:
                events.append((t, 1))
            elif before > 0 and pods_on == 0:
                events.append((t, -1))
    events.sort(key=lambda e: (e[0], e[1]))
    in_use = peak = 0
    busy_s, last = 0.0, None
    for t, d in events:
        if last is not None:
            busy_s += in_use * (t - last)
        in_use += d
        peak = max(peak, in_use)
        last = t
    return {"mode": mode, "gpus": capacity, "pods": len(pods), "gave_up": gave_up,
            "never_started": sum(r.start is None for r in results.values()),
            "wait_p50_s": _finite(percentile(waits, 50)), "wait_p95_s": _finite(percentile(waits, 95)),
            "gpu_hours_held": round(held / 3600, 3), "gpu_hours_in_use": round(busy_s / 3600, 3),
            "peak_gpus_in_use": peak, "cycles": engine.cycles, "wall_s": round(time.perf_counter() - wall, 2),
            "cpu_s": round(time.process_time() - cpu, 2)}


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 1)


def min_nodes(pods: list[Pod], mode: str, per_node: int, cycle_s: float, target_s: float) -> tuple[int, dict]:
    """The fewest nodes of `per_node` GPUs at which the p95 wait is within `target_s`."""
    biggest = max(math.ceil(p.gpus / per_node) for p in pods)
    results: dict[int, dict] = {}

    def ok(n: int) -> bool:
        if n not in results:
            results[n] = replay_pods(pods, make_nodes(POOL, n, per_node), mode, host=False, cycle_s=cycle_s,
                                     target_s=target_s)
        r = results[n]
        return not r["gave_up"] and r["never_started"] == 0 and (r["wait_p95_s"] or 0) <= target_s

    lo, hi = biggest, biggest
    while not ok(hi):
        lo, hi = hi + 1, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi, results[hi]


def main(args) -> int:
    log_to = sys.stderr if args.json else sys.stdout
    started_wall, started_cpu = time.perf_counter(), time.process_time()
    path = Path(args.trace)
    nodes_path = Path(args.nodes_file) if args.nodes_file else path.with_name("openb_node_list_gpu_node.csv")
    pods, left_out = load_pods(path)
    if not pods:
        print(f"{path}: no GPU pods that ran", file=sys.stderr)
        return 2
    nodes = tuple(trace_nodes(nodes_path))
    print(f"{path}: {len(pods)} GPU pods that ran ({left_out} left out: CPU-only or never scheduled), "
          f"{sum(p.milli < MILLI_PER_GPU for p in pods)} asking for a fraction; {len(nodes)} GPU nodes, "
          f"{sum(len(n.gpus) for n in nodes)} GPUs", file=log_to)
    summary: dict = {"trace": str(path), "pods": len(pods), "left_out": left_out, "modes": {}}
    for mode in MODES:
        result = replay_pods(pods, nodes, mode, host=True, cycle_s=args.cycle_s)
        if args.find_min_gpus:
            n, at_min = min_nodes(pods, mode, args.gpus_per_node, args.cycle_s, args.p95_wait)
            result["min_gpus"] = n * args.gpus_per_node
            result["at_min_gpus"] = at_min
        summary["modes"][mode] = result
        print(f"{mode:>9}: wait p50 {result['wait_p50_s']} s, p95 {result['wait_p95_s']} s · GPU-hours held "
              f"{result['gpu_hours_held']:,} · GPU-hours of GPUs in use {result['gpu_hours_in_use']:,} · "
              f"peak GPUs in use {result['peak_gpus_in_use']}"
              + (f" · min GPUs at p95 <= {args.p95_wait:g} s: {result['min_gpus']}" if args.find_min_gpus else "")
              + f" · {result['cycles']} cycles, {result['wall_s']} s wall, {result['cpu_s']} s CPU", file=log_to)
    ex, sh = summary["modes"]["exclusive"], summary["modes"]["shared"]
    summary["shared_over_exclusive"] = {
        key: round(sh[key] / ex[key], 3) if ex[key] else None
        for key in ("gpu_hours_held", "gpu_hours_in_use", "peak_gpus_in_use", *(("min_gpus",) if args.find_min_gpus
                                                                                  else ()))}
    summary["wall_s"] = round(time.perf_counter() - started_wall, 1)
    summary["cpu_s"] = round(time.process_time() - started_cpu, 1)
    print("shared / exclusive: " + ", ".join(f"{k} {v}" for k, v in summary["shared_over_exclusive"].items())
          + f" · took {summary['wall_s']} s wall, {summary['cpu_s']} s CPU", file=log_to)
    if args.json:
        print(json.dumps(summary))
    return 0
