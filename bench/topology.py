"""Topology-aware placement benchmark: a gang-heavy load on a synthetic 512-node cluster, through the
scheduler core's forward simulation (`scheduling.core.replay`, the production cycle), placed once with
topology and once topology-blind.

    python -m bench.topology --json
    python -m bench.topology --derive-histogram ../shared/traces/philly/trace_job_Philly_MIX1.csv

Cluster: 512 nodes of 8 GPUs, 8 nodes a rack, 4 racks a block (64 racks, 16 blocks), one pool whose levels
are block > rack. Load: jobs arrive as a Poisson stream at `--load` (1.0) times what the cluster serves; half of
them (`--single-share`) are 1-GPU jobs, the others gangs whose GPU count follows the Philly trace's
histogram of GPUs per job (the jobs of 2 GPUs or more; `bench/philly_gpus_per_job.json`, derived from the
trace by `--derive-histogram`). A gang of up to 8 GPUs is that many 1-GPU replicas; a bigger one is 8-GPU
replicas (4-GPU when 8 does not divide it). Every gang of up to one rack's GPUs asks `preferred: rack`, a
bigger one `preferred: block`. Durations are exponential (mean `--mean-duration`).

Figures: `preferred_rack_share`, the share of the `preferred: rack` gangs whose first placement was within
one rack; `utilisation`, the mean share of GPUs held between `--warmup` and the end of arrivals; the same
for the same load with no job asking for topology (`utilisation_blind`, `preferred_rack_share_blind`).
Wall and CPU seconds are printed. Figures and the command: bench/TOPOLOGY.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from scheduling.core.builders import job
from scheduling.core.model import Gpu, Node, Pool, Queue, Snapshot, Topology
from scheduling.core.replay import ReplayJob, replay

HISTOGRAM = Path(__file__).with_name("philly_gpus_per_job.json")
BLOCK, RACK = "example.com/block", "topology.kubernetes.io/rack"
GPUS_PER_NODE, NODES_PER_RACK, RACKS_PER_BLOCK = 8, 8, 4


def derive_histogram(trace: Path) -> dict[int, int]:
    """Jobs per GPU count in the Philly trace (`num_gpu` column)."""
    with trace.open(newline="") as f:
        counts = Counter(int(row["num_gpu"]) for row in csv.DictReader(f))
    return dict(sorted(counts.items()))


def load_histogram(path: Path = HISTOGRAM) -> dict[int, int]:
    raw = json.loads(path.read_text())
    return {int(k): int(v) for k, v in raw["jobs_by_gpus"].items()}


def cluster(nodes: int = 512) -> Snapshot:
    pool = Pool("h100", topology=(BLOCK, RACK))
    per_block = NODES_PER_RACK * RACKS_PER_BLOCK
    made = tuple(
        Node(f"n{i:04d}", "h100", tuple(Gpu(g, f"n{i}g{g}") for g in range(GPUS_PER_NODE)),
             labels=((BLOCK, f"b{i // per_block}"), (RACK, f"r{(i // NODES_PER_RACK) % RACKS_PER_BLOCK}")))
        for i in range(nodes))
    return Snapshot(pools=(pool,), nodes=made, queues=(Queue("a", deserved_milli=10**9),), jobs=(),
                    backfill_patience_s=None)   # no backfill reservations: the figures measure placement alone


def gang_shape(gpus: int) -> tuple[int, int]:
    """(replicas, GPUs per replica) of a job of `gpus` GPUs."""
    if gpus <= GPUS_PER_NODE:
        return gpus, 1
    per = GPUS_PER_NODE if gpus % GPUS_PER_NODE == 0 else 4 if gpus % 4 == 0 else 1
    return gpus // per, per


def workload(histogram: dict[int, int], *, seed: int, hours: float, load: float, single_share: float,
             mean_duration: float, capacity_gpus: int) -> list[tuple[float, int, float]]:
    """(submit time, GPUs, duration) of each job, in submit order."""
    rng = np.random.default_rng(seed)
    sizes = np.array([g for g in histogram if g >= 2])
    weights = np.array([histogram[g] for g in sizes], dtype=float)
    weights /= weights.sum()
    mean_gpus = single_share + (1 - single_share) * float((sizes * weights).sum())
    rate = load * capacity_gpus / (mean_gpus * mean_duration)       # jobs per second
    jobs, t, end = [], 0.0, hours * 3600
    while True:
        t += float(rng.exponential(1 / rate))
        if t >= end:
            return jobs
        gpus = 1 if rng.random() < single_share else int(rng.choice(sizes, p=weights))
        jobs.append((t, gpus, float(rng.exponential(mean_duration))))


def replay_jobs(load: list[tuple[float, int, float]], topology: bool) -> tuple[list[ReplayJob], set[str]]:
    """The load as replay jobs, and the ids of those that ask `preferred: rack`."""
    rack_gpus = GPUS_PER_NODE * NODES_PER_RACK
    out, by_rack = [], set()
    for i, (submit, gpus, duration) in enumerate(load):
        replicas, per = gang_shape(gpus)
        asked = None
        if replicas > 1:
            asked = Topology("rack" if gpus <= rack_gpus else "block")
            if asked.level == "rack":
                by_rack.add(f"j{i}")
        core = job(f"j{i}", "a", gpus=per, replicas=replicas, created=submit,
                   topology=asked if topology else None)
        out.append(ReplayJob(core, submit, duration))
    return out, by_rack


def measure(snapshot: Snapshot, jobs: list[ReplayJob], asked_rack: set[str], *, warmup: float, end: float,
            cycle_s: float) -> dict:
    rack_of = {n.name: dict(n.labels)[BLOCK] + "/" + dict(n.labels)[RACK] for n in snapshot.nodes}
    capacity = sum(len(n.gpus) for n in snapshot.nodes) * 1000
    result = replay(snapshot, jobs, start=0.0, until=end, cycle_s=cycle_s, on_events=False,
                    record_allocation=True)
    held, since, area = 0, 0.0, 0.0
    first: dict[str, tuple[float, set[str]]] = {}   # preferred-rack gang -> its first placement's racks
    for when, job_id, node, milli in result.allocation:
        area += held * max(0.0, min(when, end) - max(since, warmup))
        since, held = when, held + milli
        if milli > 0 and job_id in asked_rack:
            start = first.setdefault(job_id, (when, set()))
            if start[0] == when:
                start[1].add(rack_of[node])
    area += held * max(0.0, end - max(since, warmup))
    one_rack = sum(1 for _, racks in first.values() if len(racks) == 1)
    return {
        "utilisation": round(100 * area / (capacity * (end - warmup)), 2),
        "preferred_rack_share": round(100 * one_rack / len(first), 2) if first else None,
        "preferred_rack_gangs": len(first),
        "cycles": result.cycles,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--derive-histogram", type=Path, metavar="TRACE",
                        help="write bench/philly_gpus_per_job.json from the Philly trace and stop")
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--hours", type=float, default=6.0, help="arrivals for this long (simulated)")
    parser.add_argument("--warmup", type=float, default=1.0, help="hours left out of the utilisation")
    parser.add_argument("--load", type=float, default=1.0, help="offered GPU load over capacity")
    parser.add_argument("--single-share", type=float, default=0.5, help="share of 1-GPU jobs")
    parser.add_argument("--mean-duration", type=float, default=3600.0, help="seconds")
    parser.add_argument("--cycle", type=float, default=30.0, help="seconds between cycles")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.derive_histogram:
        counts = derive_histogram(args.derive_histogram)
        HISTOGRAM.write_text(json.dumps({"source": args.derive_histogram.name, "jobs_by_gpus": counts}, indent=1)
                             + "\n")
        print(f"wrote {HISTOGRAM} ({sum(counts.values())} jobs)")
        return 0
    wall, cpu = time.perf_counter(), time.process_time()
    snapshot = cluster(args.nodes)
    capacity = sum(len(n.gpus) for n in snapshot.nodes)
    load = workload(load_histogram(), seed=args.seed, hours=args.hours, load=args.load,
                    single_share=args.single_share, mean_duration=args.mean_duration, capacity_gpus=capacity)
    end, warmup = args.hours * 3600, args.warmup * 3600
    figures: dict = {"nodes": args.nodes, "gpus": capacity, "jobs": len(load),
                     "gangs": sum(1 for _, g, _ in load if gang_shape(g)[0] > 1)}
    timings = {}
    for name, topology in (("aware", True), ("blind", False)):
        started, started_cpu = time.perf_counter(), time.process_time()
        jobs, asked = replay_jobs(load, topology)
        found = measure(snapshot, jobs, asked, warmup=warmup, end=end, cycle_s=args.cycle)
        timings[name] = (round(time.perf_counter() - started, 1), round(time.process_time() - started_cpu, 1))
        suffix = "" if topology else "_blind"
        figures.update({f"{k}{suffix}": v for k, v in found.items()})
    figures["wall_s"] = round(time.perf_counter() - wall, 1)
    figures["cpu_s"] = round(time.process_time() - cpu, 1)
    figures["seconds"] = {name: {"wall": w, "cpu": c} for name, (w, c) in timings.items()}
    if args.json:
        json.dump(figures, sys.stdout, indent=1)
        print()
    else:
        print(f"{figures['jobs']} jobs ({figures['gangs']} gangs) on {capacity} GPUs")
        print(f"preferred: rack gangs in one rack: {figures['preferred_rack_share']} % "
              f"(topology-blind {figures['preferred_rack_share_blind']} %)")
        print(f"utilisation: {figures['utilisation']} % (topology-blind {figures['utilisation_blind']} %)")
        print(f"wall {figures['wall_s']} s, CPU {figures['cpu_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
