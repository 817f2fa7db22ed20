"""A job that could never run is refused at submit, naming the figures (422 in the API, an error on the
Submit page, gpuctl's message); one that fits the cluster but not what is free now waits as before."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client
from rest_framework.test import APIClient

from scheduling.models import Job, Node, Queue
from tests.factories import QueueAccessFactory, QueueFactory

SPEC = ("name: big\n{queue}roles:\n  - name: worker\n    image: busybox\n    replicas: {{min: {replicas}, max: {replicas}}}\n"
        "    {model}resources: {{gpu: {gpus}}}\n{topology}")


def spec(gpus: int = 8, replicas: int = 1, *, queue: str = "", model: str = "gpuModel: H100-80GB\n    ",
         topology: str = "") -> str:
    return SPEC.format(queue=f"queue: {queue}\n" if queue else "", replicas=replicas, gpus=gpus, model=model,
                       topology=topology)


@pytest.fixture
def api(cluster):
    client = APIClient()
    client.force_authenticate(cluster.alice)
    return client


def refused(api, text: str) -> str:
    before = Job.objects.count()
    response = api.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": text}, format="json")
    assert response.status_code == 422, response.content[:400]
    assert response["Content-Type"].startswith("application/problem+json")
    assert Job.objects.count() == before
    quoted = api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": text}, format="json")
    assert quoted.status_code == 422
    return " ".join(e["message"] for e in response.json()["errors"])


@pytest.fixture
def limited(cluster):
    queue = QueueFactory(name="small-team", parent=Queue.objects.get(name="root"), deserved_gpus=Decimal(8),
                         limit_gpus=Decimal(12))
    QueueAccessFactory(queue=queue, workspace=cluster.vision)
    return queue


def test_more_gpus_than_the_queues_limit_is_refused_naming_it(api, limited):
    # 16 GPUs into a queue limited to 12 (the operator's D-case): it would wait for ever, "0 GPU in use"
    message = refused(api, spec(8, 2, queue="small-team"))
    assert "16 GPUs" in message and "small-team" in message and "12 GPUs" in message
    # within the limit it is taken
    assert api.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": spec(4, 2, queue="small-team")},
                    format="json").status_code == 201


def test_an_ancestors_limit_counts_too(api, cluster):
    parent = QueueFactory(name="dept", parent=Queue.objects.get(name="root"), limit_gpus=Decimal(4))
    leaf = QueueFactory(name="dept-team", parent=parent)
    QueueAccessFactory(queue=leaf, workspace=cluster.vision)
    message = refused(api, spec(8, queue="dept-team"))
    assert "dept" in message and "4 GPUs" in message and "8 GPUs" in message


def test_a_gang_bigger_than_every_pool_that_serves_it_is_refused(api):
    # the world's H100 pool has 2 nodes of 8: 24 H100 GPUs at once can never start (the quote's refusal)
    response = api.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": spec(8, 3)}, format="json")
    assert response.status_code == 422 and not Job.objects.exists()
    assert "h100: the pool has 16 GPUs, the job needs 24 GPUs to start" in response.json()["detail"]


def test_a_required_topology_bigger_than_its_largest_domain_is_refused(api, cluster):
    from scheduling.models import NodePool

    NodePool.objects.filter(name="h100").update(topology_levels=["example.com/rack"])
    for name, rack in (("h100-01", "r1"), ("h100-02", "r2")):
        Node.objects.filter(name=name).update(labels={"example.com/rack": rack})
    message = refused(api, spec(8, 2, topology="topology: {required: rack}\n"))
    assert "16 GPUs within one rack" in message and "8 GPUs" in message
    # preferred may spill over racks: taken
    assert api.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": spec(
        8, 2, topology="topology: {preferred: rack}\n")}, format="json").status_code == 201


def test_a_model_no_pool_offers_is_refused(api):
    message = refused(api, spec(1, model="gpuModel: B200-192GB\n    "))
    assert "B200" in message and "H100-80GB" in message


def test_a_job_that_fits_the_cluster_but_not_what_is_free_waits(api, cluster):
    # both H100 nodes busy: a 16-GPU gang fits the pool's 16 GPUs, so it is taken and waits
    for _ in range(2):
        assert api.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": spec(8)},
                        format="json").status_code == 201
    response = api.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": spec(8, 2)}, format="json")
    assert response.status_code == 201
    assert Job.objects.get(pk=response.json()["id"]).state == "Pending"


def test_the_submit_page_shows_the_figures_beside_the_spec(cluster, limited):
    client = Client()
    client.force_login(cluster.alice)
    response = client.post("/submit/", {"workspace": "vision-lab", "spec": spec(8, 2, queue="small-team"),
                                        "duration_hours": "1"})
    assert response.status_code == 422
    html = response.content.decode()
    assert "small-team" in html and "12 GPUs" in html and "16 GPUs" in html


def test_gpuctl_says_which_figures_refuse_it(api, limited, tmp_path, capsys):
    import httpx

    from gpuctl.cli import main

    text = spec(8, 2, queue="small-team")
    answer = api.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": text}, format="json")
    assert answer.status_code == 422

    def server(request: httpx.Request) -> httpx.Response:   # the platform's own answer, as it sent it
        return httpx.Response(answer.status_code, json=answer.json())

    path = tmp_path / "big.yaml"
    path.write_text(text)
    code = main(["submit", str(path), "--workspace", "vision-lab"],
                env={"HOME": str(tmp_path), "GPUCTL_URL": "http://gpu.test", "GPUCTL_TOKEN": "gpt_t"},
                transport=httpx.MockTransport(server))
    err = capsys.readouterr().err
    assert code != 0
    assert "big.yaml" in err and "16 GPUs" in err and "small-team" in err and "12 GPUs" in err
