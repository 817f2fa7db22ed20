"""What the node agent sent from a real NVIDIA H200 (`python -m bench.nvml_device` on a lent GPU machine, kept in
tests/data/device/), replayed into the portal's agent API: the heartbeat registers the card as NVML names it,
with its health; every usage sample is stored, the pod's on the replica whose pod it names; and the card's
name and memory pick the H200's MIG profiles."""

import json
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from billing.ledger.posting import post_ledger
from billing.metering.tokens import create_node_token
from billing.models import ChargeLine, UsageSample
from scheduling.core.mig import mig_card
from scheduling.models import Gpu, JobState, Replica
from tests.factories import GpuRateFactory, JobFactory, NodeFactory, NodePoolFactory

RECORD = json.loads((Path(__file__).resolve().parents[2] / "data" / "device" / "nvml_device.json").read_text())
GIB = 1024


@pytest.fixture
def h200(tenants, clock):
    """The recorded node, as the console would add it, and the platform clock just after the recording."""
    last = max(datetime.fromisoformat(s["ts"]) for p in RECORD["posts"] for s in p["body"].get("samples", []))
    clock.now = last + timedelta(minutes=1)
    pool = NodePoolFactory(name="h200", gpu_model="H200-141GB", gpu_memory_mib=141 * GIB)
    node = NodeFactory(pool=pool, name=RECORD["node"], gpus=0)
    _, raw = create_node_token(node)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    job = JobFactory(workspace=tenants.vision, state=JobState.RUNNING)
    replica = Replica.objects.create(uid=RECORD["pod_uid"], job=job, role="main", index=0, state=JobState.RUNNING,
                                     node=node, gpu_indices=[0], slice={"kind": "whole"})
    return api, node, replica


def test_the_h200_agents_heartbeats_and_samples_are_taken_and_meter_its_pod(h200):
    api, node, replica = h200
    for post in RECORD["posts"]:
        response = api.post(post["path"], post["body"], format="json")
        assert response.status_code == 200, response.content[:300]
        if post["path"].endswith("/usage"):
            assert sorted(response.json()["accepted"]) == sorted(s["id"] for s in post["body"]["samples"])
    [inventory] = RECORD["inventory"]
    gpu = Gpu.objects.get(node=node, index=0)
    assert (gpu.uuid, gpu.model, gpu.memory_mib) == (inventory["uuid"], "NVIDIA H200", 143771)
    assert gpu.temperature_c is not None and gpu.ecc_uncorrected == 0 and gpu.xid_count == 0

    samples = [s for p in RECORD["posts"] if p["path"].endswith("/usage") for s in p["body"]["samples"]]
    pods = [s for s in samples if s["pod_uid"] == RECORD["pod_uid"]]
    assert UsageSample.objects.count() == len(samples) and len(pods) >= 10
    metered = UsageSample.objects.filter(replica=replica)
    assert metered.count() == len(pods)
    # The load held 8 GiB plus its context, at part duty: NVML's figures, not a simulator's.
    assert all(9000 <= s.mem_used_mib <= 10000 and 5 <= s.gpu_util_pct <= 95 for s in metered)

    card = mig_card(gpu.model, gpu.memory_mib)  # NVML's "NVIDIA H200" and its memory
    assert card is not None and card.model == "H200-141GB"


def test_the_h200_pods_samples_become_its_used_gpu_hours_in_the_ledger(h200, clock):
    api, _node, replica = h200
    GpuRateFactory(gpu_model="H200-141GB", per_gpu_hour=Decimal("4.00"))
    pods = [s for p in RECORD["posts"] if p["path"].endswith("/usage") for s in p["body"]["samples"]
            if s["pod_uid"] == RECORD["pod_uid"]]
    first, last = (datetime.fromisoformat(pods[i]["ts"]) for i in (0, -1))
    replica.started, replica.ended = first - timedelta(seconds=2), last
    replica.save(update_fields=["started", "ended"])
    for post in RECORD["posts"]:
        assert api.post(post["path"], post["body"], format="json").status_code == 200
    post_ledger(now=clock.now)
    lines = ChargeLine.objects.filter(job=replica.job, category=ChargeLine.Category.USAGE)
    used = sum(Decimal(str(s["gpu_util_pct"])) / 100 * Decimal(str(s["interval_s"])) / 3600 for s in pods)
    assert sum(line.used_gpu_hours for line in lines) == pytest.approx(used, abs=Decimal("0.000001"))
    allocated = sum(line.allocated_gpu_hours for line in lines)
    assert allocated == pytest.approx(Decimal((last - first).total_seconds() + 2) / 3600, abs=Decimal("0.000001"))
    assert 0 < sum(line.used_gpu_hours for line in lines) < allocated  # the load ran at part duty
    assert sum(line.cost for line in lines) > 0


def test_the_same_posts_again_store_nothing_twice(h200):
    api, _node, _replica = h200
    usage = [p for p in RECORD["posts"] if p["path"].endswith("/usage")]
    for post in usage + usage:
        assert api.post(post["path"], post["body"], format="json").status_code == 200
    assert UsageSample.objects.count() == sum(len(p["body"]["samples"]) for p in usage)
