"""Buckets mounted through a CSI driver on Kubernetes (the pool's bucket_csi_driver): per job and bucket a
static PersistentVolume of the driver and a claim bound to it (csi-s3: and a Secret with the credentials the
node-publish step reads), mounted in every replica at the spec's mountPath, removed with the job's last pod;
Mountpoint for Amazon S3 takes the bucket as volumeAttributes.bucketName and the prefix as a mount option.
The credentials never appear in a pod, a volume or a label; every object valid for Kubernetes 1.30."""

from __future__ import annotations

import base64
import json

import kubernetes_validate
import pytest

from scheduling.backends.base import BucketMount
from scheduling.backends.kubernetes import manifests as m
from scheduling.backends.kubernetes.config import KubernetesConfig
from tests.scheduling.backends.kubernetes.k8s_launches import launch

K8S_VERSION = "1.30.0"
NS = "gpu-ws-vision-lab"
KEY_ID, SECRET_KEY = "AKIAEXAMPLEKEYID0001", "s3cr3t-value-never-logged-9c1e"
VALUES = {"s3-key-id": KEY_ID, "s3-secret": SECRET_KEY}
SECRET_ENV = (("AWS_ACCESS_KEY_ID", "s3-key-id"), ("AWS_SECRET_ACCESS_KEY", "s3-secret"))


def bucket(driver: str, prefix: str = "team/raw/") -> BucketMount:
    return BucketMount(driver=driver, name="raw-data", bucket="acme-raw", endpoint="https://s3.eu-west-1.amazonaws.com",
                       region="eu-west-1", prefix=prefix, access_key_id_secret="s3-key-id",
                       secret_access_key_secret="s3-secret", mount_path="/data/raw")


def with_bucket(driver: str, job_id: int = 7, **extra):
    return launch(job_id=job_id, bucket_mounts=(bucket(driver, **extra),), secret_env=SECRET_ENV,
                  secret_values=VALUES)


def objects_of(replica) -> dict[str, dict]:
    objects = {o["kind"]: o for o in m.bucket_objects(replica, NS)}
    for obj in objects.values():
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    return objects


def test_mountpoint_s3_gets_a_static_volume_naming_the_bucket_and_the_prefix_as_a_mount_option():
    replica = with_bucket(m.MOUNTPOINT_S3)
    objects = objects_of(replica)
    assert set(objects) == {"PersistentVolume", "PersistentVolumeClaim"}  # its credentials are the driver's
    pv, claim = objects["PersistentVolume"], objects["PersistentVolumeClaim"]
    assert pv["spec"]["csi"] == {"driver": "s3.csi.aws.com", "volumeHandle": pv["metadata"]["name"],
                                 "volumeAttributes": {"bucketName": "acme-raw"}}
    assert "prefix team/raw/" in pv["spec"]["mountOptions"] and "region eu-west-1" in pv["spec"]["mountOptions"]
    assert "endpoint-url https://s3.eu-west-1.amazonaws.com" in pv["spec"]["mountOptions"]
    assert pv["spec"]["claimRef"] == {"namespace": NS, "name": "job-7-bucket-raw-data"}
    assert pv["spec"]["storageClassName"] == claim["spec"]["storageClassName"] == ""  # no dynamic provisioning
    assert claim["spec"]["volumeName"] == pv["metadata"]["name"]
    pod = m.replica_pod(replica, NS, "nvidia", KubernetesConfig())
    kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
    assert {"name": "bucket-0", "mountPath": "/data/raw"} in pod["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "bucket-0", "persistentVolumeClaim": {"claimName": "job-7-bucket-raw-data"}} in pod["spec"]["volumes"]
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["AWS_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"]["key"] == "s3-key-id"  # the environment stays
    whole = objects_of(with_bucket(m.MOUNTPOINT_S3, prefix=""))["PersistentVolume"]
    assert not any(option.startswith("prefix") for option in whole["spec"]["mountOptions"])


def test_csi_s3_gets_bucket_slash_prefix_as_its_handle_and_a_secret_of_its_own():
    objects = objects_of(with_bucket(m.CSI_S3))
    pv, secret = objects["PersistentVolume"], objects["Secret"]
    csi = pv["spec"]["csi"]
    assert csi["driver"] == "ru.yandex.s3.csi" and csi["volumeHandle"] == "acme-raw/team/raw"
    assert csi["volumeAttributes"]["mounter"] == "geesefs"
    ref = {"name": "job-7-bucket-raw-data", "namespace": NS}
    assert csi["nodePublishSecretRef"] == csi["nodeStageSecretRef"] == csi["controllerPublishSecretRef"] == ref
    assert secret["metadata"]["name"] == ref["name"] and secret["metadata"]["namespace"] == NS
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "accessKeyID": KEY_ID, "secretAccessKey": SECRET_KEY, "endpoint": "https://s3.eu-west-1.amazonaws.com",
        "region": "eu-west-1"}
    outside = json.dumps([pv, objects["PersistentVolumeClaim"],
                          m.replica_pod(with_bucket(m.CSI_S3), NS, "nvidia", KubernetesConfig())])
    assert KEY_ID not in outside and SECRET_KEY not in outside
    assert objects_of(with_bucket(m.CSI_S3, prefix=""))["PersistentVolume"]["spec"]["csi"]["volumeHandle"] == "acme-raw"


def test_an_unknown_driver_is_refused():
    with pytest.raises(ValueError, match="s3fs.example.com"):
        m.bucket_objects(with_bucket("s3fs.example.com"), NS)


@pytest.mark.parametrize("driver", [m.MOUNTPOINT_S3, m.CSI_S3])
def test_the_jobs_first_replica_makes_the_objects_and_its_last_pod_takes_them(api, backend, gpu_node, driver):
    backend.inventory()
    backend.launch(with_bucket(driver))
    backend.launch(launch(job_id=7, index=1, gpus=(1,), bucket_mounts=(bucket(driver),), secret_env=SECRET_ENV,
                          secret_values=VALUES))
    (pv,) = api.list("persistentvolumes")
    assert pv["spec"]["csi"]["driver"] == driver
    assert [c["metadata"]["name"] for c in api.list("persistentvolumeclaims", NS)] == ["job-7-bucket-raw-data"]
    secrets = {s["metadata"]["name"] for s in api.list("secrets", NS)}
    assert ("job-7-bucket-raw-data" in secrets) == (driver == m.CSI_S3)
    assert len(api.list("pods", NS)) == 2

    backend.forget((7, "worker", 0))
    assert len(api.list("persistentvolumes")) == 1  # a replica still runs
    backend.forget((7, "worker", 1))
    assert api.list("persistentvolumes") == [] and api.list("persistentvolumeclaims", NS) == []
    assert "job-7-bucket-raw-data" not in {s["metadata"]["name"] for s in api.list("secrets", NS)}
    assert {s["metadata"]["name"] for s in api.list("secrets", NS)} == {m.secret_object_name("s3-key-id"),
                                                                         m.secret_object_name("s3-secret")}
