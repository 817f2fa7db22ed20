"""Object storage for jobs: a workspace registers an S3-compatible bucket (its credentials two of its secrets),
a spec's `buckets` gives a role's replicas the bucket as environment, a job's real process writes to the store
with it and the platform lists what it wrote. Against a real S3 API on loopback (moto in server mode)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import boto3
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from scheduling import buckets, secrets, services, sigv4
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.errors import Conflict, DomainError, Forbidden
from scheduling.models import JobState, WorkspaceBucket
from scheduling.spec import SpecError

KEY_ID, SECRET_KEY = "AKIAEXAMPLEKEYID0001", "s3cr3t-value-never-logged-9c1e"
SPEC = """name: {name}
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: busybox:1.36
    nodePool: h100
    buckets: [{{name: {bucket}}}]
"""


@pytest.fixture
def store(s3_server, settings):
    """A fresh bucket in the store, the loopback let through for buckets only."""
    settings.BUCKET_ALLOW_PRIVATE_CIDRS = ["127.0.0.1/32"]
    name = f"raw-{uuid.uuid4().hex[:8]}"
    client = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1", aws_access_key_id=KEY_ID,
                          aws_secret_access_key=SECRET_KEY)
    client.create_bucket(Bucket=name)
    return s3_server, name, client


def register(cluster, endpoint: str, bucket: str, name: str = "raw-data", prefix: str = "team/"):
    secrets.set_secret(cluster.alice, cluster.vision, "s3-key-id", KEY_ID)
    secrets.set_secret(cluster.alice, cluster.vision, "s3-secret", SECRET_KEY)
    return buckets.add_bucket(cluster.alice, cluster.vision, name=name, endpoint=endpoint, bucket=bucket,
                              prefix=prefix, access_key_id={"secret": "s3-key-id"},
                              secret_access_key={"secret": "s3-secret"})


def test_the_signature_is_the_one_botocore_computes():
    url = sigv4.object_url("http://127.0.0.1:9000", "raw-data", "team/a b+c.txt")
    params = {"prefix": "team/", "list-type": "2"}
    request = AWSRequest(method="GET", url=url, params=params, headers={"X-Amz-Content-Sha256": sigv4.EMPTY_SHA256})
    S3SigV4Auth(Credentials(KEY_ID, SECRET_KEY), "s3", "eu-west-1").add_auth(request)
    # botocore signs at its own now: ours signs at the same second
    now = datetime.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    ours = sigv4.sign("GET", url, params=params, access_key=KEY_ID, secret_key=SECRET_KEY, region="eu-west-1",
                      now=now)
    assert ours["Authorization"] == request.headers["Authorization"]
    assert "%20" in url and "%2B" in url   # the key's space and plus, encoded once


@pytest.mark.django_db
def test_bad_input_is_refused_by_field_and_nothing_is_stored(cluster, settings):
    settings.BUCKET_ALLOW_PRIVATE_CIDRS = []
    secrets.set_secret(cluster.alice, cluster.vision, "s3-key-id", KEY_ID)
    with pytest.raises(DomainError) as refused:
        buckets.add_bucket(cluster.alice, cluster.vision, name="Raw Data", endpoint="ftp://s3.example.com",
                           bucket="A", prefix="x\n", region="US East", access_key_id={"secret": "s3-key-id"},
                           secret_access_key={"secret": "nope"})
    assert set(refused.value.errors) == {"name", "endpoint", "bucket", "prefix", "region",
                                         buckets.SECRET_KEY_FIELD}
    assert "nope" in refused.value.errors[buckets.SECRET_KEY_FIELD][0]
    for inside in ("http://127.0.0.1:9000", "http://10.1.2.3", "http://localhost:9000", "http://[::1]:9000",
                   "http://169.254.169.254"):
        with pytest.raises(DomainError) as refused:
            buckets.add_bucket(cluster.alice, cluster.vision, name="raw", endpoint=inside, bucket="raw-data",
                               access_key_id="s3-key-id", secret_access_key="s3-key-id")
        assert set(refused.value.errors) == {"endpoint"}, inside
    with pytest.raises(DomainError) as refused:
        buckets.add_bucket(cluster.alice, cluster.vision, name="raw", endpoint="https://user:pw@s3.example.com",
                           bucket="raw-data", access_key_id="s3-key-id", secret_access_key="s3-key-id")
    assert "password" in refused.value.errors["endpoint"][0]
    assert not WorkspaceBucket.objects.exists()


@pytest.mark.django_db
def test_only_an_owner_registers_or_deletes_and_names_are_one_per_workspace(cluster, store):
    endpoint, bucket, _client = store
    register(cluster, endpoint, bucket)
    with pytest.raises(Forbidden):
        buckets.add_bucket(cluster.carol, cluster.vision, name="other", endpoint=endpoint, bucket=bucket,
                           access_key_id="s3-key-id", secret_access_key="s3-secret")
    with pytest.raises(Conflict):
        buckets.add_bucket(cluster.alice, cluster.vision, name="raw-data", endpoint=endpoint, bucket=bucket,
                           access_key_id="s3-key-id", secret_access_key="s3-secret")
    with pytest.raises(Forbidden):
        buckets.delete_bucket(cluster.carol, cluster.vision, "raw-data")
    # the other workspace neither sees it nor reaches it by name
    assert list(buckets.buckets_of(cluster.nlp)) == []
    with pytest.raises(buckets.NoSuchBucket):
        buckets.delete_bucket(cluster.bob, cluster.nlp, "raw-data")
    assert WorkspaceBucket.objects.filter(workspace=cluster.vision).count() == 1


@pytest.mark.django_db
def test_a_spec_reads_a_registered_bucket_as_environment_and_nothing_else(cluster, store):
    endpoint, bucket, _client = store
    register(cluster, endpoint, bucket)
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision,
                              spec=SPEC.format(name="train", bucket="raw-data"))
    role = job.roles[0]
    assert role["env"]["AWS_ENDPOINT_URL"] == role["env"]["AWS_ENDPOINT_URL_S3"] == endpoint
    assert (role["env"]["S3_BUCKET"], role["env"]["S3_PREFIX"]) == (bucket, "team/")
    assert role["secret_env"] == {"AWS_ACCESS_KEY_ID": "s3-key-id", "AWS_SECRET_ACCESS_KEY": "s3-secret"}
    assert KEY_ID not in str(job.roles) and SECRET_KEY not in str(job.roles) + job.spec_text + str(job.spec)

    with pytest.raises(SpecError) as refused:   # another workspace cannot name it
        services.read_spec(cluster.nlp, SPEC.format(name="steal", bucket="raw-data").replace("vision-lab",
                                                                                              "nlp-group"))
    assert "has no bucket 'raw-data'" in str(refused.value) and refused.value.errors[0].line == 8
    two = SPEC.format(name="two", bucket="raw-data").replace("[{name: raw-data}]", "[{name: a}, {name: b}]")
    with pytest.raises(SpecError, match="at most 1 bucket"):
        services.read_spec(cluster.vision, two)
    clash = SPEC.format(name="clash", bucket="raw-data") + "    env: {S3_BUCKET: mine}\n"
    with pytest.raises(SpecError, match="S3_BUCKET is set from the bucket raw-data"):
        services.read_spec(cluster.vision, clash)


@pytest.mark.django_db
def test_a_notebook_names_a_bucket_at_its_top_level(cluster, store):
    endpoint, bucket, _client = store
    register(cluster, endpoint, bucket)
    spec = services.read_spec(cluster.vision, "kind: notebook\nname: nb\nqueue: vision-lab\n"
                                              "buckets: [{name: raw-data}]\n")
    assert [use.name for use in spec.roles[0].buckets] == ["raw-data"]


def _wait(predicate, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


@pytest.mark.django_db
def test_a_jobs_real_process_writes_to_the_bucket_and_the_platform_lists_it(cluster, store, clock, run):
    endpoint, bucket, client = store
    register(cluster, endpoint, bucket)
    client.put_object(Bucket=bucket, Key="elsewhere/not-listed.txt", Body=b"x")   # outside the prefix
    backend = SimulatedBackend(speedup=360, failure_rate=0, clock=clock, training_processes=True)
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision,
                              spec=SPEC.format(name="train", bucket="raw-data"))
    run(backend, clock)
    clock.advance(2)
    run(backend, clock)
    assert backend.wait_for_starts()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    key = (job.pk, "main", 0)
    log = _wait(lambda: "bucket:" in backend.logs(key) and backend.logs(key))
    assert "bucket: wrote team/main-0.txt (200)" in log, log
    assert "AWS_SECRET_ACCESS_KEY" in log and SECRET_KEY not in log and KEY_ID not in log
    listed = buckets.list_objects(cluster.vision, "raw-data")
    assert [(o.key, o.size) for o in listed] == [("team/main-0.txt", len(b"written by main-0\n"))]
    assert client.get_object(Bucket=bucket, Key="team/main-0.txt")["Body"].read() == b"written by main-0\n"
    assert buckets.list_objects(cluster.vision, "raw-data", prefix="nothing-here/") == []

    with pytest.raises(Conflict, match=f"{job.pk} \\(train"):   # a live job reads it
        buckets.delete_bucket(cluster.alice, cluster.vision, "raw-data")
    services.cancel_job(user=cluster.alice, job=job)
    buckets.delete_bucket(cluster.alice, cluster.vision, "raw-data")
    assert not WorkspaceBucket.objects.exists()


@pytest.mark.django_db
def test_listing_says_what_the_store_answered_and_an_endpoint_no_longer_allowed_is_refused(cluster, store,
                                                                                          settings):
    endpoint, _bucket, _client = store
    register(cluster, endpoint, "no-such-bucket-here")
    with pytest.raises(buckets.StoreUnreachable, match="404 \\(NoSuchBucket\\)"):
        buckets.list_objects(cluster.vision, "raw-data")
    settings.BUCKET_ALLOW_PRIVATE_CIDRS = []
    with pytest.raises(buckets.StoreUnreachable, match="no longer calls"):
        buckets.list_objects(cluster.vision, "raw-data")


@pytest.mark.django_db
def test_on_kubernetes_the_pod_reads_the_credentials_by_secret_key_ref(cluster, store):
    import json

    from scheduling.backends.kubernetes import manifests
    from scheduling.backends.kubernetes.config import KubernetesConfig
    from tests.scheduling.backends.kubernetes.k8s_launches import launch

    endpoint, bucket, _client = store
    register(cluster, endpoint, bucket)
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision,
                              spec=SPEC.format(name="train", bucket="raw-data"))
    role = job.roles[0]
    replica = launch(job.pk, "main", 0, env=tuple(sorted(role["env"].items())),
                     secret_env=tuple(sorted(role["secret_env"].items())),
                     secret_values=secrets.launch_secrets([job]).values_for(job.workspace_id,
                                                                            secrets.referenced(role)))
    pod = manifests.replica_pod(replica, "gpu-ws-vision-lab", "nvidia", KubernetesConfig())
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["key"] == "s3-secret"
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"]["key"] == "s3-key-id"
    assert env["S3_BUCKET"]["value"] == bucket and env["AWS_ENDPOINT_URL_S3"]["value"] == endpoint
    assert SECRET_KEY not in json.dumps(pod) and KEY_ID not in json.dumps(pod)
    made = {o["metadata"]["name"] for o in manifests.replica_secret_objects(replica, "gpu-ws-vision-lab")}
    assert made == {manifests.secret_object_name("s3-key-id"), manifests.secret_object_name("s3-secret")}


@pytest.mark.django_db
def test_a_secret_a_bucket_holds_its_credentials_in_is_not_deleted_before_the_bucket(cluster, store):
    endpoint, bucket, _client = store
    register(cluster, endpoint, bucket)
    with pytest.raises(Conflict, match="raw-data"):
        secrets.delete_secret(cluster.alice, cluster.vision, "s3-secret")
    buckets.delete_bucket(cluster.alice, cluster.vision, "raw-data")
    secrets.delete_secret(cluster.alice, cluster.vision, "s3-secret")
    assert secrets.secret_names(cluster.vision) == ["s3-key-id"]


@pytest.mark.parametrize("text", [
    SPEC.format(name="train", bucket="raw-data"),
    "kind: notebook\nname: nb\nqueue: vision-lab\nbuckets: [{name: raw-data}]\n",
    "kind: notebook\nname: nb\nqueue: vision-lab\nbuckets: [{name: raw-data, mountPath: /data/raw}]\n",
    "kind: inference\nname: svc\nqueue: vision-lab\nserver: custom\nimage: busybox:1.36\nport: 8000\n"
    "healthPath: /health\nresources: {gpu: 1}\nbuckets: [{name: raw-data}]\n",
])
def test_the_clean_form_keeps_the_bucket(text):
    from scheduling.spec import parse_job_spec, spec_to_yaml

    parsed = parse_job_spec(text)
    again = parse_job_spec(spec_to_yaml(parsed))
    assert [use.name for use in again.roles[0].buckets] == ["raw-data"] and again == parsed


@pytest.mark.django_db
def test_a_pool_with_a_bucket_csi_driver_also_mounts_the_bucket_where_the_spec_says(cluster, store):
    from scheduling.models import NodePool

    endpoint, bucket, _client = store
    register(cluster, endpoint, bucket)
    spec = SPEC.format(name="train", bucket="raw-data").replace("[{name: raw-data}]",
                                                                "[{name: raw-data, mountPath: /data/raw/}]")
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=spec)
    pool = NodePool.objects.get(name="h100")
    assert buckets.launch_mounts(job.roles[0], pool.pk) == ()  # no driver: the environment alone, as before
    assert job.roles[0]["env"]["S3_BUCKET"] == bucket
    pool.bucket_csi_driver = "s3.csi.aws.com"
    pool.save()
    (mount,) = buckets.launch_mounts(job.roles[0], pool.pk)
    assert (mount.driver, mount.name, mount.bucket, mount.prefix, mount.mount_path) == (
        "s3.csi.aws.com", "raw-data", bucket, "team/", "/data/raw")
    assert (mount.access_key_id_secret, mount.secret_access_key_secret) == ("s3-key-id", "s3-secret")
    assert KEY_ID not in str(job.roles) and SECRET_KEY not in str(job.roles)
    plain = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC.format(name="p", bucket="raw-data"))
    assert buckets.launch_mounts(plain.roles[0], pool.pk)[0].mount_path == "/buckets/raw-data"


@pytest.mark.django_db
@pytest.mark.parametrize(("entry", "message"), [
    ("{name: raw-data, mountPath: data}", "must be an absolute path"),
    ("{name: raw-data, mountPath: /proc/x}", "cannot be under /proc"),
    ("{name: raw-data, mountPath: /a/../b}", "is not a valid path"),
    ("{name: raw-data, mountPath: /}", "cannot be /"),
    ("{name: raw-data, mount: /x}", "mount"),
])
def test_a_bad_bucket_mount_path_is_refused_at_its_line_and_column(cluster, store, entry, message):
    endpoint, bucket, _client = store
    register(cluster, endpoint, bucket)
    spec = SPEC.format(name="train", bucket="raw-data").replace("[{name: raw-data}]", f"\n      - {entry}")
    with pytest.raises(SpecError) as refused:
        services.read_spec(cluster.vision, spec)
    (issue,) = refused.value.errors
    assert message in issue.message and issue.line == 9 and issue.column is not None, issue


@pytest.mark.django_db
def test_a_bucket_cannot_be_mounted_where_a_volume_is(cluster, store):
    from scheduling import storage

    endpoint, bucket, _client = store
    register(cluster, endpoint, bucket)
    storage.create_volume(cluster.alice, cluster.vision, name="data", size_gib=1)
    spec = SPEC.format(name="train", bucket="raw-data") + "    volumes: [{name: data, mountPath: /buckets/raw-data}]\n"
    with pytest.raises(SpecError, match="also a volume's mountPath"):
        services.read_spec(cluster.vision, spec)

