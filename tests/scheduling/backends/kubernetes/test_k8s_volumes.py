"""Workspace volumes on Kubernetes: a PersistentVolumeClaim per volume in the workspace's namespace, made when a
job first mounts it and grown when the volume grew; the pod mounts it (read-only when asked), beside a
notebook's home; a dataset version mounts read-only; every object valid for Kubernetes 1.30."""

from __future__ import annotations

from dataclasses import replace

import kubernetes_validate

from scheduling.backends.base import JUPYTER
from scheduling.backends.kubernetes import manifests as m
from scheduling.backends.kubernetes.config import KubernetesConfig
from scheduling.storage import Mount
from tests.scheduling.backends.kubernetes.k8s_launches import launch

K8S_VERSION = "1.30.0"
NS = "gpu-ws-vision-lab"
IMAGENET = Mount("volume", "vision-lab", "imagenet", 0, "/data", True, 100, "fast-ssd", "ReadWriteMany")
SCRATCH = Mount("volume", "vision-lab", "scratch", 0, "/scratch", False, 5, "", "ReadWriteOnce")
REFERENCE = Mount("dataset", "nlp-group", "corpus", 3, "/ref", True)


def test_the_pod_mounts_each_claim_and_honours_read_only():
    replica = launch(mounts=(IMAGENET, SCRATCH, REFERENCE))
    pod = m.replica_pod(replica, NS, "nvidia", KubernetesConfig())
    claims = m.volume_claims(replica, NS)
    for obj in (pod, *claims):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    (container,) = pod["spec"]["containers"]
    assert container["volumeMounts"] == [
        {"name": "mount-0", "mountPath": "/data", "readOnly": True},
        {"name": "mount-1", "mountPath": "/scratch", "readOnly": False},
        {"name": "mount-2", "mountPath": "/ref", "readOnly": True}]
    assert [v["persistentVolumeClaim"] for v in pod["spec"]["volumes"]] == [
        {"claimName": "vol-imagenet", "readOnly": True}, {"claimName": "vol-scratch", "readOnly": False},
        {"claimName": "ds-nlp-group-corpus-v3", "readOnly": True}]
    imagenet, scratch, corpus = claims
    assert imagenet["spec"] == {"accessModes": ["ReadWriteMany"], "storageClassName": "fast-ssd",
                                "resources": {"requests": {"storage": "100Gi"}}}
    assert "storageClassName" not in scratch["spec"]  # the cluster's default class
    assert corpus["spec"]["accessModes"] == ["ReadOnlyMany"] and corpus["spec"]["dataSource"]["kind"] == "VolumeSnapshot"


def test_a_notebook_keeps_its_home_beside_the_workspace_volumes():
    home = Mount("volume", "vision-lab", "home-lab", 0, "", False, 1, "standard", "ReadWriteOnce", home_of="lab")
    replica = replace(launch(role="notebook", kind="fraction", home_mib=1024, home=home, job_name="lab",
                             mounts=(IMAGENET,)), shape=JUPYTER)
    pod = m.replica_pod(replica, NS, "nvidia", KubernetesConfig())
    assert [v["mountPath"] for v in pod["spec"]["containers"][0]["volumeMounts"]] == ["/home/jovyan", "/data"]
    assert [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]] == ["home-lab", "vol-imagenet"]


def test_launch_makes_the_claim_once_grows_it_and_delete_removes_it(api, backend, gpu_node):
    backend.inventory()
    backend.launch(launch(job_id=1, mounts=(IMAGENET,)))
    (claim,) = api.list("persistentvolumeclaims", NS)
    assert claim["metadata"]["name"] == "vol-imagenet" and claim["spec"]["resources"]["requests"]["storage"] == "100Gi"
    (pod,) = api.list("pods", NS)
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "vol-imagenet"

    backend.launch(launch(job_id=2, gpus=(1,), mounts=(replace(IMAGENET, size_gib=200),)))  # grown since
    (again,) = api.list("persistentvolumeclaims", NS)
    assert again["metadata"]["uid"] == claim["metadata"]["uid"]
    assert again["spec"]["resources"]["requests"]["storage"] == "200Gi"

    backend.delete_volume("vision-lab", "imagenet")
    assert api.list("persistentvolumeclaims", NS) == [] or all(
        c["metadata"].get("deletionTimestamp") for c in api.list("persistentvolumeclaims", NS))
    backend.delete_volume("vision-lab", "never-mounted")  # no claim yet: nothing to do
