"""Helpers for the fault tests (test_faults.py): processes in their own process groups, a TCP proxy
that can be cut, PostgreSQL scratch databases, and two command-line entry points that run in
child processes:

    python tests/reliability/tests_faults_helpers.py worker --pause MODE --marker FILE -- CELERY_ARGS...
        a Celery worker that stops dead at a chosen point of its first scheduling cycle, writes
        FILE and waits there to be killed (MODE: before-commit, mid-launch)
    python tests/reliability/tests_faults_helpers.py prepare
        migrate the DATABASE_URL database and seed a node with two busy GPUs, a workspace owner
        and an API token; prints JSON
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
PG_ADMIN_URL = os.environ.get("FAULT_PG_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")


def wait_until(predicate, timeout: float, what: str, every: float = 0.2):
    """The first truthy value of `predicate()`, polled until `timeout` seconds; TimeoutError else."""
    deadline = time.monotonic() + timeout
    while True:
        if result := predicate():
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} (waited {timeout:.0f} s)")
        time.sleep(every)


# --- processes ----------------------------------------------------------------------------------

class Processes:
    """Child processes, each the leader of its own process group: a kill reaches its children too."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        proc.wait(timeout=30)

    def stop_all(self) -> None:
        running = [p for p in self.procs.values() if p.poll() is None]
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in running:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        # What a group leader left behind (a worker's pool children, say) goes too.
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def worker_command(name: str, queue: str, pause: str | None = None, marker: Path | None = None) -> list[str]:
    """A Celery worker on `queue` (solo pool: the cycle runs in the process that is killed)."""
    celery = ["-A", "portal", "worker", "-Q", queue, "--pool", "solo", "-n", f"{name}@%h", "-l", "INFO",
              "--without-gossip", "--without-mingle", "--without-heartbeat"]
    if pause is None:
        return [sys.executable, "-m", "celery", *celery]
    return [sys.executable, str(HERE), "worker", "--pause", pause, "--marker", str(marker), "--", *celery]


# --- a TCP proxy that can be cut ----------------------------------------------------------------

class TcpProxy:
    """127.0.0.1:<port> forwarded to `target`. `cut()` closes every connection and refuses new
    ones (nothing listens); `restore()` listens on the same port again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]

    def start(self) -> TcpProxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        listener.settimeout(0.2)  # accept() wakes up to notice a cut
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="proxy-accept", daemon=True).start()
        return self

    restore = start

    @property
    def up(self) -> bool:
        return self._listener is not None

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, set()
        if listener is not None:
            listener.close()
        for conn in conns:
            self._close(conn)

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                alive = self._listener is listener
                if alive:
                    self._conns.update((client, upstream))
            if not alive:
                self._close(client)
                self._close(upstream)
                return
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), name="proxy-pipe", daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(src)
                self._conns.discard(dst)
            self._close(src)
            self._close(dst)

    @staticmethod
    def _close(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
        conn.close()


# --- PostgreSQL scratch databases ---------------------------------------------------------------

def postgres_unreachable_reason() -> str | None:
    """Why PostgreSQL at PG_ADMIN_URL cannot be used, or None when it can."""
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # any failure means: not here
        return f"PostgreSQL not reachable at {PG_ADMIN_URL}: {exc.__class__.__name__}: {exc}"
    return None


def _admin(statement: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=10) as conn:
        conn.execute(statement)


def create_database(name: str) -> str:
    """A new empty database; returns its URL."""
    drop_database(name)
    _admin(f'CREATE DATABASE "{name}"')
    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


def drop_database(name: str) -> None:
    _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_url_via(url: str, port: int) -> str:
    """`url` with its host and port replaced by 127.0.0.1:`port`."""
    parts = urlsplit(url)
    auth = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{auth}@127.0.0.1:{port}" if auth else f"127.0.0.1:{port}"))


# --- child-process entry points -----------------------------------------------------------------

def _mark(marker: Path, **facts) -> None:
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(facts))
    tmp.rename(marker)


def _wait_to_be_killed() -> None:
    while True:
        time.sleep(60)


def _pause_before_commit(marker: Path) -> None:
    """Stop inside the apply step of the first cycle (on a database without replicas): at the
    first after-commit registration once its binds are written, before they are committed."""
    from django.db import connection, transaction

    from scheduling.models import Replica

    original = transaction.on_commit

    def on_commit(func, using=None, robust=False):
        if connection.in_atomic_block and (written := Replica.objects.count()):
            _mark(marker, uncommitted_replicas=written)
            _wait_to_be_killed()
        return original(func, using=using, robust=robust)

    transaction.on_commit = on_commit


def _pause_mid_launch(marker: Path) -> None:
    """Stop after the decisions are committed, half way through launching them on the backend."""
    from scheduling.backends.simulated.backend import SimulatedBackend

    original = SimulatedBackend.launch_many

    def launch_many(self, replicas):
        if len(replicas) < 2:
            return original(self, replicas)
        half = len(replicas) // 2
        original(self, replicas[:half])
        _mark(marker, launched=half, of=len(replicas))
        _wait_to_be_killed()

    SimulatedBackend.launch_many = launch_many


def _worker(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--pause", choices=["before-commit", "mid-launch"], required=True)
    parser.add_argument("--marker", type=Path, required=True)
    parser.add_argument("celery", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    (_pause_before_commit if args.pause == "before-commit" else _pause_mid_launch)(args.marker)
    from celery.__main__ import main as celery_main

    sys.argv = ["celery", *[a for a in args.celery if a != "--"]]
    celery_main()


def _prepare() -> None:
    """Migrate, then one node with two GPUs, each held by a running replica, and the node's token."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from datetime import timedelta

    from django.core.management import call_command
    from django.utils import timezone

    from billing.metering.tokens import create_node_token
    from portal.models import Role
    from portal.services import create_api_token
    from scheduling.models import JobState, Replica
    from tests.factories import (
        JobFactory,
        MembershipFactory,
        NodeFactory,
        NodePoolFactory,
        QueueFactory,
        WorkspaceFactory,
    )

    call_command("migrate", verbosity=0, interactive=False)
    pool = NodePoolFactory(name="fault-pool", gpu_model="H100-80GB", gpu_memory_mib=81920)
    node = NodeFactory(pool=pool, name="fault-node-01", gpus=2)
    workspace, queue = WorkspaceFactory(slug="fault-lab"), QueueFactory(name="fault-queue")
    started = timezone.now() - timedelta(minutes=1)
    pods = []
    for index in range(2):
        job = JobFactory(workspace=workspace, queue=queue, state=JobState.RUNNING, started=started)
        replica = Replica.objects.create(job=job, role="main", index=0, state=JobState.RUNNING, node=node,
                                         gpu_indices=[index], slice={"kind": "whole"}, started=started)
        pods.append({"pod_uid": str(replica.uid), "gpu_index": index, "milli": 1000, "memory_mib": 40000})
    _, token = create_node_token(node)
    owner = MembershipFactory(workspace=workspace, role=Role.OWNER).user
    _, api_token = create_api_token(owner, "fault")
    print(json.dumps({"node": node.name, "token": token, "pods": pods, "api_token": api_token,
                      "username": owner.username, "password": f"{owner.username}-test"}))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # run as a script from tests/reliability: the project comes first
    command, rest = sys.argv[1], sys.argv[2:]
    if command == "worker":
        _worker(rest)
    elif command == "prepare":
        _prepare()
    else:
        sys.exit(f"unknown command {command!r}")
