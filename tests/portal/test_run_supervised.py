"""`python -m portal.run` under supervisord: a killed process comes back, the others keep serving,
and stopping the supervisor stops every child."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from portal.testing import ROOT, child_env, free_port, wait_for_http

pytestmark = pytest.mark.slow  # make run's processes killed and brought back


def _ctl(conf: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "supervisor.supervisorctl", "-c", str(conf), *args],
                          capture_output=True, text=True, timeout=30).stdout.strip()


def _pid(conf: Path, name: str) -> int:
    out = _ctl(conf, "pid", name)
    return int(out) if out.isdigit() else 0


def _running(conf: Path, name: str) -> bool:
    return " RUNNING " in _ctl(conf, "status", name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := predicate():
            return result
        time.sleep(0.25)
    raise TimeoutError(what)


class Stack:
    def __init__(self, env: dict, tmp: Path, only: str):
        self.port = env["PORT"]
        self.conf = Path(env["VAR_DIR"]) / "supervisord.conf"
        self.log = tmp / "run.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "portal.run", "--only", only], cwd=ROOT, env=env,
                                         stdout=out, stderr=subprocess.STDOUT)
        self.health = f"http://127.0.0.1:{self.port}/healthz"
        self.ready = f"http://127.0.0.1:{self.port}/readyz"  # names the database and Redis

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=60)


def _start(env, tmp_path, only, names) -> Stack:
    stack = Stack(env, tmp_path, only)
    try:
        wait_for_http(stack.health, timeout=60, proc=stack.proc)
        _wait(lambda: all(_running(stack.conf, n) for n in names), 60, f"{names} not RUNNING")
    except BaseException:
        stack.stop()
        raise
    return stack


@pytest.mark.django_db(transaction=True)
def test_killed_worker_comes_back_while_web_keeps_serving(tmp_path):
    from portal.celery import app

    queue = f"test-run-{uuid.uuid4().hex[:8]}"  # its own queue: it must take no other test's tasks
    env = child_env(VAR_DIR=str(tmp_path / "var"), PORT=str(free_port()), CELERY_QUEUE=queue)
    stack = _start(env, tmp_path, "web,worker", ("web", "worker"))
    try:
        web, worker = _pid(stack.conf, "web"), _pid(stack.conf, "worker")
        os.kill(worker, signal.SIGKILL)
        answers = []

        def worker_back():
            answers.append(httpx.get(stack.health, timeout=5).status_code)
            new = _pid(stack.conf, "worker")
            return new if new not in (0, worker) and _running(stack.conf, "worker") else 0

        new_worker = _wait(worker_back, 60, "the worker was not restarted")
        assert set(answers) == {200}  # web served throughout
        assert _pid(stack.conf, "web") == web
        # The new worker answers Celery's ping (the name run.py gives it: worker@<host>).
        name = f"worker@{socket.gethostname()}"
        _wait(lambda: app.control.ping(destination=[name], timeout=1.0), 60, "the restarted worker does not answer ping")
    finally:
        code = stack.stop()
    output = stack.output()
    assert "exited: worker (terminated by SIGKILL" in output, output[-3000:]
    assert "stopped: web" in output and "stopped: worker" in output, output[-3000:]
    assert code == 0, output[-3000:]
    _wait(lambda: not any(_alive(p) for p in (web, new_worker)), 30, "children outlived the supervisor")
    with pytest.raises(httpx.HTTPError):
        httpx.get(stack.health, timeout=2)


def test_killed_embedded_redis_comes_back(tmp_path):
    """The embedded Redis is a supervised program too (no REDIS_URL: run.py starts its own)."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(VAR_DIR=str(tmp_path / "var"), DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
               PORT=str(free_port()), PYTHONUNBUFFERED="1")
    stack = _start(env, tmp_path, "redis,web", ("redis", "web"))
    try:
        redis_pid = _pid(stack.conf, "redis")
        os.kill(redis_pid, signal.SIGKILL)
        _wait(lambda: _pid(stack.conf, "redis") not in (0, redis_pid), 60, "redis was not restarted")
        _wait(lambda: httpx.get(stack.ready, timeout=5).json().get("redis") == "ok", 60,
              "web does not reach the restarted redis")
        new_redis = _pid(stack.conf, "redis")
    finally:
        code = stack.stop()
    assert code == 0, stack.output()[-3000:]
    _wait(lambda: not _alive(new_redis), 30, "redis outlived the supervisor")
    # Every line reaches the terminal with its process name.
    assert "redis  | " in stack.output() and "web    | " in stack.output()
