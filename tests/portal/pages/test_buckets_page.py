"""The Buckets section of the Volumes page: an owner registers a bucket naming two secrets (a bad field is
shown beside it, nothing made) and deletes it; a member sees the list without the forms; the other tenant gets
a 404; no secret's value is on the page."""

from __future__ import annotations

import pytest

from scheduling.api import secrets
from scheduling.models import WorkspaceBucket

PAGE = "/w/vision-lab/volumes/"
SECRET_KEY = "page-s3cr3t-never-on-a-page-3f0e"


def form(endpoint: str, **more) -> dict:
    return {"action": "bucket-add", "name": "raw-data", "endpoint": endpoint, "bucket": "team-data",
            "prefix": "vision/", "region": "us-east-1", "access_key_id": "s3-key-id",
            "secret_access_key": "s3-secret", **more}


@pytest.mark.django_db
def test_an_owner_registers_and_deletes_a_bucket_and_a_member_only_reads(client, cluster, s3_server, settings):
    settings.BUCKET_ALLOW_PRIVATE_CIDRS = ["127.0.0.1/32"]
    secrets.set_secret(cluster.alice, cluster.vision, "s3-key-id", "AKIAPAGEKEY000000001")
    secrets.set_secret(cluster.alice, cluster.vision, "s3-secret", SECRET_KEY)
    client.force_login(cluster.alice)
    bad = client.post(PAGE, form("ftp://s3.example.com", secret_access_key="missing"))
    text = bad.content.decode()
    assert bad.status_code == 400 and 'data-field="endpoint"' in text and 'data-field="secret_access_key"' in text
    assert not WorkspaceBucket.objects.exists()
    assert client.post(PAGE, form(s3_server)).status_code == 302
    page = client.get(PAGE).content.decode()
    assert 'data-bucket="raw-data"' in page and "s3-key-id, s3-secret" in page and SECRET_KEY not in page

    client.force_login(cluster.carol)   # a member: the list, no forms, and a delete refused
    page = client.get(PAGE).content.decode()
    assert 'data-bucket="raw-data"' in page and 'id="add-bucket"' not in page
    assert client.post(PAGE, {"action": "bucket-delete", "bucket": "raw-data"}).status_code == 403
    client.force_login(cluster.bob)
    assert client.get(PAGE).status_code == 404

    client.force_login(cluster.alice)
    assert client.post(PAGE, {"action": "bucket-delete", "bucket": "raw-data"}).status_code == 302
    assert not WorkspaceBucket.objects.exists()
