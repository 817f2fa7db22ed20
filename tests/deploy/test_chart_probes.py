"""The worker's liveness probe, as the chart writes it, against a worker started with the chart's command."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from portal.testing import ROOT, child_env
from tests.deploy.test_chart import named, render, values_for


def _probe(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow_server
def test_the_worker_probe_answers_for_a_live_worker_and_fails_for_another_name(tmp_path):
    docs = render(values_for("values.yaml", {"probes": {"workerTimeoutSeconds": 5}}))
    container = named(docs, "Deployment", "gpu-worker")["spec"]["template"]["spec"]["containers"][0]
    command = list(container["command"])
    queue = f"probe-{uuid.uuid4().hex[:8]}"  # the chart's command, on a queue no other test sends to
    command[command.index("-Q") + 1] = queue
    assert command[0] == "celery"
    bin_dir = str(Path(sys.executable).parent)
    env = child_env(PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", CELERY_QUEUE=queue)
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen([sys.executable, "-m", *command], cwd=ROOT, env=env, stdout=out,
                                  stderr=subprocess.STDOUT)
    probe = container["livenessProbe"]["exec"]["command"]
    # the kubelet runs the probe in the pod, whose HOSTNAME is its host name (what %h expands to)
    in_pod = {**env, "HOSTNAME": socket.gethostname()}
    try:
        deadline = time.monotonic() + 180
        while True:
            answer = _probe(probe, in_pod)
            if answer.returncode == 0:
                break
            assert worker.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, answer.stdout + answer.stderr + log.read_text()[-3000:]
            time.sleep(2)
        assert "pong" in answer.stdout
        elsewhere = _probe(probe, {**env, "HOSTNAME": "another-pod"})
        assert elsewhere.returncode != 0  # no worker of that name: the probe fails
    finally:
        worker.terminate()
        worker.wait(timeout=60)
