"""A client's mistake is a 4xx, never a 500: bad numbers, dates, NUL bytes, huge bodies, deep JSON."""

import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from billing.metering.tokens import create_node_token
from portal.models import ApiToken
from portal.services import create_api_token
from scheduling.models import Gpu, Node


@pytest.fixture
def api(cluster):
    client = APIClient()
    client.force_authenticate(cluster.alice)
    return client


@pytest.fixture
def page(cluster):
    client = Client()
    client.force_login(cluster.alice)
    return client


@pytest.fixture
def agent(cluster):
    _, raw = create_node_token(Node.objects.get(name="h100-01"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def is_problem(response, status):
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == status and body["title"] and "errors" in body
    return body


def heartbeat(agent, gpus):
    return agent.post("/api/v1/agent/heartbeat", {"node": "h100-01", "gpus": gpus}, format="json")


@pytest.mark.parametrize("gpu", [
    {"index": True, "uuid": "GPU-x", "memory_mib": 1000},
    {"index": 10**30, "uuid": "GPU-x", "memory_mib": 1000},
    {"index": 0, "uuid": "GPU-x", "memory_mib": 10**30},
    {"index": -1, "uuid": "GPU-x", "memory_mib": 1000},
    {"index": 0, "uuid": "G" * 5000, "memory_mib": 1000},
    {"index": 0, "uuid": "GPU-\x00", "memory_mib": 1000},
    {"index": 0, "uuid": "", "memory_mib": 1000},
])
def test_heartbeat_with_a_bad_gpu_is_refused_and_changes_nothing(agent, gpu):
    before = list(Gpu.objects.order_by("pk").values_list("index", "uuid", "memory_mib"))
    is_problem(heartbeat(agent, [gpu]), 400)
    assert list(Gpu.objects.order_by("pk").values_list("index", "uuid", "memory_mib")) == before


def test_heartbeat_claiming_another_nodes_gpu_uuid_is_refused(agent):
    other = Gpu.objects.exclude(node__name="h100-01").first()
    response = heartbeat(agent, [{"index": 0, "uuid": other.uuid, "memory_mib": 1000}])
    assert 400 <= response.status_code < 500
    assert Gpu.objects.get(pk=other.pk).node.name != "h100-01"


@pytest.mark.parametrize("params", [
    {"limit": "99999999999999999999999"}, {"limit": "100000"}, {"offset": "99999999999999999999999"},
    {"state": "Pending\x00"}, {"workspace": "vision\x00"},
])
def test_job_list_parameters(api, params):
    response = api.get("/api/v1/jobs/", params)
    if "limit" in params:  # a large page is clamped to 500, not an error
        assert response.status_code == 200 and response.json()["results"] == []
        return
    assert 400 <= response.status_code < 500, response.content[:300]


def test_page_size_is_at_most_500(api, cluster):
    from scheduling.models import Job, Queue
    from tests.factories import JobFactory

    queue = Queue.objects.get(name="vision-lab")
    Job.objects.bulk_create([JobFactory.build(workspace=cluster.vision, queue=queue, submitted_by=cluster.alice)
                             for _ in range(501)])
    response = api.get("/api/v1/jobs/", {"limit": "100000"})
    assert response.status_code == 200
    assert len(response.json()["results"]) == 500


@pytest.mark.parametrize("query", [
    "end=0001-01-01", "start=0001-01-01&end=0001-01-07", "end=9999-12-31", "queue=%00", "workspace=%00",
    "gpu_model=a%00b", "sharing=%00", "job=%00", "job=99999999999999999999999", "start=%00",
    "queue=" + "q" * 5000,
])
def test_report_filters_answer_4xx_for_the_export(page, query):
    response = page.get("/reports/export.csv?" + query)
    assert response.status_code == 400, query


@pytest.mark.parametrize("query", ["end=0001-01-01", "queue=%00", "job=99999999999999999999999"])
def test_report_page_shows_the_filter_error(page, query):
    response = page.get("/reports/?" + query)
    assert response.status_code in (200, 400)


@pytest.mark.parametrize("month", ["9999-12", "0001-01", "2026-13", "1-1-1", "%00"])
def test_statement_month_out_of_range(page, month):
    assert page.get(f"/reports/statements/vision-lab/{month}/").status_code in (400, 404)


def test_nul_in_any_query_string_is_a_400(page, api):
    assert page.get("/jobs/?state=%00").status_code == 400
    assert page.get("/cluster/?x=%00").status_code == 400
    is_problem(api.get("/api/v1/workspaces/?q=%00"), 400)


def test_an_unknown_list_parameter_is_a_400_not_everything(api):
    is_problem(api.get("/api/v1/jobs/?stat=Pending"), 400)  # a misspelt filter
    is_problem(api.get("/api/v1/workspaces/?a=b"), 400)
    assert api.get("/api/v1/jobs/?state=Pending&limit=5").status_code == 200


def test_revoke_with_a_bad_id(page, cluster):
    token, _ = create_api_token(cluster.alice, "ci")
    assert page.post("/account/tokens/", {"revoke": "abc"}).status_code == 400
    assert page.post("/account/tokens/", {"revoke": "9" * 40}).status_code == 400
    assert ApiToken.objects.get(pk=token.pk).revoked is None


def test_token_name_with_nul_or_too_long_is_refused(page, cluster):
    page.post("/account/tokens/", {"name": "a\x00b"})
    page.post("/account/tokens/", {"name": "n" * 5000})
    assert not ApiToken.objects.filter(user=cluster.alice).exists()


@pytest.mark.parametrize("spec", [
    "name: t\nroles:\n  - name: main\n    image: busybox\n    resources: {gpu: inf}\n",
    "name: t\nroles:\n  - name: main\n    image: busybox\n    resources: {gpu: .inf}\n",
    "name: t\nroles:\n  - name: main\n    image: busybox\n    resources: {gpu: .nan}\n",
    "name: t\nroles:\n  - name: main\n    image: busybox\n    resources: {gpu: 1e400}\n",
    "name: t\nroles:\n  - name: main\n    image: busybox\n    resources: {gpu: 99999999999999999999999}\n",
    "name: t\x00\nroles:\n  - name: main\n    image: busybox\n    resources: {gpu: 1}\n",
    "name: " + "t" * 5000 + "\nroles:\n  - name: main\n    image: busybox\n    resources: {gpu: 1}\n",
])
def test_bad_numbers_and_strings_in_a_spec(api, spec):
    response = api.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": spec}, format="json")
    is_problem(response, 400)
    assert api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": spec}, format="json").status_code == 400


def test_spec_object_with_infinite_gpus(api):
    body = ('{"workspace": "vision-lab", "spec": {"name": "t", "roles": [{"name": "main", "image": "busybox", '
            '"resources": {"gpu": Infinity}}]}}')
    response = api.post("/api/v1/jobs/", body, content_type="application/json")
    is_problem(response, 400)


def test_deeply_nested_json_is_a_400(api, agent):
    deep = "[" * 100_000 + "]" * 100_000
    is_problem(api.post("/api/v1/jobs/", deep, content_type="application/json"), 400)
    body = '{"node": "h100-01", "samples": ' + deep + "}"
    is_problem(agent.post("/api/v1/agent/usage", body, content_type="application/json"), 400)


def test_a_huge_api_body_is_a_413_problem(api, agent):
    big = json.dumps({"workspace": "vision-lab", "spec": "x" * (10 * 1024 * 1024)})
    is_problem(api.post("/api/v1/jobs/", big, content_type="application/json"), 413)
    big = json.dumps({"node": "h100-01", "samples": [], "pad": "x" * (10 * 1024 * 1024)})
    is_problem(agent.post("/api/v1/agent/usage", big, content_type="application/json"), 413)
