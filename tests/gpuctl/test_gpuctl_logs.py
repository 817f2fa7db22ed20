"""`gpuctl logs`: against the real ASGI server on the test database (an ended job's kept logs, a running
job followed line by line), and against a fake server (what it asks, how it prints a stream)."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from gpuctl.cli import main

if not pytest.importorskip("django.conf").settings.configured:  # run with -p no:django
    pytest.skip("needs the Django test plugin (live server, test database)", allow_module_level=True)

SPEC = """name: {name}
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: busybox
    replicas: {{min: {count}, max: {count}}}
    resources: {{gpu: 8}}
    nodePool: h100
"""


def submit(cluster, name: str, count: int):
    from billing.services import submit_quoted_job

    return submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC.format(name=name, count=count))


def cycle_until(backend, job, state: str, *, every: float = 0.0, timeout: float = 60.0) -> None:
    from scheduling.cycle.run import run_scheduling_cycle

    deadline = time.monotonic() + timeout
    while True:
        run_scheduling_cycle(backend)
        job.refresh_from_db()
        if job.state == state:
            return
        assert time.monotonic() < deadline, f"job {job.pk} is {job.state}, not {state}"
        time.sleep(every)


@pytest.mark.django_db(transaction=True)
def test_the_logs_of_an_ended_job(gpuctl, tokens, cluster, clock):
    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.cycle.run import run_scheduling_cycle
    from scheduling.models import ReplicaLog

    backend = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)
    job = submit(cluster, "ended", 2)
    for seconds in (0, 2, 61):  # bind, start, finish (a 1 h job runs 60 s)
        clock.advance(seconds)
        run_scheduling_cycle(backend, now=clock.now)
    job.refresh_from_db()
    assert job.state == "Succeeded"
    kept = {entry.name: entry for entry in ReplicaLog.objects.filter(job=job)}
    alice, pk = tokens["alice"], str(job.pk)

    everything = "".join(f"== {name} on {kept[name].node}\n{kept[name].text}" for name in sorted(kept))
    assert gpuctl(alice, "logs", pk) == (0, everything, "")
    assert gpuctl(alice, "logs", pk, "--replica", "main-1") == (0, kept["main-1"].text, "")
    assert gpuctl(alice, "logs", pk, "-f") == (0, everything, "")  # ended: nothing to wait for
    assert "training finished" in kept["main-1"].text

    assert gpuctl(alice, "logs", pk, "--replica", "main-9") == (
        1, "", f"gpuctl: error: replica: job {pk} has no replica main-9\n")
    assert gpuctl(alice, "logs", pk, "--replica", "Main") == (
        1, "", "gpuctl: error: replica: not a replica name such as worker-0\n")
    assert gpuctl(tokens["bob"], "logs", pk) == (1, "", f"gpuctl: error: no such job: {pk}\n")


@pytest.mark.django_db(transaction=True)
def test_follow_prints_lines_while_the_job_runs(live_daphne, tokens, cluster, tmp_path):
    """The server streams over ASGI line by line: the first lines arrive while the job still runs."""
    from django.utils import timezone

    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.models import ReplicaLog

    backend = SimulatedBackend(speedup=720, failure_rate=0, clock=timezone.now)  # a 1 h job runs 5 s
    job = submit(cluster, "followed", 1)
    cycle_until(backend, job, "Running", every=0.2, timeout=30)
    gpuctl = Path(sys.executable).parent / "gpuctl"
    env = {"HOME": str(tmp_path), "GPUCTL_URL": live_daphne.url, "GPUCTL_TOKEN": tokens["alice"]}
    proc = subprocess.Popen([str(gpuctl), "logs", str(job.pk), "--replica", "main-0", "--follow"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    arrived: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: arrived.extend((time.monotonic(), line) for line in proc.stdout))
    reader.start()
    try:
        cycle_until(backend, job, "Succeeded", every=0.2, timeout=60)
        ended = time.monotonic()
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        proc.kill()
        reader.join(timeout=10)
    assert "".join(line for _, line in arrived) == ReplicaLog.objects.get(job=job).text
    assert arrived[0][0] < ended and arrived[-1][1] == "training finished, checkpoint saved\n"


class FakeServer:
    def __init__(self, chunks: list[bytes], status: int = 200):
        self.chunks, self.status = chunks, status
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.status != 200:
            return httpx.Response(self.status, json={"type": "t", "title": "x", "status": self.status,
                                                     "detail": "No such job", "errors": []})
        return httpx.Response(200, headers={"Content-Type": "text/plain; charset=utf-8"},
                              stream=httpx.ByteStream(b"".join(self.chunks)))


def test_logs_asks_for_text_and_passes_replica_and_follow(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    server = FakeServer([b"== worker-0 on n1\n", "step 1 \u00e9\n".encode()])
    env = {"HOME": str(tmp_path), "GPUCTL_URL": "http://gpu.test", "GPUCTL_TOKEN": "gpt_t"}
    code = main(["logs", "7", "--replica", "worker-0", "-f"], env=env, transport=httpx.MockTransport(server))
    out, err = capsys.readouterr()
    assert (code, out, err) == (0, "== worker-0 on n1\nstep 1 \u00e9\n", "")
    (request,) = server.requests
    assert request.url.path == "/api/v1/jobs/7/logs/" and request.headers["accept"] == "text/plain"
    assert dict(request.url.params) == {"replica": "worker-0", "follow": "1"}

    code = main(["logs", "8"], env=env, transport=httpx.MockTransport(FakeServer([], status=404)))
    assert (code, *capsys.readouterr()) == (1, "", "gpuctl: error: no such job: 8\n")
