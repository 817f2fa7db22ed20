"""`gpuctl bucket add|list|ls|rm` against the real ASGI server and a real S3 API on loopback: an owner
registers a bucket naming two secrets, lists it and its objects; a bad field is one line naming it; bob reaches
none of alice's buckets; no output holds a secret's value."""

from __future__ import annotations

import json
import uuid

import pytest

if not pytest.importorskip("django.conf").settings.configured:  # run with -p no:django
    pytest.skip("needs the Django test plugin (live server, test database)", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)
KEY_ID, SECRET_KEY = "AKIACLITESTKEY000001", "cli-s3cr3t-never-printed-77ab"


def test_add_list_ls_and_rm(gpuctl, cluster, s3_server):
    import boto3

    from portal.services import create_api_token
    from scheduling.api import secrets

    alice = create_api_token(cluster.alice, "cli manage", scope="manage")[1]
    bob = create_api_token(cluster.bob, "cli manage", scope="manage")[1]
    secrets.set_secret(cluster.alice, cluster.vision, "s3-key-id", KEY_ID)
    secrets.set_secret(cluster.alice, cluster.vision, "s3-secret", SECRET_KEY)
    bucket = f"cli-{uuid.uuid4().hex[:8]}"
    client = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1", aws_access_key_id=KEY_ID,
                          aws_secret_access_key=SECRET_KEY)
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key="team/model.bin", Body=b"12345")

    add = ("bucket", "add", "raw-data", "--endpoint", s3_server, "--bucket", bucket, "--prefix", "team/",
           "--access-key-secret", "s3-key-id", "--secret-key-secret", "s3-secret", "-w", "vision-lab")
    code, out, err = gpuctl(alice, *add)
    assert (code, err) == (0, ""), err
    assert out.strip() == f"bucket raw-data in vision-lab: added ({s3_server}/{bucket}/team/)"
    code, out, err = gpuctl(alice, "bucket", "list", "-w", "vision-lab")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "ENDPOINT", "BUCKET", "PREFIX", "SECRETS"]
    assert row.split()[:4] == ["raw-data", s3_server, bucket, "team/"]
    code, out, err = gpuctl(alice, "bucket", "ls", "raw-data", "-w", "vision-lab", "-o", "json")
    assert code == 0 and [(o["key"], o["size"]) for o in json.loads(out)] == [("team/model.bin", 5)]

    code, out, err = gpuctl(alice, "bucket", "add", "bad", "--endpoint", "ftp://x", "--bucket", bucket,
                            "--access-key-secret", "nope", "--secret-key-secret", "s3-secret", "-w", "vision-lab")
    assert code == 1 and "endpoint" in err and "nope" in err
    code, out, err = gpuctl(bob, "bucket", "ls", "raw-data", "-w", "vision-lab")
    assert (code, out) == (1, "") and "vision-lab" in err and bucket not in err
    code, out, err = gpuctl(bob, "bucket", "rm", "raw-data", "-w", "nlp-group")
    assert code == 1 and "workspace 'nlp-group' has no bucket 'raw-data'" in err
    assert KEY_ID not in out + err and SECRET_KEY not in out + err
    code, out, err = gpuctl(alice, "bucket", "rm", "raw-data", "-w", "vision-lab")
    assert (code, out.strip()) == (0, "bucket raw-data in vision-lab: deleted")
    code, out, err = gpuctl(alice, "bucket", "list", "-w", "vision-lab")
    assert code == 0 and out == "" and "no buckets in vision-lab" in err
