"""What the OpenAPI schema declares, the API enforces, and the other way round (schemathesis checks the whole
of it in tests/reliability/test_api_schema.py; these are the cases it first found, by hand)."""

import json

import pytest
from rest_framework.test import APIClient

from scheduling.spec.examples import SEED_YAML


@pytest.fixture
def alice(cluster, clock):
    api = APIClient()
    api.force_authenticate(cluster.alice)
    return api


@pytest.fixture
def schema(alice):
    return alice.get("/api/schema/", {"format": "json"}).json()


def test_a_null_spec_is_refused_and_the_schema_says_text_or_object(alice, schema):
    declared = schema["components"]["schemas"]["JobSubmitInput"]["properties"]["spec"]
    assert [choice["type"] for choice in declared["oneOf"]] == ["string", "object"]
    for path in ("/api/v1/jobs/", "/api/v1/quotes/", "/api/v1/specs/image-form/values/"):
        response = alice.post(path, {"workspace": "vision-lab", "spec": None}, format="json")
        assert response.status_code == 400 and response.json()["errors"][0]["field"] == "spec", path


def test_a_form_body_is_refused_with_415_and_only_json_is_declared(alice, schema):
    response = alice.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": SEED_YAML}, format="multipart")
    assert response.status_code == 415
    assert response["Content-Type"] == "application/problem+json"
    assert list(schema["paths"]["/api/v1/quotes/"]["post"]["requestBody"]["content"]) == ["application/json"]


def test_a_duration_is_a_number_within_its_bounds_rounded_to_the_hundredth(alice, schema):
    declared = schema["components"]["schemas"]["JobSubmitInput"]["properties"]["duration_hours"]
    assert (declared["type"], declared["minimum"], declared["maximum"]) == ("number", 0.01, 2160)
    body = {"workspace": "vision-lab", "spec": SEED_YAML, "duration_hours": 2.345}
    response = alice.post("/api/v1/quotes/", body, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["duration_hours"] == "2.35"
    assert alice.post("/api/v1/quotes/", {**body, "duration_hours": "3"}, format="json").status_code == 200


def test_costs_filters_declare_their_bounds_and_an_empty_one_is_the_default(alice, schema):
    params = {p["name"]: p for p in schema["paths"]["/api/v1/costs/"]["get"]["parameters"]}
    assert params["page"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 10**6}
    assert params["start"]["schema"]["pattern"].startswith("^(19[7-9]")
    assert all(p["allowEmptyValue"] for p in params.values())
    assert alice.get("/api/v1/costs/", {"start": "", "end": "", "page": "", "job": ""}).status_code == 200
    assert alice.get("/api/v1/costs/", {"start": "1969-12-31", "end": "1970-01-02"}).status_code == 400
    assert alice.get("/api/v1/costs/", {"page": "0"}).status_code == 400


def test_a_range_no_schema_can_refuse_is_unprocessable(alice):
    for query in ({"start": "2026-03-10", "end": "2026-03-01"}, {"start": "1970-01-01", "end": "2100-01-01"}):
        response = alice.get("/api/v1/costs/", query)
        assert response.status_code == 422, query
        assert response["Content-Type"] == "application/problem+json"
        assert json.loads(response.content)["errors"][0]["field"] in ("start", "end")
