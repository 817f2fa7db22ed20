"""A `make run` start (web, worker, beat and the banner under supervisord) whose Redis comes up late: every
process waits for it, saying so once, and none logs a traceback; then the banner names the URL and the
logins, a page is one INFO line, and node-agent calls and the beat's cycles every second log nothing at INFO."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

import httpx
import pytest
import redis

from portal import embedded_redis
from portal.testing import ROOT, child_env, free_port, wait_for_http

pytestmark = pytest.mark.slow  # make run started before Redis

CYCLES = json.dumps(["gpu_platform_scheduler_cycle_seconds_count", []])


def _wait(predicate, timeout: float, what: str, output: list[str]):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.25)
    raise TimeoutError(f"{what}:\n" + "".join(output[-80:]))


def _cycles(url: str) -> float:
    try:
        return float(redis.Redis.from_url(url).hget("gpu-platform:metrics", CYCLES) or 0)
    except redis.RedisError:
        return 0


@pytest.mark.django_db(transaction=True)
def test_a_start_with_redis_late_is_quiet(tmp_path, tenants):
    url = f"unix://{tmp_path / 'late.sock'}?db=0"
    port = free_port()
    env = child_env(VAR_DIR=str(tmp_path / "var"), PORT=str(port), REDIS_URL=url, WEB_WORKERS="1", DEMO_LOAD="0",
                    SCHEDULER_INTERVAL_S="1", CELERY_QUEUE=f"quiet-{uuid.uuid4().hex[:8]}", LOG_LEVEL="INFO")
    # A pipe, not a file: supervisord reopens /dev/stdout per program, which on a file overwrites lines.
    proc = subprocess.Popen([sys.executable, "-m", "portal.run", "--only", "web,worker,beat,banner"], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    redis_proc = None
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: any(line.startswith("web    | waiting for redis ...") for line in output), 120,
              "the web server does not say it waits for Redis", output)
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{base}/healthz", timeout=2)  # the web server has not started without Redis
        redis_proc = embedded_redis.start(url)
        wait_for_http(f"{base}/healthz", timeout=180, proc=proc)
        _wait(lambda: any("GPU Platform is up:" in line for line in output), 120, "no banner", output)
        assert httpx.get(f"{base}/login/", timeout=10).status_code == 200
        assert httpx.post(f"{base}/api/v1/agent/heartbeat", json={}, timeout=10).status_code in (401, 403)
        _wait(lambda: _cycles(url) >= 3, 120, "the worker ran no scheduling cycles", output)
        _wait(lambda: any("GET /login/ 200" in line for line in output), 30, "the page was not logged", output)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=90)
        reader.join(timeout=10)
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(timeout=10)
    text = "".join(output)
    assert code == 0, text[-4000:]
    assert "Traceback" not in text, text
    assert "web    | redis is up after" in text, text[-4000:]
    # The worker and beat start once the web server answers, so that it starts alone on the cores.
    web_started = next(i for i, line in enumerate(output) if "Started server process" in line)
    for name in ("worker", "beat"):
        first = next(i for i, line in enumerate(output) if line.startswith(f"{name:<7}| "))
        assert first > web_started, text[-4000:]
        assert f"{name:<7}| waiting for redis" not in text, text[-4000:]
    assert f"GPU Platform is up: {base}/" in text and "alice    alice-demo    owner of vision-lab" in text
    assert sum(re.search(r"portal\.requests \[request \w+ user -\]: GET /login/ 200", line) is not None
               for line in output) == 1, text[-4000:]
    assert '"GET /login/ HTTP/1.1"' not in text  # no second line from the web server's access log
    assert "agent/heartbeat" not in text and "healthz" not in text  # DEBUG
    assert "scheduling_cycle" not in text, text[-4000:]  # sent, received, succeeded: DEBUG
