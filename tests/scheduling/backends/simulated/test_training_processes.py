"""A training replica on the simulated cluster runs a small real process while it runs: the process logs
the names (never the values) of its environment and its mounts, a cancel stops it, one that dies fails
the replica, and past SIM_MAX_PROCESSES (or with the feature off) a replica runs without one."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from scheduling import services
from scheduling.backends.simulated import processes
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.models import Job, JobState, Node, ReplicaLog

# 1 h on the simulated clock; speedup 360: its process lives about 11 s, longer than any test here
SPEC = """name: {name}
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: busybox:1.36
    nodePool: h100
    env: {{WANDB_PROJECT: vision, HF_TOKEN: not-for-the-log-7f3a}}
"""
SPEEDUP = 360


@pytest.fixture
def backend(clock):
    return SimulatedBackend(speedup=SPEEDUP, failure_rate=0, clock=clock, training_processes=True)


def submit(cluster, name: str) -> Job:
    return services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC.format(name=name))


def start(run, backend, clock) -> None:
    run(backend, clock)  # placed and launched; the processes start in the background
    clock.advance(2)  # past the image pull
    run(backend, clock)
    assert backend.wait_for_starts()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not processes._is_zombie(pid)


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def log_says(backend, key, text: str) -> bool:
    return wait_for(lambda: text in backend.logs(key))


@pytest.mark.django_db
def test_a_training_replica_runs_a_process_whose_log_names_its_environment_not_the_values(cluster, backend,
                                                                                          clock, run):
    job = submit(cluster, "train")
    start(run, backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    key = (job.pk, "main", 0)
    info = backend.runtime.find(key)
    assert info is not None and info.alive
    assert log_says(backend, key, "mounts: none")
    log = backend.logs(key)
    environment = next(line for line in log.splitlines() if line.startswith("environment: "))
    # exactly the spec's env and the platform's variables: nothing of the worker's own environment
    assert environment == "environment: HF_TOKEN, NVIDIA_VISIBLE_DEVICES, RANK, WANDB_PROJECT, WORLD_SIZE"
    assert "not-for-the-log-7f3a" not in log and "vision\n" not in log
    assert log.index("scheduled on") < log.index("environment: ")

    services.cancel_job(user=cluster.alice, job=job)
    run(backend, clock)  # the cycle evicts the cancelled replica: its log is kept, its process ends
    assert wait_for(lambda: not alive(info.pid))
    assert backend.runtime.find(key) is None
    kept = ReplicaLog.objects.get(job=job, role="main", index=0)
    assert environment in kept.text and "not-for-the-log-7f3a" not in kept.text


def test_the_mounts_a_process_is_given_are_in_its_log(backend, tmp_path):
    from scheduling.backends.base import BATCH, ReplicaLaunch

    launch = ReplicaLaunch(job_id=998, role="main", index=0, workspace="vision-lab", job_name="wired",
                           job_type="single", image="x", command=(), env=(("A", "1"),), node="h100-01", gpus=(0,),
                           gpu_uuids=("GPU-h100-01-0",), slice={"kind": "whole"}, cpu_milli=1000, mem_mib=1024,
                           expected_duration_s=60, kind="training", shape=BATCH)
    (tmp_path / "data").mkdir()
    assert backend.start_training_process(launch, env={"A": "1"}, run_s=0.2,
                                          mounts={"/data": str(tmp_path / "data"), "/gone": str(tmp_path / "x")})
    assert wait_for(lambda: backend.runtime.find(launch.key).exit_code == 0)
    said = backend.runtime.log_tail(launch.key)
    assert "environment: A, SIM_MOUNTS\n" in said
    assert "mount /data: directory\n" in said and "mount /gone: missing\n" in said
    assert said.endswith("training process completed\n")
    backend.runtime.stop(launch.key)


@pytest.mark.django_db
def test_what_training_wiring_adds_reaches_the_process(cluster, clock, run, tmp_path):
    class Wired(SimulatedBackend):  # as volumes and secrets will: a variable and a mounted folder more
        def training_wiring(self, replica):
            env, mounts = super().training_wiring(replica)
            return {**env, "DATASET_TOKEN": "hidden-value-91c2"}, {**mounts, "/data": str(tmp_path)}

    backend = Wired(speedup=SPEEDUP, failure_rate=0, clock=clock, training_processes=True)
    job = submit(cluster, "wired")
    start(run, backend, clock)
    key = (job.pk, "main", 0)
    assert log_says(backend, key, "mount /data: directory")
    log = backend.logs(key)
    assert "DATASET_TOKEN" in log and "SIM_MOUNTS" in log and "hidden-value-91c2" not in log
    services.cancel_job(user=cluster.alice, job=job)
    run(backend, clock)


@pytest.mark.django_db
def test_past_the_cap_a_replica_runs_without_a_process_and_its_log_says_so(cluster, clock, run, settings):
    settings.SIM_TRAINING_PROCESSES, settings.SIM_MAX_PROCESSES = True, 1
    backend = SimulatedBackend(speedup=SPEEDUP, failure_rate=0, clock=clock)
    first, second = submit(cluster, "first"), submit(cluster, "second")
    start(run, backend, clock)
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.state == second.state == JobState.RUNNING
    # which replica gets the one process depends on the order of the starts, not on a contract
    keys = [(first.pk, "main", 0), (second.pk, "main", 0)]
    with_process = [key for key in keys if backend.runtime.find(key) is not None]
    assert len(with_process) == 1 and backend.runtime.find(with_process[0]).alive
    without = next(key for key in keys if key not in with_process)
    assert "no process: 1 simulated processes run already" in backend.logs(without)
    assert backend.runtime.running() == 1


@pytest.mark.django_db
def test_with_training_processes_off_a_replica_has_none(cluster, clock, run, settings):
    settings.SIM_TRAINING_PROCESSES = False
    backend = SimulatedBackend(speedup=SPEEDUP, failure_rate=0, clock=clock)
    job = submit(cluster, "quiet")
    start(run, backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert backend.runtime.find((job.pk, "main", 0)) is None and backend.runtime.keys() == []
    assert "environment:" not in backend.logs((job.pk, "main", 0))


@pytest.mark.django_db
def test_a_replica_on_a_node_that_is_lost_loses_its_process(cluster, backend, clock, run):
    job = submit(cluster, "stranded")
    start(run, backend, clock)
    key = (job.pk, "main", 0)
    info = backend.runtime.find(key)
    assert info.alive
    Node.objects.filter(name=job.replicas.get().node.name).update(ready=False)
    assert key not in {status.key for status in backend.statuses()}
    assert wait_for(lambda: not alive(info.pid)) and backend.runtime.find(key) is None


@pytest.mark.django_db
def test_a_process_killed_from_outside_fails_its_replica(cluster, backend, clock, run):
    job = submit(cluster, "fragile")
    start(run, backend, clock)
    key = (job.pk, "main", 0)
    info = backend.runtime.find(key)
    os.kill(info.pid, signal.SIGKILL)
    assert wait_for(lambda: not backend.runtime.find(key).alive)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.FAILED, list(job.events.values_list("kind", "reason"))
    assert "the training process was killed by signal 9" in job.events.get(kind="failed").reason
    assert backend.runtime.find(key) is None  # forgotten once recorded


@pytest.mark.django_db
def test_a_process_that_completed_does_not_fail_its_replica(cluster, clock, run):
    backend = SimulatedBackend(speedup=36000, failure_rate=0, clock=clock, training_processes=True)
    job = submit(cluster, "quick")  # 1 h at 36000x: 0.1 s after the image pull's second; its process 1.1 s
    run(backend, clock)
    assert backend.wait_for_starts()
    clock.advance(1.05)  # the platform's clock says it runs still
    key = (job.pk, "main", 0)
    assert wait_for(lambda: backend.runtime.find(key).exit_code == 0)
    assert "\ntraining process completed\n" in backend.logs(key)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING  # a process that ended well is no failure
    clock.advance(1)
    run(backend, clock)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED


def test_the_starter_runs_jobs_in_order_in_the_background_and_goes_on_after_one_fails():
    from scheduling.backends.simulated.processes import Starter

    starter, release, done = Starter(), threading.Event(), []

    def blocked():
        release.wait(10)
        done.append("blocked")

    def failing():
        raise OSError("no more processes")

    starter.submit(blocked)  # the caller does not wait for it
    starter.submit(failing)
    starter.submit(lambda: done.append("after"))
    assert done == [] and not starter.wait(timeout=0.2)
    release.set()
    assert starter.wait(timeout=10) and done == ["blocked", "after"]
