"""Scheduling-cycle benchmark on a synthetic cluster built in memory.

    python -m bench.cycle --nodes 4000 --gpus-per-node 8 --pending 40000 --running 100000 --queues 200 --json

The cluster: two pools (whole/fraction GPUs; default and binpack placement), a two-level queue tree
with `--queues` leaf queues, as many of `--running` pods as fit already placed (by one untimed cycle;
the others are dropped) and `--pending` pending pods on top: single GPUs, multi-GPU pods, fractions,
gangs, elastic jobs, ReduceCost and non-preemptible work, mixed priorities.

Two figures, wall and CPU seconds side by side (the machine may be shared; CPU seconds are the fairer
figure there):

- the first cycle: a cold process, the Snapshot dataclasses built whole from plain rows (what the
  database layer hands over) + `run_cycle` (median of `--repeat`);
- the steady cycle: the service keeps its snapshot (`core.live.LiveSnapshot`) and cycle memo
  (`core.cycle.CycleMemo`) between cycles. Before each cycle the previous decisions are carried out and
  `--churn` running jobs end and as many new ones arrive (a few hundred changes in all); the cycle
  applies those changes to the kept snapshot and runs `run_cycle`. `--warmup` cycles, then the median
  and p95 of `--cycles`. `--full` rebuilds the snapshot from rows each steady cycle and visits every
  job (`exact`): the reference, and what a cycle cost before.

`--db [URL]` (default postgres://postgres@127.0.0.1:5432/gpuplatform_bench_cycle, dropped and
created) adds a "db" object: the same cluster bulk-loaded into PostgreSQL and the cycle timed there,
snapshot from the database, decisions and their writes included; see bench/cycle_db.py.
`BENCH_CYCLE_PROFILE=FILE` writes a cProfile of the timed steady cycles there.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import random
import re
import statistics
import time

from bench.cycle_db import DEFAULT_DB_URL, database_name, run_db_benchmark
from scheduling.core import Gpu, Job, Node, Pool, Queue, Request, Role, RunningReplica, Slice, Snapshot
from scheduling.core.arrays import next_indices, parse_indices
from scheduling.core.cycle import apply_decisions, run_cycle

try:  # the steady cycle's service side (absent from trees before it existed: --full still runs there)
    from scheduling.core.cycle import CycleMemo
    from scheduling.core.live import LiveSnapshot
except ImportError:  # pragma: no cover
    CycleMemo = LiveSnapshot = None


def job_rows(rng: random.Random, count: int, prefix: str, start: float, leaf_names: list[str]) -> list[dict]:
    """Job rows for `count` pods (replicas), submitted one second apart from `start`."""
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


class Arrays:
    """`--arrays NxM[:P]`: N arrays of M indices, at most P of each unfinished; the indices made so far are jobs."""

    def __init__(self, text: str, leaf_names: list[str], seed: int) -> None:
        count, _, rest = text.partition("x")
        size, _, parallelism = rest.partition(":")
        rng = random.Random(seed)
        self.arrays = [dict(id=f"array{a:03d}", queue=rng.choice(leaf_names), indices=parse_indices(f"0-{int(size) - 1}"),
                            made=0, parallelism=int(parallelism or 10), open=set()) for a in range(int(count))]

    def step(self, gone: set[str]) -> list[dict]:
        """The children to make now, once `gone` ended: rows as job_rows makes them (one whole GPU each)."""
        new = []
        for array in self.arrays:
            array["open"] -= gone
            for index in next_indices(array["indices"], array["made"], array["parallelism"], len(array["open"])):
                job_id = f"{array['id']}-{index:06d}"
                new.append(dict(id=job_id, queue=array["queue"], priority=0, preemptible=True, reduce_cost=False,
                                created=2e6 + array["made"], mode="exclusive", num_gpus=1, gpu_milli=1000,
                                gpu_mem_mib=0, replicas=1, min_replicas=1, cpu_milli=4000, mem_mib=32768, pool=""))
                array["open"].add(job_id)
                array["made"] += 1
        return new


def leaves(rows: dict) -> list[str]:
    return [q["name"] for q in rows["queues"] if q["parent"] is not None]


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
    return dict(pools=pools, nodes=node_rows, queues=queue_rows,
                running_jobs=job_rows(rng, running, "run", 0.0, leaf_names),
                pending_jobs=job_rows(rng, pending, "pend", 1e6, leaf_names), placed=[])


ROLE_FIELDS = ("mode", "num_gpus", "gpu_milli", "gpu_mem_mib", "cpu_milli", "mem_mib", "pool", "min_replicas", "replicas")


def core_job(r: dict, roles: dict[tuple, tuple[Role, ...]]) -> Job:
    """A row as a core Job. Jobs with the same roles share one tuple of them, as the database's
    snapshot shares the roles decoded once."""
    key = tuple(r[f] for f in ROLE_FIELDS)
    found = roles.get(key)
    if found is None:
        found = roles[key] = (Role("worker", Request(
            mode=r["mode"], num_gpus=r["num_gpus"], gpu_milli=r["gpu_milli"], gpu_mem_mib=r["gpu_mem_mib"],
            cpu_milli=r["cpu_milli"], mem_mib=r["mem_mib"], pool=r["pool"]), r["min_replicas"], r["replicas"]),)
    return Job(r["id"], r["queue"], found, priority=r["priority"], preemptible=r["preemptible"],
               reduce_cost=r["reduce_cost"], created=r["created"])


def core_replica(p: tuple) -> RunningReplica:
    return RunningReplica(p[0], p[1], p[2], p[3], tuple(p[4]), Slice(*p[5]))


def placed_row(r: RunningReplica) -> tuple:
    return (r.job_id, r.role, r.index, r.node, r.gpus, (r.slice.kind, r.slice.gpu_milli, r.slice.gpu_mem_mib))


def build_snapshot(rows: dict, with_pending: bool) -> Snapshot:
    """Rows -> Snapshot dataclasses (the part of a real cycle that reads the database)."""
    pools = tuple(Pool(**p) for p in rows["pools"])
    nodes = tuple(Node(r["name"], r["pool"], tuple(Gpu(g, f"{r['name']}-{g}") for g in range(r["gpus"])),
                       r["cpu_milli"], r["memory_mib"]) for r in rows["nodes"])
    queues = tuple(Queue(**q) for q in rows["queues"])
    job_list = rows["running_jobs"] + (rows["pending_jobs"] if with_pending else [])
    roles: dict[tuple, tuple[Role, ...]] = {}
    jobs = tuple(core_job(r, roles) for r in job_list)
    running = tuple(core_replica(p) for p in sorted(rows["placed"], key=lambda p: p[:3]))
    return Snapshot(pools, nodes, queues, jobs, running, now=2e6, off_peak=False, next_off_peak="00:00")


def place_running(rows: dict) -> None:
    """One untimed cycle places the running pods; their bindings become rows."""
    snap = build_snapshot(rows, with_pending=False)
    snap = apply_decisions(snap, run_cycle(snap))
    rows["placed"] = [placed_row(r) for r in snap.running]
    placed_jobs = {r.job_id for r in snap.running}
    rows["running_jobs"] = [j for j in rows["running_jobs"] if j["id"] in placed_jobs]


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def figures(wall: list[float], cpu: list[float]) -> dict:
    return {"median_s": round(statistics.median(wall), 4), "p95_s": round(p95(wall), 4),
            "cpu_median_s": round(statistics.median(cpu), 4)}


class Clock:
    """Wall and CPU seconds of a block, added to lists."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def __enter__(self) -> Clock:
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall.append(time.perf_counter() - self.t0)
        self.cpu.append(time.process_time() - self.c0)


