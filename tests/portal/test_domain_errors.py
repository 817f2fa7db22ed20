"""A refused request reads the same everywhere: the API answers RFC 9457 problem details, a page
answers a styled error page with the right 4xx status."""

import pytest
from rest_framework.test import APIClient

from scheduling.spec.examples import CLEAN_YAML, SEED_YAML


@pytest.fixture
def alice(cluster):
    api = APIClient()
    api.force_authenticate(cluster.alice)
    return api


def problem(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == status and body["title"] and body["detail"] and body["type"]
    return body


@pytest.mark.django_db
def test_a_spec_error_is_a_problem_with_errors_per_field(alice):
    bad = SEED_YAML.replace("MaxReplicas: 50", "MaxReplicas: 5")
    body = problem(alice.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": bad}, format="json"), 400)
    assert any(e["field"] == "MaxReplicas" and e["line"] == 8 for e in body["errors"])


def test_a_quote_nothing_fits_is_a_422_problem():
    from billing.quotes import QuoteError
    from portal.api.errors import exception_handler

    response = exception_handler(QuoteError("h100: no B200-192GB here"), {})
    assert response.status_code == 422 and response.content_type == "application/problem+json"
    assert response.data["errors"][0]["field"] == "spec" and response.data["status"] == 422


@pytest.mark.django_db
def test_cancelling_twice_is_a_409_problem(alice):
    job_id = alice.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": CLEAN_YAML}, format="json").json()["id"]
    assert alice.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 200
    body = problem(alice.post(f"/api/v1/jobs/{job_id}/cancel/"), 409)
    assert body["errors"][0]["field"] == "state" and "already" in body["detail"]


@pytest.mark.django_db
def test_a_forbidden_submit_is_a_403_problem(cluster):
    finance = APIClient()
    finance.force_authenticate(cluster.finance)
    body = problem(finance.post("/api/v1/jobs/", {"workspace": "vision-lab", "spec": CLEAN_YAML}, format="json"),
                   403)
    assert body["errors"][0]["field"] == "workspace"


@pytest.mark.django_db
def test_a_bad_request_body_is_a_problem_too(alice):
    body = problem(alice.post("/api/v1/jobs/", {"spec": CLEAN_YAML}, format="json"), 400)
    assert body["errors"][0]["field"] == "workspace"


@pytest.mark.django_db
def test_a_page_gets_a_styled_400(client, cluster):
    client.force_login(cluster.finance)
    response = client.get("/reports/statements/vision-lab/March/")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert 'class="topbar"' in html and 'id="domain-error"' in html and "March" in html


@pytest.mark.django_db
def test_a_page_error_naming_a_field_says_which(client, cluster):
    client.force_login(cluster.finance)
    response = client.post("/reports/exports/", {"start": "2026-13-01"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="domain-error"' in html and "start" in html
