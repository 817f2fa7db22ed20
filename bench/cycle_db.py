"""PostgreSQL side of `python -m bench.cycle --db [URL]`: the same cycle, its snapshot read from a database.

The parent (`run_db_benchmark`, called by bench.cycle) drops and creates the throwaway database,
starts a private Redis (the cycle publishes live events), and runs this module in a child process
on that DATABASE_URL. The child migrates, bulk-inserts bench.cycle's synthetic cluster (pools,
nodes, GPUs, queues, jobs whose `roles` come from scheduling.spec.requests.role_requests, running
replicas with their slices and their simulated pods), and `--history N` finished jobs, each with its ended
replica (the rows a platform keeps from months of work, which the cycle's reads must not scan), then times

  decide: build_snapshot(now) from the database + core.run_cycle (no writes), on the loaded database;
  first:  run_scheduling_cycle with the simulated backend (reconcile, snapshot, decide, apply, launch)
          in a cold process (nothing kept: the snapshot read whole), each repeat on a fresh copy of the
          loaded database (CREATE DATABASE ... TEMPLATE);
  steady: on the last copy, the cycles after it, as the Celery worker runs them (its kept snapshot and
          memo, `scheduling.cycle.run.Kept`): before each, `churn` running jobs end (their simulated
          pods finish) and as many new jobs are submitted; `warmup` cycles, then `cycles` timed.

`--throughput` is another mode (bench/throughput.py): binds per second of a burst of jobs submitted into an
empty cluster, from the first submit to the last launch.

Wall and CPU seconds (this process; the database server's own CPU is not in it). Only JSON goes to
the child's stdout. `BENCH_CYCLE_DB_PROFILE=FILE` writes a cProfile of the timed steady cycles there.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DB_URL = "postgres://postgres@127.0.0.1:5432/gpuplatform_bench_cycle"
# Cycles run after the busy one before giving up on settling (each may take seconds on the database).
SETTLE_MAX_CYCLES = 4
# Jobs run a month (12 h on the simulated clock): none finishes while the benchmark runs.
RUN_FOR_S = 30 * 24 * 3600


def progress(message: str) -> None:
    print(f"[bench.cycle_db {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def figures(values: list[float]) -> dict:
    return {"median_s": round(statistics.median(values), 4), "p95_s": round(p95(values), 4),
            "runs_s": [round(v, 3) for v in values]}


# --- databases --------------------------------------------------------------------------------

def database_name(url: str) -> str:
    """The database a loopback postgres:// URL names (the benchmark drops it: never anything remote)."""
    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    if parsed.scheme not in ("postgres", "postgresql"):
        raise SystemExit(f"--db must be a postgres:// URL, got {url!r}")
    if not name or parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"--db must name a database on this machine's loopback, got {url!r}")
    return name


def with_name(url: str, name: str) -> str:
    return urlparse(url)._replace(path=f"/{name}").geturl()


def admin_sql(url: str, *statements) -> None:
    """Run statements on the server's `postgres` database (CREATE/DROP DATABASE need autocommit)."""
    import psycopg

    with psycopg.connect(with_name(url, "postgres"), autocommit=True, connect_timeout=10) as conn:
        for statement in statements:
            conn.execute(statement)


def recreate(url: str, name: str, template: str | None = None) -> None:
    from psycopg import sql

    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template:
        create = sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
            sql.Identifier(name), sql.Identifier(template))
    admin_sql(url, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)), create)