def first_cycles(rows: dict, repeat: int):
    """Cold cycles: the snapshot built whole from rows, then run_cycle (no memo)."""
    total, build = Clock(), Clock()
    decisions = None
    for _ in range(repeat):
        with total:
            with build:
                snap = build_snapshot(rows, with_pending=True)
            decisions = run_cycle(snap)
    return total, build, snap, decisions


class Churn:
    """The world between two steady cycles, the same for every mode: the decisions carried out,
    then `count` running jobs end (chosen at random) and `count` new ones arrive."""

    def __init__(self, rows: dict, count: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.count = count
        self.leaf_names = leaves(rows)
        self.jobs = {r["id"]: r for r in rows["running_jobs"] + rows["pending_jobs"]}
        self.placed = {p[:3]: p for p in rows["placed"]}
        self.batch = 0

    def step(self, decisions) -> tuple[list[dict], list[str]]:
        for e in decisions.evicts:
            del self.placed[(e.job_id, e.role, e.replica)]
        for b in decisions.binds:
            self.placed[(b.job_id, b.role, b.replica)] = (b.job_id, b.role, b.replica, b.node, b.gpus,
                                                          (b.slice.kind, b.slice.gpu_milli, b.slice.gpu_mem_mib))
        running = sorted({key[0] for key in self.placed})
        gone = self.rng.sample(running, min(self.count, len(running)))
        for job_id in gone:
            del self.jobs[job_id]
        gone_set = set(gone)
        self.placed = {k: p for k, p in self.placed.items() if k[0] not in gone_set}
        self.batch += 1
        new = job_rows(self.rng, self.count, f"new{self.batch:04d}", 3e6 + 1e4 * self.batch, self.leaf_names)
        for r in new:
            self.jobs[r["id"]] = r
        return new, gone

    def rows(self, template: dict) -> dict:
        return {**template, "running_jobs": list(self.jobs.values()), "pending_jobs": [],
                "placed": list(self.placed.values())}


def steady_cycles(rows: dict, first_snapshot: Snapshot, first_decisions, args, arrays: Arrays | None = None) -> dict:
    """Cycles after the first, each after `--churn` changes; the kept snapshot and memo (or, with
    --full, the snapshot rebuilt from rows and every job visited)."""
    churn = Churn(rows, args.churn, args.seed + 1)
    full = args.full
    live = memo = None
    if not full:
        live = LiveSnapshot(first_snapshot)
        memo = CycleMemo()
        run_cycle(first_snapshot, memo)   # the service ran the first cycle with its memo
    roles: dict[tuple, tuple[Role, ...]] = {}
    profile_to = os.environ.get("BENCH_CYCLE_PROFILE")  # a cProfile file of the timed steady cycles
    profiler = cProfile.Profile() if profile_to else None
    total, snap_part = Clock(), Clock()
    decisions, changes = first_decisions, []
    for i in range(args.warmup + args.cycles):
        new, gone = churn.step(decisions)
        if i == args.warmup:
            total, snap_part = Clock(), Clock()
        changes.append(len(decisions.binds) + len(decisions.evicts) + len(new) + len(gone))
        if profiler is not None and i == args.warmup:
            profiler.enable()
        with total:
            if arrays is not None:   # the indices that ended make room for the next ones (the service's step)
                made = arrays.step(set(gone))
                for r in made:
                    churn.jobs[r["id"]] = r
                new = new + made
            with snap_part:
                if full:
                    snap = build_snapshot(churn.rows(rows), with_pending=False)
                else:
                    live.apply(decisions)
                    for job_id in gone:
                        live.drop_job(job_id)
                    for r in new:
                        live.put_job(core_job(r, roles))
                    snap = live.snapshot()
            decisions = run_cycle(snap, exact=True) if full and CycleMemo is not None else (
                run_cycle(snap) if full else run_cycle(snap, memo))
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile_to)
    timed = changes[args.warmup:]
    return {**figures(total.wall, total.cpu), "snapshot_median_s": round(statistics.median(snap_part.wall), 4),
            "snapshot_cpu_median_s": round(statistics.median(snap_part.cpu), 4),
            "changes_median": statistics.median(timed), "binds_last": len(decisions.binds),
            "evicts_last": len(decisions.evicts), "pending_jobs_last": len(decisions.pending),
            "cycles": args.cycles, "warmup": args.warmup, "mode": "full" if full else "incremental"}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--pending", type=int, default=10000, help="pending pods (replicas)")
    parser.add_argument("--running", type=int, default=5000, help="running pods (replicas), as many as fit")
    parser.add_argument("--queues", type=int, default=50, help="leaf queues")
    parser.add_argument("--repeat", type=int, default=3, help="first (cold, full) cycles timed")
    parser.add_argument("--cycles", type=int, default=10, help="steady cycles timed")
    parser.add_argument("--warmup", type=int, default=2, help="steady cycles run before those timed")
    parser.add_argument("--churn", type=int, default=100, help="jobs ending and as many arriving before each steady cycle")
    parser.add_argument("--full", action="store_true", help="steady cycles rebuild the snapshot and visit every job")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--db", nargs="?", const=DEFAULT_DB_URL, metavar="URL",
                        help="also time the cycle on a throwaway PostgreSQL database "
                             f"(dropped and created; default {DEFAULT_DB_URL})")
    parser.add_argument("--db-repeat", type=int, default=3, help="first cycles timed on the database")
    parser.add_argument("--db-cycles", type=int, default=5, help="steady cycles timed on the database")
    parser.add_argument("--db-history", type=int, default=0, metavar="N",
                        help="finished jobs (each with its ended replica) in the database too, as months of work leave")
    parser.add_argument("--arrays", metavar="NxM[:P]", help="add N pending array jobs of M indices each, at most P "
                        "(default 10) of each at a time, e.g. 10x1000")
    args = parser.parse_args(argv)
    if args.arrays and not re.fullmatch(r"[1-9][0-9]*x[1-9][0-9]*(:[1-9][0-9]*)?", args.arrays):
        parser.error("--arrays is NxM or NxM:P, e.g. 10x1000 or 10x1000:10")
    if min(args.nodes, args.gpus_per_node, args.queues, args.repeat, args.cycles, args.db_repeat, args.db_cycles) < 1 \
            or min(args.pending, args.running, args.churn, args.warmup, args.db_history) < 0:
        parser.error("--nodes, --gpus-per-node, --queues, --repeat, --cycles, --db-repeat and --db-cycles must be "
                     ">= 1; pod counts, --churn, --warmup and --db-history >= 0")
    if not args.full and LiveSnapshot is None:
        parser.error("this tree has no kept snapshot: use --full")

    if args.db:
        database_name(args.db)  # a bad URL fails before the in-memory run
    rows = make_rows(args.nodes, args.gpus_per_node, args.pending, args.running, args.queues, args.seed)
    place_running(rows)
    arrays = Arrays(args.arrays, leaves(rows), args.seed + 2) if args.arrays else None
    if arrays is not None:   # their first indices wait with the other pending jobs
        rows["pending_jobs"] = rows["pending_jobs"] + arrays.step(set())
    total, build, snap, decisions = first_cycles(rows, args.repeat)
    result = {
        "nodes": args.nodes, "gpus": args.nodes * args.gpus_per_node, "queues": args.queues,
        "running_pods": len(rows["placed"]), "pending_pods": args.pending, "churn": args.churn,
        "first_cycle": {**figures(total.wall, total.cpu), "snapshot_build_median_s": round(statistics.median(build.wall), 4),
                        "binds": len(decisions.binds), "evicts": len(decisions.evicts),
                        "pending_jobs": len(decisions.pending), "repeat": args.repeat},
        "steady_cycle": steady_cycles(rows, snap, decisions, args, arrays),
    }
    if arrays is not None:
        result["arrays"] = {"spec": args.arrays, "indices": sum(len(a["indices"]) for a in arrays.arrays),
                            "made": sum(a["made"] for a in arrays.arrays)}
    if args.db:
        result["db"] = run_db_benchmark(rows, args.db, args.db_repeat, cycles=args.db_cycles, churn=args.churn,
                                        seed=args.seed, history=args.db_history)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>14}: {value}")
    return result


if __name__ == "__main__":
    main()
