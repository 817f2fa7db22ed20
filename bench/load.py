"""Portal load: N locust users over the main pages and the API of the real web server.

    make extras EXTRAS=load
    python -m bench.load --users 20 --duration 60 --json                       # fresh SQLite
    python -m bench.load --users 50 --duration 60 \\
        --database-url postgres://postgres@127.0.0.1:5432/gpuplatform_load --json

Everything is throwaway and on 127.0.0.1:
1. A fresh database: a SQLite file under a temp VAR_DIR (default), or the PostgreSQL database
   named by --database-url, dropped and created again (and dropped at the end unless --keep-db;
   --reuse-db serves the one an earlier --keep-db run, or `bench.request_cost`, built: no step 2's
   migrate and load_demo, which take minutes on a busy machine);
   the project's embedded Redis on a unix socket in the temp dir.
2. `manage.py migrate` and `manage.py load_demo` (child processes), then a `manage.py shell`
   snippet that makes one API token per demo user (`portal.services.create_api_token`) and lists
   the jobs each can see.
3. The web server as `make run` serves it (`portal.run.web_command`: uvicorn with one process
   per core, or --web-workers; DEBUG=0, DB_POOL=1) with the rate limits (RATE_LIMIT_LOGIN / _API_TOKEN / _AGENT) raised so
   that they do not shape the figures.
4. Locust, headless, from Python (`locust.env.Environment` + its local runner): --users users,
   spawned at --spawn-rate per second, for --duration seconds. Three in four are browsers (log in
   as alice, bob or finance through /login/, then open `/`, `/jobs/`, `/reports/`, `/cluster/` and
   a job page); one in four are API clients with a Bearer token (GET /api/v1/workspaces/,
   GET /api/v1/jobs/?limit=50, POST /api/v1/quotes/ with a small spec). Each user waits --wait
   seconds (uniform MIN,MAX) between requests, like a person; `--wait 0,0` is a closed loop.
   Figures cover the whole run, logins included, unless --reset-stats (from the moment every user
   has started and logged in: the steady state; a login hashes a password, hundreds of ms of CPU).

Prints (JSON with --json): requests, req/s, response-time p50/p95/p99/max in ms and failures,
overall and per endpoint; the failures by status/endpoint; the distinct error lines of the
server log; wall seconds of the run; CPU seconds used by the web server (all its processes), Redis and this process (the load
generator) during it; cores and 1-minute load. A benchmark, not a gate: nothing is asserted.
"""

from __future__ import annotations

# isort: off
# locust monkey-patches the standard library (gevent) when imported: first, before anything else.
import locust
from locust import HttpUser, between, constant, task
from locust.env import Environment

# isort: on
import argparse
import json
import os
import platform
import random
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import gevent

from bench import ingest, live
from bench.databases import check_postgres_url
from portal.run import web_command
from portal.testing import ROOT, free_port, stop_processes, wait_for_http

RAISED_LIMIT = "1000000/60"
QUOTE_SPEC = {"name": "load-quote", "type": "single", "expectedDuration": "1h",
              "roles": [{"name": "main", "image": "pytorch/pytorch:latest",
                         "resources": {"gpu": 1, "cpu": 4, "memory": "16Gi"}}]}

# Filled by `run` before the users start: username -> password, token, workspaces, job ids.
ACCOUNTS: dict[str, dict] = {}
READY = [0]  # users whose on_start (the login, for a browser) has finished


# --- the users ---------------------------------------------------------------------------------

