"""An escaped NUL (YAML "\\0", JSON "\\u0000") is refused after decoding, in every string, keys too, with
the field's path: a 400 problem on the API, a form error on the Submit page, nothing stored."""

import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from scheduling.models import Job
from scheduling.spec import SpecError, parse_job_spec, parse_job_spec_obj

YAML_SPECS = [  # (text, the path named in the error)
    ('name: t\nroles:\n  - name: main\n    image: busybox\n    command: ["sh", "a\\0b"]\n    resources: {gpu: 1}\n',
     "roles[0].command[1]"),
    ('name: t\nroles:\n  - name: main\n    image: busybox\n    env: {A: "x\\0"}\n    resources: {gpu: 1}\n',
     "roles[0].env.A"),
    ('name: t\nroles:\n  - name: main\n    image: busybox\n    env: {"A\\0": "x"}\n    resources: {gpu: 1}\n',
     "roles[0].env"),
    ('name: "t\\x00"\nroles:\n  - name: main\n    image: busybox\n    resources: {gpu: 1}\n', "name"),
]
JSON_SPECS = [
    ('{"name": "t", "roles": [{"name": "main", "image": "busybox", "command": ["sh", "a\\u0000b"],'
     ' "resources": {"gpu": 1}}]}', "roles[0].command[1]"),
    ('{"name": "t", "roles": [{"name": "main", "image": "busybox", "env": {"A": "\\u0000"},'
     ' "resources": {"gpu": 1}}]}', "roles[0].env.A"),
    ('{"name": "t", "roles": [{"name": "main", "image": "busybox", "env": {"A\\u0000": "x"},'
     ' "resources": {"gpu": 1}}]}', "roles[0].env"),
]


@pytest.mark.parametrize(("text", "path"), YAML_SPECS)
def test_yaml_nul_is_refused_with_the_path(text, path):
    with pytest.raises(SpecError) as caught:
        parse_job_spec(text)
    assert any(e.field == path and path in e.message and "NUL" in e.message for e in caught.value.errors), \
        caught.value.to_dicts()


@pytest.mark.parametrize(("text", "path"), JSON_SPECS)
def test_json_nul_is_refused_with_the_path(text, path):
    with pytest.raises(SpecError) as caught:
        parse_job_spec_obj(json.loads(text))
    assert any(e.field == path and "NUL" in e.message for e in caught.value.errors), caught.value.to_dicts()


@pytest.fixture
def api(cluster):
    client = APIClient()
    client.force_authenticate(cluster.alice)
    return client


@pytest.mark.parametrize(("text", "path"), YAML_SPECS)
def test_the_api_answers_a_problem_and_stores_nothing_for_yaml(api, clock, text, path):
    for url in ("/api/v1/jobs/", "/api/v1/quotes/"):
        response = api.post(url, {"workspace": "vision-lab", "spec": text}, format="json")
        assert response.status_code == 400, response.content[:300]
        assert response["Content-Type"].startswith("application/problem+json")
        assert path in json.dumps(response.json())
    assert not Job.objects.exists()


@pytest.mark.parametrize(("text", "path"), JSON_SPECS)
def test_the_api_answers_a_problem_and_stores_nothing_for_json(api, clock, text, path):
    body = '{"workspace": "vision-lab", "spec": ' + text + "}"
    response = api.post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"].startswith("application/problem+json")
    assert path in json.dumps(response.json())
    assert not Job.objects.exists()


@pytest.mark.parametrize(("text", "path"), YAML_SPECS[:2])
def test_the_submit_page_shows_the_error_and_stores_nothing(cluster, clock, text, path):
    page = Client()
    page.force_login(cluster.alice)
    for extra in ({}, {"option": "a100-spot.fraction.now"}):
        response = page.post("/submit/", {"workspace": "vision-lab", "spec": text, "duration_hours": "3", **extra})
        assert response.status_code == 400
        assert path in response.content.decode() and "NUL" in response.content.decode()
    assert not Job.objects.exists()
