"""Tenant pages for jobs: submit page, list, detail, cancel; scoped to the caller's workspaces."""

from rest_framework.test import APIClient

from scheduling.services import submit_job
from scheduling.spec.examples import CLEAN_YAML


def test_submit_page_offers_examples_and_the_image_form(client, cluster):
    client.force_login(cluster.alice)
    html = client.get("/submit/").content.decode()
    assert 'data-workspace="vision-lab"' in html
    assert "TaskName: training1" in html and "name: bert-finetune" in html
    assert 'data-field="image"' in html and "community" in html


def test_job_list_and_detail_are_scoped(client, cluster):
    job = submit_job(user=cluster.alice, workspace=cluster.vision, spec=CLEAN_YAML)
    client.force_login(cluster.alice)
    assert f'data-job="{job.pk}"' in client.get("/jobs/").content.decode()
    assert "bert-finetune" in client.get(f"/jobs/{job.pk}/").content.decode()
    client.force_login(cluster.bob)
    assert "bert-finetune" not in client.get("/jobs/").content.decode()
    assert client.get(f"/jobs/{job.pk}/").status_code == 404
    assert client.post(f"/jobs/{job.pk}/cancel/").status_code == 404
    job.refresh_from_db()
    assert job.state == "Pending"


def test_cancel_from_the_job_page(client, cluster):
    job = submit_job(user=cluster.alice, workspace=cluster.vision, spec=CLEAN_YAML)
    client.force_login(cluster.alice)
    page = client.post(f"/jobs/{job.pk}/cancel/", follow=True).content.decode()
    assert "Cancelled" in page
    job.refresh_from_db()
    assert job.state == "Cancelled"


def test_state_filter(client, cluster):
    job = submit_job(user=cluster.alice, workspace=cluster.vision, spec=CLEAN_YAML)
    client.force_login(cluster.alice)
    assert f'data-job="{job.pk}"' not in client.get("/jobs/?state=Running").content.decode()
    assert f'data-job="{job.pk}"' in client.get("/jobs/?state=Pending").content.decode()


def test_image_form_becomes_yaml(cluster):
    api = APIClient()
    api.force_authenticate(cluster.alice)
    form = {"image": "pytorch/pytorch:2.4.0", "gpus": "0.5", "gpuMemory": "10Gi", "sharing": "fraction"}
    response = api.post("/api/v1/specs/image-form/", {"workspace": "vision-lab", "form": form}, format="json")
    assert response.status_code == 200, response.json()
    assert "image: pytorch/pytorch:2.4.0" in response.json()["yaml"] and "gpu: 0.5" in response.json()["yaml"]
    bad = api.post("/api/v1/specs/image-form/", {"workspace": "vision-lab", "form": {"image": "x", "gpus": "lots"}},
                   format="json")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "gpus"
    bob = APIClient()
    bob.force_authenticate(cluster.bob)
    assert bob.post("/api/v1/specs/image-form/", {"workspace": "vision-lab", "form": form},
                    format="json").status_code == 404
