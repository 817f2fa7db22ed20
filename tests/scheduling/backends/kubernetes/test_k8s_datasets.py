"""Dataset versions on Kubernetes: a version is a VolumeSnapshot of the volume's claim in the owner's namespace;
a job mounting it gets a read-only claim restored from it; a workspace granted the dataset gets a copy of the
snapshot in its own namespace (a pre-provisioned VolumeSnapshotContent naming the same snapshot handle, kept
on the storage when the copy goes); deleting a version or taking a grant back removes what it made. Through
scheduling.storage with the database: a version of a volume no job mounted is refused, and a version a live
job mounts stays with its snapshot."""

from __future__ import annotations

from dataclasses import replace

import kubernetes_validate
import pytest

from scheduling import storage
from scheduling.backends.kubernetes import manifests as m
from scheduling.errors import Conflict
from scheduling.models import DatasetVersion, Job, JobState
from scheduling.storage import Mount
from tests.scheduling.backends.kubernetes.k8s_launches import launch

K8S_VERSION = "1.30.0"
OWNER_NS, GRANTEE_NS = "gpu-ws-vision-lab", "gpu-ws-nlp-group"
IMAGENET = Mount("volume", "vision-lab", "imagenet", 0, "/data", False, 100, "fast-ssd", "ReadWriteOnce")
V1 = Mount("dataset", "vision-lab", "imagenet", 1, "/ref", True, 100)
SNAPSHOT = "ds-vision-lab-imagenet-v1"


def snapshot_of_imagenet(api, backend) -> dict:
    backend.inventory()
    backend.launch(launch(job_id=1, mounts=(IMAGENET,)))
    assert backend.snapshot_volume("vision-lab", "imagenet", "imagenet", 1) is True
    return api.get("volumesnapshots", OWNER_NS, SNAPSHOT)


