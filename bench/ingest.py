"""Usage-sample ingestion: samples per second through the real `POST /api/v1/agent/usage`.

    python -m bench.ingest --db postgres://postgres@127.0.0.1:5432/gpuplatform_bench \\
        --samples 200000 --batch 500 --concurrency 8 --nodes 100 --json
    python -m bench.ingest --db sqlite --samples 50000 --json       # the embedded default, for comparison

Everything is throwaway and on 127.0.0.1:
1. The database named by --db is dropped and created again (PostgreSQL; dropped again at the end
   unless --keep-db), or a fresh SQLite file is made in a temp dir (--db sqlite);
   `bench.ingest_db setup` (a child process with that DATABASE_URL) migrates it and creates --nodes
   nodes of --gpus GPUs, each with one agent token made by `portal.api.agent.create_node_token`.
2. --servers real Daphne processes (`python -m daphne -b 127.0.0.1 -p PORT portal.asgi:application`,
   default one per core) with DEBUG=0, on their own embedded Redis (unix socket in the temp dir).
3. The load generator (httpx.AsyncClient, one event loop in this process): --concurrency senders
   take batches from one queue; each batch holds --batch samples of one node, in the agent's wire
   format (`nodeagent.samples.UsageSample`), sent with that node's token. Senders are spread over
   the servers round-robin. The request bodies are built and serialised before the clock starts.
4. Checks: every answer is 200 with every id accepted and none rejected; the database then holds
   exactly the samples sent, per node (nothing lost, nothing doubled); --resend of the batches is
   sent again, must be answered the same, and must leave the row count unchanged.

Prints JSON: samples, seconds, samples_per_s (accepted samples / wall seconds of the timed run),
batch latency p50/p95/max, db_rows, the resend check, server processes and the command line that
started them, CPU seconds used by the servers and by this process during the timed run (CPU
microseconds per sample is the steadier figure on a shared machine), cores and 1-minute load.
When a request failed, `server_log_errors` quotes the servers' tracebacks.

--batch 8 is what one 8-GPU node sends per 10 s interval in steady state (many small requests);
the default 500 is the agent's upload size when it catches up. --settings runs the servers with
another settings module (e.g. `from portal.settings import *` plus a change) to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

from nodeagent.samples import Reading, UsageSample
from portal.testing import ROOT, free_port, stop_processes, wait_for_http

USAGE_PATH = "/api/v1/agent/usage"
TARGET_PER_S = 10_000
DEFAULT_DB = "postgres://postgres@127.0.0.1:5432/gpuplatform_bench"


@dataclass
class Batch:
    node: str
    token: str
    body: bytes
    ids: frozenset[str]


@dataclass
class Stack:
    """The processes and files the benchmark owns; `stop` ends and removes them."""

    tmp: Path
    redis_url: str
    redis_proc: subprocess.Popen | None = None
    servers: list[subprocess.Popen] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    server_command: str = ""

    def stop(self) -> None:
        stop_processes([*self.servers, self.redis_proc])
        shutil.rmtree(self.tmp, ignore_errors=True)


# --- database ---------------------------------------------------------------------------------

def database_url(db: str, tmp: Path) -> str:
    """--db as a DATABASE_URL: 'sqlite' is a fresh file in the temp dir."""
    if db == "sqlite":
        return f"sqlite:///{tmp / 'bench.sqlite3'}"
    if not db.startswith(("postgres://", "postgresql://", "sqlite:///")):
        raise SystemExit(f"--db must be a postgres:// URL or 'sqlite', got {db!r}")
    return db


def reset_postgres(url: str, *, create: bool = True) -> None:
    """Drop (and create again) the benchmark's own database, never one it was not named."""
    import psycopg
    from psycopg import sql

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    if not name or name == "postgres" or parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"--db must name a database of its own on this machine's loopback, got {url!r}")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        if create:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def run_child(args: list[str], env: dict[str, str], timeout: float) -> dict:
    """A `bench.ingest_db` command in a child process; its stdout is JSON."""
    done = subprocess.run([sys.executable, "-m", "bench.ingest_db", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"bench.ingest_db {args[0]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


# --- processes --------------------------------------------------------------------------------

def server_env(db_url: str, stack: Stack, settings_module: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": db_url, "REDIS_URL": stack.redis_url, "VAR_DIR": str(stack.tmp),
           "SECRET_KEY": secrets.token_urlsafe(50), "DEBUG": "0",  # production behaviour...
           "SECURE_SSL_REDIRECT": "0", "SESSION_COOKIE_SECURE": "0", "CSRF_COOKIE_SECURE": "0",  # ...plain HTTP
           "LOG_LEVEL": "WARNING", "PYTHONUNBUFFERED": "1", "DB_POOL": "1"}  # as make run serves
    env["DJANGO_SETTINGS_MODULE"] = settings_module
    return env


def start_stack(db_url: str, servers: int, tmp: Path, settings_module: str) -> Stack:
    from portal import embedded_redis

    stack = Stack(tmp=tmp, redis_url=f"unix://{tmp / 'redis.sock'}?db=0")
    try:
        stack.redis_proc = embedded_redis.start(stack.redis_url, log_file=tmp / "redis.log")
        env = server_env(db_url, stack, settings_module)
        for _ in range(servers):
            port = free_port()
            command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                       "portal.asgi:application"]
            log = open(tmp / f"daphne-{port}.log", "wb")  # noqa: SIM115 - owned by the child
            stack.servers.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
            stack.ports.append(port)
            stack.server_command = " ".join(["python", *command[1:6], "PORT", *command[7:]])
        for port, proc in zip(stack.ports, stack.servers, strict=True):
            wait_for_http(f"http://127.0.0.1:{port}/", timeout=60, proc=proc)
    except BaseException:
        stack.stop()
        raise
    return stack


def server_log_errors(stack: Stack, limit: int = 5) -> list[str]:
    """The last line of each distinct traceback the servers logged (the cause of their 500s)."""
    found: dict[str, None] = {}
    for log in sorted(stack.tmp.glob("daphne-*.log")):
        lines = log.read_text(errors="replace").splitlines()
        for before, line in zip(lines, lines[1:], strict=False):
            if before.startswith("  ") and line and not line.startswith((" ", "Traceback")):
                found[line.strip()[:300]] = None
    return list(found)[:limit]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc); 0 when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- samples ----------------------------------------------------------------------------------