def drop(url: str, name: str) -> None:
    from psycopg import sql

    admin_sql(url, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


# --- parent -----------------------------------------------------------------------------------

def run_db_benchmark(rows: dict, url: str, repeat: int, timeout_s: float = 1800, cycles: int = 5, churn: int = 100,
                     seed: int = 42, warmup: int = 2, history: int = 0) -> dict:
    """Load `rows` (bench.cycle.make_rows + place_running) into a fresh database and time cycles there."""
    from portal import embedded_redis

    name = database_name(url)
    started = time.perf_counter()
    recreate(url, name)
    with tempfile.TemporaryDirectory(prefix="bench-cycle-db-") as tmp:
        rows_file = Path(tmp) / "rows.json"
        rows_file.write_text(json.dumps(rows))
        redis_url = f"unix://{Path(tmp) / 'redis.sock'}?db=0"
        redis = embedded_redis.start(redis_url, log_file=Path(tmp) / "redis.log")
        env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": redis_url, "VAR_DIR": tmp,
               "DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(50),  # production behaviour, no query log
               "SECURE_SSL_REDIRECT": "0", "SESSION_COOKIE_SECURE": "0", "CSRF_COOKIE_SECURE": "0",
               "LOG_LEVEL": "WARNING", "DJANGO_SETTINGS_MODULE": "portal.settings",
               "SIM_TRAINING_PROCESSES": "0"}  # the cycle's cost, not thousands of training processes
        try:
            done = subprocess.run([sys.executable, "-m", "bench.cycle_db", "--rows", str(rows_file),
                                   "--repeat", str(repeat), "--cycles", str(cycles), "--churn", str(churn),
                                   "--seed", str(seed), "--warmup", str(warmup), "--history", str(history)],
                                  cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
                                  timeout=timeout_s)  # stderr passes through: progress and errors
        finally:
            if redis is not None:
                redis.terminate()
                redis.wait(timeout=10)
            drop(url, name)
    if done.returncode != 0:
        raise RuntimeError(f"bench.cycle_db failed ({done.returncode}); its stderr is above")
    result = json.loads(done.stdout)
    result["database"] = url
    result["benchmark_wall_s"] = round(time.perf_counter() - started, 1)
    return result


# --- child: loading ---------------------------------------------------------------------------

def role_dicts(row: dict) -> list[dict]:
    """The job's `roles` JSON exactly as submission stores it (scheduling.spec.requests.role_requests)."""
    from scheduling.spec.model import JobSpec, RoleSpec
    from scheduling.spec.requests import role_requests

    role = RoleSpec(name="worker", image="bench/trainer:latest", command=("python", "train.py"),
                    min_replicas=row["min_replicas"], max_replicas=row["replicas"], sharing=row["mode"],
                    num_gpus=row["num_gpus"], gpu_milli=row["gpu_milli"],
                    gpu_mem_mib=row["gpu_mem_mib"] or None, cpu_milli=row["cpu_milli"], mem_mib=row["mem_mib"],
                    node_pool=row["pool"] or None)
    return role_requests(JobSpec(name=row["id"], type="single" if row["replicas"] == 1 else "pytorch",
                                 roles=(role,)), None)


def gpus_of(milli: int | None) -> Decimal | None:
    return None if milli is None else (Decimal(milli) / 1000).quantize(Decimal("0.01"))


