"""The notebooks API: list (with the URL it opens at, its idle time and costs), stop and start with a token
of scope submit, delete keeping the home unless asked; bob, the other tenant, reaches none of it."""

from __future__ import annotations

import time

import pytest
from rest_framework.test import APIClient

from billing.services import submit_quoted_job
from portal.services import create_api_token
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, JobState

NOTEBOOK = "kind: notebook\nname: lab\nqueue: vision-lab\nnodePool: h100\n"


def api_with(user, scope: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_token(user, f'{scope} token', scope=scope)[1]}")
    return api


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=1, failure_rate=0, clock=clock)


@pytest.fixture
def running(cluster, backend, clock, run):
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    deadline = time.monotonic() + 20
    while job.state != JobState.RUNNING and time.monotonic() < deadline:
        run(backend, clock)
        job.refresh_from_db()
        time.sleep(0.05)
    assert job.state == JobState.RUNNING
    return job


def test_the_list_says_where_each_notebook_opens_and_how_long_it_idles(cluster, running):
    api = api_with(cluster.alice, "read")
    response = api.get("/api/v1/notebooks/", {"workspace": "vision-lab"})
    body = response.json()
    assert response.status_code == 200, body
    (item,) = body["results"]
    assert (item["id"], item["name"], item["state"], item["workspace"]) == (running.pk, "lab", "Running", "vision-lab")
    assert item["url"] == "http://testserver/nb/vision-lab/lab/" and item["slice"] == "0.5 GPU"
    assert isinstance(item["idle_s"], int) and item["idle_s"] >= 0
    job = api.get(f"/api/v1/jobs/{running.pk}/").json()
    assert job["kind"] == "notebook"
    assert api_with(cluster.bob, "manage").get("/api/v1/notebooks/", {"workspace": "vision-lab"}).status_code == 404
    assert api_with(cluster.bob, "manage").get("/api/v1/notebooks/").json()["results"] == []


def test_stop_and_start_need_scope_submit_and_a_member(cluster, running, backend, clock, run):
    pk = running.pk
    read = api_with(cluster.alice, "read")
    refused = read.post(f"/api/v1/jobs/{pk}/stop/")
    assert refused.status_code == 403 and "needs scope 'submit'" in refused.json()["detail"]
    bob = api_with(cluster.bob, "manage")
    for path in (f"/api/v1/jobs/{pk}/stop/", f"/api/v1/jobs/{pk}/start/", f"/api/v1/notebooks/{pk}/delete/"):
        assert bob.post(path, {"delete_home": True}, format="json").status_code == 404
    assert Job.objects.get(pk=pk).state == JobState.RUNNING

    alice = api_with(cluster.alice, "submit")
    stopped = alice.post(f"/api/v1/jobs/{pk}/stop/")
    assert stopped.status_code == 200 and stopped.json()["state"] == "Stopped"
    conflict = alice.post(f"/api/v1/jobs/{pk}/stop/")
    assert conflict.status_code == 409 and conflict["Content-Type"] == "application/problem+json"
    assert alice.post(f"/api/v1/jobs/{pk}/start/").json()["state"] == "Pending"

    home = backend.home_of("vision-lab", "lab")
    deleted = alice.post(f"/api/v1/notebooks/{pk}/delete/", {}, format="json")
    assert deleted.json()["state"] == "Cancelled" and home.is_dir()
    again = alice.post(f"/api/v1/notebooks/{pk}/delete/", {}, format="json")
    assert again.status_code == 409  # already ended, and its home was not asked for
    bad = alice.post(f"/api/v1/notebooks/{pk}/delete/", {"delete_home": "perhaps"}, format="json")
    assert bad.status_code == 400


def test_a_training_job_neither_stops_nor_starts(cluster, clock):
    from scheduling.spec.examples import CLEAN_YAML

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=CLEAN_YAML)
    alice = api_with(cluster.alice, "submit")
    response = alice.post(f"/api/v1/jobs/{job.pk}/stop/")
    assert response.status_code == 409 and "is a training job, which does not stop and start" in response.json()["detail"]
    assert alice.post(f"/api/v1/notebooks/{job.pk}/delete/", {}, format="json").status_code == 404
