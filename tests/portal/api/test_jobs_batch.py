"""POST /api/v1/jobs/batch/: many jobs in one request, each quoted and checked as POST /api/v1/jobs/ does; the
answer has one result per item, in order: 201 with the job, or the item's RFC 9457 problem. A refused item never
keeps the others out; another tenant's workspace is refused whole."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from rest_framework.test import APIClient

from billing.models import ChargeLine
from billing.reports.services import set_budget
from billing.services import submit_quoted_job
from scheduling.models import Job, Queue
from tests.factories import QueueAccessFactory, QueueFactory

SPEC = "name: {name}\nqueue: {queue}\nroles:\n  - name: main\n    image: busybox\n    resources: {{gpu: {gpus}}}\n"
URL = "/api/v1/jobs/batch/"


def spec(name: str, gpus: int = 1, queue: str = "vision-lab") -> str:
    return SPEC.format(name=name, gpus=gpus, queue=queue)


def client(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


@pytest.fixture
def alice(cluster, clock):
    return client(cluster.alice)


def test_good_items_are_stored_and_each_bad_one_gets_its_problem(alice, cluster):
    small = QueueFactory(
        name="small-team",
        parent=Queue.objects.get(name="root"),
        deserved_gpus=Decimal(8),
        limit_gpus=Decimal(4),
    )
    QueueAccessFactory(queue=small, workspace=cluster.vision)
    jobs = [
        {"spec": spec("one")},
        {"spec": "name: [unclosed"},  # not YAML
        {"spec": spec("two"), "option": "no-such-option"},  # an option the quote does not offer
        {"spec": spec("big", gpus=8, queue="small-team")},  # past its queue's limit
        {"spec": 42},  # malformed item
        None,
        {
            "spec": {
                "name": "three",
                "queue": "vision-lab",
                "roles": [{"name": "main", "image": "busybox", "resources": {"gpu": 1}}],
            },
            "duration_hours": 3,
        },
    ]
    response = alice.post(URL, {"workspace": "vision-lab", "jobs": jobs}, format="json")
    assert response.status_code == 200, response.content[:600]
    body = response.json()
    assert (body["submitted"], body["refused"]) == (2, 5)
    results = body["results"]
    assert [r["index"] for r in results] == list(range(7))
    assert [r["status"] for r in results] == [201, 400, 400, 422, 400, 400, 201]
    for result in results:
        if result["status"] == 201:
            assert result["problem"] is None and result["job"]["state"] == "Pending"
        else:
            problem = result["problem"]
            assert result["job"] is None and problem["status"] == result["status"]
            assert problem["type"].startswith("urn:gpu-platform:problem:") and problem["errors"]
    assert results[1]["problem"]["type"] == "urn:gpu-platform:problem:spec-error"
    assert results[1]["problem"]["errors"][0]["line"] == 1
    assert results[2]["problem"]["errors"][0]["field"] == "option"
    assert "small-team" in results[3]["problem"]["detail"]
    assert results[4]["problem"]["errors"][0]["field"] == "spec"
    stored = {j.name: j for j in Job.objects.filter(workspace=cluster.vision)}
    assert set(stored) == {"one", "three"}
    assert results[0]["job"]["id"] == stored["one"].pk and results[6]["job"]["id"] == stored["three"].pk
    # each quoted and frozen as a single submit's: the option and the duration asked for
    assert stored["three"].expected_duration_s == 3 * 3600
    assert results[6]["job"]["quote"]["id"] == stored["three"].quote["id"]


def test_a_spent_budget_refuses_every_item(alice, cluster, clock):
    spent = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec("spent"))
    hour = clock.now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    ChargeLine.objects.create(
        hour=hour,
        day=hour.date(),
        period=hour.date(),
        charge_start=hour,
        charge_end=hour + timedelta(hours=1),
        workspace=cluster.vision,
        queue="vision-lab",
        job=spent,
        job_name=spent.name,
        gpu_model="RTX-4090-24GB",
        sharing="exclusive",
        allocated_gpu_hours=1,
        idle_gpu_hours=0,
        exclusive_gpu_hours=1,
        cost=Decimal("5"),
        list_cost=Decimal("5"),
        exclusive_cost=Decimal("5"),
        currency="USD",
        provisional=False,
        computed_at=hour,
    )
    set_budget(user=cluster.alice, workspace=cluster.vision, amount="2", block_at_limit=True)
    response = alice.post(
        URL, {"workspace": "vision-lab", "jobs": [{"spec": spec("a")}, {"spec": spec("b")}]}, format="json"
    )
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["status"] for r in results] == [403, 403]
    assert {r["problem"]["type"] for r in results} == {"urn:gpu-platform:problem:budget-blocked"}
    assert list(Job.objects.values_list("name", flat=True)) == ["spent"]


def test_another_tenants_workspace_is_refused_whole(cluster, clock):
    bob = client(cluster.bob)
    response = bob.post(URL, {"workspace": "vision-lab", "jobs": [{"spec": spec("a")}]}, format="json")
    assert response.status_code in (403, 404)
    assert response["Content-Type"].startswith("application/problem+json")
    # in his own workspace his items are his, and vision-lab's queue is not open to them
    response = bob.post(
        URL,
        {
            "workspace": "nlp-group",
            "jobs": [{"spec": spec("mine", queue="nlp-group")}, {"spec": spec("theirs")}],
        },
        format="json",
    )
    assert [r["status"] for r in response.json()["results"]] == [201, 422]
    assert list(Job.objects.values_list("workspace__slug", "name")) == [("nlp-group", "mine")]


def test_the_request_itself_must_be_sound(alice, cluster):
    assert alice.post(URL, {"workspace": "vision-lab", "jobs": []}, format="json").status_code == 400
    too_many = [{"spec": spec(f"j{i}")} for i in range(1001)]
    response = alice.post(URL, {"workspace": "vision-lab", "jobs": too_many}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "jobs"
    assert not Job.objects.exists()
