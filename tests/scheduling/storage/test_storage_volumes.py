"""Workspace volumes and datasets in the scheduling layer: who may, the storage quota, a delete refused while
a live job mounts, snapshots, grants to other workspaces, and what a submitted spec may mount."""

from __future__ import annotations

import pytest
from django.conf import settings

from scheduling import services, storage
from scheduling.errors import Conflict, DomainError, Forbidden
from scheduling.models import DatasetVersion, Job, JobState, Volume
from scheduling.spec import SpecError

TRAINING = """\
name: train
queue: vision-lab
roles:
  - name: main
    image: busybox:1.36
    volumes:
      - {mount}
"""


def submit(cluster, mount: str, user=None, workspace=None) -> Job:
    return services.submit_job(user=user or cluster.alice, workspace=workspace or cluster.vision,
                               spec=TRAINING.replace("queue: vision-lab", f"queue: {(workspace or cluster.vision).slug}")
                               .format(mount=mount))


@pytest.mark.django_db
def test_owners_and_members_manage_volumes_viewers_finance_and_outsiders_do_not(cluster):
    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=100)
    storage.create_volume(cluster.carol, cluster.vision, name="scratch", size_gib=5, access_mode="ReadWriteMany")
    for outsider in (cluster.finance, cluster.bob):
        with pytest.raises(Forbidden):
            storage.create_volume(outsider, cluster.vision, name="other", size_gib=1)
        with pytest.raises(Forbidden):
            storage.delete_volume(outsider, cluster.vision, "imagenet")
    assert sorted(Volume.objects.filter(workspace=cluster.vision).values_list("name", "size_gib", "access_mode")) == [
        ("imagenet", 100, "ReadWriteOnce"), ("scratch", 5, "ReadWriteMany")]
    with pytest.raises(Conflict):
        storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=1)
    with pytest.raises(DomainError) as bad:
        storage.create_volume(cluster.alice, cluster.vision, name="No Good", size_gib=0, access_mode="Many")
    assert set(bad.value.errors) == {"name", "size_gib", "access_mode"}


@pytest.mark.django_db
def test_the_storage_quota_refuses_a_new_volume_or_a_resize_over_it_with_the_figures(cluster):
    storage.set_storage_quota(cluster.vision, 150)
    storage.create_volume(cluster.alice, cluster.vision, name="a", size_gib=100)
    with pytest.raises(Conflict) as over:
        storage.create_volume(cluster.alice, cluster.vision, name="b", size_gib=60)
    assert "storage quota is 150 GiB: 100 GiB are in other volumes, so 60 GiB more would make 160 GiB" in str(
        over.value)
    storage.resize_volume(cluster.alice, cluster.vision, "a", 150)
    with pytest.raises(Conflict) as grown:
        storage.resize_volume(cluster.alice, cluster.vision, "a", 151)
    assert "151 GiB" in str(grown.value)
    with pytest.raises(Conflict) as shrunk:
        storage.resize_volume(cluster.alice, cluster.vision, "a", 10)
    assert "only grows" in str(shrunk.value)
    storage.create_volume(cluster.bob, cluster.nlp, name="b", size_gib=500)  # another workspace's quota


@pytest.mark.django_db
def test_a_spec_mounts_only_its_own_workspaces_volumes_named_at_the_line(cluster):
    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=10)
    storage.create_volume(cluster.bob, cluster.nlp, name="corpus", size_gib=10)
    job = submit(cluster, "{name: imagenet, mountPath: /data, readOnly: true}")
    assert job.spec["roles"][0]["volumes"] == [{"name": "imagenet", "mountPath": "/data", "readOnly": True}]
    with pytest.raises(SpecError) as caught:
        submit(cluster, "{name: corpus, mountPath: /data}")
    issue, = caught.value.errors
    assert (issue.line, issue.column, issue.field) == (7, 16, "roles[0].volumes[0].name")
    assert "workspace 'vision-lab' has no volume 'corpus'" in issue.message
    assert Job.objects.filter(workspace=cluster.vision).count() == 1


@pytest.mark.django_db
def test_delete_is_refused_while_a_live_job_mounts_the_volume_and_names_it(cluster):
    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=10)
    job = submit(cluster, "{name: imagenet, mountPath: /data}")
    with pytest.raises(Conflict) as refused:
        storage.delete_volume(cluster.alice, cluster.vision, "imagenet")
    assert refused.value.status == 409 and f"{job.pk} (train, Pending)" in str(refused.value)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    storage.delete_volume(cluster.alice, cluster.vision, "imagenet")
    assert not Volume.objects.filter(workspace=cluster.vision).exists()


