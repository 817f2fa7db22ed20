"""The real OpenSSH client through the gateway into a running training job's replica on the simulated cluster
(`<workspace>.<name>.<replica>`): its process started its SSH server, whose shell starts in the job's mapped
working directory (its writable volume's folder) with the job's environment, secrets included, and sim-smi on
PATH; another tenant is refused, and the job's own process never sees the SSH server's wiring."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.portal.ssh.conftest import make_key, ssh_options

pytestmark = [pytest.mark.django_db(transaction=True)]

TOKEN = "hf_s3cr3t-Value-0123456789"
SPEC = """name: train
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: busybox:1.36
    nodePool: h100
    env: {WANDB_PROJECT: vision, HF_TOKEN: {secret: hf-token}}
    volumes: [{name: data, mountPath: /data}]
"""
REFUSED = "no running notebook or job by that name that you may reach over SSH"


class WallClock:
    @property
    def now(self):
        from scheduling import clock

        return clock.now()


@pytest.fixture
def running_training(cluster, run):
    from scheduling import secrets, services, storage
    from scheduling.backends.simulated.backend import SimulatedBackend
    from scheduling.models import JobState

    secrets.set_secret(cluster.alice, cluster.vision, "hf-token", TOKEN)
    storage.create_volume(cluster.alice, cluster.vision, name="data", size_gib=1)
    backend = SimulatedBackend(speedup=1, failure_rate=0, training_processes=True)
    job = services.submit_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run(backend, WallClock())
        job.refresh_from_db()
        if job.state == JobState.RUNNING and backend.ssh_endpoint((job.pk, "main", 0)) is not None:
            break
        backend.wait_for_starts()
        time.sleep(0.2)
    assert job.state == JobState.RUNNING, job.state
    assert backend.ssh_endpoint((job.pk, "main", 0)) is not None, backend.logs((job.pk, "main", 0))
    return job, backend


def ssh(port, key, target, command, timeout=60):
    return subprocess.run(["ssh", *ssh_options(port, key), f"{target}@127.0.0.1", command], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_ssh_into_a_training_replica_runs_in_its_working_directory_with_its_environment(
        gateway, running_training, cluster, tmp_path):
    from portal import ssh_keys
    from portal.models import SshSession
    from scheduling import storage

    job, backend = running_training
    key, public = make_key(tmp_path)
    ssh_keys.add_key(cluster.alice, "laptop", public)
    done = ssh(gateway, key, "vision-lab.train.main-0",
               "pwd; echo project=$WANDB_PROJECT token=$HF_TOKEN rank=$RANK ssh=${SIM_SSH_TOKEN:-none}; "
               "echo from-ssh > made.txt; sim-smi")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    folder = storage.volume_dir("vision-lab", "data")
    assert lines[0] == str(folder)   # the job's writable volume, as mapped on this machine
    assert lines[1] == f"project=vision token={TOKEN} rank=0 ssh=none"
    assert "NVIDIA-SMI" in done.stdout and "1.00 GPU" in done.stdout
    assert (folder / "made.txt").read_text() == "from-ssh\n"   # the job's own files
    assert SshSession.objects.filter(job=job, replica="main-0", user=cluster.alice).exists()

    log = backend.logs((job.pk, "main", 0))
    environment = next(line for line in log.splitlines() if line.startswith("environment: "))
    assert "SIM_SSH" not in environment and TOKEN not in log   # the job's process sees no SSH wiring


def test_another_tenant_and_a_replica_that_is_not_there_are_refused(gateway, running_training, cluster, tmp_path):
    from portal import ssh_keys

    bob_key, bob_public = make_key(tmp_path, "bob")
    ssh_keys.add_key(cluster.bob, "bob", bob_public)
    alice_key, alice_public = make_key(tmp_path, "alice")
    ssh_keys.add_key(cluster.alice, "alice", alice_public)
    for key, target in ((bob_key, "vision-lab.train.main-0"), (alice_key, "vision-lab.train.main-7")):
        done = ssh(gateway, key, target, "echo in")
        assert done.returncode != 0 and "in" not in done.stdout.split()
        assert REFUSED in done.stderr, done.stderr