def build_batches(tokens: dict[str, str], total: int, batch: int, gpus: int, interval_s: float,
                  seed: int) -> list[Batch]:
    """`total` samples spread evenly over the nodes, each node's readings every `interval_s` up to a
    minute ago, cut into batches of one node each and interleaved across nodes like a fleet."""
    rng = random.Random(seed)
    nodes = sorted(tokens)
    per_node = [total // len(nodes) + (1 if i < total % len(nodes) else 0) for i in range(len(nodes))]
    newest = datetime.now(UTC) - timedelta(minutes=1)
    by_node: list[list[Batch]] = []
    for name, count in zip(nodes, per_node, strict=True):
        # Three GPUs in four run a pod; the rest report the whole device.
        pods = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) if rng.random() < 0.75 else None
                for _ in range(gpus)]
        steps = -(-count // gpus)
        samples = []
        for step in range(steps):
            now = newest - timedelta(seconds=interval_s * (steps - 1 - step))
            for g in range(gpus):
                if len(samples) == count:
                    break
                reading = Reading(gpu_uuid=f"GPU-{name}-{g}", gpu_index=g, pod_uid=pods[g],
                                  gpu_util_pct=rng.uniform(0, 100) if pods[g] else rng.uniform(0, 5),
                                  mem_used_mib=rng.randrange(1024, 81920) if pods[g] else 0)
                samples.append(UsageSample.from_reading(name, now, interval_s, reading).to_json())
        by_node.append([
            Batch(node=name, token=tokens[name],
                  body=json.dumps({"node": name, "samples": samples[i:i + batch]}).encode(),
                  ids=frozenset(s["id"] for s in samples[i:i + batch]))
            for i in range(0, len(samples), batch)
        ])
    out = []
    for round_ in range(max(len(b) for b in by_node)):
        out.extend(b[round_] for b in by_node if round_ < len(b))
    return out


# --- load -------------------------------------------------------------------------------------

@dataclass
class LoadResult:
    accepted: int = 0
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


async def send(batches: list[Batch], ports: list[int], concurrency: int, timeout: float) -> LoadResult:
    """Post every batch once with `concurrency` senders; each batch must be accepted whole."""
    import httpx

    queue: asyncio.Queue[Batch] = asyncio.Queue()
    for b in batches:
        queue.put_nowait(b)
    result = LoadResult()

    async def sender(port: int) -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            while True:
                try:
                    b = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                started = time.perf_counter()
                try:
                    response = await client.post(USAGE_PATH, content=b.body, headers={
                        "Authorization": f"Bearer {b.token}", "Content-Type": "application/json"})
                except httpx.HTTPError as error:
                    result.errors.append(f"{b.node}: {error!r}")
                    continue
                result.latencies.append(time.perf_counter() - started)
                if response.status_code != 200:
                    result.errors.append(f"{b.node}: HTTP {response.status_code} {response.text[:200]}")
                    continue
                body = response.json()
                accepted = set(body["accepted"])
                if accepted != b.ids or body["rejected"]:
                    result.errors.append(f"{b.node}: {len(accepted & b.ids)}/{len(b.ids)} accepted, "
                                         f"rejected {body['rejected'][:2]}")
                result.accepted += len(accepted & b.ids)

    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(sender(ports[i % len(ports)]) for i in range(concurrency))),
                           timeout=timeout)
    result.seconds = time.perf_counter() - started
    return result


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- main -------------------------------------------------------------------------------------