def load(rows: dict, now: datetime) -> dict:
    """Bulk-insert the cluster; returns row counts. Job `created` follows the rows' clock (seconds before now)."""
    from dataclasses import asdict

    from portal.models import Workspace
    from scheduling.core import Slice
    from scheduling.models import Gpu, Job, JobState, Node, NodePool, Queue, Replica, SimulatedPod

    pools = {p["name"]: NodePool.objects.create(name=p["name"], gpu_model=p["gpu_model"],
                                                gpu_memory_mib=p["gpu_memory_mib"], placement=p["placement"])
             for p in rows["pools"]}
    Node.objects.bulk_create([Node(pool=pools[n["pool"]], name=n["name"], cpu_milli=n["cpu_milli"],
                                   memory_mib=n["memory_mib"]) for n in rows["nodes"]], batch_size=2000)
    nodes = {n.name: n for n in Node.objects.all()}
    pool_memory = {p["name"]: p["gpu_memory_mib"] for p in rows["pools"]}
    Gpu.objects.bulk_create([Gpu(node=nodes[n["name"]], index=g, uuid=f"{n['name']}-{g}",
                                 memory_mib=pool_memory[n["pool"]])
                             for n in rows["nodes"] for g in range(n["gpus"])], batch_size=5000)
    queues: dict[str, Queue] = {}
    for q in sorted(rows["queues"], key=lambda q: q["parent"] is not None):  # parents first
        queues[q["name"]] = Queue(name=q["name"], parent=queues.get(q["parent"]),
                                  deserved_gpus=gpus_of(q["deserved_milli"]),
                                  over_quota_weight=Decimal(str(q["over_quota_weight"])),
                                  limit_gpus=gpus_of(q["limit_milli"]))
    Queue.objects.bulk_create([q for q in queues.values() if q.parent is None])
    Queue.objects.bulk_create([q for q in queues.values() if q.parent is not None])
    workspace = Workspace.objects.create(slug="bench", name="Benchmark tenant")

    origin = now - timedelta(seconds=2e6)  # the rows' clock: running pods from 0 s, pending from 1e6 s
    started = now - timedelta(hours=1)
    jobs = [Job(workspace=workspace, queue=queues[r["queue"]], name=r["id"],
                job_type="single" if r["replicas"] == 1 else "pytorch",
                state=JobState.RUNNING if running else JobState.PENDING, priority=r["priority"],
                preemptible=r["preemptible"], reduce_cost=r["reduce_cost"], spec_text="", spec={},
                expected_duration_s=RUN_FOR_S,
                roles=role_dicts(r), created=origin + timedelta(seconds=r["created"]),
                started=started if running else None)
            for running, key in ((True, "running_jobs"), (False, "pending_jobs")) for r in rows[key]]
    Job.objects.bulk_create(jobs, batch_size=2000)
    by_name = {j.name: j for j in jobs}
    replicas, pods = [], []
    for job_name, role, index, node, gpus, slice_fields in rows["placed"]:
        job = by_name[job_name]
        replicas.append(Replica(job=job, role=role, index=index, state=JobState.RUNNING, node=nodes[node],
                                gpu_indices=list(gpus), slice=asdict(Slice(*slice_fields)),
                                started=started + timedelta(seconds=1)))
        # still running on the simulated cluster for the whole benchmark
        pods.append(SimulatedPod(job_id=job.pk, role=role, index=index, node=node, image="bench/trainer:latest",
                                 gpus=list(gpus), launched=started, job_started=started, run_seconds=1e7))
    Replica.objects.bulk_create(replicas, batch_size=2000)
    SimulatedPod.objects.bulk_create(pods, batch_size=2000)
    return {"nodes": len(nodes), "jobs": len(jobs), "running_replicas": len(replicas)}


def load_history(count: int, now: datetime) -> int:
    """`count` finished jobs, each with one ended replica, copied by the server from a running job and its
    replica (the same roles and row widths), submitted 7 seconds apart before `now`, each finished an hour after."""
    from django.db import connection

    from scheduling.models import Job, JobState, Replica

    if count <= 0:
        return 0

    def columns(model, changed: dict[str, str]) -> tuple[str, str]:
        names = [f.column for f in model._meta.concrete_fields if f.column != "id"]
        quoted = connection.ops.quote_name   # some are SQL words: "array", "after"
        return ", ".join(map(quoted, names)), ", ".join(changed.get(n, f"t.{quoted(n)}") for n in names)

    jobs, job_values = columns(Job, {"name": "'history-' || g", "state": "%(state)s", "created": "%(now)s - g * interval '7 seconds'",
                                     "finished": "%(now)s - g * interval '7 seconds' + interval '1 hour'",
                                     "pending_reason": "''", "pending_code": "''", "pending_params": "'{}'::jsonb"})
    replicas, replica_values = columns(Replica, {"job_id": "j.id", "state": "%(state)s", "uid": "gen_random_uuid()",
                                                 "ended": "j.finished", "end_reason": "'Completed'"})
    job_table, replica_table = Job._meta.db_table, Replica._meta.db_table
    params = {"state": JobState.SUCCEEDED, "now": now, "count": count, "running": JobState.RUNNING}
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {job_table} ({jobs}) SELECT {job_values} FROM (SELECT * FROM {job_table} "
                       f"WHERE state = %(running)s ORDER BY id LIMIT 1) t, generate_series(1, %(count)s) g", params)
        cursor.execute(f"INSERT INTO {replica_table} ({replicas}) SELECT {replica_values} FROM "
                       f"(SELECT * FROM {replica_table} WHERE state = %(running)s ORDER BY id LIMIT 1) t, {job_table} j "
                       f"WHERE j.name LIKE 'history-%%'", params)
    return count