def test_a_version_is_a_snapshot_of_the_claim_and_a_job_mounts_a_read_only_claim_restored_from_it(
        api, make_backend, gpu_node):
    backend = make_backend(snapshot_class="csi-snapclass")
    snapshot = snapshot_of_imagenet(api, backend)
    assert snapshot["apiVersion"] == "snapshot.storage.k8s.io/v1"
    assert snapshot["spec"] == {"source": {"persistentVolumeClaimName": "vol-imagenet"},
                                "volumeSnapshotClassName": "csi-snapclass"}
    assert snapshot["metadata"]["labels"][m.DATASET] == "imagenet-v1"

    backend.launch(launch(job_id=2, gpus=(1,), mounts=(V1,)))
    claim = api.get("persistentvolumeclaims", OWNER_NS, SNAPSHOT)
    kubernetes_validate.validate(claim, K8S_VERSION, strict=True)
    assert claim["spec"]["dataSource"] == {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                                           "name": SNAPSHOT}
    assert claim["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "100Gi"  # the snapshot's restoreSize
    pod = api.get("pods", OWNER_NS, m.pod_name((2, "worker", 0)))
    assert pod["spec"]["volumes"] == [{"name": "mount-0", "persistentVolumeClaim": {"claimName": SNAPSHOT,
                                                                                    "readOnly": True}}]
    assert pod["spec"]["containers"][0]["volumeMounts"] == [{"name": "mount-0", "mountPath": "/ref", "readOnly": True}]

    content = snapshot_content = api.get("volumesnapshots", OWNER_NS, SNAPSHOT)["status"]["boundVolumeSnapshotContentName"]
    backend.delete_dataset_version("vision-lab", "imagenet", 1)
    assert api.get("volumesnapshots", OWNER_NS, SNAPSHOT) is None
    assert api.get("persistentvolumeclaims", OWNER_NS, SNAPSHOT) is None
    assert api.get("volumesnapshotcontents", "", snapshot_content) is None, content  # the class's Delete policy
    assert api.get("persistentvolumeclaims", OWNER_NS, "vol-imagenet") is not None  # the volume stays
    backend.delete_dataset_version("vision-lab", "imagenet", 1)  # again: nothing left, no error


def test_without_a_snapshot_class_the_cluster_default_is_used(api, backend, gpu_node):
    assert "volumeSnapshotClassName" not in snapshot_of_imagenet(api, backend)["spec"]


def test_a_volume_no_job_mounted_has_no_claim_and_nothing_to_snapshot(api, backend, gpu_node):
    assert backend.snapshot_volume("vision-lab", "imagenet", "imagenet", 1) is False
    assert api.list("volumesnapshots") == []


def test_a_grantee_gets_a_copy_bound_to_the_same_snapshot_handle_and_losing_the_grant_removes_it(
        api, backend, gpu_node):
    snapshot_of_imagenet(api, backend)
    original = api.get("volumesnapshotcontents", "",
                       api.get("volumesnapshots", OWNER_NS, SNAPSHOT)["status"]["boundVolumeSnapshotContentName"])
    backend.launch(launch(job_id=3, gpus=(2,), workspace="nlp-group", mounts=(replace(V1, mount_path="/corpus"),)))

    copy = api.get("volumesnapshots", GRANTEE_NS, SNAPSHOT)
    content = api.get("volumesnapshotcontents", "", copy["spec"]["source"]["volumeSnapshotContentName"])
    assert content["spec"]["source"] == {"snapshotHandle": original["status"]["snapshotHandle"]}
    assert content["spec"]["deletionPolicy"] == "Retain"  # the storage's snapshot is the owner's to delete
    assert content["spec"]["driver"] == original["spec"]["driver"]
    assert content["spec"]["volumeSnapshotRef"] == {"name": SNAPSHOT, "namespace": GRANTEE_NS}
    claim = api.get("persistentvolumeclaims", GRANTEE_NS, SNAPSHOT)
    assert claim["spec"]["dataSource"]["name"] == SNAPSHOT and claim["spec"]["resources"]["requests"]["storage"] == "100Gi"
    (pod,) = api.list("pods", GRANTEE_NS)
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"] == {"claimName": SNAPSHOT, "readOnly": True}

    backend.revoke_dataset("vision-lab", "imagenet", [1], "nlp-group")
    assert api.get("volumesnapshots", GRANTEE_NS, SNAPSHOT) is None
    assert api.get("persistentvolumeclaims", GRANTEE_NS, SNAPSHOT) is None
    assert api.get("volumesnapshotcontents", "", content["metadata"]["name"]) is None
    # the owner's snapshot and its content (the handle) are untouched
    assert api.get("volumesnapshotcontents", "", original["metadata"]["name"])["status"]["snapshotHandle"] == \
        original["status"]["snapshotHandle"]
    assert api.get("volumesnapshots", OWNER_NS, SNAPSHOT) is not None


def test_a_grantees_copy_waits_for_the_owners_snapshot_to_be_cut(api, backend, gpu_node):
    api.snapshotter = False
    snapshot_of_imagenet(api, backend)
    backend.launch(launch(job_id=3, gpus=(2,), workspace="nlp-group", mounts=(V1,)))
    assert api.get("volumesnapshots", GRANTEE_NS, SNAPSHOT) is None
    assert api.get("persistentvolumeclaims", GRANTEE_NS, SNAPSHOT) is not None  # Pending until its source is
    assert len(api.list("pods", GRANTEE_NS)) == 1
    backend.statuses()
    assert api.get("volumesnapshots", GRANTEE_NS, SNAPSHOT) is None  # still not cut: nothing to copy
    api.ready_snapshots()
    api.snapshotter = True
    backend.statuses()
    copy = api.get("volumesnapshots", GRANTEE_NS, SNAPSHOT)
    assert copy is not None and copy["status"]["readyToUse"] is True
    creates = api.count("POST", "/volumesnapshotcontents$")
    backend.statuses()
    assert api.count("POST", "/volumesnapshotcontents$") == creates  # done once


def test_a_version_and_its_copies_go_together(api, backend, gpu_node):
    snapshot_of_imagenet(api, backend)
    backend.launch(launch(job_id=3, gpus=(2,), workspace="nlp-group", mounts=(V1,)))
    backend.delete_dataset_version("vision-lab", "imagenet", 1, ["nlp-group"])
    assert api.list("volumesnapshots") == [] and api.list("volumesnapshotcontents") == []
    assert [c["metadata"]["name"] for c in api.list("persistentvolumeclaims")] == ["vol-imagenet"]


# --- through scheduling.storage -------------------------------------------------------------------------

TRAINING = """\
name: train
queue: {queue}
roles:
  - name: main
    image: busybox:1.36
    volumes:
      - {{dataset: {ref}, mountPath: /ref}}
"""


@pytest.mark.django_db
def test_storage_makes_and_deletes_the_snapshot_with_the_version(cluster, api, backend, gpu_node):
    from scheduling import services

    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=100)
    with pytest.raises(Conflict) as never:
        storage.snapshot(cluster.alice, cluster.vision, "imagenet", backend=backend)
    assert "never been mounted" in str(never.value) and never.value.errors.get("volume")
    assert not DatasetVersion.objects.exists() and api.list("volumesnapshots") == []  # nothing changed

    backend.inventory()
    backend.launch(launch(job_id=1000, mounts=(IMAGENET,)))  # not a job id of the database's
    version = storage.snapshot(cluster.alice, cluster.vision, "imagenet", backend=backend)
    assert api.get("volumesnapshots", OWNER_NS, f"ds-vision-lab-imagenet-v{version.number}") is not None
    storage.grant(cluster.alice, cluster.vision, "imagenet", "nlp-group")
    job = services.submit_job(user=cluster.bob, workspace=cluster.nlp,
                              spec=TRAINING.format(queue=cluster.nlp.slug, ref=f"vision-lab/imagenet@v{version.number}"))
    (mount,) = storage.role_mounts(job, "main")
    assert (mount.kind, mount.workspace, mount.read_only, mount.size_gib) == ("dataset", "vision-lab", True, 100)
    backend.launch(launch(job_id=job.pk, role="main", gpus=(2,), workspace="nlp-group", mounts=(mount,)))
    name = f"ds-vision-lab-imagenet-v{version.number}"
    assert api.get("volumesnapshots", GRANTEE_NS, name) is not None

    with pytest.raises(Conflict):  # a live job mounts it: the version and every snapshot stay
        storage.delete_version(cluster.alice, cluster.vision, "imagenet", version.number, backend=backend)
    assert api.get("volumesnapshots", OWNER_NS, name) and api.get("volumesnapshots", GRANTEE_NS, name)
    Job.objects.filter(pk=job.pk).update(state=JobState.CANCELLED)
    storage.delete_version(cluster.alice, cluster.vision, "imagenet", version.number, backend=backend)
    assert api.list("volumesnapshots") == [] and api.list("volumesnapshotcontents") == []
    assert not DatasetVersion.objects.exists()


@pytest.mark.django_db
def test_taking_a_grant_back_removes_the_grantees_copies_only(cluster, api, backend, gpu_node):
    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=100)
    backend.inventory()
    backend.launch(launch(job_id=1000, mounts=(IMAGENET,)))  # not a job id of the database's
    version = storage.snapshot(cluster.alice, cluster.vision, "imagenet", backend=backend)
    storage.grant(cluster.alice, cluster.vision, "imagenet", "nlp-group")
    backend.launch(launch(job_id=5, gpus=(2,), workspace="nlp-group", mounts=(replace(V1, version=version.number),)))
    storage.revoke(cluster.alice, cluster.vision, "imagenet", "nlp-group", backend=backend)
    name = f"ds-vision-lab-imagenet-v{version.number}"
    assert api.get("volumesnapshots", GRANTEE_NS, name) is None
    assert api.get("volumesnapshots", OWNER_NS, name) is not None
