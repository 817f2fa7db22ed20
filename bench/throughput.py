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

Each `--db` (a loopback postgres:// URL, dropped and made again, or `sqlite` for a file in a temporary
folder) runs in a child process of its own on a migrated empty database; `run_throughput` is the
measurement itself, on whatever database Django is connected to (the smoke test runs it there).
"""

from __future__ import annotations

import argparse
import json
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
    """The simulated backend, training processes off, noting when its last launch returned."""
    from scheduling.backends.simulated.backend import SimulatedBackend

    class LaunchTimed(SimulatedBackend):
        last_launch: float | None = None

        def launch_many(self, replicas) -> None:
            super().launch_many(replicas)
            self.last_launch = time.perf_counter()

    return LaunchTimed(training_processes=False, failure_rate=0.0)


def run_throughput(nodes: int, burst: int, *, max_cycles: int = MAX_CYCLES, batch: int = BATCH) -> dict:
    """Submit `burst` jobs and run cycles until all are bound and launched; the figures as a dict."""
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
    load_before = load_average()

    t0 = time.perf_counter()
    if batch > 1:
        for start in range(0, burst, batch):
            refused = [out for out in submit_jobs(user=user, workspace=workspace, items=specs[start:start + batch])
                       if not isinstance(out, Job)]
            if refused:
                raise RuntimeError(f"the batch refused {len(refused)} jobs: {refused[0]}")
    else:
        for spec in specs:
            submit_job(user=user, workspace=workspace, spec=spec)
    submitted = time.perf_counter()
    progress(f"{burst} jobs submitted in {submitted - t0:.2f} s")
    cycles = []
    while len(cycles) < max_cycles:
        c0 = time.perf_counter()
        report = run_scheduling_cycle(backend, kept=kept)   # its launches run at its commit, inside this call
        cycles.append({"s": round(time.perf_counter() - c0, 3), "binds": report.binds, "pending": report.pending})
        progress(f"cycle {len(cycles)}: {cycles[-1]}")
        if not report.pending and not Job.objects.filter(state=JobState.PENDING).exists():
            break
    cycles_done = time.perf_counter()
    launched = SimulatedPod.objects.count()
    done = backend.last_launch or cycles_done   # the last bind committed and its pod recorded
    while True:   # the simulated image pull: every pod Running
        statuses = backend.statuses()
        if len(statuses) >= burst and all(s.phase == RUNNING for s in statuses):
            break
        if time.perf_counter() - cycles_done > 30:
            break
        time.sleep(0.05)
    running = time.perf_counter()

    binds = sum(c["binds"] for c in cycles)
    wall = done - t0
    return {
        "database": connection.vendor, "batch": batch, "nodes": nodes, "gpus": nodes * GPUS_PER_NODE, "burst": burst,
        "binds": binds, "pods_launched": launched,
        "jobs_bound": Job.objects.filter(state=JobState.SCHEDULED).count(),
        "jobs_pending": Job.objects.filter(state=JobState.PENDING).count(),
        "wall_s": round(wall, 3), "binds_per_s": round(binds / wall, 1) if wall else None,
        "submit_s": round(submitted - t0, 3), "submits_per_s": round(burst / (submitted - t0), 1),
        "schedule_s": round(done - submitted, 3),
        "schedule_binds_per_s": round(binds / (done - submitted), 1) if done > submitted else None,
        "cycles": cycles, "cycles_done_s": round(cycles_done - t0, 3), "all_running_s": round(running - t0, 3),
        "load_average_1m_before": load_before, "load_average_1m_after": load_average(),
    }


# --- parent and child -------------------------------------------------------------------------

def child(nodes: int, burst: int, batch: int = BATCH) -> dict:
    import django

    os.environ["SIM_TRAINING_PROCESSES"] = "0"
    django.setup()
    from django.core.management import call_command

    t0 = time.perf_counter()
    call_command("migrate", interactive=False, verbosity=0)
    progress(f"migrated in {time.perf_counter() - t0:.1f} s")
    profile_to = os.environ.get("BENCH_THROUGHPUT_PROFILE")  # a cProfile file of the whole measurement
    if not profile_to:
        return run_throughput(nodes, burst, batch=batch)
    import cProfile

    profiler = cProfile.Profile()
    result = profiler.runcall(run_throughput, nodes, burst, batch=batch)
    profiler.dump_stats(profile_to)
    return result


def run_on(db: str, nodes: int, burst: int, timeout_s: float, batch: int = BATCH) -> dict:
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
                                   "--burst", str(burst), "--batch", str(batch)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
                                  timeout=timeout_s)
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
    parser.add_argument("--timeout", type=float, default=3600, help="seconds for each database's run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.burst < 1 or args.batch < 1:
        parser.error("--nodes, --burst and --batch must be >= 1")
    if args.burst > args.nodes * GPUS_PER_NODE:
        parser.error(f"--burst must fit on the cluster: at most {args.nodes * GPUS_PER_NODE} jobs")
    if args.child:
        print(json.dumps(child(args.nodes, args.burst, args.batch)))
        return
    runs = []
    for db in args.db or ["postgres://postgres@127.0.0.1:5432/gpuplatform_bench_throughput"]:
        result = run_on(db, args.nodes, args.burst, args.timeout, args.batch)
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
