"""The heartbeat's health figures: stored per GPU with the agent's version, each checked on its own (a
bad one is refused in the answer, never a 5xx), and optional (an older agent's heartbeat still works)."""

import pytest
from rest_framework.test import APIClient

from billing.metering.tokens import create_node_token
from scheduling.models import Gpu, Node


@pytest.fixture
def agent(cluster):
    _, raw = create_node_token(Node.objects.get(name="h100-01"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def gpu(index, **health):
    return {"index": index, "uuid": f"GPU-h100-01-{index}", "memory_mib": 81920, **health}


def heartbeat(agent, gpus, **body):
    return agent.post("/api/v1/agent/heartbeat", {"node": "h100-01", "gpus": gpus, **body}, format="json")


HEALTHY = {"model": "NVIDIA H100 80GB HBM3", "util_pct": 87.5, "memory_used_mib": 40000, "temperature_c": 61,
           "ecc_uncorrected": 0, "xid_count": 2, "xid_last": 79}


def test_health_figures_and_agent_version_are_stored(agent, clock):
    response = heartbeat(agent, [gpu(0, **HEALTHY), gpu(1, util_pct=None, temperature_c=40.4)], agent_version="0.2.0")
    assert response.status_code == 200
    assert response.json() == {"node": "h100-01", "gpus": 2, "rejected": []}
    node = Node.objects.get(name="h100-01")
    assert node.agent_version == "0.2.0" and node.last_heartbeat == clock.now
    g0, g1 = Gpu.objects.get(node=node, index=0), Gpu.objects.get(node=node, index=1)
    assert (g0.model, g0.util_pct, g0.memory_used_mib, g0.temperature_c, g0.ecc_uncorrected, g0.xid_count,
            g0.xid_last) == ("NVIDIA H100 80GB HBM3", 87.5, 40000, 61, 0, 2, 79)
    assert g0.health_at == clock.now
    assert g1.util_pct is None and g1.temperature_c == 40  # null: the device cannot tell
    assert Gpu.objects.get(node=node, index=2).health_at is None  # not in this heartbeat: untouched


@pytest.mark.parametrize(("field", "value", "says"), [
    ("util_pct", 140, "outside 0..100"),
    ("util_pct", "busy", "must be a number"),
    ("util_pct", True, "must be a number"),
    ("temperature_c", 10**6, "outside -50..200"),
    ("memory_used_mib", -1, "outside 0.."),
    ("memory_used_mib", 1.5, "whole number"),
    ("ecc_uncorrected", 2**70, "outside 0.."),
    ("xid_count", [1], "whole number"),
    ("xid_last", {"code": 79}, "whole number"),
    ("model", "x" * 65, "at most 64"),
    ("model", "H100\x00", "printable"),
])
def test_a_bad_figure_is_refused_alone_and_the_rest_is_kept(agent, clock, field, value, says):
    response = heartbeat(agent, [gpu(0, **{**HEALTHY, field: value}), gpu(1, **HEALTHY)])
    assert response.status_code == 200
    [refused] = response.json()["rejected"]
    assert refused["gpu"] == 0 and refused["field"] == field and says in refused["reason"]
    g0, g1 = Gpu.objects.get(node__name="h100-01", index=0), Gpu.objects.get(node__name="h100-01", index=1)
    column = "model" if field == "model" else field
    assert getattr(g0, column) in (None, "")  # unknown, not a stale or invalid value
    assert g0.temperature_c == 61 or field == "temperature_c"
    assert g1.util_pct == 87.5 and g1.xid_last == 79
    assert Node.objects.get(name="h100-01").last_heartbeat == clock.now  # the node is alive all the same


def test_a_bad_agent_version_is_refused_and_the_heartbeat_counts(agent, clock):
    Node.objects.filter(name="h100-01").update(agent_version="0.1.0")
    response = heartbeat(agent, [gpu(0)], agent_version="v" * 100)
    assert response.status_code == 200
    assert [r["field"] for r in response.json()["rejected"]] == ["agent_version"]
    node = Node.objects.get(name="h100-01")
    assert node.agent_version == "0.1.0" and node.last_heartbeat == clock.now


def test_an_older_agents_heartbeat_keeps_the_last_figures(agent, clock):
    heartbeat(agent, [gpu(0, **HEALTHY)], agent_version="0.2.0")
    clock.advance(30)
    response = heartbeat(agent, [gpu(0)])  # no health fields, no version: as before this release
    assert response.status_code == 200 and response.json()["rejected"] == []
    g0 = Gpu.objects.get(node__name="h100-01", index=0)
    assert g0.temperature_c == 61 and g0.health_at < clock.now
    node = Node.objects.get(name="h100-01")
    assert node.agent_version == "0.2.0" and node.last_heartbeat == clock.now


def test_a_malformed_inventory_is_still_refused_whole(agent):
    response = heartbeat(agent, [{"index": "x", "util_pct": 50}])
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/problem+json")
    assert not Gpu.objects.filter(node__name="h100-01", util_pct=50).exists()


def test_gpus_that_swapped_indexes_are_stored_swapped(agent):
    assert heartbeat(agent, [gpu(0), gpu(1)]).status_code == 200
    swapped = [{**gpu(0), "uuid": "GPU-h100-01-1"}, {**gpu(1), "uuid": "GPU-h100-01-0"}]
    response = heartbeat(agent, swapped)
    assert response.status_code == 200, response.json()
    node = Node.objects.get(name="h100-01")
    assert dict(Gpu.objects.filter(node=node, index__in=[0, 1]).values_list("index", "uuid")) == {
        0: "GPU-h100-01-1", 1: "GPU-h100-01-0"}


def test_a_uuid_moved_from_an_index_the_report_leaves_out_is_a_conflict_and_changes_nothing(agent):
    assert heartbeat(agent, [gpu(0), gpu(1)]).status_code == 200
    response = heartbeat(agent, [{**gpu(1), "uuid": "GPU-h100-01-0"}])
    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["errors"][0]["field"] == "gpus"
    node = Node.objects.get(name="h100-01")
    assert dict(Gpu.objects.filter(node=node, index__in=[0, 1]).values_list("index", "uuid")) == {
        0: "GPU-h100-01-0", 1: "GPU-h100-01-1"}


def test_one_gpu_reported_twice_is_unprocessable(agent):
    response = heartbeat(agent, [gpu(0), gpu(0)])
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "gpus"
