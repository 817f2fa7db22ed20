"""`python -m bench.cycle_db --throughput`: binds per second on an empty simulated cluster, as other
schedulers publish it (YuniKorn: 833 pods/s on 5,000 simulated nodes; kube-scheduler: 300-578).

`--burst` pending 1-GPU jobs go in through the batch submit service (`scheduling.services.submit_jobs`, as
POST /api/v1/jobs/batch/ calls it after quoting, `--batch` jobs a call; `--batch 1`: `submit_job`, one call
each) into an empty cluster of `--nodes` 8-GPU nodes; then the scheduling
cycle runs (`run_scheduling_cycle` with the simulated backend, training processes off, the worker's
kept state) until every job is bound. The clock starts at the first submit and stops when the last
bind is committed and its replica is recorded as a pod on the simulated backend (`launch_many`, after
the cycle's commit). Beside it, not in the rate: when the cycle that bound it returned (`cycles_done_s`:
its live events published after the launches), and when every pod was Running (`all_running_s`: the
backend reports a pod Running after its simulated image pull, 1 s).

By default every submit comes first, then the cycles in the same process. `--worker`: the cycles run as
the product runs them, in a worker process of their own beside the submits (as the Celery worker beside the
API), started and warm before the first submit, one cycle per beat tick (`--interval`, the product's
SCHEDULER_INTERVAL_S, 2 s) or at once after a cycle that outlasted a tick (the tick's task waited in the
queue). Its later cycles also find the first pods Running and record it (events, notifications), as the
worker would: work the serial protocol leaves after its clock stops.

Each `--db` (a loopback postgres:// URL, dropped and made again, or `sqlite` for a file in a temporary
folder) runs in a child process of its own on a migrated empty database; `run_throughput` is the
measurement itself, on whatever database Django is connected to (the smoke test runs it there).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPUS_PER_NODE = 8
POOL = "bench-h100"
QUEUE = "bench"
# Cycles after the last submit before giving up: each binds every job that fits, so one should do.
MAX_CYCLES = 20
# Jobs a submit call takes: the API's most per batch request (portal.api.jobs.MAX_BATCH).
BATCH = 1000
# The beat's period of the scheduling cycle (portal.settings.scheduler.SCHEDULER_INTERVAL_S's default).
INTERVAL_S = 2.0


def progress(message: str) -> None:
    print(f"[bench.throughput {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # pragma: no cover - no load average on this platform
        return None


def build_cluster(nodes: int):
    """An empty cluster: one pool of `nodes` 8-GPU nodes, one queue deserving all of it, one workspace
    and its owner. Returns (user, workspace)."""
    from django.contrib.auth import get_user_model

    from portal.models import Membership, Role, Workspace
    from scheduling.models import Gpu, Node, NodePool, Queue, QueueAccess

    pool = NodePool.objects.create(name=POOL, gpu_model="H100-80GB", gpu_memory_mib=80 * 1024)
    Node.objects.bulk_create([Node(pool=pool, name=f"bench-{i:05d}", cpu_milli=128_000, memory_mib=1024 * 1024)
                              for i in range(nodes)], batch_size=2000)
    Gpu.objects.bulk_create([Gpu(node=node, index=g, uuid=f"GPU-{node.name}-{g}", memory_mib=80 * 1024)
                             for node in Node.objects.filter(pool=pool) for g in range(GPUS_PER_NODE)],
                            batch_size=5000)
    root = Queue.objects.create(name=f"{QUEUE}-root", deserved_gpus=nodes * GPUS_PER_NODE)
    queue = Queue.objects.create(name=QUEUE, parent=root, deserved_gpus=nodes * GPUS_PER_NODE)
    workspace = Workspace.objects.create(slug="bench-throughput", name="Throughput benchmark")
    QueueAccess.objects.create(queue=queue, workspace=workspace, is_default=True)
    user = get_user_model().objects.create_user(username="bench-throughput", password=secrets.token_urlsafe(16))
    Membership.objects.create(user=user, workspace=workspace, role=Role.OWNER)
    return user, workspace


def job_spec(n: int) -> dict:
    return {"name": f"burst-{n:05d}", "queue": QUEUE, "expectedDuration": "30d",
            "roles": [{"name": "main", "image": "bench/trainer:latest", "resources": {"gpu": 1},
                       "nodePool": POOL}]}


def timed_backend():
    """The simulated backend, training processes off, noting when its last launch returned (on the
    machine's monotonic clock, which the worker process shares)."""
    from scheduling.backends.simulated.backend import SimulatedBackend

    class LaunchTimed(SimulatedBackend):
        last_launch: float | None = None

        def launch_many(self, replicas) -> None:
            super().launch_many(replicas)
            self.last_launch = time.monotonic()

    return LaunchTimed(training_processes=False, failure_rate=0.0)


def run_throughput(nodes: int, burst: int, *, max_cycles: int = MAX_CYCLES, batch: int = BATCH,
                   worker: bool = False, interval: float = INTERVAL_S, timeout_s: float = 3600) -> dict:
    """Submit `burst` jobs and run cycles until all are bound and launched; the figures as a dict.
    `worker`: the cycles run in a worker process beside the submits (`run_worker`), not after them."""
    from django.db import connection

    from scheduling.backends.base import RUNNING
    from scheduling.cycle.run import Kept, run_scheduling_cycle
    from scheduling.models import Job, JobState, SimulatedPod
    from scheduling.services import submit_job, submit_jobs

    if burst > nodes * GPUS_PER_NODE:
        raise ValueError(f"--burst {burst} does not fit on {nodes} nodes of {GPUS_PER_NODE} GPUs")
    user, workspace = build_cluster(nodes)
    specs = [job_spec(n) for n in range(burst)]
    backend = timed_backend()
    kept = Kept()   # a worker that starts with the burst: its first cycle reads the snapshot whole
    cycling = start_worker(burst, interval, timeout_s) if worker else None
    load_before = load_average()

    t0 = time.monotonic()
    if batch > 1:
        for start in range(0, burst, batch):
            refused = [out for out in submit_jobs(user=user, workspace=workspace, items=specs[start:start + batch])
                       if not isinstance(out, Job)]
            if refused:
                raise RuntimeError(f"the batch refused {len(refused)} jobs: {refused[0]}")
    else:
        for spec in specs:
            submit_job(user=user, workspace=workspace, spec=spec)
    submitted = time.monotonic()
    progress(f"{burst} jobs submitted in {submitted - t0:.2f} s")
    if cycling is not None:
        found = finish_worker(cycling, timeout_s)
        cycles, cycles_done, done = found["cycles"], found["cycles_done"], found["last_launch"] or found["cycles_done"]
        for cycle in cycles:
            cycle["at_s"] = round(cycle.pop("at") - t0, 3)   # when it started, from the first submit
    else:
        cycles = []
        while len(cycles) < max_cycles:
            c0 = time.monotonic()
            report = run_scheduling_cycle(backend, kept=kept)   # its launches run at its commit, inside this call
            cycles.append({"s": round(time.monotonic() - c0, 3), "binds": report.binds, "pending": report.pending})
            progress(f"cycle {len(cycles)}: {cycles[-1]}")
            if not report.pending and not Job.objects.filter(state=JobState.PENDING).exists():
                break
        cycles_done = time.monotonic()
        done = backend.last_launch or cycles_done   # the last bind committed and its pod recorded
    launched = SimulatedPod.objects.count()
    while True:   # the simulated image pull: every pod Running
        statuses = backend.statuses()
        if len(statuses) >= burst and all(s.phase == RUNNING for s in statuses):
            break
        if time.monotonic() - cycles_done > 30:
            break
        time.sleep(0.05)
    running = time.monotonic()

    binds = sum(c["binds"] for c in cycles)
    wall = done - t0
    return {
        "database": connection.vendor, "batch": batch, "nodes": nodes, "gpus": nodes * GPUS_PER_NODE, "burst": burst,
        "worker": "beside the submits" if worker else "after the submits", "interval_s": interval if worker else None,
        "binds": binds, "pods_launched": launched,
        # a worker's later cycles find the first pods Running (after their simulated pull) and say so
        "jobs_bound": Job.objects.filter(state__in=(JobState.SCHEDULED, JobState.RUNNING)).count(),
        "jobs_pending": Job.objects.filter(state=JobState.PENDING).count(),
        "wall_s": round(wall, 3), "binds_per_s": round(binds / wall, 1) if wall else None,
        "submit_s": round(submitted - t0, 3), "submits_per_s": round(burst / (submitted - t0), 1),
        # with the worker beside the submits most binds come before the last submit: the rest's time
        "schedule_s": round(done - submitted, 3),
        "schedule_binds_per_s": round(binds / (done - submitted), 1) if done > submitted and not worker else None,
        "cycles": cycles, "cycles_done_s": round(cycles_done - t0, 3), "all_running_s": round(running - t0, 3),
        "load_average_1m_before": load_before, "load_average_1m_after": load_average(),
    }


# --- the worker beside the submits -------------------------------------------------------------

def database_url() -> str:
    """The URL of the database Django is connected to (the test database in a test), for the worker."""
    from django.db import connection

    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def start_worker(burst: int, interval: float, timeout_s: float) -> subprocess.Popen:
    """The worker process on this database, once it has run its first cycle (as a worker already up)."""
    from django.conf import settings

    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": settings.REDIS_URL,
           "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "portal.settings"),
           "SIM_TRAINING_PROCESSES": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "bench.throughput", "--worker-process", "--burst", str(burst),
                             "--interval", str(interval), "--timeout", str(timeout_s)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        raise RuntimeError(f"the worker did not start: {line!r}; its stderr is above")
    return proc


def finish_worker(proc: subprocess.Popen, timeout_s: float) -> dict:
    out, _ = proc.communicate(timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"the worker failed ({proc.returncode}); its stderr is above")
    return json.loads(out)


def run_worker(burst: int, interval: float, timeout_s: float) -> dict:
    """What the Celery worker does with the beat's ticks: a cycle at each tick, or at once after a cycle
    that outlasted one (its task waited), until `burst` replicas are bound. Times on the monotonic clock."""
    from scheduling.cycle.run import Kept, run_scheduling_cycle

    backend, kept = timed_backend(), Kept()
    run_scheduling_cycle(backend, kept=kept)   # a worker already up: its first cycle read the empty cluster
    print("ready", flush=True)
    start = time.monotonic()
    cycles, bound, idle = [], 0, 0
    while bound < burst and time.monotonic() - start < timeout_s:
        c0 = time.monotonic()
        report = run_scheduling_cycle(backend, kept=kept)   # its launches run at its commit, inside this call
        ended = time.monotonic()
        bound += report.binds
        if report.binds:
            cycles.append({"at": c0, "s": round(ended - c0, 3), "binds": report.binds, "pending": report.pending})
            progress(f"worker cycle: {cycles[-1]['s']} s, {report.binds} binds, {report.pending} pending")
        else:
            idle += 1
        tick = start + interval * math.floor((c0 - start) / interval + 1)   # the first tick after this cycle began
        if tick > time.monotonic():
            time.sleep(tick - time.monotonic())
    return {"cycles": cycles, "idle_cycles": idle, "cycles_done": time.monotonic(), "last_launch": backend.last_launch}


# --- parent and child -------------------------------------------------------------------------

def child(nodes: int, burst: int, batch: int = BATCH, worker: bool = False, interval: float = INTERVAL_S) -> dict:
    import django

    os.environ["SIM_TRAINING_PROCESSES"] = "0"
    django.setup()
    from django.core.management import call_command

    t0 = time.perf_counter()
    call_command("migrate", interactive=False, verbosity=0)
    progress(f"migrated in {time.perf_counter() - t0:.1f} s")
    profile_to = os.environ.get("BENCH_THROUGHPUT_PROFILE")  # a cProfile file of the whole measurement
    if not profile_to:
        return run_throughput(nodes, burst, batch=batch, worker=worker, interval=interval)
    import cProfile

    profiler = cProfile.Profile()
    result = profiler.runcall(run_throughput, nodes, burst, batch=batch, worker=worker, interval=interval)
    profiler.dump_stats(profile_to)
    return result


def worker_process(burst: int, interval: float, timeout_s: float) -> dict:
    import django

    django.setup()
    profile_to = os.environ.get("BENCH_THROUGHPUT_PROFILE")   # the worker's own cProfile file beside it
    if not profile_to:
        return run_worker(burst, interval, timeout_s)
    import cProfile

    profiler = cProfile.Profile()
    result = profiler.runcall(run_worker, burst, interval, timeout_s)
    profiler.dump_stats(f"{profile_to}.worker")
    return result


def run_on(db: str, nodes: int, burst: int, timeout_s: float, batch: int = BATCH, worker: bool = False,
           interval: float = INTERVAL_S) -> dict:
    """One measurement in a child process on a fresh database: `db` is a loopback postgres:// URL or `sqlite`."""
    from bench.cycle_db import database_name, drop, recreate
    from portal import embedded_redis

    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        if db == "sqlite":
            url, name = f"sqlite:///{Path(tmp) / 'throughput.sqlite3'}", None
        else:
            url, name = db, database_name(db)
            recreate(url, name)
        redis_url = f"unix://{Path(tmp) / 'redis.sock'}?db=0"
        redis = embedded_redis.start(redis_url, log_file=Path(tmp) / "redis.log")
        env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": redis_url, "VAR_DIR": tmp,
               "DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(50),  # production behaviour, no query log
               "SECURE_SSL_REDIRECT": "0", "SESSION_COOKIE_SECURE": "0", "CSRF_COOKIE_SECURE": "0",
               "LOG_LEVEL": "WARNING", "DJANGO_SETTINGS_MODULE": "portal.settings",
               "SIM_TRAINING_PROCESSES": "0", "SIM_RUNTIME_DIR": str(Path(tmp) / "sim")}
        try:
            done = subprocess.run([sys.executable, "-m", "bench.throughput", "--child", "--nodes", str(nodes),
                                   "--burst", str(burst), "--batch", str(batch), "--interval", str(interval),
                                   *(["--worker"] if worker else [])], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                  text=True, timeout=timeout_s)
        finally:
            if redis is not None:
                redis.terminate()
                redis.wait(timeout=10)
            if name is not None:
                drop(url, name)
    if done.returncode != 0:
        raise RuntimeError(f"bench.throughput failed ({done.returncode}); its stderr is above")
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cycle_db --throughput",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--throughput", action="store_true", help="this mode (bench.cycle_db's flag)")
    parser.add_argument("--nodes", type=int, default=4000, help="8-GPU nodes in the simulated cluster")
    parser.add_argument("--burst", type=int, default=20000, help="1-GPU jobs submitted")
    parser.add_argument("--db", action="append", metavar="URL",
                        help="a loopback postgres:// URL (dropped and made again) or `sqlite`; repeat for both")
    parser.add_argument("--batch", type=int, default=BATCH,
                        help="jobs per call of the batch submit service; 1: one submit_job call each")
    parser.add_argument("--worker", action="store_true",
                        help="the cycles in a worker process beside the submits, one per beat tick, not after "
                             "every submit in the same process")
    parser.add_argument("--interval", type=float, default=INTERVAL_S,
                        help="seconds between the beat's ticks of the worker's cycle (SCHEDULER_INTERVAL_S)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds for each database's run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker_process:
        print(json.dumps(worker_process(args.burst, args.interval, args.timeout)))
        return
    if args.nodes < 1 or args.burst < 1 or args.batch < 1:
        parser.error("--nodes, --burst and --batch must be >= 1")
    if args.burst > args.nodes * GPUS_PER_NODE:
        parser.error(f"--burst must fit on the cluster: at most {args.nodes * GPUS_PER_NODE} jobs")
    if args.child:
        print(json.dumps(child(args.nodes, args.burst, args.batch, args.worker, args.interval)))
        return
    runs = []
    for db in args.db or ["postgres://postgres@127.0.0.1:5432/gpuplatform_bench_throughput"]:
        result = run_on(db, args.nodes, args.burst, args.timeout, args.batch, args.worker, args.interval)
        result["db"] = "sqlite" if db == "sqlite" else db
        runs.append(result)
        progress(f"{result['database']}: {result['binds_per_s']} binds/s ({result['binds']} binds in "
                 f"{result['wall_s']} s; load average {result['load_average_1m_before']})")
    if args.json:
        print(json.dumps({"runs": runs, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, indent=2))
    else:
        for r in runs:
            print(f"{r['database']:>10}  {r['binds_per_s']:>8} binds/s  {r['binds']} binds in {r['wall_s']} s "
                  f"(submit {r['submit_s']} s, schedule {r['schedule_s']} s), load {r['load_average_1m_before']}")


if __name__ == "__main__":
    main()