class BrowserUser(HttpUser):
    """A person in the portal: logs in once, then opens the main pages."""

    weight = 3
    wait_time = between(0.5, 1.5)

    def on_start(self) -> None:
        self.username = random.choice(sorted(ACCOUNTS))
        account = ACCOUNTS[self.username]
        self.jobs = account["jobs"]
        self.client.get("/login/", name="/login/ [GET]")
        csrf = self.client.cookies.get("csrftoken", "")
        with self.client.post("/login/", name="/login/ [POST]", catch_response=True,
                              data={"username": self.username, "password": account["password"],
                                    "csrfmiddlewaretoken": csrf},
                              headers={"Referer": f"{self.host}/login/"}) as response:
            if response.ok and "/login/" in response.url:
                response.failure("login refused (still on /login/)")
        READY[0] += 1

    @task(3)
    def dashboard(self) -> None:
        self.client.get("/", name="/")

    @task(3)
    def jobs_list(self) -> None:
        self.client.get("/jobs/", name="/jobs/")

    @task(2)
    def reports(self) -> None:
        self.client.get("/reports/", name="/reports/")

    @task(2)
    def cluster(self) -> None:
        # the cluster map is the operators': a tenant (every user here) is answered the styled 403 page
        with self.client.get("/cluster/", name="/cluster/", catch_response=True) as response:
            if response.status_code == 403:
                response.success()

    @task(2)
    def job_page(self) -> None:
        if self.jobs:
            self.client.get(f"/jobs/{random.choice(self.jobs)}/", name="/jobs/[id]/")


class ApiUser(HttpUser):
    """A script with an API token."""

    weight = 1
    wait_time = between(0.5, 1.5)

    def on_start(self) -> None:
        self.username = random.choice(sorted(ACCOUNTS))
        account = ACCOUNTS[self.username]
        self.client.headers["Authorization"] = f"Bearer {account['token']}"
        self.workspaces = account["workspaces"]
        READY[0] += 1

    @task(3)
    def workspaces_list(self) -> None:
        self.client.get("/api/v1/workspaces/", name="/api/v1/workspaces/")

    @task(3)
    def jobs_list(self) -> None:
        self.client.get("/api/v1/jobs/?limit=50", name="/api/v1/jobs/?limit=50")

    @task(2)
    def quote(self) -> None:
        self.client.post("/api/v1/quotes/", name="/api/v1/quotes/ [POST]",
                         json={"workspace": random.choice(self.workspaces), "spec": QUOTE_SPEC})


# --- the stack ---------------------------------------------------------------------------------

@dataclass
class Stack(live.Stack):
    """The processes and files the benchmark owns; `stop` ends and removes them."""

    server_command: str = ""
    server_proc: subprocess.Popen | None = None  # uvicorn (not live.Stack's daphne)

    def stop(self) -> None:
        stop_processes([self.server_proc])  # its workers hold database connections until it ends
        super().stop()


def reset_postgres(url: str, *, create: bool = True) -> None:
    """Drop (and create again) the benchmark's own database, never one it was not named."""
    import psycopg
    from psycopg import sql

    name, admin = check_postgres_url(url)
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if create:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def server_env(db_url: str, stack: Stack) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": db_url, "REDIS_URL": stack.redis_url, "VAR_DIR": str(stack.tmp / "var"),
           "SECRET_KEY": secrets.token_urlsafe(50), "DEBUG": "0",  # production behaviour...
           "SECURE_SSL_REDIRECT": "0", "SESSION_COOKIE_SECURE": "0", "CSRF_COOKIE_SECURE": "0",  # ...plain HTTP
           "LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1", "DB_POOL": "1",  # as make run serves
           "RATE_LIMIT_LOGIN": RAISED_LIMIT, "RATE_LIMIT_API_TOKEN": RAISED_LIMIT, "RATE_LIMIT_AGENT": RAISED_LIMIT}
    env.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


SETUP_SNIPPET = """
import json
from portal.demo.tenants import DEMO_PASSWORDS
from portal.models import Membership
from portal.services import create_api_token
from scheduling.models import Job
from django.contrib.auth import get_user_model
out = {}
for name in ("alice", "bob", "finance"):
    user = get_user_model().objects.get(username=name)
    _, raw = create_api_token(user, "bench-load")
    slugs = sorted(Membership.objects.filter(user=user).values_list("workspace__slug", flat=True))
    jobs = list(Job.objects.filter(workspace__slug__in=slugs).order_by("-pk").values_list("pk", flat=True)[:200])
    out[name] = {"password": DEMO_PASSWORDS[name], "token": raw, "workspaces": slugs, "jobs": jobs}
print("BENCH-LOAD-ACCOUNTS " + json.dumps(out))
"""


