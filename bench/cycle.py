"""Scheduling-cycle benchmark on a synthetic cluster built in memory.

    python -m bench.cycle --nodes 1000 --gpus-per-node 8 --pending 10000 --running 5000 --queues 50 --json

One timed cycle = building the Snapshot dataclasses from plain rows (what the database layer
hands over) + `run_cycle`. The cluster: two pools (whole/fraction GPUs; default and binpack
placement), a two-level queue tree with `--queues` leaf queues, `--running` replicas already
placed (by one untimed cycle) and `--pending` pending pods on top: single GPUs, multi-GPU pods,
fractions, gangs, elastic jobs, ReduceCost and non-preemptible work, mixed priorities.

Prints median and p95 wall seconds of the first cycle after the pending pods arrive (the busy one,
snapshot build included), its median CPU seconds (the fairer figure on a shared machine), what it
decided, the next cycle on the applied result, how many cycles the cluster takes to settle (no
more decisions; evicting scenarios are capped per cycle) and the cycle time once settled (run_cycle
only).

`--db [URL]` (default postgres://postgres@127.0.0.1:5432/gpuplatform_bench_cycle, dropped and
created) adds a "db" object: the same cluster bulk-loaded into PostgreSQL and the cycle timed there,
both the decision part (build_snapshot + run_cycle) and the full run_scheduling_cycle with the
simulated backend; see bench/cycle_db.py.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from bench.cycle_db import DEFAULT_DB_URL, database_name, run_db_benchmark
from scheduling.core import Gpu, Job, Node, Pool, Queue, Request, Role, RunningReplica, Slice, Snapshot
from scheduling.core.cycle import apply_decisions, run_cycle
from scheduling.core.session import Session


def make_rows(nodes: int, gpus_per_node: int, pending: int, running: int, queues: int, seed: int) -> dict:
    """Plain rows (dicts and tuples) for a cluster; `running` pods are not yet placed."""
    rng = random.Random(seed)
    pools = [dict(name="h100", gpu_model="H100-80GB", gpu_memory_mib=81920, placement="default"),
             dict(name="a100", gpu_model="A100-80GB", gpu_memory_mib=81920, placement="binpack")]
    node_rows = [dict(name=f"node-{i:05d}", pool="h100" if i % 4 else "a100", gpus=gpus_per_node,
                      cpu_milli=128000, memory_mib=1024 * 1024) for i in range(nodes)]
    capacity = nodes * gpus_per_node * 1000
    orgs = max(1, queues // 10)
    queue_rows = [dict(name=f"org-{o}", parent=None, deserved_milli=int(capacity * 0.7 / orgs),
                       over_quota_weight=1.0, limit_milli=None) for o in range(orgs)]
    leaf_names = [f"team-{i:03d}" for i in range(queues)]
    for i, name in enumerate(leaf_names):
        queue_rows.append(dict(name=name, parent=f"org-{i % orgs}", deserved_milli=int(capacity * 0.7 / queues),
                               over_quota_weight=float(rng.choice([1, 1, 2])),
                               limit_milli=None if i % 5 else int(capacity * 0.1)))

    def pods(count: int, prefix: str, start: float) -> list[dict]:
        out, made, i = [], 0, 0
        while made < count:
            kind = rng.random()
            row = dict(id=f"{prefix}-{i:06d}", queue=rng.choice(leaf_names), priority=rng.choice([0, 0, 0, 50, 100]),
                       preemptible=rng.random() < 0.9, reduce_cost=rng.random() < 0.05, created=start + i,
                       mode="exclusive", num_gpus=1, gpu_milli=1000, gpu_mem_mib=0, replicas=1, min_replicas=1,
                       cpu_milli=4000, mem_mib=32768, pool="")
            if kind < 0.55:
                pass                                         # one whole GPU
            elif kind < 0.70:
                row.update(num_gpus=rng.choice([2, 4, 8]))
            elif kind < 0.85:
                row.update(mode="fraction", gpu_milli=rng.choice([100, 250, 500]), gpu_mem_mib=rng.choice([8192, 20480]))
            elif kind < 0.95:
                row.update(replicas=rng.choice([2, 3, 4]))   # gang
            else:
                row.update(replicas=4, min_replicas=1)        # elastic
            row["replicas"] = min(row["replicas"], count - made)
            row["min_replicas"] = min(row["min_replicas"], row["replicas"])
            if not row["preemptible"]:
                row["reduce_cost"] = False
            made += row["replicas"]
            out.append(row)
            i += 1
        return out

    return dict(pools=pools, nodes=node_rows, queues=queue_rows, running_jobs=pods(running, "run", 0.0),
                pending_jobs=pods(pending, "pend", 1e6), placed=[])


def build_snapshot(rows: dict, with_pending: bool) -> Snapshot:
    """Rows -> Snapshot dataclasses (the part of a real cycle that reads the database)."""
    pools = tuple(Pool(**p) for p in rows["pools"])
    nodes = tuple(Node(r["name"], r["pool"], tuple(Gpu(g, f"{r['name']}-{g}") for g in range(r["gpus"])),
                       r["cpu_milli"], r["memory_mib"]) for r in rows["nodes"])
    queues = tuple(Queue(**q) for q in rows["queues"])
    job_rows = rows["running_jobs"] + (rows["pending_jobs"] if with_pending else [])
    jobs = tuple(
        Job(r["id"], r["queue"], (Role("worker", Request(
            mode=r["mode"], num_gpus=r["num_gpus"], gpu_milli=r["gpu_milli"], gpu_mem_mib=r["gpu_mem_mib"],
            cpu_milli=r["cpu_milli"], mem_mib=r["mem_mib"], pool=r["pool"]), r["min_replicas"], r["replicas"]),),
            priority=r["priority"], preemptible=r["preemptible"], reduce_cost=r["reduce_cost"], created=r["created"])
        for r in job_rows
    )
    running = tuple(RunningReplica(p[0], p[1], p[2], p[3], p[4], Slice(*p[5])) for p in rows["placed"])
    return Snapshot(pools, nodes, queues, jobs, running, now=2e6, off_peak=False, next_off_peak="00:00")


def place_running(rows: dict) -> None:
    """One untimed cycle places the running pods; their bindings become rows."""
    snap = build_snapshot(rows, with_pending=False)
    snap = apply_decisions(snap, run_cycle(snap))
    rows["placed"] = [(r.job_id, r.role, r.index, r.node, r.gpus,
                       (r.slice.kind, r.slice.gpu_milli, r.slice.gpu_mem_mib)) for r in snap.running]
    placed_jobs = {r.job_id for r in snap.running}
    rows["running_jobs"] = [j for j in rows["running_jobs"] if j["id"] in placed_jobs]


def timed(rows: dict, repeat: int) -> tuple[list[float], list[float], list[float], object]:
    """Wall and CPU seconds of full cycles (snapshot build included), and the build alone."""
    totals, cpu, builds, decisions = [], [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        snap = build_snapshot(rows, with_pending=True)
        t1 = time.perf_counter()
        decisions = run_cycle(snap)
        totals.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        builds.append(t1 - t0)
    return totals, cpu, builds, decisions


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--pending", type=int, default=10000, help="pending pods (replicas)")
    parser.add_argument("--running", type=int, default=5000, help="running pods (replicas)")
    parser.add_argument("--queues", type=int, default=50, help="leaf queues")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--db", nargs="?", const=DEFAULT_DB_URL, metavar="URL",
                        help="also time the cycle on a throwaway PostgreSQL database "
                             f"(dropped and created; default {DEFAULT_DB_URL})")
    parser.add_argument("--db-repeat", type=int, default=3, help="timed cycles on the database")
    args = parser.parse_args(argv)
    if min(args.nodes, args.gpus_per_node, args.queues, args.repeat, args.db_repeat) < 1 or min(args.pending, args.running) < 0:
        parser.error("--nodes, --gpus-per-node, --queues, --repeat and --db-repeat must be >= 1; pod counts >= 0")

    if args.db:
        database_name(args.db)  # a bad URL fails before the in-memory run
    rows = make_rows(args.nodes, args.gpus_per_node, args.pending, args.running, args.queues, args.seed)
    place_running(rows)
    busy, busy_cpu, builds, decisions = timed(rows, args.repeat)
    session_s = []
    for _ in range(3):
        snap = build_snapshot(rows, with_pending=True)
        t0 = time.perf_counter()
        Session.build(snap)
        session_s.append(time.perf_counter() - t0)
    # the cycles after it, on the applied result, until nothing changes any more (settled)
    after = apply_decisions(build_snapshot(rows, with_pending=True), decisions)
    next_cycle, next_cpu = [], []
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        next_decisions = run_cycle(after)
        next_cycle.append(time.perf_counter() - t0)
        next_cpu.append(time.process_time() - c0)
    settled, cycles_to_settle = after, 1
    while next_decisions.changes and cycles_to_settle < 60:
        settled = apply_decisions(settled, next_decisions)
        next_decisions = run_cycle(settled)
        cycles_to_settle += 1
    quiet = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        run_cycle(settled)
        quiet.append(time.perf_counter() - t0)

    result = {
        "nodes": args.nodes, "gpus": args.nodes * args.gpus_per_node, "queues": args.queues,
        "running_pods": len(rows["placed"]), "pending_pods": args.pending,
        "median_s": round(statistics.median(busy), 4), "p95_s": round(p95(busy), 4),
        "cpu_median_s": round(statistics.median(busy_cpu), 4),
        "snapshot_build_median_s": round(statistics.median(builds), 4),
        "session_build_median_s": round(statistics.median(session_s), 4),
        "next_cycle_median_s": round(statistics.median(next_cycle), 4),
        "next_cycle_cpu_median_s": round(statistics.median(next_cpu), 4),
        "cycles_to_settle": cycles_to_settle if not next_decisions.changes else None,
        "settled_cycle_median_s": round(statistics.median(quiet), 4),
        "binds": len(decisions.binds), "evicts": len(decisions.evicts), "pending_jobs": len(decisions.pending),
        "repeat": args.repeat,
    }
    if args.db:
        result["db"] = run_db_benchmark(rows, args.db, args.db_repeat)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>26}: {value}")
    return result


if __name__ == "__main__":
    main()