# --- child: timing ----------------------------------------------------------------------------

def time_decide(repeat: int) -> dict:
    """build_snapshot from the database + core.run_cycle, read-only."""
    from django.utils import timezone

    from scheduling import core
    from scheduling.cycle.snapshot import build_snapshot

    totals, builds, decisions = [], [], None
    build_snapshot(timezone.now())  # warm: connection, imports, the server's buffer cache
    for _ in range(repeat):
        t0 = time.perf_counter()
        snap = build_snapshot(timezone.now())
        t1 = time.perf_counter()
        decisions = core.run_cycle(snap)
        totals.append(time.perf_counter() - t0)
        builds.append(t1 - t0)
    return {**figures(totals), "snapshot_build_median_s": round(statistics.median(builds), 4),
            "snapshot_jobs": len(snap.jobs), "snapshot_running": len(snap.running),
            "binds": len(decisions.binds), "evicts": len(decisions.evicts), "pending_jobs": len(decisions.pending)}


def use_database(url: str, name: str) -> None:
    """Point Django's connection at another database (the copy of this repeat)."""
    from django.db import connections

    connections["default"].close()
    connections["default"].settings_dict["NAME"] = name


@contextmanager
def phase_timer():
    """Seconds and calls per phase of run_scheduling_cycle, by wrapping the functions it looks up at
    call time. `apply` includes what runs at its commit (launches, live-event publishes); the
    pending reasons, launches and publishes are also shown on their own."""
    import portal.services
    import scheduling.core
    import scheduling.cycle.run
    from scheduling.backends.simulated.backend import SimulatedBackend

    spots = {"sync_inventory": (scheduling.cycle.run, "sync_inventory"), "reconcile": (scheduling.cycle.run, "reconcile"),
             "build_snapshot": (scheduling.cycle.run, "build_snapshot"), "core_run_cycle": (scheduling.core, "run_cycle"),
             "apply": (scheduling.cycle.run, "apply"), "set_pending_reasons": (scheduling.cycle.run, "set_pending_reasons"),
             "write_pending_reasons": (scheduling.cycle.pending, "write_pending_reasons"),
             "backend_launch": (SimulatedBackend, "launch"), "publish_live_event": (portal.services, "_send")}
    seconds: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)

    def timed(label: str, function):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[label] += time.perf_counter() - t0
                calls[label] += 1
        return wrapper

    originals = {label: getattr(owner, name) for label, (owner, name) in spots.items()}
    for label, (owner, name) in spots.items():
        setattr(owner, name, timed(label, originals[label]))
    try:
        yield seconds, calls
    finally:
        for label, (owner, name) in spots.items():
            setattr(owner, name, originals[label])


def phases(seconds: dict[str, float], calls: dict[str, int]) -> dict:
    return {label: {"s": round(s, 3), "calls": calls[label]} for label, s in seconds.items()}


