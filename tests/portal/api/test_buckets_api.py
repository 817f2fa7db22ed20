"""The buckets API: an owner registers a bucket naming two of the workspace's secrets, members list it and its
objects (read from a real S3 API on loopback), bad input is a problem detail per field with nothing made, the
other tenant reaches none of it, and no answer holds a secret's value."""

from __future__ import annotations

import uuid

import boto3
import pytest
from rest_framework.test import APIClient

from portal.console.models import AuditEntry
from portal.services import create_api_token
from scheduling.api import secrets
from scheduling.models import WorkspaceBucket

BUCKETS = "/api/v1/workspaces/{slug}/buckets/"
KEY_ID, SECRET_KEY = "AKIAAPITESTKEY000001", "api-s3cr3t-never-shown-51d2"


def api_with(user, scope: str = "manage") -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {create_api_token(user, f'{scope} token', scope=scope)[1]}")
    return api


def fields(response) -> dict[str, str]:
    assert response["Content-Type"].startswith("application/problem+json"), response.content
    return {e["field"]: e["message"] for e in response.json()["errors"]}


@pytest.fixture
def store(s3_server, settings, cluster):
    settings.BUCKET_ALLOW_PRIVATE_CIDRS = ["127.0.0.1/32"]
    name = f"api-{uuid.uuid4().hex[:8]}"
    client = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1", aws_access_key_id=KEY_ID,
                          aws_secret_access_key=SECRET_KEY)
    client.create_bucket(Bucket=name)
    secrets.set_secret(cluster.alice, cluster.vision, "s3-key-id", KEY_ID)
    secrets.set_secret(cluster.alice, cluster.vision, "s3-secret", SECRET_KEY)
    return s3_server, name, client


def body(endpoint: str, bucket: str, **more) -> dict:
    return {"name": "raw-data", "endpoint": endpoint, "bucket": bucket, "prefix": "team/",
            "credentials": {"accessKeyId": {"secret": "s3-key-id"}, "secretAccessKey": {"secret": "s3-secret"}},
            **more}


@pytest.mark.django_db
def test_register_list_objects_and_delete(cluster, store):
    endpoint, bucket, client = store
    alice = api_with(cluster.alice)
    made = alice.post(BUCKETS.format(slug="vision-lab"), body(endpoint, bucket), format="json")
    assert made.status_code == 201, made.content
    assert made.json()["credentials"] == {"accessKeyId": {"secret": "s3-key-id"},
                                          "secretAccessKey": {"secret": "s3-secret"}}
    client.put_object(Bucket=bucket, Key="team/a.txt", Body=b"abc")
    client.put_object(Bucket=bucket, Key="team/sub/b.txt", Body=b"hello")
    client.put_object(Bucket=bucket, Key="other/c.txt", Body=b"x")
    carol = api_with(cluster.carol, "read")   # a member lists
    listed = carol.get(BUCKETS.format(slug="vision-lab"))
    assert [b["name"] for b in listed.json()] == ["raw-data"]
    objects = carol.get(BUCKETS.format(slug="vision-lab") + "raw-data/objects/")
    assert objects.status_code == 200
    assert [(o["key"], o["size"]) for o in objects.json()] == [("team/a.txt", 3), ("team/sub/b.txt", 5)]
    sub = carol.get(BUCKETS.format(slug="vision-lab") + "raw-data/objects/", {"prefix": "sub/"})
    assert [o["key"] for o in sub.json()] == ["team/sub/b.txt"]
    for answer in (made, listed, objects):
        assert KEY_ID not in answer.content.decode() and SECRET_KEY not in answer.content.decode()

    assert carol.delete(BUCKETS.format(slug="vision-lab") + "raw-data/").status_code in (403, 404)
    assert alice.delete(BUCKETS.format(slug="vision-lab") + "raw-data/").status_code == 204
    assert not WorkspaceBucket.objects.exists()
    lines = AuditEntry.objects.filter(target_type="scheduling.workspacebucket").order_by("pk")
    assert [(a.action, a.target_repr) for a in lines] == [("create", "vision-lab/raw-data"),
                                                          ("delete", "vision-lab/raw-data")]
    assert SECRET_KEY not in str(lines[0].changes) and "s3-key-id, s3-secret" in str(lines[0].changes)


@pytest.mark.django_db
def test_bad_input_is_a_problem_per_field_and_nothing_is_made(cluster, store, settings):
    _endpoint, bucket, _client = store
    alice = api_with(cluster.alice)
    bad = alice.post(BUCKETS.format(slug="vision-lab"),
                     body("gopher://s3.example.com", "B", name="Raw!", region="Mars 1",
                          credentials={"accessKeyId": {"secret": "missing"},
                                       "secretAccessKey": {"secret": "s3-secret"}}), format="json")
    assert bad.status_code == 400
    assert {"name", "endpoint", "bucket", "region", "credentials.accessKeyId"} <= set(fields(bad))
    settings.BUCKET_ALLOW_PRIVATE_CIDRS = []
    inside = alice.post(BUCKETS.format(slug="vision-lab"), body("http://127.0.0.1:9000", bucket), format="json")
    assert inside.status_code == 400 and "BUCKET_ALLOW_PRIVATE_CIDRS" in fields(inside)["endpoint"]
    shapeless = alice.post(BUCKETS.format(slug="vision-lab"), {"name": "x"}, format="json")
    assert shapeless.status_code == 400 and {"endpoint", "bucket", "credentials"} <= set(fields(shapeless))
    assert not WorkspaceBucket.objects.exists()


@pytest.mark.django_db
def test_the_other_tenant_reaches_nothing(cluster, store):
    endpoint, bucket, _client = store
    assert api_with(cluster.alice).post(BUCKETS.format(slug="vision-lab"), body(endpoint, bucket),
                                        format="json").status_code == 201
    bob = api_with(cluster.bob)
    assert bob.get(BUCKETS.format(slug="vision-lab")).status_code == 404
    assert bob.get(BUCKETS.format(slug="vision-lab") + "raw-data/objects/").status_code == 404
    assert bob.delete(BUCKETS.format(slug="vision-lab") + "raw-data/").status_code == 404
    assert bob.get(BUCKETS.format(slug="nlp-group")).json() == []
    assert bob.get(BUCKETS.format(slug="nlp-group") + "raw-data/objects/").status_code == 404
    # bob's workspace cannot point a bucket at alice's secrets: it has none of that name
    stolen = bob.post(BUCKETS.format(slug="nlp-group"), body(endpoint, bucket), format="json")
    assert stolen.status_code == 400 and "credentials.accessKeyId" in fields(stolen)
    assert WorkspaceBucket.objects.count() == 1


@pytest.mark.django_db
def test_a_store_that_refuses_the_listing_is_a_502_naming_its_answer(cluster, store):
    endpoint, _bucket, _client = store
    alice = api_with(cluster.alice)
    assert alice.post(BUCKETS.format(slug="vision-lab"), body(endpoint, "not-made-in-the-store"),
                      format="json").status_code == 201
    refused = alice.get(BUCKETS.format(slug="vision-lab") + "raw-data/objects/")
    assert refused.status_code == 502 and "404 (NoSuchBucket)" in fields(refused)["endpoint"]
    assert SECRET_KEY not in refused.content.decode()
