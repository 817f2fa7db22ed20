"""The simulated collector reports what a pod's real server measures (the simulated cluster's inference
and notebook servers), falls back to invented figures when it does not answer, and the portal tells
only the node's own agent where those servers answer."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from nodeagent.simulated import Assignment, SimulatedCollector, parse_assignments

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


def start_server(module: str, *args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", f"scheduling.backends.simulated.{module}", "--port", "0", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line, f"{module} exited with {proc.wait()} before it listened"
    return proc, json.loads(line)["listening"].rstrip("/") + "/"


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM drains a model server (answers in flight end first); then kill, as a pod's grace ends."""
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    proc.stdout.close()


@pytest.fixture
def inference():
    proc, url = start_server("inference_server", "--model", "m", "--api-key", "k")
    yield url
    stop(proc)


def pod_util(collector: SimulatedCollector, pod: str, at: datetime) -> list[float]:
    return [r.gpu_util_pct for r in collector.sample(at) if r.pod_uid == pod]


def wait_until(check, what: str, limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def test_an_idle_server_reports_no_use_where_invented_figures_would(inference):
    served = Assignment("svc", 0, 500, 8000, inference + "metrics?format=json", "Bearer k")
    invented = Assignment("svc", 0, 500, 8000)
    measured = SimulatedCollector(lambda: [served], node="n1", gpus=1)
    made_up = SimulatedCollector(lambda: [invented], node="n1", gpus=1)

    ticks = [T0 + timedelta(seconds=10 * t) for t in range(5)]
    assert [pod_util(measured, "svc", t) for t in ticks] == [[0.0]] * 5
    assert sum(u for t in ticks for u in pod_util(made_up, "svc", t)) > 5  # the fallback invents use


def test_a_loaded_server_reports_its_slots_in_use_scaled_to_the_share_held(inference):
    def ask():
        try:
            httpx.post(inference + "v1/completions", headers={"Authorization": "Bearer k"}, timeout=120,
                       json={"model": "m", "prompt": "hello", "max_tokens": 4096})
        except httpx.HTTPError:
            pass  # the server is stopped at the end of the test, mid-request

    for _ in range(4):
        threading.Thread(target=ask, daemon=True).start()
    wait_until(lambda: httpx.get(inference + "metrics?format=json", headers={"Authorization": "Bearer k"})
               .json()["in_service"] == 4, "4 requests in service")
    # Two GPUs of the same pod: one read per sample, both report it.
    pods = [Assignment("svc", i, 500, 8000, inference + "metrics?format=json", "Bearer k") for i in (0, 1)]
    collector = SimulatedCollector(lambda: pods, node="n1", gpus=2)

    first = pod_util(collector, "svc", T0)
    time.sleep(0.3)
    second = pod_util(collector, "svc", T0 + timedelta(seconds=10))  # the mean since the first read

    # 4 of its 8 slots busy, on a pod that holds half of each GPU: a quarter of each GPU.
    assert first == [25.0, 25.0]
    assert second[0] == second[1] and 20 < second[0] <= 25.0
    devices = [r for r in collector.sample(T0 + timedelta(seconds=20)) if r.pod_uid is None]
    assert all(d.gpu_util_pct > 0 for d in devices)


def test_a_notebook_reports_its_running_code():
    proc, url = start_server("notebook_server", "--base-url", "/nb/ws/lab/", "--token", "t", "--gpu", "1")
    try:
        auth = {"Authorization": "token t"}
        kernel = httpx.post(url + "api/kernels", headers=auth, json={}).json()["id"]
        pod = Assignment("nb", 0, 1000, 8000, url + "metrics?format=json", "token t")
        assert pod_util(SimulatedCollector(lambda: [pod], node="n1", gpus=1), "nb", T0) == [0.0]
        httpx.post(url + f"api/kernels/{kernel}/execute", headers=auth, json={"seconds": 600, "gpu": 0.6})
        collector = SimulatedCollector(lambda: [pod], node="n1", gpus=1)
        assert pod_util(collector, "nb", T0) == [60.0]
        time.sleep(0.2)
        assert pod_util(collector, "nb", T0 + timedelta(seconds=10)) == [pytest.approx(60.0, abs=0.5)]
    finally:
        stop(proc)


def test_a_server_that_does_not_answer_falls_back_and_is_logged_once(inference, caplog):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    dead = Assignment("gone", 0, 1000, 8000, f"http://127.0.0.1:{free_port}/metrics?format=json", "Bearer k")
    refused = Assignment("wrong-key", 0, 1000, 8000, inference + "metrics?format=json", "Bearer nope")
    reference = SimulatedCollector(lambda: [Assignment("gone", 0, 1000, 8000), Assignment("wrong-key", 0, 1000, 8000)],
                                   node="n1", gpus=1)
    collector = SimulatedCollector(lambda: [dead, refused], node="n1", gpus=1)

    with caplog.at_level(logging.WARNING, logger="nodeagent.simulated"):
        for t in range(4):
            at = T0 + timedelta(seconds=10 * t)
            assert collector.sample(at) == reference.sample(at)  # the invented figures, exactly

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert any("401" in w for w in warnings)


def test_metrics_keys_are_optional_and_checked():
    payload = {"assignments": [{"pod_uid": "a", "gpu_index": 0, "milli": 500},
                               {"pod_uid": "b", "gpu_index": 1, "milli": 1000, "metrics_url": "http://x/metrics",
                                "metrics_auth": "Bearer k"}]}
    assert parse_assignments(payload) == [Assignment("a", 0, 500, 0),
                                          Assignment("b", 1, 1000, 0, "http://x/metrics", "Bearer k")]
    with pytest.raises(ValueError, match="metrics_url must be text"):
        parse_assignments({"assignments": [{"pod_uid": "a", "gpu_index": 0, "milli": 5, "metrics_url": 3}]})


# ---------------------------------------------------------------------------- the portal's side

SERVICE = """\
kind: inference
name: chat
queue: vision-lab
vendor: amd
nodePool: mi300x
model: {path: /models/chat}
resources: {gpu: 2}
replicas: {min: 1, max: 1}
"""
TRAINING = """\
name: train
queue: vision-lab
roles:
  - name: main
    image: busybox:1.36
    vendor: amd
    nodePool: mi300x
    resources: {gpu: 4}
"""


def agent_client(node_name: str):
    from rest_framework.test import APIClient

    from billing.metering.tokens import create_node_token
    from scheduling.models import Node

    _, raw = create_node_token(Node.objects.get(name=node_name))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


@pytest.mark.django_db
def test_the_nodes_agent_learns_where_its_inference_replica_tells_its_use(cluster, clock, run):
    from scheduling import services
    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.models import JobState

    backend = SimulatedBackend(speedup=1, failure_rate=0, clock=clock, server_startup_s=0)
    service = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SERVICE)
    training = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=TRAINING)
    deadline = time.monotonic() + 30
    while service.state != JobState.RUNNING or training.state != JobState.RUNNING:
        assert time.monotonic() < deadline, (service.state, training.state)
        clock.advance(1)
        run(backend, clock)
        service.refresh_from_db()
        training.refresh_from_db()
        time.sleep(0.1)
    [replica] = service.replicas.all()
    [worker] = training.replicas.all()
    assert replica.node.name == worker.node.name == "mi300x-01"

    answer = agent_client("mi300x-01").get("/api/v1/agent/assignments", {"node": "mi300x-01"})
    assert answer.status_code == 200
    entries = answer.json()["assignments"]
    served = [e for e in entries if e["pod_uid"] == str(replica.uid)]
    trained = [e for e in entries if e["pod_uid"] == str(worker.uid)]
    assert len(served) == 2 and len(trained) == 4
    assert all("metrics_url" not in e and "metrics_auth" not in e for e in trained)
    endpoint = backend.endpoint((service.pk, replica.role, replica.index))
    for entry in served:
        assert entry["metrics_url"] == endpoint.url + "metrics?format=json"
        assert entry["metrics_auth"] == f"Bearer {endpoint.token}"
    # What the agent is told reaches the server: it answers with that header, and nothing without it.
    assert httpx.get(served[0]["metrics_url"], headers={"Authorization": served[0]["metrics_auth"]}).json()["gpu"]
    assert httpx.get(served[0]["metrics_url"]).status_code == 401
    collector = SimulatedCollector(lambda: parse_assignments(answer.json()), node="mi300x-01", gpus=8)
    readings = collector.sample(T0)
    assert [r.gpu_util_pct for r in readings if r.pod_uid == str(replica.uid)] == [0.0, 0.0]  # no traffic

    other = agent_client("h100-01")
    assert other.get("/api/v1/agent/assignments", {"node": "mi300x-01"}).status_code == 403
    own = other.get("/api/v1/agent/assignments", {"node": "h100-01"}).json()["assignments"]
    assert not any(e["pod_uid"] in (str(replica.uid), str(worker.uid)) or "metrics_url" in e for e in own)