def churn_database(rng, count: int, batch: int, leaf_names: list[str]) -> tuple[int, int]:
    """Between two steady cycles: `count` running jobs end and `count` new jobs are submitted, the
    rows those writes leave (an ended job's final cost and events are written where it ends, not in
    the cycle; its pods are removed by the next reconcile). Returns (jobs ended, jobs submitted)."""
    from django.utils import timezone

    from bench.cycle import job_rows
    from portal.models import Workspace
    from scheduling.models import ACTIVE_STATES, Job, JobState, Queue, Replica

    running = sorted(Job.objects.filter(state=JobState.RUNNING).values_list("pk", flat=True))
    ending = rng.sample(running, min(count, len(running)))
    now = timezone.now()
    Job.objects.filter(pk__in=ending).update(state=JobState.SUCCEEDED, finished=now)
    Replica.objects.filter(job_id__in=ending, state__in=ACTIVE_STATES).update(
        state=JobState.SUCCEEDED, ended=now, end_reason="Completed")
    workspace = Workspace.objects.get(slug="bench")
    queues = {q.name: q for q in Queue.objects.filter(name__in=leaf_names)}
    new = job_rows(rng, count, f"new{batch:04d}", 0.0, leaf_names)
    Job.objects.bulk_create([
        Job(workspace=workspace, queue=queues[r["queue"]], name=r["id"],
            job_type="single" if r["replicas"] == 1 else "pytorch", state=JobState.PENDING, priority=r["priority"],
            preemptible=r["preemptible"], reduce_cost=r["reduce_cost"], spec_text="", spec={},
            expected_duration_s=RUN_FOR_S, roles=role_dicts(r)) for r in new])
    return len(ending), len(new)


def time_full(url: str, repeat: int, cycles: int, churn: int, seed: int, warmup: int, leaf_names: list[str]) -> dict:
    import random
    from dataclasses import asdict

    from django.utils import timezone

    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.cycle.run import run_scheduling_cycle
    from scheduling.cycle.snapshot import build_snapshot

    try:   # a tree from before the worker kept anything runs every cycle cold (the "before" figures)
        from scheduling.cycle.run import Kept
    except ImportError:  # pragma: no cover
        Kept = None

    def cycle(kept):
        if kept is None:
            return run_scheduling_cycle(SimulatedBackend())
        return run_scheduling_cycle(SimulatedBackend(), kept=kept)

    template = database_name(url)
    copies, busy, busy_cpu, busy_phases, reports = [], [], [], [], []
    steady, steady_cpu, steady_phases, steady_reports = [], [], [], []
    try:
        for i in range(repeat):
            copy = f"{template}_run{i}"
            use_database(url, template)  # no connection may stay on the template while it is copied
            t0 = time.perf_counter()
            recreate(url, copy, template=template)
            copies.append((copy, time.perf_counter() - t0))
            use_database(url, copy)
            build_snapshot(timezone.now())  # warm the connection and imports; nothing is kept
            kept = Kept() if Kept is not None else None   # a cold worker
            with phase_timer() as (seconds, calls):
                t0, c0 = time.perf_counter(), time.process_time()
                report = cycle(kept)
                busy.append(time.perf_counter() - t0)
                busy_cpu.append(time.process_time() - c0)
            busy_phases.append(phases(seconds, calls))
            progress(f"first cycle {i + 1}/{repeat}: {busy[-1]:.2f} s (CPU {busy_cpu[-1]:.2f} s) {busy_phases[-1]}")
            reports.append(report)
            if i < repeat - 1:
                use_database(url, template)
                drop(url, copy)
        # the steady cycles, on the last copy, by the same worker (its kept snapshot and memo)
        rng = random.Random(seed + 1)
        profile_to = os.environ.get("BENCH_CYCLE_DB_PROFILE")  # a cProfile file of the timed steady cycles
        profiler = cProfile.Profile() if profile_to else None
        for k in range(warmup + cycles):
            time.sleep(1.1)  # past the simulated image pull: launched replicas report Running
            ending, submitted = churn_database(rng, churn, k, leaf_names)
            with phase_timer() as (seconds, calls):
                if profiler is not None and k >= warmup:
                    profiler.enable()
                t0, c0 = time.perf_counter(), time.process_time()
                report = cycle(kept)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                if profiler is not None:
                    profiler.disable()
            reads = dict(kept.snapshot.reads) if kept is not None else "all"
            progress(f"steady cycle {k + 1}/{warmup + cycles}{' (warm-up)' if k < warmup else ''}: {wall:.2f} s "
                     f"(CPU {cpu:.2f} s), {report}, rows read whole {reads}")
            if k >= warmup:
                steady.append(wall)
                steady_cpu.append(cpu)
                steady_phases.append(phases(seconds, calls))
                steady_reports.append((report, ending, submitted, reads))
        if profiler is not None:
            profiler.dump_stats(profile_to)
    finally:
        use_database(url, template)
        for copy, _ in copies:
            drop(url, copy)
    last = reports[-1]
    return {
        "first_cycle": {
            **figures(busy), "cpu_median_s": round(statistics.median(busy_cpu), 4),
            "report": {k: v for k, v in asdict(last).items() if k != "seconds"},
            "phases_median_s": {label: round(statistics.median(p[label]["s"] for p in busy_phases), 3)
                                for label in busy_phases[-1]},
            "phase_calls": {label: c["calls"] for label, c in busy_phases[-1].items()},
        },
        "copy_database_median_s": round(statistics.median(s for _, s in copies), 2),
        "steady_cycle": {
            **figures(steady), "cpu_median_s": round(statistics.median(steady_cpu), 4),
            "phases_median_s": {label: round(statistics.median(p[label]["s"] for p in steady_phases if label in p), 3)
                                for label in steady_phases[-1]},
            "cycles": [{"binds": r.binds, "evicts": r.evicts, "started": r.started, "finished": r.finished,
                        "requeued": r.requeued, "pending": r.pending, "jobs_ended": ending, "submitted": submitted,
                        "rows_read": reads} for r, ending, submitted, reads in steady_reports],
            "warmup": warmup, "churn": churn,
        },
    }


