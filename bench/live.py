"""Live-update latency: N websocket clients through Daphne and Redis, K job events to all of them.

    python -m bench.live --clients 500 --events 50 --json

Everything is throwaway and on 127.0.0.1: a temporary SQLite database (migrated), a tenant with one
workspace and a logged-in session, the project's embedded Redis on a unix socket in a temp dir
(unless --redis-url), and one real Daphne process serving `portal.asgi:application`, started the
way `make run` starts it. The clients (the `websockets` asyncio client, one event loop) join
`/ws/workspaces/<slug>/` with the session cookie and an Origin header, like a browser page.

Each event goes through the product's path, `portal.services.publish_to_workspace` (Channels
group_send over channels_redis), and carries its wall-clock send time; the latency of one delivery
is receipt time minus send time (one machine, one clock). Events are spaced by --interval seconds
(default 0.5; 0 sends them in one burst, which measures drain throughput rather than latency).

Prints: `latency_ms` p50/p95/p99/max over every (client, event) delivery (the target: p95 < 200 ms
at 500 clients); per event, the first and the last client to get it; delivered/expected (a client
that connected counts as expected even if it drops later); connect times; the publish call's own
time; CPU microseconds per delivery spent by Daphne, Redis and this process (clients + publisher)
while events flowed, split user/sys: on a shared machine the wall-clock figures swing with the
load, the CPU cost per delivery much less; and the machine (cores, 1-minute load).

To find where Daphne spends its time: --profile-daphne FILE (cProfile; read with pstats). To compare
settings (e.g. another CHANNEL_LAYERS), set DJANGO_SETTINGS_MODULE to a module that imports
portal.settings and overrides them; Daphne inherits it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import platform
import random
import resource
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from portal.testing import ROOT, free_port, stop_processes, wait_for_http

TARGET_P95_MS = 200.0


@dataclass
class Stack:
    """The processes and files the benchmark owns, removed by `stop`."""

    tmp: Path
    redis_url: str
    redis_proc: subprocess.Popen | None = None
    daphne_proc: subprocess.Popen | None = None
    daphne_log: Path | None = None

    def stop(self) -> None:
        stop_processes([self.daphne_proc, self.redis_proc])
        shutil.rmtree(self.tmp, ignore_errors=True)


@dataclass
class Client:
    """One websocket client's record: when it connected and what it received."""

    connect_s: float | None = None
    error: str | None = None
    latencies_ms: dict[int, float] = field(default_factory=dict)  # event seq -> latency


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil
    return ordered[int(rank) - 1]


def summary(values: list[float]) -> dict:
    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 2)

    return {"p50": r(percentile(values, 50)), "p95": r(percentile(values, 95)),
            "p99": r(percentile(values, 99)), "max": r(max(values) if values else None)}


# --- environment ------------------------------------------------------------------------------

def configure_environment(tmp: Path, redis_url: str | None) -> str:
    """Point this process (and the Daphne it starts) at a throwaway database and Redis."""
    url = redis_url or f"unix://{tmp / 'redis.sock'}?db=0"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")  # another one: to compare settings
    os.environ.update(
        DATABASE_URL=f"sqlite:///{tmp / 'db.sqlite3'}",
        REDIS_URL=url,
        VAR_DIR=str(tmp / "var"),
        SECRET_KEY=secrets.token_urlsafe(50),
        DEBUG="0",                      # production behaviour...
        SECURE_SSL_REDIRECT="0",        # ...but plain HTTP/WS on loopback
        SESSION_COOKIE_SECURE="0",
        CSRF_COOKIE_SECURE="0",
        LOG_LEVEL="INFO",               # keeps channels_redis' "over capacity" lines in the log
        PYTHONUNBUFFERED="1",
    )
    return url


def prepare_tenant() -> tuple[object, str, str]:
    """Migrate, then create a user, a workspace it belongs to and a session.

    The workspace gets a random large id so its Channels group (`workspace.<id>`) cannot meet a
    real one when --redis-url points at a shared Redis.
    Returns (workspace, slug, "name=value" session cookie).
    """
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connections
    from django.test import Client as DjangoClient

    from portal.models import Membership, Role, Workspace

    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per readiness probe otherwise
    call_command("migrate", verbosity=0, interactive=False)
    user = get_user_model().objects.create_user("bench-live", password=None)
    slug = f"bench-live-{secrets.token_hex(4)}"
    workspace = Workspace.objects.create(pk=random.randint(10**9, 2 * 10**9), slug=slug, name="bench live")
    Membership.objects.create(user=user, workspace=workspace, role=Role.MEMBER)
    browser = DjangoClient()
    browser.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"
    connections.close_all()
    return workspace, slug, cookie


