"""`gpuctl volume create|list|resize|rm|cp` and `gpuctl dataset snapshot|list|share|rm` against the real ASGI
server: the quota and a live job's mount refused in one line; bob reaches none of alice's volumes."""

from __future__ import annotations

import json

import pytest

if not pytest.importorskip("django.conf").settings.configured:  # run with -p no:django
    pytest.skip("needs the Django test plugin (live server, test database)", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)


def test_create_list_resize_copy_and_remove(gpuctl, tokens, cluster, tmp_path):
    from scheduling.api import storage

    alice = tokens["alice"]
    storage.set_storage_quota(cluster.vision, 150)
    code, out, err = gpuctl(alice, "volume", "create", "imagenet", "--size", "100Gi", "-w", "vision-lab")
    assert (code, err) == (0, "") and out.strip() == "volume imagenet in vision-lab: created (100 GiB, ReadWriteOnce)"
    code, out, err = gpuctl(alice, "volume", "create", "more", "--size", "60", "-w", "vision-lab")
    assert code == 1 and "storage quota is 150 GiB" in err and "160 GiB" in err
    code, out, err = gpuctl(alice, "volume", "resize", "imagenet", "--size", "120", "-w", "vision-lab")
    assert code == 0 and "(120 GiB" in out
    code, out, err = gpuctl(alice, "volume", "resize", "imagenet", "--size", "10", "-w", "vision-lab")
    assert code == 1 and "only grows" in err
    code, out, err = gpuctl(alice, "volume", "list", "-w", "vision-lab")
    header, row = out.splitlines()
    assert header.split() == ["NAME", "GIB", "ACCESS", "CLASS", "HOME", "OF"]
    assert row.split() == ["imagenet", "120", "ReadWriteOnce", "standard", "-"]
    assert "120 GiB used of 150 GiB" in err

    local = tmp_path / "labels.csv"
    local.write_text("cat,dog\n")
    code, out, err = gpuctl(alice, "volume", "cp", str(local), "imagenet:/train/", "-w", "vision-lab", "-o", "json")
    assert code == 0 and json.loads(out) == {"volume": "imagenet", "path": "/train/labels.csv", "bytes": 8}
    assert (storage.volume_dir("vision-lab", "imagenet") / "train" / "labels.csv").read_text() == "cat,dog\n"
    code, out, err = gpuctl(alice, "volume", "cp", str(local), "imagenet:/../../x", "-w", "vision-lab")
    assert code != 0 and "leaves the volume" in err
    code, out, err = gpuctl(alice, "volume", "cp", str(local), "imagenet", "-w", "vision-lab")
    assert code == 2 and "is not VOLUME:/path" in err

    code, out, err = gpuctl(alice, "dataset", "snapshot", "imagenet", "-w", "vision-lab")
    assert code == 0 and out.startswith("imagenet@v1 in vision-lab")
    code, out, err = gpuctl(alice, "dataset", "list", "-w", "vision-lab")
    assert out.splitlines()[1].split()[:3] == ["imagenet@v1", "imagenet", "8"]
    code, out, err = gpuctl(alice, "volume", "rm", "imagenet", "-w", "vision-lab")
    assert (code, out.strip()) == (0, "volume imagenet in vision-lab: deleted")
    code, out, err = gpuctl(alice, "volume", "rm", "imagenet", "-w", "vision-lab")
    assert code == 1 and "has no volume 'imagenet'" in err


def test_rm_is_refused_while_a_job_mounts_it_and_bob_reaches_nothing(gpuctl, tokens, cluster):
    from billing.services import submit_quoted_job
    from scheduling.api import storage

    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=10)
    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=(
        "name: train\nqueue: vision-lab\nroles:\n  - name: main\n    image: busybox:1.36\n"
        "    volumes: [{name: imagenet, mountPath: /data}]\n"))
    code, out, err = gpuctl(tokens["alice"], "volume", "rm", "imagenet", "-w", "vision-lab")
    assert code == 1 and f"{job.pk} (train, Pending)" in err and len(err.splitlines()) == 1
    for argv in (("volume", "list"), ("volume", "rm", "imagenet"), ("dataset", "snapshot", "imagenet")):
        code, out, err = gpuctl(tokens["bob"], *argv, "-w", "vision-lab")
        assert code == 1 and out == "" and "vision-lab" in err