def child(rows_file: Path, repeat: int, cycles: int, churn: int, seed: int, warmup: int, history: int = 0) -> dict:
    import django

    os.environ["SIM_TRAINING_PROCESSES"] = "0"  # also when run by hand: the launches start no processes
    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    if connection.vendor != "postgresql":
        raise SystemExit(f"DATABASE_URL must be PostgreSQL, got {connection.vendor}")
    rows = json.loads(rows_file.read_text())
    t0 = time.perf_counter()
    call_command("migrate", interactive=False, verbosity=0)
    t1 = time.perf_counter()
    progress(f"migrated in {t1 - t0:.1f} s")
    counts = load(rows, timezone.now())
    counts["history_jobs"] = load_history(history, timezone.now())
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # planner statistics, as autovacuum would have them on a live database
    t2 = time.perf_counter()
    progress(f"loaded {counts} in {t2 - t1:.1f} s")
    decide = time_decide(repeat)
    progress(f"decide: {decide['runs_s']}")
    leaf_names = [q["name"] for q in rows["queues"] if q["parent"] is not None]
    full = time_full(settings.DATABASE_URL, repeat, cycles, churn, seed, warmup, leaf_names)
    return {"setup": {"migrate_s": round(t1 - t0, 2), "load_s": round(t2 - t1, 2), **counts},
            "decide": decide, **full, "repeat": repeat}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "--throughput" in argv:  # binds per second on an empty cluster: bench/throughput.py
        from bench import throughput

        throughput.main(argv)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=Path, required=True, help="JSON rows written by bench.cycle")
    parser.add_argument("--repeat", type=int, default=3, help="first cycles, each on a fresh copy")
    parser.add_argument("--cycles", type=int, default=5, help="steady cycles timed")
    parser.add_argument("--warmup", type=int, default=2, help="steady cycles run before those timed")
    parser.add_argument("--churn", type=int, default=100, help="jobs ending and as many submitted before each")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--history", type=int, default=0, help="finished jobs (each with its ended replica) loaded too")
    args = parser.parse_args(argv)
    if "DATABASE_URL" not in os.environ:
        parser.error("DATABASE_URL must name the benchmark's own database")
    database_name(os.environ["DATABASE_URL"])
    if min(args.repeat, args.cycles) < 1 or min(args.churn, args.warmup, args.history) < 0:
        parser.error("--repeat and --cycles must be >= 1, --churn, --warmup and --history >= 0")
    print(json.dumps(child(args.rows, args.repeat, args.cycles, args.churn, args.seed, args.warmup, args.history)))


if __name__ == "__main__":
    main()