def start_stack(stack: Stack, own_redis: bool, profile_to: str | None = None, start_timeout_s: float = 60) -> str:
    """Start the embedded Redis (unless given one) and Daphne (answering within `start_timeout_s`); returns
    Daphne's base URL."""
    from portal import embedded_redis

    if own_redis:
        stack.redis_proc = embedded_redis.start(stack.redis_url, log_file=stack.tmp / "redis.log")
    port = free_port()
    stack.daphne_log = stack.tmp / "daphne.log"
    with open(stack.daphne_log, "wb") as out:
        profiler = ["-m", "cProfile", "-o", str(Path(profile_to).resolve())] if profile_to else []
        stack.daphne_proc = subprocess.Popen(
            [sys.executable, *profiler, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "portal.asgi:application"],
            cwd=ROOT, env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    wait_for_http(f"{base}/healthz", timeout=start_timeout_s, proc=stack.daphne_proc)
    return base


def raise_fd_limit(clients: int) -> None:
    """Each client is one socket here and one in Daphne (which inherits the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 2 * clients + 256))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


# --- the run ----------------------------------------------------------------------------------

async def run_client(url: str, origin: str, cookie: str, record: Client, events: int,
                     gate: asyncio.Semaphore, connected: asyncio.Event, done: asyncio.Event,
                     connect_timeout: float, sockets: list) -> None:
    from websockets.asyncio.client import connect

    try:
        async with gate:
            started = time.perf_counter()
            ws = await connect(url, origin=origin, additional_headers={"Cookie": cookie},
                               open_timeout=connect_timeout, close_timeout=2)
            hello = json.loads(await asyncio.wait_for(ws.recv(), connect_timeout))
            if hello.get("type") != "hello":
                raise RuntimeError(f"expected hello, got {hello}")
            record.connect_s = time.perf_counter() - started
        sockets.append(ws)
        connected.set()
        async for raw in ws:
            received = time.time()  # before parsing: the parse is the client's cost, not the server's
            message = json.loads(raw)
            event = message["event"]
            record.latencies_ms[event["seq"]] = (received - event["sent_at"]) * 1000.0
            if len(record.latencies_ms) >= events:
                break
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # one failed client is a figure (delivered < expected), not a crash
        record.error = f"{type(exc).__name__}: {exc}"
    finally:
        connected.set()
        if len(record.latencies_ms) >= events or record.error:
            done.set()


def job_event(seq: int, workspace_id: int) -> dict:
    """Shaped like scheduling.services.job_event_message, plus the benchmark's two fields."""
    return {"job": 100000 + seq, "name": f"bench-job-{seq}", "kind": "started", "state": "Running",
            "reason": "", "pending_reason": "", "time": "2026-01-01T00:00:00+00:00",
            "workspace": workspace_id, "seq": seq, "sent_at": time.time()}


def publish(workspace, seq: int) -> float:
    """The product's publish path, in a worker thread (as a Celery task calls it: no event loop)."""
    from portal.services import publish_to_workspace

    started = time.perf_counter()
    publish_to_workspace(workspace, job_event(seq, workspace.pk))
    return time.perf_counter() - started


async def measure(args, base: str, slug: str, cookie: str, workspace, stack: Stack) -> dict:
    url = base.replace("http://", "ws://") + f"/ws/workspaces/{slug}/"
    records = [Client() for _ in range(args.clients)]
    gate = asyncio.Semaphore(args.connect_concurrency)
    sockets: list = []
    finished = [asyncio.Event() for _ in records]
    connected = [asyncio.Event() for _ in records]

    connect_started = time.perf_counter()
    tasks = [asyncio.create_task(run_client(url, base, cookie, rec, args.events, gate, conn, done,
                                            args.connect_timeout, sockets))
             for rec, conn, done in zip(records, connected, finished, strict=True)]
    await asyncio.gather(*(c.wait() for c in connected))
    connect_wall = time.perf_counter() - connect_started
    live = [r for r in records if r.connect_s is not None]  # a client lost later still counts as expected

    cpu_before = (cpu_seconds(stack.daphne_proc), cpu_seconds(stack.redis_proc), own_cpu_seconds())
    publish_s: list[float] = []
    for seq in range(args.events):
        publish_s.append(await asyncio.to_thread(publish, workspace, seq))
        if args.interval:
            await asyncio.sleep(args.interval)
    drain_until = time.perf_counter() + args.drain
    pending = [f.wait() for f, r in zip(finished, records, strict=True) if r.connect_s is not None]
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*pending), max(0.0, drain_until - time.perf_counter()))

    cpu_after = (cpu_seconds(stack.daphne_proc), cpu_seconds(stack.redis_proc), own_cpu_seconds())
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)

    deliveries = [ms for r in live for ms in r.latencies_ms.values()]
    per_event = [[r.latencies_ms[seq] for r in live if seq in r.latencies_ms] for seq in range(args.events)]
    per_event = [ms for ms in per_event if ms]
    errors = sorted({r.error for r in records if r.error})
    return {
        "clients": args.clients,
        "connected": len(live),
        "events": args.events,
        "interval_s": args.interval,
        "expected": len(live) * args.events,
        "delivered": len(deliveries),
        "latency_ms": summary(deliveries),
        "first_client_ms": summary([min(ms) for ms in per_event]),
        "last_client_ms": summary([max(ms) for ms in per_event]),
        "publish_call_ms": summary([s * 1000 for s in publish_s]),
        "connect": {"all_s": round(connect_wall, 2),
                    "each_ms": summary([r.connect_s * 1000 for r in live]),
                    "concurrency": args.connect_concurrency, "failed": args.clients - len(live)},
        # CPU spent while events flowed, per delivery: the figure that a busy shared machine
        # does not distort much (wall-clock latency is what it does distort).
        "cpu_us_per_delivery": {
            name: {kind: round((a - b) * 1e6 / max(1, len(deliveries)), 1)
                   for kind, b, a in zip(("user", "sys"), before, after, strict=True)}
            for name, before, after in zip(("daphne", "redis", "clients_and_publisher"), cpu_before, cpu_after,
                                           strict=True)},
        "errors": errors[:5],
    }


