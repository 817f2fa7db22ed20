"""The Submit page's image form has a tab per kind: each builds a valid spec of its kind on the server (the
image-form API), reads back from its YAML, and is quoted: a notebook per hour, a service per hour at its
min and its max. The page without JavaScript shows those rates too. Scoped to the caller's workspaces."""

from decimal import Decimal

import pytest
import yaml
from rest_framework.test import APIClient

from billing.services import submit_quoted_job
from scheduling.models import Job
from scheduling.spec import parse_job_spec

NOTEBOOK_FORM = {"kind": "notebook", "gpus": "0.5", "gpuMemory": "10Gi", "homeSize": "20Gi", "idleAfter": "45m",
                 "queue": "vision-lab", "nodePool": "a100-spot"}
SERVICE_FORM = {"kind": "inference", "server": "vllm", "modelPath": "/models/llama-3-8b", "sharing": "fraction",
                "gpus": "0.5", "gpuMemory": "20Gi", "gpuMemoryLimit": "24Gi", "cpu": "4", "memory": "16Gi",
                "minReplicas": "0", "maxReplicas": "3", "targetMetric": "concurrency", "targetValue": "8",
                "scaleDownDelay": "10m", "nodePool": "a100-spot"}


@pytest.fixture
def alice(cluster, clock):
    api = APIClient()
    api.force_authenticate(cluster.alice)
    return api


def form_yaml(api, form, workspace="vision-lab"):
    return api.post("/api/v1/specs/image-form/", {"workspace": workspace, "form": form}, format="json")


def quote(api, spec, **extra):
    response = api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": spec, **extra}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


@pytest.mark.parametrize(("form", "kind"), [
    ({"image": "pytorch/pytorch:2.4.0", "gpus": "1"}, "training"),
    ({"kind": "training", "image": "pytorch/pytorch:2.4.0", "gpus": "0.5", "gpuMemory": "10Gi",
      "sharing": "fraction"}, "training"),
    (NOTEBOOK_FORM, "notebook"),
    (SERVICE_FORM, "inference"),
])
def test_each_tab_builds_a_valid_spec_of_its_kind(alice, form, kind):
    response = form_yaml(alice, form)
    assert response.status_code == 200, response.json()
    text = response.json()["yaml"]
    spec = parse_job_spec(text)
    assert spec.kind == kind and (yaml.safe_load(text).get("kind", "training") == kind)
    # the YAML reads back into the same tab, nothing of it left out
    values = alice.post("/api/v1/specs/image-form/values/", {"workspace": "vision-lab", "spec": text},
                        format="json").json()
    assert values["form"]["kind"] == kind and values["not_in_form"] == []
    again = form_yaml(alice, values["form"]).json()["yaml"]
    assert parse_job_spec(again) == spec


def test_a_tabs_errors_name_its_fields_and_the_cluster_is_checked(alice):
    bad = form_yaml(alice, {"kind": "inference", "sharing": "fraction", "gpus": "0.5", "nodePool": "a100-spot"})
    assert bad.status_code == 400
    assert {e["field"] for e in bad.json()["errors"]} == {"modelPath", "gpuMemory"}
    assert all(e["line"] is None for e in bad.json()["errors"])
    no_pool = form_yaml(alice, {**NOTEBOOK_FORM, "nodePool": "nowhere"})
    assert no_pool.status_code == 422 and [e["field"] for e in no_pool.json()["errors"]] == ["nodePool"]
    not_open = form_yaml(alice, {**NOTEBOOK_FORM, "queue": "nlp-group"})  # another tenant's queue
    assert not_open.status_code == 422 and [e["field"] for e in not_open.json()["errors"]] == ["queue"]
    # the YAML of a tab, edited by hand, gets its errors at their line and column
    text = form_yaml(alice, SERVICE_FORM).json()["yaml"].replace("scaleDownDelay: 10m", "scaleDownDelay: 3d")
    errors = quote_errors(alice, text)
    assert [(e["field"], e["line"] is not None) for e in errors] == [("scaleDownDelay", True)]


def quote_errors(api, text):
    response = api.post("/api/v1/quotes/", {"workspace": "vision-lab", "spec": text}, format="json")
    assert response.status_code == 400
    return response.json()["errors"]


def test_another_tenants_workspace_is_not_found(cluster, clock):
    bob = APIClient()
    bob.force_authenticate(cluster.bob)
    assert form_yaml(bob, NOTEBOOK_FORM).status_code == 404
    assert form_yaml(bob, {**NOTEBOOK_FORM, "queue": "nlp-group"}, workspace="nlp-group").status_code == 200


