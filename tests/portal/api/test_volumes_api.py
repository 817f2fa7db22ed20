"""The volumes and datasets API: create, list, grow, upload, snapshot, share and delete, every refusal a
problem detail naming its field; the other tenant reaches none of it; viewers and finance only read."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from billing.services import submit_quoted_job
from portal.services import create_api_token
from scheduling.api import storage
from scheduling.models import Job, JobState, Volume

VOLUMES = "/api/v1/workspaces/{slug}/volumes/"


def api_with(user, scope: str = "submit") -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_token(user, f'{scope} token', scope=scope)[1]}")
    return api


def fields(response) -> dict[str, str]:
    assert response["Content-Type"].startswith("application/problem+json"), response.content
    return {e["field"]: e["message"] for e in response.json()["errors"]}


@pytest.mark.django_db
def test_create_list_grow_and_the_quota_in_figures(cluster):
    alice = api_with(cluster.alice)
    storage.set_storage_quota(cluster.vision, 120)
    made = alice.post(VOLUMES.format(slug="vision-lab"), {"name": "imagenet", "size_gib": 100,
                                                          "access_mode": "ReadWriteMany"}, format="json")
    assert made.status_code == 201 and made.json()["access_mode"] == "ReadWriteMany"
    listed = alice.get(VOLUMES.format(slug="vision-lab")).json()
    assert (listed["used_gib"], listed["quota_gib"]) == (100, 120)
    assert [v["name"] for v in listed["volumes"]] == ["imagenet"]

    over = alice.post(VOLUMES.format(slug="vision-lab"), {"name": "more", "size_gib": 30}, format="json")
    assert over.status_code == 409 and "120 GiB" in fields(over)["size_gib"]
    grown = alice.patch(VOLUMES.format(slug="vision-lab") + "imagenet/", {"size_gib": 110}, format="json")
    assert grown.status_code == 200 and grown.json()["size_gib"] == 110
    shrunk = alice.patch(VOLUMES.format(slug="vision-lab") + "imagenet/", {"size_gib": 5}, format="json")
    assert shrunk.status_code == 409 and "only grows" in fields(shrunk)["size_gib"]
    bad = alice.post(VOLUMES.format(slug="vision-lab"), {"name": "x", "size_gib": 0, "access_mode": "Both"},
                     format="json")
    assert bad.status_code == 400 and {"size_gib", "access_mode"} <= set(fields(bad))


@pytest.mark.django_db
def test_delete_is_refused_with_409_naming_the_live_job_then_allowed(cluster):
    alice = api_with(cluster.alice)
    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=10)
    spec = ("name: train\nqueue: vision-lab\nroles:\n  - name: main\n    image: busybox:1.36\n"
            "    volumes: [{name: imagenet, mountPath: /data, readOnly: true}]\n")
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec)
    refused = alice.delete(VOLUMES.format(slug="vision-lab") + "imagenet/")
    assert refused.status_code == 409
    assert refused.json()["title"] == "Conflicts with the current state"
    assert f"{job.pk} (train, Pending)" in fields(refused)["name"]
    Job.objects.filter(pk=job.pk).update(state=JobState.CANCELLED)
    assert alice.delete(VOLUMES.format(slug="vision-lab") + "imagenet/").status_code == 204
    assert alice.get(VOLUMES.format(slug="vision-lab") + "imagenet/").status_code == 404


@pytest.mark.django_db
def test_upload_writes_the_file_refuses_traversal_and_a_big_file(cluster, settings):
    alice = api_with(cluster.alice)
    storage.create_volume(cluster.alice, cluster.vision, name="data", size_gib=1)
    url = VOLUMES.format(slug="vision-lab") + "data/files/"
    sent = alice.post(url, {"file": SimpleUploadedFile("a.csv", b"x,y\n"), "path": "/train/a.csv"},
                      format="multipart")
    assert sent.status_code == 201 and sent.json() == {"volume": "data", "path": "/train/a.csv", "bytes": 4}
    assert (storage.volume_dir("vision-lab", "data") / "train" / "a.csv").read_bytes() == b"x,y\n"
    escaped = alice.post(url, {"file": SimpleUploadedFile("p", b"x"), "path": "../../../etc/x"}, format="multipart")
    assert escaped.status_code == 400 and "leaves the volume" in fields(escaped)["path"]
    settings.VOLUME_UPLOAD_MAX_BYTES = 2
    big = alice.post(url, {"file": SimpleUploadedFile("b", b"xyz")}, format="multipart")
    assert big.status_code == 400 and "file" in fields(big)


@pytest.mark.django_db
def test_the_other_tenant_reaches_nothing_and_viewers_only_read(cluster):
    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=10)
    bob = api_with(cluster.bob, "manage")
    for response in (bob.get(VOLUMES.format(slug="vision-lab")),
                     bob.get(VOLUMES.format(slug="vision-lab") + "imagenet/"),
                     bob.delete(VOLUMES.format(slug="vision-lab") + "imagenet/"),
                     bob.post(VOLUMES.format(slug="vision-lab") + "imagenet/files/",
                              {"file": SimpleUploadedFile("a", b"x")}, format="multipart"),
                     bob.post("/api/v1/workspaces/vision-lab/datasets/", {"volume": "imagenet"}, format="json")):
        assert response.status_code == 404
    finance = api_with(cluster.finance, "manage")
    assert finance.get(VOLUMES.format(slug="vision-lab")).status_code == 200
    refused = finance.post(VOLUMES.format(slug="vision-lab"), {"name": "f", "size_gib": 1}, format="json")
    assert refused.status_code == 403
    assert finance.delete(VOLUMES.format(slug="vision-lab") + "imagenet/").status_code == 403
    assert Volume.objects.filter(workspace=cluster.vision).count() == 1
    reader = api_with(cluster.alice, "read")
    assert reader.post(VOLUMES.format(slug="vision-lab"), {"name": "r", "size_gib": 1},
                       format="json").status_code == 403


@pytest.mark.django_db
def test_snapshot_share_and_mount_a_dataset_from_another_workspace(cluster):
    alice, bob = api_with(cluster.alice, "manage"), api_with(cluster.bob)
    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=10)
    made = alice.post("/api/v1/workspaces/vision-lab/datasets/", {"volume": "imagenet"}, format="json")
    assert made.status_code == 201 and made.json()["ref"] == "imagenet@v1"
    spec = ("name: train\nqueue: nlp-group\nroles:\n  - name: main\n    image: busybox:1.36\n"
            "    volumes: [{dataset: vision-lab/imagenet@v1, mountPath: /data}]\n")
    refused = bob.post("/api/v1/jobs/", {"workspace": "nlp-group", "spec": spec}, format="json")
    assert refused.status_code == 400
    error, = refused.json()["errors"]
    assert (error["line"], error["column"]) == (6, 25) and "may mount" in error["message"]
    assert bob.get("/api/v1/workspaces/nlp-group/datasets/").json() == []

    shared = alice.post("/api/v1/workspaces/vision-lab/datasets/imagenet/grants/", {"workspace": "nlp-group"},
                        format="json")
    assert shared.status_code == 201
    seen, = bob.get("/api/v1/workspaces/nlp-group/datasets/").json()
    assert (seen["workspace"], seen["shared_with"], seen["versions"][0]["ref"]) == ("vision-lab", [], "imagenet@v1")
    mine, = alice.get("/api/v1/workspaces/vision-lab/datasets/").json()
    assert mine["shared_with"] == ["nlp-group"]
    submitted = bob.post("/api/v1/jobs/", {"workspace": "nlp-group", "spec": spec}, format="json")
    assert submitted.status_code == 201, submitted.content

    kept = alice.delete("/api/v1/workspaces/vision-lab/datasets/imagenet/versions/1/")
    assert kept.status_code == 409 and str(submitted.json()["id"]) in fields(kept)["version"]
    assert bob.delete("/api/v1/workspaces/vision-lab/datasets/imagenet/versions/1/").status_code == 404
    assert alice.delete("/api/v1/workspaces/vision-lab/datasets/imagenet/grants/nlp-group/").status_code == 204
