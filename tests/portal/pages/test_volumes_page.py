"""The Volumes page: members create, grow, upload to, snapshot and delete (after a confirmation, refused while a
live job mounts); owners share datasets; viewers and finance read; the other tenant gets a 404."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from billing.services import submit_quoted_job
from scheduling.api import storage
from scheduling.models import DatasetGrant, Job, JobState, Volume

PAGE = "/w/vision-lab/volumes/"


@pytest.mark.django_db
def test_the_workspace_page_links_here_and_a_member_creates_grows_and_uploads(client, cluster):
    client.force_login(cluster.carol)
    assert PAGE in client.get("/w/vision-lab/").content.decode()
    made = client.post(PAGE, {"action": "create", "name": "imagenet", "size_gib": "10",
                              "access_mode": "ReadWriteMany", "storage_class": "standard"})
    assert made.status_code == 302
    assert Volume.objects.get(workspace=cluster.vision, name="imagenet").access_mode == "ReadWriteMany"
    assert client.post(PAGE, {"action": "resize", "volume": "imagenet", "size_gib": "20"}).status_code == 302
    shrunk = client.post(PAGE, {"action": "resize", "volume": "imagenet", "size_gib": "5"})
    assert shrunk.status_code == 409 and "only grows" in shrunk.content.decode()
    sent = client.post(PAGE + "imagenet/upload/", {"file": SimpleUploadedFile("a.txt", b"hello"), "path": "/x/a.txt"})
    assert sent.status_code == 302
    assert (storage.volume_dir("vision-lab", "imagenet") / "x" / "a.txt").read_bytes() == b"hello"
    escaped = client.post(PAGE + "imagenet/upload/", {"file": SimpleUploadedFile("a", b"x"), "path": "../../a"})
    assert escaped.status_code == 400 and "leaves the volume" in escaped.content.decode()
    page = client.get(PAGE).content.decode()
    assert 'data-volume="imagenet"' in page and "20 GiB" in page


@pytest.mark.django_db
def test_the_quota_refuses_a_volume_on_the_form_with_the_figures(client, cluster):
    storage.set_storage_quota(cluster.vision, 10)
    client.force_login(cluster.alice)
    refused = client.post(PAGE, {"action": "create", "name": "big", "size_gib": "11", "access_mode": "ReadWriteOnce",
                                 "storage_class": "standard"})
    assert refused.status_code == 409 and "storage quota is 10 GiB" in refused.content.decode()
    assert "0 GiB of the storage quota of 10 GiB" in client.get(PAGE).content.decode()


@pytest.mark.django_db
def test_delete_asks_first_and_is_refused_while_a_live_job_mounts(client, cluster):
    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=10)
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=(
        "name: train\nqueue: vision-lab\nroles:\n  - name: main\n    image: busybox:1.36\n"
        "    volumes: [{name: imagenet, mountPath: /data}]\n"))
    client.force_login(cluster.alice)
    asked = client.get(PAGE + "imagenet/delete/").content.decode()
    assert "Live jobs mount it" in asked and f"/jobs/{job.pk}/" in asked and "confirm-delete" not in asked
    refused = client.post(PAGE + "imagenet/delete/")
    assert refused.status_code == 409 and f"{job.pk} (train, Pending)" in refused.content.decode()
    Job.objects.filter(pk=job.pk).update(state=JobState.FAILED)
    assert 'id="confirm-delete"' in client.get(PAGE + "imagenet/delete/").content.decode()
    assert client.post(PAGE + "imagenet/delete/").status_code == 302
    assert not Volume.objects.filter(workspace=cluster.vision).exists()


@pytest.mark.django_db
def test_owners_share_members_snapshot_finance_reads_and_the_other_tenant_sees_nothing(client, cluster):
    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=10)
    client.force_login(cluster.carol)
    assert client.post(PAGE, {"action": "snapshot", "volume": "imagenet"}).status_code == 302
    assert client.post(PAGE, {"action": "grant", "dataset": "imagenet", "workspace": "nlp-group"}).status_code == 403
    client.force_login(cluster.alice)
    assert client.post(PAGE, {"action": "grant", "dataset": "imagenet", "workspace": "nlp-group"}).status_code == 302
    assert DatasetGrant.objects.filter(workspace=cluster.nlp, dataset__name="imagenet").exists()

    client.force_login(cluster.finance)
    page = client.get(PAGE).content.decode()
    assert 'id="read-only"' in page and "create-volume" not in page and "imagenet@v1" in page
    assert client.post(PAGE, {"action": "create", "name": "f", "size_gib": "1"}).status_code == 403
    assert client.get(PAGE + "imagenet/delete/").status_code == 403

    client.force_login(cluster.bob)
    assert client.get(PAGE).status_code == 404
    assert client.post(PAGE + "imagenet/delete/").status_code == 404
    assert client.post(PAGE + "imagenet/upload/", {"file": SimpleUploadedFile("a", b"x")}).status_code == 404
    theirs = client.get("/w/nlp-group/volumes/").content.decode()
    assert "vision-lab/imagenet@v1" in theirs  # shared with bob's workspace, read-only
    assert Volume.objects.filter(workspace=cluster.vision).count() == 1


@pytest.mark.django_db
def test_an_operator_sets_the_storage_quota_on_the_console(client, cluster):
    client.force_login(cluster.admin)
    page = "/console/workspaces/vision-lab/"
    assert 'id="storage-quota"' in client.get(page).content.decode()
    assert client.post(page, {"storage_quota": "500"}).status_code == 302
    assert storage.quota_gib(cluster.vision) == 500
    from portal.console.models import AuditEntry

    entry = AuditEntry.objects.get(action="change", target_repr="vision-lab")
    assert entry.changes == {"storage_quota_gib": [None, 500]} and entry.username == "admin"
    assert client.post(page, {"storage_quota": "lots"}).status_code == 400
    assert client.post(page, {"storage_quota": ""}).status_code == 302
    assert storage.quota_gib(cluster.vision) is None
    client.force_login(cluster.alice)  # not an operator
    client.post(page, {"storage_quota": "1"})
    assert storage.quota_gib(cluster.vision) is None
