"""A notebook on the simulated cluster is a real local process: started when its replica launches, found
again by a restarted worker, stopped when the replica is evicted, with a home folder that outlives it."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

from scheduling import services
from scheduling.backends.simulated import processes
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, JobState, SimulatedPod
from scheduling.notebooks import endpoint_of, notebook_token

NOTEBOOK = ("kind: notebook\nname: scratch\nqueue: vision-lab\nnodePool: h100\n"
            "resources: {gpu: 0.5, gpuMemory: 10Gi}\n")
TRAINING = "name: train\nqueue: vision-lab\nroles:\n  - name: main\n    image: busybox:1.36\n    nodePool: h100\n"


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=60, failure_rate=0, clock=clock)


def cycle_until(run, backend, clock, job: Job, state: str, timeout: float = 20.0) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        run(backend, clock)
        job.refresh_from_db()
        if job.state == state or time.monotonic() > deadline:
            assert job.state == state, (job.state, list(job.events.values_list("kind", "reason")))
            return job
        time.sleep(0.1)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not processes._is_zombie(pid)


@pytest.mark.django_db
def test_a_notebook_runs_as_a_process_that_a_restarted_worker_finds_and_a_stop_ends(cluster, backend, clock,
                                                                                    run):
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    training = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=TRAINING)
    job = cycle_until(run, backend, clock, job, JobState.RUNNING)
    assert SimulatedPod.objects.get(job_id=job.pk).kind == "notebook"
    assert SimulatedPod.objects.get(job_id=training.pk).kind == "training"  # training replicas stay modelled
    key = (job.pk, "notebook", 0)
    info = backend.runtime.find(key)
    assert info.alive and info.url.endswith("/nb/vision-lab/scratch/")
    assert notebook_token(job.pk) not in " ".join(open(f"/proc/{info.pid}/cmdline").read().split("\0"))

    endpoint = endpoint_of(job, backend)
    page = httpx.get(endpoint.url + "lab", headers={"Authorization": f"token {endpoint.token}"})
    assert page.status_code == 200 and "<h1>scratch</h1>" in page.text and "0.5 GPU" in page.text
    assert httpx.get(endpoint.url + "lab").status_code == 403  # the token is required
    saved = httpx.put(endpoint.url + "api/contents/notes.txt", json={"content": "keep me"},
                      headers={"Authorization": f"token {endpoint.token}"})
    assert saved.status_code == 200

    # a worker restart: a new backend in a process that did not start the server finds it by its record
    started_here = dict(processes._CHILDREN)
    processes._CHILDREN.clear()
    try:
        again = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)
        assert again.endpoint(key) == backend.endpoint(key)
        assert {s.key: s.phase for s in again.statuses()}[key] == "Running"
        run(again, clock)
        job.refresh_from_db()
        assert job.state == JobState.RUNNING and again.runtime.find(key).pid == info.pid
    finally:
        processes._CHILDREN.update(started_here)

    services.stop_workload(cluster.alice, job, "done for today")
    job.refresh_from_db()
    assert job.state == JobState.STOPPED and not job.replicas.filter(state__in=("Scheduled", "Running")).exists()
    run(backend, clock)  # the next cycle evicts the pod the database no longer holds: the process ends
    deadline = time.monotonic() + 10
    while alive(info.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(info.pid) and backend.runtime.find(key) is None
    assert not SimulatedPod.objects.filter(job_id=job.pk).exists()
    job.refresh_from_db()
    assert job.state == JobState.STOPPED  # the cycle leaves a stopped notebook alone

    services.start_workload(cluster.alice, job)
    job = cycle_until(run, backend, clock, job, JobState.RUNNING)
    endpoint = endpoint_of(job, backend)
    note = httpx.get(endpoint.url + "api/contents/notes.txt", headers={"Authorization": f"token {endpoint.token}"})
    assert note.json()["content"] == "keep me"  # the home folder outlived the first process
    assert backend.runtime.find(key).pid != info.pid


@pytest.mark.django_db
def test_a_notebook_server_that_dies_fails_its_job_and_eviction_cleans_up(cluster, backend, clock, run):
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    job = cycle_until(run, backend, clock, job, JobState.RUNNING)
    info = backend.runtime.find((job.pk, "notebook", 0))
    os.kill(info.pid, signal.SIGKILL)
    job = cycle_until(run, backend, clock, job, JobState.FAILED)
    failed = job.events.get(kind="failed")
    assert "the notebook server exited" in failed.reason
    assert backend.runtime.find((job.pk, "notebook", 0)) is None  # forgotten once recorded
    assert not SimulatedPod.objects.filter(job_id=job.pk).exists()


@pytest.mark.django_db
def test_a_process_without_its_pod_is_stopped_and_homes_are_deleted_only_when_asked(cluster, backend, clock):
    from scheduling.backends.base import JUPYTER, ReplicaLaunch
    from scheduling.storage import Mount

    launch = ReplicaLaunch(job_id=999, role="notebook", index=0, workspace="vision-lab", job_name="lost",
                           job_type="single", image="x", command=(), env=(), node="h100-01", gpus=(0,),
                           gpu_uuids=("GPU-h100-01-0",), slice={"kind": "fraction", "gpu_milli": 250},
                           cpu_milli=1000, mem_mib=1024, expected_duration_s=3600, kind="notebook", shape=JUPYTER, token="t",
                           base_url="/nb/vision-lab/lost/", home_mib=1024,
                           home=Mount("volume", "vision-lab", "home-lost", 0, "", False, 1, home_of="lost"))
    backend.launch(launch)
    home = backend.home_of("vision-lab", "lost")
    assert home.is_dir() and backend.runtime.has(launch.key)
    SimulatedPod.objects.filter(job_id=999).delete()  # as if its launch had rolled back
    assert launch.key not in {s.key for s in backend.statuses()}
    assert not backend.runtime.has(launch.key)
    assert home.is_dir()  # the home stays until deleted explicitly
    backend.delete_home("vision-lab", "lost")
    assert not home.exists()
    with pytest.raises(ValueError):
        backend.home_of("vision-lab", "../escape")
