"""Node agents: tokens per node, idempotent ingestion, heartbeats, assignments, and the real agent
process against a real portal process (portal down then up, agent killed and restarted)."""

import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from billing.metering.tokens import create_node_token
from billing.models import UsageSample
from portal.testing import ROOT, child_env, free_port, wait_for_http
from scheduling import clock as platform_clock
from scheduling.models import Gpu, JobState, Node, Replica


def sample(node="h100-01", **overrides):
    body = {"id": str(uuid.uuid4()), "node": node, "ts": platform_clock.now().isoformat(), "gpu_uuid": "GPU-h100-01-0",
            "gpu_index": 0, "pod_uid": None, "gpu_util_pct": 42.5, "mem_used_mib": 1000, "interval_s": 10.0}
    body.update(overrides)
    return body


@pytest.fixture
def agent(cluster, clock):  # samples are checked against the platform clock
    node = Node.objects.get(name="h100-01")
    _, raw = create_node_token(node)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def post(api, samples, node="h100-01"):
    return api.post("/api/v1/agent/usage", {"node": node, "samples": samples}, format="json")


def test_good_samples_are_stored_once_and_bad_ones_rejected_with_a_reason(agent):
    good = [sample(), sample(gpu_util_pct=None)]
    bad = [sample(gpu_util_pct=140), sample(ts="yesterday"), sample(id="not-a-uuid"),
           sample(ts=(platform_clock.now() + timedelta(hours=2)).isoformat()), sample(mem_used_mib=-1)]
    response = post(agent, good + bad)
    assert response.status_code == 200
    body = response.json()
    assert sorted(body["accepted"]) == sorted(s["id"] for s in good)
    reasons = {r["id"]: r["reason"] for r in body["rejected"]}
    assert "gpu_util_pct 140 is outside" in reasons[bad[0]["id"]]
    assert "not an ISO 8601 time" in reasons[bad[1]["id"]]
    assert "is not a UUID" in reasons["not-a-uuid"]
    assert "in the future" in reasons[bad[3]["id"]]
    assert "mem_used_mib" in reasons[bad[4]["id"]]
    assert UsageSample.objects.count() == 2
    again = post(agent, good + bad)  # the same batch twice
    assert again.json() == body and UsageSample.objects.count() == 2


def test_a_token_reports_only_for_its_node(agent, cluster):
    response = post(agent, [sample(node="h100-02")], node="h100-02")
    assert response.status_code == 403
    assert post(agent, [sample(node="h100-02")]).json()["rejected"][0]["reason"].startswith("node 'h100-02'")
    assert UsageSample.objects.count() == 0


def test_missing_wrong_and_revoked_tokens(cluster, clock):
    api = APIClient()
    assert post(api, [sample()]).status_code == 401
    api.credentials(HTTP_AUTHORIZATION="Bearer gpn_nope")
    assert post(api, [sample()]).status_code == 401
    token, raw = create_node_token(Node.objects.get(name="h100-01"))
    token.revoked = clock.now
    token.save()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert post(api, [sample()]).status_code == 401
    user_api = APIClient()
    user_api.force_authenticate(cluster.alice)  # a tenant's session is no node credential
    assert post(user_api, [sample()]).status_code == 403


def test_malformed_batches_change_nothing(agent):
    assert agent.post("/api/v1/agent/usage", {"node": "h100-01"}, format="json").status_code == 400
    assert agent.post("/api/v1/agent/usage", {"samples": [sample()] * 5001}, format="json").status_code == 400
    assert UsageSample.objects.count() == 0


def test_samples_are_linked_to_the_replica_they_measure(agent, cluster):
    from billing.services import submit_quoted_job
    from scheduling.spec.examples import CLEAN_YAML

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=CLEAN_YAML)
    replica = Replica.objects.create(job=job, role="worker", index=0, state=JobState.RUNNING,
                                     node=Node.objects.get(name="h100-01"), gpu_indices=[3],
                                     slice={"kind": "fraction", "gpu_milli": 500, "gpu_mem_mib": 10240})
    post(agent, [sample(pod_uid=str(replica.uid), gpu_index=3)])
    assert UsageSample.objects.get().replica == replica
    assignments = agent.get("/api/v1/agent/assignments", {"node": "h100-01"}).json()["assignments"]
    assert assignments == [{"pod_uid": str(replica.uid), "gpu_index": 3, "milli": 500, "memory_mib": 10240}]
    assert agent.get("/api/v1/agent/assignments", {"node": "h100-02"}).status_code == 403


def test_heartbeat_updates_inventory_and_last_seen(agent):
    gpus = [{"uuid": f"GPU-real-{i}", "index": i, "model": "H100", "memory_mib": 81559} for i in range(9)]
    response = agent.post("/api/v1/agent/heartbeat", {"node": "h100-01", "gpus": gpus}, format="json")
    assert response.status_code == 200
    node = Node.objects.get(name="h100-01")
    assert node.last_heartbeat is not None
    assert Gpu.objects.filter(node=node).count() == 9
    assert Gpu.objects.get(node=node, index=0).uuid == "GPU-real-0"
    bad = agent.post("/api/v1/agent/heartbeat", {"node": "h100-01", "gpus": [{"index": "x"}]}, format="json")
    assert bad.status_code == 400


def _agent(portal: str, token: str, spool, node: str = "h100-01") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nodeagent", "--portal", portal, "--token", token, "--collector", "simulated",
         "--interval", "0.2", "--node", node, "--spool", str(spool), "--sim-gpus", "2", "--backoff-cap", "0.5"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def _spooled_ids(spool) -> set[str]:
    try:
        with sqlite3.connect(spool) as db:
            return {row[0] for row in db.execute("SELECT id FROM samples")}
    except sqlite3.OperationalError:  # the agent is still creating its spool
        return set()


@pytest.mark.django_db(transaction=True)
def test_agent_process_against_a_real_portal_loses_and_doubles_nothing(cluster, tmp_path):
    _, token = create_node_token(Node.objects.get(name="h100-01"))
    port = free_port()
    portal = f"http://127.0.0.1:{port}"
    spool = tmp_path / "spool.sqlite"

    # 1. The portal is down: the agent keeps its samples in the spool; then it is killed hard.
    first = _agent(portal, token, spool)
    try:
        deadline = time.monotonic() + 15
        while (not spool.exists() or len(_spooled_ids(spool)) < 4) and time.monotonic() < deadline:
            subprocess.run(["sleep", "0.2"])
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    held = _spooled_ids(spool)
    assert len(held) >= 4 and UsageSample.objects.count() == 0

    # 2. The portal comes up and the agent restarts on the same spool: everything arrives once.
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                               "portal.asgi:application"], cwd=ROOT, env=child_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_http(f"{portal}/healthz", proc=server)
        second = _agent(portal, token, spool)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not held <= {str(i) for i in UsageSample.objects.values_list("id", flat=True)}:
            subprocess.run(["sleep", "0.3"])
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=20) == 0
    finally:
        server.terminate()
        server.wait(timeout=15)
    stored = {str(i) for i in UsageSample.objects.values_list("id", flat=True)}
    assert held <= stored
    assert _spooled_ids(spool) == set()
    keys = list(UsageSample.objects.values_list("ts", "gpu_uuid", "pod_uid"))
    assert len(keys) == len(set(keys))  # no reading counted twice
    assert not (tmp_path / "spool.sqlite.deadletter.jsonl").exists()
    assert Node.objects.get(name="h100-01").last_heartbeat is not None
