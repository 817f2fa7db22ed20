"""On the simulated cluster a volume is a folder that the replica's real process sees at its mount path,
through SIM_MOUNTS in its environment."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import httpx
import pytest

from scheduling import services, storage
from scheduling.backends.simulated import mounts
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, JobState
from scheduling.notebooks import endpoint_of

NOTEBOOK = ("kind: notebook\nname: scratch\nqueue: vision-lab\nnodePool: h100\n"
            "resources: {gpu: 0.5, gpuMemory: 10Gi}\n"
            "volumes:\n  - {name: imagenet, mountPath: /data, readOnly: true}\n")


def test_a_path_in_the_replica_maps_into_its_mount_and_never_out_of_it(tmp_path):
    table = {"/data": str(tmp_path / "v"), "/data/ref": str(tmp_path / "d")}
    assert mounts.local_path("/data/a/b.txt", table) == (tmp_path / "v" / "a" / "b.txt").resolve()
    assert mounts.local_path("/data/ref/x", table) == (tmp_path / "d" / "x").resolve()
    assert mounts.local_path("/data/../etc/passwd", table) is None
    assert mounts.local_path("/other/x", table) is None
    assert mounts.from_env({"SIM_MOUNTS": json.dumps(table)}) == table
    assert mounts.from_env({"SIM_MOUNTS": "not json"}) == {}


@pytest.mark.django_db
def test_a_notebook_process_sees_a_file_written_to_its_volume(cluster, clock, run, monkeypatch):
    # the server process imports this checkout's code, wherever the environment's package points
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[3]))
    backend = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)
    storage.create_volume(cluster.alice, cluster.vision, name="imagenet", size_gib=1)
    storage.upload_file(cluster.alice, cluster.vision, "imagenet", "/labels.txt", io.BytesIO(b"cat\ndog\n"), 8)
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    assert storage.volume_mounts(job, "notebook") == {"/data": str(storage.volume_dir("vision-lab", "imagenet"))}

    deadline = time.monotonic() + 20
    while True:
        run(backend, clock)
        job = Job.objects.get(pk=job.pk)
        if job.state == JobState.RUNNING or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert job.state == JobState.RUNNING
    endpoint = endpoint_of(job, backend)
    auth = {"Authorization": f"token {endpoint.token}"}
    seen = httpx.get(endpoint.url + "api/mounts/data/labels.txt", headers=auth)
    assert seen.status_code == 200 and seen.json()["content"] == "cat\ndog\n"
    assert httpx.get(endpoint.url + "api/mounts/data/none.txt", headers=auth).status_code == 404
    assert httpx.get(endpoint.url + "api/mounts/etc/passwd", headers=auth).status_code == 404


@pytest.mark.django_db
def test_an_inference_process_is_given_its_mounts(cluster, clock):
    from dataclasses import replace

    from scheduling.backends.base import MODEL_SERVER
    from tests.scheduling.backends.kubernetes.k8s_launches import launch

    backend = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)
    mount = storage.Mount("volume", "vision-lab", "models", 0, "/models", True)
    replica = replace(launch(job_id=41, role="server", mounts=(mount,)), shape=MODEL_SERVER, job_name="chat")
    assert backend.runtime.find(replica.key) is None  # no process of an earlier test holds this key
    backend._start_server(replica)
    process = backend.runtime.find(replica.key)
    environ = dict(item.split("=", 1) for item in open(f"/proc/{process.pid}/environ").read().split("\0") if "=" in item)
    assert environ, f"the server is gone already ({process}): {backend.runtime.log_tail(replica.key, 40)}"
    assert json.loads(environ["SIM_MOUNTS"]) == {"/models": str(storage.volume_dir("vision-lab", "models"))}
    assert storage.volume_dir("vision-lab", "models").is_dir()  # made when first mounted