def test_a_notebook_from_its_tab_is_quoted_per_hour(alice):
    text = form_yaml(alice, NOTEBOOK_FORM).json()["yaml"]
    body = quote(alice, text, duration_hours="1")
    assert body["kind"] == "notebook" and {o["when"] for o in body["options"]} == {"now"}
    fraction = next(o for o in body["options"] if o["id"] == "a100-spot.fraction.now")
    # 0.5 A100 (0.90) + 1 CPU (0.02) + 4 GiB (0.02) = 0.94 / h, spot 60 % off: 0.376 / h
    assert fraction["price_per_hour"] == "0.3760" and fraction["total"] == "0.38"


def test_a_service_from_its_tab_is_quoted_at_its_min_and_its_max(alice):
    text = form_yaml(alice, SERVICE_FORM).json()["yaml"]
    body = quote(alice, text)
    assert body["kind"] == "inference" and {o["when"] for o in body["options"]} == {"now"}
    fraction = next(o for o in body["options"] if o["id"] == "a100-spot.fraction.now")
    # a replica: 0.5 A100 (0.90) + 4 CPUs (0.08) + 16 GiB (0.08) = 1.06 / h, spot 60 % off: 0.424 / h
    assert fraction["roles"][0]["price_per_hour"] == "0.4240"
    assert (fraction["price_per_hour"], fraction["price_per_hour_max"]) == ("0.0000", "1.2720")  # 0 and 3 replicas
    at_one = quote(alice, text.replace("min: 0", "min: 1"))
    one = next(o for o in at_one["options"] if o["id"] == "a100-spot.fraction.now")
    assert (one["price_per_hour"], one["price_per_hour_max"]) == ("0.4240", "1.2720")


def test_the_page_without_javascript_shows_the_rates_of_each_kind(client, cluster, clock):
    client.force_login(cluster.alice)
    api = APIClient()
    api.force_authenticate(cluster.alice)
    notebook = form_yaml(api, NOTEBOOK_FORM).json()["yaml"]
    html = client.post("/submit/", {"workspace": "vision-lab", "spec": notebook, "duration_hours": "1"}).content.decode()
    assert 'data-kind="notebook"' in html and "$0.376 per hour" in html
    service = form_yaml(api, SERVICE_FORM).json()["yaml"]
    html = client.post("/submit/", {"workspace": "vision-lab", "spec": service}).content.decode()
    # a service that scales to zero: not just "0 per hour", but one replica and each for the hours quoted
    assert ("$0.00 per hour at 0 replicas, $0.424 at 1 replica, $1.272 at 3; "
            "for 1 h: $0.00 at 0 replicas, $0.42 at 1 replica, $1.27 at 3") in html
    training = client.get("/submit/?example=single").content.decode()
    assert 'data-option="' in training and 'class="hint rate"' not in training  # a batch job's total is for its duration


def test_the_page_offers_a_tab_per_kind_and_links_the_advice(client, cluster):
    client.force_login(cluster.alice)
    html = client.get("/submit/").content.decode()
    for marker in ('data-kind="training"', 'data-kind="notebook"', 'data-kind="inference"', 'id="notebook-form"',
                   'id="inference-form"', 'data-field="modelPath"', 'data-field="gpuMemoryLimit"',
                   'data-field="homeSize"', 'data-field="idleAfter"', 'data-field="targetMetric"',
                   'id="form-yaml-preview"', 'href="/advice/inference/"', 'id="submit-texts"'):
        assert marker in html, marker
    assert 'placeholder="quay.io/jupyter/pytorch-notebook:cuda12-latest"' in html
    assert '<script>' not in html.replace('<script src=', '').replace(
        '<script id="submit-examples"', '').replace('<script id="submit-texts"', '')  # no inline script


def test_a_service_from_its_tab_is_submitted_with_the_chosen_option(cluster, clock):
    api = APIClient()
    api.force_authenticate(cluster.alice)
    text = form_yaml(api, SERVICE_FORM).json()["yaml"]
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=text, option="a100-spot.fraction.now")
    job = Job.objects.get(pk=job.pk)
    assert job.kind == "inference" and job.quote["price_per_hour_max"] == "1.2720"
    assert Decimal(job.quote["total"]) == 0  # at its min of 0 replicas