def manage(args: list[str], env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def prepare(env: dict[str, str], *, build: bool = True) -> tuple[dict, dict[str, float]]:
    timings = {}
    steps = (("migrate_s", ["migrate", "--noinput", "-v", "0"]), ("load_demo_s", ["load_demo"])) if build else ()
    for step, args in steps:
        started = time.perf_counter()
        manage(args, env)
        timings[step] = round(time.perf_counter() - started, 1)
    out = manage(["shell", "-c", SETUP_SNIPPET], env)
    line = next(x for x in out.splitlines() if x.startswith("BENCH-LOAD-ACCOUNTS "))
    return json.loads(line.split(" ", 1)[1]), timings


def start_server(stack: Stack, env: dict[str, str], workers: int | None = None) -> str:
    port = free_port()
    stack.server_log = stack.tmp / "web.log"
    command = web_command(port, workers=workers)
    with open(stack.server_log, "wb") as out:
        stack.server_proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    stack.server_command = " ".join(["python", *command[1:]]).replace(f" {port} ", " PORT ")
    base = f"http://127.0.0.1:{port}"
    wait_for_http(f"{base}/healthz", timeout=60, proc=stack.server_proc)
    return base


def server_log_errors(log: Path | None, limit: int = 10) -> list[str]:
    """Distinct error lines of the server log: a traceback's last line, or a logged warning/error."""
    if log is None or not log.exists():
        return []
    lines = log.read_text(errors="replace").splitlines()
    found: dict[str, int] = {}
    for before, line in zip(["", *lines], lines, strict=False):
        end_of_traceback = before.startswith("  ") and line and not line.startswith((" ", "Traceback"))
        if end_of_traceback or any(w in line for w in ("ERROR", "WARNING", "Internal Server Error", "CRITICAL")):
            key = line.strip()[:300]
            found[key] = found.get(key, 0) + 1
    return [f"{n}x {text}" for text, n in sorted(found.items(), key=lambda kv: -kv[1])][:limit]


def process_tree(root: int) -> list[int]:
    """`root` and every process below it (Linux /proc): the web server's worker processes."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def cpu_seconds(proc: subprocess.Popen | None) -> float:
    """CPU seconds a child and its own children have used so far; 0 when it is gone."""
    if proc is None or proc.poll() is not None:
        return 0.0
    return sum(ingest.cpu_seconds(pid) for pid in process_tree(proc.pid))


# --- the run -----------------------------------------------------------------------------------

def entry_figures(entry, wall_s: float) -> dict:
    def pct(q: float) -> float | None:
        return round(entry.get_response_time_percentile(q), 1) if entry.num_requests else None

    return {"requests": entry.num_requests, "failures": entry.num_failures,
            "req_per_s": round(entry.num_requests / wall_s, 1) if wall_s else None,
            "p50_ms": pct(0.5), "p95_ms": pct(0.95), "p99_ms": pct(0.99),
            "max_ms": round(entry.max_response_time, 1) if entry.num_requests else None,
            "avg_ms": round(entry.avg_response_time, 1) if entry.num_requests else None}


def run_load(base: str, args, stack: Stack) -> dict:
    wait = constant(0) if args.wait == (0.0, 0.0) else between(*args.wait)
    for cls in (BrowserUser, ApiUser):
        cls.wait_time = wait
    env = Environment(user_classes=[BrowserUser, ApiUser], host=base)
    runner = env.create_local_runner()
    READY[0] = 0
    cpu_before = (cpu_seconds(stack.server_proc), cpu_seconds(stack.redis_proc), ingest.own_cpu_seconds())
    started = time.perf_counter()
    runner.start(args.users, spawn_rate=args.spawn_rate)
    deadline = started + args.duration
    ready_at = None
    while time.perf_counter() < deadline:
        if ready_at is None and READY[0] >= args.users:
            ready_at = time.perf_counter()
            cpu_ready = (cpu_seconds(stack.server_proc), cpu_seconds(stack.redis_proc), ingest.own_cpu_seconds(),
                         machine_busy_seconds())
            if args.reset_stats:
                env.stats.reset_all()
        gevent.sleep(min(0.05, max(0.0, deadline - time.perf_counter())))
    runner.stop()
    ended = time.perf_counter()
    wall_s = ended - started
    counted_s = ended - ready_at if args.reset_stats and ready_at else wall_s
    cpu_after = (cpu_seconds(stack.server_proc), cpu_seconds(stack.redis_proc), ingest.own_cpu_seconds())
    busy_after = machine_busy_seconds()
    runner.quit()

    stats = env.stats
    endpoints = {f"{method} {name}": entry_figures(entry, counted_s)
                 for (name, method), entry in sorted(stats.entries.items(), key=lambda kv: kv[0][0])
                 if entry.num_requests or entry.num_failures}
    errors = [{"endpoint": f"{e.method} {e.name}", "error": str(e.error)[:300], "count": e.occurrences}
              for e in sorted(stats.errors.values(), key=lambda e: -e.occurrences)]
    return {
        "users": args.users, "spawn_rate": args.spawn_rate, "duration_s": args.duration,
        "wait_s": list(args.wait), "wall_s": round(wall_s, 1),
        "all_users_ready_s": round(ready_at - started, 1) if ready_at else None,
        "counted": ("after every user had logged in (--reset-stats)" if args.reset_stats and ready_at
                    else "whole run, logins included"),
        "counted_s": round(counted_s, 1),
        "overall": entry_figures(stats.total, counted_s),
        "endpoints": endpoints,
        "errors": errors,
        "cpu_s": {name: round(a - b, 1) for name, b, a in
                  zip(("web", "redis", "load_generator"), cpu_before, cpu_after, strict=True)},
        # the counted part alone (no sign-ins): what each used, and the whole machine's busy CPU
        # (the database server and everything else included) against what its cores had
        "cpu_s_counted": None if ready_at is None else {
            **{name: round(a - b, 1) for name, b, a in
               zip(("web", "redis", "load_generator", "machine_busy"), cpu_ready, (*cpu_after, busy_after),
                   strict=True)},
            "machine_capacity": round((os.cpu_count() or 1) * counted_s, 1)},
    }


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (Linux /proc/stat: user, nice, system and interrupts)."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    return (sum(fields[:7]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # steal left out


def run(args) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
    stack = Stack(tmp=tmp, redis_url=f"unix://{tmp / 'redis.sock'}?db=0")
    pg = args.database_url and args.database_url.startswith(("postgres://", "postgresql://"))
    db_url = args.database_url or f"sqlite:///{tmp / 'var' / 'db.sqlite3'}"
    (tmp / "var").mkdir()
    try:
        from portal import embedded_redis

        machine_before = {"cores": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2),
                          "python": platform.python_version(), "locust": locust.__version__}
        if pg and not args.reuse_db:
            reset_postgres(db_url)
        stack.redis_proc = embedded_redis.start(stack.redis_url, log_file=tmp / "redis.log")
        env = server_env(db_url, stack)
        started = time.perf_counter()
        accounts, timings = prepare(env, build=not args.reuse_db)
        ACCOUNTS.clear()
        ACCOUNTS.update(accounts)
        base = start_server(stack, env, args.web_workers)
        timings["setup_s"] = round(time.perf_counter() - started, 1)
        result = run_load(base, args, stack)
        if stack.server_proc.poll() is not None:
            result["errors"].append({"endpoint": "-", "error": f"the web server exited with {stack.server_proc.returncode}",
                                     "count": 1})
        result["server_log_errors"] = server_log_errors(stack.server_log)
        result["database"] = "postgresql" if pg else "sqlite"
        result["server"] = stack.server_command
        result["demo_jobs_visible"] = {u: len(a["jobs"]) for u, a in accounts.items()}
        result["setup"] = timings
        result["machine"] = machine_before
        return result
    finally:
        stack.stop()
        if pg and not (args.keep_db or args.reuse_db):
            try:
                reset_postgres(db_url, create=False)
            except Exception as exc:  # the figures matter more than the clean-up
                print(f"bench.load: could not drop the database: {exc}", file=sys.stderr)


def wait_range(text: str) -> tuple[float, float]:
    low, _, high = text.partition(",")
    low_f, high_f = float(low), float(high or low)
    if low_f < 0 or high_f < low_f:
        raise argparse.ArgumentTypeError(f"MIN,MAX with 0 <= MIN <= MAX, got {text!r}")
    return low_f, high_f


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def print_text(result: dict) -> None:
    o, m = result["overall"], result["machine"]
    print(f"{result['database']}: {result['users']} users for {result['wall_s']} s (wait {result['wait_s']} s): "
          f"{o['requests']} requests, {o['req_per_s']} req/s, p50 {o['p50_ms']} ms, p95 {o['p95_ms']} ms, "
          f"p99 {o['p99_ms']} ms, max {o['max_ms']} ms, {o['failures']} errors "
          f"(counted: {result['counted']}, {result['counted_s']} s)")
    print(f"CPU s: {result['cpu_s']}; {m['cores']} cores, load {m['loadavg_1m']} before; setup {result['setup']}")
    width = max(len(k) for k in result["endpoints"]) if result["endpoints"] else 10
    print(f"  {'endpoint':<{width}} {'reqs':>7} {'req/s':>7} {'p50':>7} {'p95':>7} {'p99':>7} {'max':>8} {'errors':>6}")
    for name, e in result["endpoints"].items():
        print(f"  {name:<{width}} {e['requests']:>7} {e['req_per_s']:>7} {e['p50_ms']!s:>7} {e['p95_ms']!s:>7} "
              f"{e['p99_ms']!s:>7} {e['max_ms']!s:>8} {e['failures']:>6}")
    for error in result["errors"]:
        print(f"  error: {error['count']}x {error['endpoint']}: {error['error']}")
    for line in result["server_log_errors"]:
        print(f"  server log: {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=live.positive_int, default=50)
    parser.add_argument("--duration", type=positive_float, default=60.0, help="seconds of load")
    parser.add_argument("--spawn-rate", type=positive_float, default=10.0, help="users started per second")
    parser.add_argument("--wait", type=wait_range, default=(0.5, 1.5), metavar="MIN,MAX",
                        help="seconds each user waits between requests (default 0.5,1.5; 0,0: closed loop)")
    parser.add_argument("--reset-stats", action="store_true",
                        help="count only after every user has started and logged in: the steady state")
    parser.add_argument("--database-url", help="a postgres:// URL of a database of its own (dropped and created)")
    parser.add_argument("--keep-db", action="store_true", help="leave the PostgreSQL database in place")
    parser.add_argument("--reuse-db", action="store_true",
                        help="serve the PostgreSQL database an earlier --keep-db run built (no migrate, no "
                             "load_demo: minutes on a busy machine), and leave it in place")
    parser.add_argument("--web-workers", type=live.positive_int, default=None,
                        help="web server processes (default: as make run, WEB_WORKERS or one per core)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.database_url and args.database_url.startswith(("postgres://", "postgresql://")):
        check_postgres_url(args.database_url)
    elif args.reuse_db:
        raise SystemExit("--reuse-db needs the --database-url of a PostgreSQL database an earlier run built")
    elif args.database_url:
        raise SystemExit("--database-url must be a postgres:// URL (the default is a fresh SQLite file)")

    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        print_text(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
