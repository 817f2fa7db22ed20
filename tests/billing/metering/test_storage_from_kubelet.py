"""On Kubernetes the node agents report the kubelet's used bytes per claim with their usage batches; the
portal keeps them as the hour's storage samples of the volumes and dataset versions those claims hold
(billed to the owner), leaves other claims out, and refuses an unreadable list with a problem."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from billing.ledger.posting import post_ledger
from billing.metering.tokens import create_node_token
from billing.models import ChargeLine, PriceTable, StorageRate, StorageSample
from scheduling.models import Dataset, DatasetVersion, Node, Volume

pytestmark = pytest.mark.django_db
GIB = 2**30


@pytest.fixture
def agent(cluster, clock, settings):
    settings.SCHEDULER_BACKEND = "kubernetes"
    clock.now = datetime(2026, 3, 2, 10, 5, tzinfo=UTC)
    StorageRate.objects.create(table=PriceTable.objects.get(name="Test prices"), storage_class="standard",
                               per_gib_month=Decimal("14.60"))
    _, raw = create_node_token(Node.objects.get(name="h100-01"))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def post(api, volumes):
    return api.post("/api/v1/agent/usage", {"node": "h100-01", "samples": [], "volumes": volumes}, format="json")


def test_kubelet_volume_stats_become_the_hours_samples_and_are_billed_on_used_bytes(agent, cluster, clock,
                                                                                  monkeypatch):
    monkeypatch.setenv("K8S_NAMESPACE_PREFIX", "gpu-ws-")
    Volume.objects.create(workspace=cluster.vision, name="weights", size_gib=500, storage_class="standard")
    version = DatasetVersion.objects.create(dataset=Dataset.objects.create(workspace=cluster.vision, name="imagenet"),
                                            number=3, source_volume="weights")
    version.dataset.shared_with.add(cluster.nlp)
    answer = post(agent, [
        {"namespace": "gpu-ws-vision-lab", "claim": "vol-weights", "used_bytes": 2 * GIB},
        {"namespace": "gpu-ws-nlp-group", "claim": "ds-vision-lab-imagenet-v3", "used_bytes": GIB},  # a grantee's
        {"namespace": "gpu-ws-vision-lab", "claim": "home-notebook-1", "used_bytes": 5 * GIB},  # not billed here
    ])
    assert answer.status_code == 200 and answer.json()["volumes"] == {"recorded": 2, "unknown": 1}
    assert sorted(StorageSample.objects.values_list("workspace__slug", "kind", "name", "used_bytes", "source")) == [
        ("vision-lab", "dataset", "imagenet@v3", GIB, "kubelet"), ("vision-lab", "volume", "weights", 2 * GIB, "kubelet")]
    post(agent, [{"namespace": "gpu-ws-vision-lab", "claim": "vol-weights", "used_bytes": 9 * GIB}])
    assert StorageSample.objects.get(name="weights").used_bytes == 2 * GIB  # the hour keeps its first reading
    post_ledger(now=datetime(2026, 3, 2, 12, tzinfo=UTC))
    lines = ChargeLine.objects.filter(resource="storage").order_by("resource_name")
    assert [(x.workspace.slug, x.resource_name, x.storage_gib_hours, x.cost) for x in lines] == [
        ("vision-lab", "dataset/imagenet@v3", Decimal(1), Decimal("0.02")),
        ("vision-lab", "volume/weights", Decimal(2), Decimal("0.04"))]


@pytest.mark.parametrize("volumes", [
    "not a list", [{"namespace": "gpu-ws-vision-lab", "claim": "vol-weights", "used_bytes": -1}],
    [{"namespace": "gpu-ws-vision-lab", "used_bytes": 1}], [{"namespace": "a", "claim": "b", "used_bytes": 1.5}],
    [{"namespace": "a\x00", "claim": "b", "used_bytes": 1}]])
def test_an_unreadable_volume_list_is_a_problem_that_names_the_field(agent, volumes):
    answer = post(agent, volumes)
    assert answer.status_code == 400 and answer["Content-Type"].startswith("application/problem+json")
    assert [e["field"] for e in answer.json()["errors"]] == ["volumes"]
    assert not StorageSample.objects.exists()