def cpu_seconds(proc: subprocess.Popen | None) -> tuple[float, float]:
    """(user, system) CPU seconds a child has used so far (Linux /proc); zeros when unknown."""
    if proc is None or proc.poll() is not None:
        return 0.0, 0.0
    try:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def own_cpu_seconds() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def over_capacity_lines(log: Path | None) -> int:
    if log is None or not log.exists():
        return 0
    return sum("over capacity" in line for line in log.read_text(errors="replace").splitlines())


def machine() -> dict:
    return {"cores": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2),
            "python": platform.python_version(), "platform": platform.platform(terse=True)}


def run(args) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="bench-live-"))
    stack = Stack(tmp=tmp, redis_url=configure_environment(tmp, args.redis_url))

    # Backstop: whatever hangs, the processes go and the benchmark ends.
    def give_up() -> None:
        print(f"bench.live: deadline of {args.deadline:.0f} s passed; stopping", file=sys.stderr, flush=True)
        stack.stop()
        os._exit(3)

    backstop = threading.Timer(args.deadline + 30, give_up)
    backstop.daemon = True
    backstop.start()
    try:
        raise_fd_limit(args.clients)
        started = time.perf_counter()
        machine_before = machine()
        workspace, slug, cookie = prepare_tenant()
        base = start_stack(stack, own_redis=args.redis_url is None, profile_to=args.profile_daphne)
        setup_s = time.perf_counter() - started
        budget = max(10.0, args.deadline - setup_s)
        try:
            result = asyncio.run(asyncio.wait_for(measure(args, base, slug, cookie, workspace, stack), budget))
        except TimeoutError:
            raise SystemExit(f"bench.live: no result within the {args.deadline:.0f} s deadline") from None
        result["over_capacity_log_lines"] = over_capacity_lines(stack.daphne_log)
        result["setup_s"] = round(setup_s, 1)
        result["target_p95_ms"] = TARGET_P95_MS
        result["meets_target"] = (result["latency_ms"]["p95"] is not None
                                  and result["latency_ms"]["p95"] < TARGET_P95_MS
                                  and result["delivered"] == result["expected"] and result["connected"] == args.clients)
        result["machine"] = machine_before
        result["redis"] = "given" if args.redis_url else "embedded (unix socket)"
        if stack.daphne_proc is not None and stack.daphne_proc.poll() is not None:
            result["errors"].append(f"daphne exited with {stack.daphne_proc.returncode}")
        return result
    finally:
        backstop.cancel()
        stack.stop()


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.live", description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=positive_int, default=500)
    parser.add_argument("--events", type=positive_int, default=50)
    parser.add_argument("--interval", type=non_negative, default=0.5, help="seconds between events (0: one burst)")
    parser.add_argument("--connect-concurrency", type=positive_int, default=50,
                        help="handshakes in flight at once")
    parser.add_argument("--connect-timeout", type=non_negative, default=15.0, help="seconds per handshake")
    parser.add_argument("--drain", type=non_negative, default=10.0,
                        help="seconds to wait for late deliveries after the last event")
    parser.add_argument("--deadline", type=non_negative, default=300.0, help="overall limit in seconds")
    parser.add_argument("--redis-url", help="use this Redis instead of starting one")
    parser.add_argument("--profile-daphne", metavar="FILE",
                        help="run Daphne under cProfile and write its stats to FILE (slows it down)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        lat, m = result["latency_ms"], result["machine"]
        print(f"{result['connected']}/{result['clients']} clients, {result['events']} events every "
              f"{result['interval_s']} s: delivered {result['delivered']}/{result['expected']}; latency ms "
              f"p50 {lat['p50']} p95 {lat['p95']} p99 {lat['p99']} max {lat['max']} "
              f"(slowest client per event p95 {result['last_client_ms']['p95']}); connect "
              f"{result['connect']['all_s']} s for all; {m['cores']} cores, load {m['loadavg_1m']}; "
              f"target p95 < {TARGET_P95_MS:.0f} ms: {'met' if result['meets_target'] else 'MISSED'}")
        for error in result["errors"]:
            print(f"  error: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
