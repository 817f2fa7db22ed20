"""Secrets on the simulated cluster: a notebook's (or a model server's) process gets its secret variables in its
environment and its secret files under its root at the mapped path; the process record and command line hold
no value, and the files go when the replica stops."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from scheduling import secrets, services
from scheduling.backends.simulated import processes
from scheduling.backends.simulated.backend import SimulatedBackend, secret_env, secret_files
from scheduling.models import JobState
from tests.scheduling.backends.kubernetes.k8s_launches import launch

TOKEN, KAGGLE = "hf_s3cr3t-Value-0123456789", '{"username": "alice", "key": "k4ggle-key-987"}'
NOTEBOOK = ("kind: notebook\nname: scratch\nqueue: vision-lab\nnodePool: h100\n"
            "resources: {gpu: 0.5, gpuMemory: 10Gi}\nenv: {HF_TOKEN: {secret: hf-token}, PLAIN: 'yes'}\n"
            "secretMounts: [{secret: kaggle, mountPath: /etc/kaggle}]\n")


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_the_launch_maps_variables_and_files_to_their_values():
    replica = launch(1, "main", 0, secret_env=(("HF_TOKEN", "hf-token"), ("GONE", "deleted")),
                     secret_mounts=(("kaggle", "/etc/kaggle/"),), secret_values={"hf-token": TOKEN, "kaggle": KAGGLE})
    assert secret_env(replica) == {"HF_TOKEN": TOKEN}  # a secret deleted since the submit is left out
    assert secret_files(replica) == {"/etc/kaggle/kaggle": KAGGLE}


def test_the_runtime_writes_files_under_the_replicas_root_for_its_owner_only(tmp_path):
    runtime = processes.ProcessRuntime(tmp_path)
    key = (1, "main", 0)
    script = ("import os, pathlib; root = os.environ['SIMULATED_ROOT']; "
              "print(os.environ['HF_TOKEN'] == 'x' and pathlib.Path(root, 'etc/kaggle/kaggle').read_text(), "
              "flush=True)")
    try:
        assert runtime.start(key, [sys.executable, "-c", script], env={"HF_TOKEN": "x"},
                             files={"/etc/kaggle/kaggle": KAGGLE})
        deadline = time.monotonic() + 10
        while KAGGLE not in runtime.log_tail(key) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert KAGGLE in runtime.log_tail(key)
        written = runtime.folder(key) / "root/etc/kaggle/kaggle"
        assert written.stat().st_mode & 0o777 == 0o600
        assert KAGGLE not in (runtime.folder(key) / processes.RECORD).read_text()
    finally:
        runtime.stop(key)
    assert not runtime.folder(key).exists()


def test_a_path_outside_the_root_is_refused(tmp_path):
    runtime = processes.ProcessRuntime(tmp_path)
    with pytest.raises(ValueError, match="outside"):
        runtime.start((1, "main", 0), [sys.executable, "-c", "pass"], files={"/etc/../../escape": "x"})


@pytest.mark.django_db
def test_a_notebook_process_reads_its_secrets(cluster, clock, run):
    secrets.set_secret(cluster.alice, cluster.vision, "hf-token", TOKEN)
    secrets.set_secret(cluster.alice, cluster.vision, "kaggle", KAGGLE)
    backend = SimulatedBackend(speedup=60, failure_rate=0, clock=clock)
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=NOTEBOOK)
    try:
        deadline = time.monotonic() + 20
        while job.state != JobState.RUNNING and time.monotonic() < deadline:
            run(backend, clock)
            job.refresh_from_db()
            time.sleep(0.1)
        assert job.state == JobState.RUNNING
        key = (job.pk, "notebook", 0)
        info = backend.runtime.find(key)
        env = environ_of(info.pid)
        assert env["HF_TOKEN"] == TOKEN
        assert Path(env["SIMULATED_ROOT"], "etc/kaggle/kaggle").read_text() == KAGGLE
        assert TOKEN not in Path(f"/proc/{info.pid}/cmdline").read_text()
        assert TOKEN not in (backend.runtime.folder(key) / processes.RECORD).read_text()
        assert not os.access(Path(env["SIMULATED_ROOT"], "etc/kaggle/kaggle"), os.X_OK)
    finally:
        backend.runtime.stop_all()


TRAINING = ("name: train\nqueue: vision-lab\nexpectedDuration: 1h\nroles:\n  - name: main\n    image: busybox:1.36\n"
            "    nodePool: h100\n    env: {HF_TOKEN: {secret: hf-token}}\n"
            "    secretMounts: [{secret: kaggle, mountPath: /etc/kaggle}]\n")


@pytest.mark.django_db
def test_a_training_process_gets_its_secrets_and_logs_their_names_only(cluster, clock, run):
    secrets.set_secret(cluster.alice, cluster.vision, "hf-token", TOKEN)
    secrets.set_secret(cluster.alice, cluster.vision, "kaggle", KAGGLE)
    backend = SimulatedBackend(speedup=360, failure_rate=0, clock=clock, training_processes=True)
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=TRAINING)
    key = (job.pk, "main", 0)
    try:
        run(backend, clock)
        clock.advance(2)
        run(backend, clock)
        assert backend.wait_for_starts()
        deadline = time.monotonic() + 10
        while "mount /etc/kaggle: directory" not in backend.logs(key) and time.monotonic() < deadline:
            time.sleep(0.05)
        log = backend.logs(key)
        assert "HF_TOKEN" in log and "mount /etc/kaggle: directory" in log
        assert TOKEN not in log and "k4ggle-key-987" not in log
        env = environ_of(backend.runtime.find(key).pid)
        assert env["HF_TOKEN"] == TOKEN
        assert Path(env["SIMULATED_ROOT"], "etc/kaggle/kaggle").read_text() == KAGGLE
    finally:
        backend.runtime.stop_all()