def run(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    try:
        return _run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(args: argparse.Namespace, tmp: Path) -> dict:
    db_url = database_url(args.db, tmp)
    if db_url.startswith("postgres"):
        reset_postgres(db_url)
    child = {**os.environ, "DATABASE_URL": db_url, "VAR_DIR": str(tmp), "DJANGO_SETTINGS_MODULE": args.settings,
             "REDIS_URL": f"unix://{tmp / 'redis.sock'}?db=0"}
    tokens = run_child(["setup", "--nodes", str(args.nodes), "--gpus", str(args.gpus)], child, timeout=300)
    batches = build_batches(tokens, args.samples, args.batch, args.gpus, args.interval, args.seed)
    sent = sum(len(b.ids) for b in batches)
    stack = start_stack(db_url, args.servers, tmp, args.settings)
    try:
        # One empty batch per server first: imports and first connections are not what we measure.
        warm = [Batch(node=n, token=tokens[n], body=json.dumps({"node": n, "samples": []}).encode(),
                      ids=frozenset()) for n in sorted(tokens)[:len(stack.ports)]]
        for i, b in enumerate(warm):
            asyncio.run(send([b], [stack.ports[i]], 1, timeout=60))
        cpu_before = [cpu_seconds(p.pid) for p in stack.servers], own_cpu_seconds()
        load = asyncio.run(send(batches, stack.ports, args.concurrency, timeout=args.timeout))
        cpu_after = [cpu_seconds(p.pid) for p in stack.servers], own_cpu_seconds()
        db_rows = run_child(["count"], child, timeout=120)
        resend = batches[:: max(1, round(1 / args.resend))] if args.resend > 0 else []
        again = asyncio.run(send(resend, stack.ports, args.concurrency, timeout=args.timeout))
        db_after_resend = run_child(["count"], child, timeout=120)["total"]
        server_errors = server_log_errors(stack) if load.errors or again.errors else []
    finally:
        stack.stop()
        if db_url.startswith("postgres") and not args.keep_db:
            reset_postgres(db_url, create=False)
    expected_per_node: dict[str, int] = {}
    for b in batches:
        expected_per_node[b.node] = expected_per_node.get(b.node, 0) + len(b.ids)
    server_cpu = sum(after - before for before, after in zip(cpu_before[0], cpu_after[0], strict=True))
    own_cpu = cpu_after[1] - cpu_before[1]
    return {
        "database": "postgresql" if db_url.startswith("postgres") else "sqlite",
        "samples": sent,
        "accepted": load.accepted,
        "seconds": round(load.seconds, 3),
        "samples_per_s": round(load.accepted / load.seconds) if load.seconds else 0,
        "target_per_s": TARGET_PER_S,
        "batches": len(batches),
        "batch_size": args.batch,
        "concurrency": args.concurrency,
        "nodes": args.nodes,
        "batch_latency_ms": {"p50": round(quantile(load.latencies, 0.5) * 1000, 1),
                             "p95": round(quantile(load.latencies, 0.95) * 1000, 1),
                             "max": round(max(load.latencies, default=float("nan")) * 1000, 1),
                             "mean": round(statistics.fmean(load.latencies) * 1000, 1) if load.latencies else None},
        "errors": len(load.errors),
        "error_examples": load.errors[:5],
        "server_log_errors": server_errors,
        "db_rows": db_rows["total"],
        "db_rows_match_sent": db_rows["total"] == sent and db_rows["per_node"] == expected_per_node,
        "resend": {"batches": len(resend), "samples": sum(len(b.ids) for b in resend),
                   "accepted_again": again.accepted, "errors": len(again.errors),
                   "db_rows_after": db_after_resend, "unchanged": db_after_resend == db_rows["total"]},
        "server_processes": len(stack.servers),
        "server_command": stack.server_command,
        "settings": args.settings,
        "cpu_s": {"servers": round(server_cpu, 2), "load_generator": round(own_cpu, 2)},
        "cpu_us_per_sample": {"servers": round(server_cpu / max(1, load.accepted) * 1e6, 1),
                              "load_generator": round(own_cpu / max(1, load.accepted) * 1e6, 1)},
        "cpu_count": os.cpu_count(),
        "load_1m": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", default=DEFAULT_DB,
                        help="postgres://... (dropped and re-created!) or 'sqlite' (a fresh temp file)")
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=500, help="samples per request (the portal takes <= 5000)")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent senders")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between one GPU's samples")
    parser.add_argument("--servers", type=int, default=os.cpu_count() or 1, help="Daphne processes")
    parser.add_argument("--settings", default="portal.settings",
                        help="DJANGO_SETTINGS_MODULE for the servers, to compare settings (e.g. one that imports "
                             "portal.settings and changes CONN_MAX_AGE)")
    parser.add_argument("--resend", type=float, default=0.05, help="fraction of the batches sent twice")
    parser.add_argument("--timeout", type=float, default=600, help="seconds the timed run may take")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep-db", action="store_true", help="leave the PostgreSQL database for inspection")
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args(argv)
    for name in ("samples", "batch", "concurrency", "nodes", "gpus", "servers"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.samples < args.nodes:
        parser.error("--samples must be at least --nodes")
    result = run(args)
    ok = (result["errors"] == 0 and result["db_rows_match_sent"] and result["resend"]["unchanged"]
          and result["resend"]["errors"] == 0)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['samples_per_s']} samples/s into {result['database']} "
              f"({result['samples']} samples in {result['seconds']} s, target {TARGET_PER_S}/s); "
              f"checks {'passed' if ok else 'FAILED'}")
        print(json.dumps(result, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
