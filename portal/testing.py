"""Helpers for tests that start real server processes (used by tests/ and bench/)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(url: str, timeout: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    """Until `url` answers below 500 (or `proc` exits). The wait allows for a server that starts beside the
    other test workers (one per core), each importing Django at the same time."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server process exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


def stop_processes(procs: list[subprocess.Popen | None]) -> None:
    """Terminate the processes still running, then wait for each; kill what does not stop in 10 s."""
    running = [p for p in procs if p is not None and p.poll() is None]
    for proc in running:
        proc.terminate()
    for proc in running:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def database_url_for_children() -> str:
    """A DATABASE_URL for child processes that points at the test database."""
    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s["PASSWORD"] else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a server process that shares the test database and Redis."""
    from django.conf import settings

    env = {**os.environ, "DATABASE_URL": database_url_for_children(), "REDIS_URL": settings.REDIS_URL,
           "VAR_DIR": str(settings.VAR_DIR), "PYTHONUNBUFFERED": "1", "TEST_FAST_PASSWORD_HASHER": "1",
           # the simulated cluster's processes, as this process sees them (a server finds a notebook's URL there)
           "SIM_RUNTIME_DIR": str(settings.SIM_RUNTIME_DIR), "NOTEBOOK_HOME_DIR": str(settings.NOTEBOOK_HOME_DIR),
           "SIM_TRAINING_PROCESSES": "1" if settings.SIM_TRAINING_PROCESSES else "0",
           "SIM_MAX_PROCESSES": str(settings.SIM_MAX_PROCESSES),
           # workspace volumes and datasets on the simulated cluster: the server writes where the tests look
           "VOLUMES_DIR": str(settings.VOLUMES_DIR), "DATASETS_DIR": str(settings.DATASETS_DIR)}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env.update(extra)
    return env