@pytest.mark.django_db
def test_an_upload_stays_inside_its_volume_and_under_the_size_limit(cluster, settings):
    import io

    storage.create_volume(cluster.alice, cluster.vision, name="data", size_gib=1)
    written = storage.upload_file(cluster.carol, cluster.vision, "data", "/train/a.csv", io.BytesIO(b"x,y\n"), 4)
    assert written == "/train/a.csv"
    assert (storage.volume_dir("vision-lab", "data") / "train" / "a.csv").read_bytes() == b"x,y\n"
    for bad in ("../../etc/passwd", "/a/../../b", "", "/"):
        with pytest.raises(DomainError) as refused:
            storage.upload_file(cluster.alice, cluster.vision, "data", bad, io.BytesIO(b"x"), 1)
        assert refused.value.errors.keys() == {"path"}
    settings.VOLUME_UPLOAD_MAX_BYTES = 3
    with pytest.raises(DomainError) as big:
        storage.upload_file(cluster.alice, cluster.vision, "data", "/b", io.BytesIO(b"four"), 4)
    assert "at most 3" in str(big.value)
    with pytest.raises(Forbidden):
        storage.upload_file(cluster.bob, cluster.vision, "data", "/c", io.BytesIO(b"x"), 1)


@pytest.mark.django_db
def test_a_snapshot_is_a_read_only_numbered_copy_mountable_when_granted(cluster, django_capture_on_commit_callbacks):
    import io

    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=1)
    storage.upload_file(cluster.alice, cluster.vision, "imagenet", "/a.txt", io.BytesIO(b"one"), 3)
    first = storage.snapshot(cluster.alice, cluster.vision, "imagenet")
    storage.upload_file(cluster.alice, cluster.vision, "imagenet", "/a.txt", io.BytesIO(b"two!"), 4)
    second = storage.snapshot(cluster.carol, cluster.vision, "imagenet")
    assert (first.number, second.number, second.size_bytes) == (1, 2, 4)
    copied = storage.dataset_dir("vision-lab", "imagenet", 1) / "a.txt"
    assert copied.read_bytes() == b"one" and copied.stat().st_mode & 0o222 == 0  # no write bits
    assert str(copied).startswith(str(settings.DATASETS_DIR))

    job = submit(cluster, "{dataset: imagenet@v1, mountPath: /ref}")
    assert storage.role_mounts(job, "main")[0].read_only is True
    # another workspace mounts it only once granted, and only an owner grants
    nlp_spec = "{dataset: vision-lab/imagenet@v2, mountPath: /ref}"
    with pytest.raises(SpecError):
        submit(cluster, nlp_spec, user=cluster.bob, workspace=cluster.nlp)
    with pytest.raises(Forbidden):
        storage.grant(cluster.carol, cluster.vision, "imagenet", "nlp-group")
    storage.grant(cluster.alice, cluster.vision, "imagenet", "nlp-group")
    theirs = submit(cluster, nlp_spec, user=cluster.bob, workspace=cluster.nlp)
    short = submit(cluster, "{dataset: imagenet@v2, mountPath: /ref}", user=cluster.bob, workspace=cluster.nlp)
    assert storage.volume_mounts(theirs, "main") == storage.volume_mounts(short, "main") == {
        "/ref": str(storage.dataset_dir("vision-lab", "imagenet", 2))}

    # a version a live job mounts stays; one no live job mounts goes
    with pytest.raises(Conflict) as refused:
        storage.delete_version(cluster.alice, cluster.vision, "imagenet", 2)
    assert f"{theirs.pk} (train, Pending)" in str(refused.value)
    Job.objects.filter(pk=job.pk).update(state=JobState.CANCELLED)
    with django_capture_on_commit_callbacks(execute=True):
        storage.delete_version(cluster.alice, cluster.vision, "imagenet", 1)
    assert list(DatasetVersion.objects.values_list("number", flat=True)) == [2]
    assert not storage.dataset_dir("vision-lab", "imagenet", 1).exists()
    storage.revoke(cluster.alice, cluster.vision, "imagenet", "nlp-group")
    with pytest.raises(SpecError):
        submit(cluster, nlp_spec, user=cluster.bob, workspace=cluster.nlp)


@pytest.mark.django_db
def test_links_left_in_a_volume_lead_nowhere_outside_it(cluster, tmp_path):
    import io

    outside = tmp_path / "host.txt"
    outside.write_text("host")
    outside.chmod(0o644)
    storage.create_volume(cluster.alice, cluster.vision, name="data", size_gib=1)
    root = storage.volume_dir("vision-lab", "data")
    root.mkdir(parents=True)
    (root / "escape").symlink_to(tmp_path)
    (root / "a.txt.upload").symlink_to(outside)   # where an upload writes first
    with pytest.raises(DomainError):
        storage.upload_file(cluster.alice, cluster.vision, "data", "/escape/x", io.BytesIO(b"x"), 1)
    storage.upload_file(cluster.alice, cluster.vision, "data", "/a.txt", io.BytesIO(b"mine"), 4)
    assert outside.read_text() == "host" and (root / "a.txt").read_text() == "mine"
    (root / "link.txt").symlink_to(outside)
    version = storage.snapshot(cluster.alice, cluster.vision, "data")
    copied = storage.dataset_dir("vision-lab", "data", version.number)
    assert (copied / "link.txt").is_symlink() and version.size_bytes == 4
    assert outside.stat().st_mode & 0o200  # the host file was not made read-only through the link
