"""The SSH sidecar on Kubernetes: a pod of a kind with `ssh` gets a container running the platform's replica SSH
server on port 2222, with the job's environment (secrets by reference) and volumes, its token and the submitter's
keys from the job's SSH Secret (never in the pod); the gateway reaches it by the pod's IP; the Secret goes with the
job's last pod. Kinds without SSH get none."""

from __future__ import annotations

import base64
import json

import pytest
from k8s_emulator import merge

from scheduling.backends.kubernetes import manifests as m
from scheduling.backends.kubernetes.config import KubernetesConfig
from scheduling.storage import Mount
from tests.scheduling.backends.kubernetes.k8s_launches import launch

NS = "gpu-ws-vision-lab"
TOKEN, SSH_TOKEN = "hf_s3cr3t-Value-0123456789", "ssh-token-0f9e8d7c6b5a"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
DATA = Mount("volume", "vision-lab", "data", 0, "/data", False, 10, "", "ReadWriteOnce")
REF = Mount("dataset", "vision-lab", "imagenet", 3, "/ref", True, 10, "", "ReadOnlyMany")


def with_ssh(job_id: int = 7, **extra):
    return launch(job_id, "main", 0, ssh=True, ssh_keys=(KEY,), ssh_token=SSH_TOKEN,
                  secret_env=(("HF_TOKEN", "hf-token"),), secret_values={"hf-token": TOKEN}, **extra)


def containers(pod: dict) -> dict[str, dict]:
    return {c["name"]: c for c in pod["spec"]["containers"]}


def test_the_sidecar_runs_the_ssh_server_with_the_jobs_environment_and_volumes():
    pod = m.replica_pod(with_ssh(mounts=(REF, DATA)), NS, "nvidia", KubernetesConfig(ssh_image="platform:1"))
    main, sidecar = containers(pod)["main"], containers(pod)["ssh"]
    assert sidecar["image"] == "platform:1"
    assert sidecar["command"] == ["python", "-m", "scheduling.backends.ssh_endpoint", "--host", "0.0.0.0",
                                  "--port", "2222", "--bin", m.SSH_BIN_DIR,
                                  "--authorized-keys", "/etc/gpu-platform-ssh/authorized_keys"]
    assert sidecar["ports"] == [{"name": "ssh", "containerPort": 2222, "protocol": "TCP"}]
    env = {e["name"]: e for e in sidecar["env"]}
    assert env["EPOCHS"] == {"name": "EPOCHS", "value": "3"}   # the job's own variables, secrets by reference
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "secret-hf-token", "key": "hf-token"}
    assert env["SIM_SSH_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": m.ssh_secret_name(7), "key": "token"}
    assert env["SIM_JOB_ENV"]["value"] == ",".join(sorted(e["name"] for e in main["env"]))
    assert "SIM_SSH_TOKEN" not in env["SIM_JOB_ENV"]["value"]
    assert env["SIM_WORKDIR"]["value"] == "/data"   # the first volume mounted writable
    assert sidecar["volumeMounts"][:-1] == main["volumeMounts"]   # the job's files, where the job has them
    assert sidecar["volumeMounts"][-1] == {"name": "ssh-keys", "mountPath": "/etc/gpu-platform-ssh", "readOnly": True}
    assert {"name": "ssh-keys", "secret": {"secretName": m.ssh_secret_name(7), "items": [
        {"key": "authorized_keys", "path": "authorized_keys"}], "defaultMode": 0o400}} in pod["spec"]["volumes"]
    assert "nvidia.com/gpu" not in sidecar["resources"]["limits"]
    assert [c["name"] for c in pod["spec"]["containers"]] == ["main", "ssh"]
    text = json.dumps(pod)
    assert SSH_TOKEN not in text and TOKEN not in text and KEY not in text


def test_a_notebooks_shell_starts_in_its_home_and_a_job_without_volumes_in_tmp():
    notebook = launch(8, "notebook", 0, ssh=True, shape="jupyter", home=DATA, token="t", base_url="/nb/v/lab/")
    pod = m.replica_pod(notebook, NS, "nvidia", KubernetesConfig())
    env = {e["name"]: e.get("value") for e in containers(pod)["ssh"]["env"]}
    assert env["SIM_WORKDIR"] == m.NOTEBOOK_HOME
    bare = m.replica_pod(launch(9, ssh=True), NS, "nvidia", KubernetesConfig())
    assert {e["name"]: e.get("value") for e in containers(bare)["ssh"]["env"]}["SIM_WORKDIR"] == "/tmp"


def test_a_kind_without_ssh_gets_no_sidecar_and_no_ssh_secret():
    replica = launch(10, ssh=False)
    assert list(containers(m.replica_pod(replica, NS, "nvidia", KubernetesConfig()))) == ["main"]
    assert m.replica_secret_objects(replica, NS) == []


def test_without_the_gateway_no_pod_gets_a_sidecar():
    off = KubernetesConfig(ssh_sidecar=False)
    assert list(containers(m.replica_pod(with_ssh(), NS, "nvidia", off))) == ["main"]
    assert [s["metadata"]["name"] for s in m.replica_secret_objects(with_ssh(), NS, off)] == ["secret-hf-token"]


def test_launch_writes_the_ssh_secret_the_gateway_reaches_the_pod_ip_and_the_secret_goes_with_the_job(
        api, backend, gpu_node):
    replica = with_ssh()
    backend.launch(replica)
    secret = api.get("secrets", NS, m.ssh_secret_name(7))
    assert base64.b64decode(secret["data"]["token"]).decode() == SSH_TOKEN
    assert base64.b64decode(secret["data"]["authorized_keys"]).decode() == KEY + "\n"
    assert backend.ssh_endpoint(replica.key) is None   # no IP yet: the gateway says it does not answer yet

    name = m.pod_name(replica.key)
    api.set_pod_phase(NS, name, "Running")
    with api.cond:
        pod = api.store.objects[("pods", NS, name)]
        api._update("pods", NS, name, merge(pod, {"status": {"podIP": "10.4.0.17"}}))
    backend.statuses()
    endpoint = backend.ssh_endpoint(replica.key)
    assert (endpoint.host, endpoint.port) == ("10.4.0.17", 2222)

    backend.evict(replica.key, "cancelled")
    assert api.get("secrets", NS, m.ssh_secret_name(7)) is None
    assert api.get("secrets", NS, "secret-hf-token") is not None   # the workspace's secrets stay


SPEC = """name: train
queue: vision-lab
expectedDuration: 1h
roles:
  - name: main
    image: busybox
    resources: {gpu: 1}
    nodePool: h100
"""


@pytest.mark.django_db
def test_the_cycle_gives_a_training_pod_the_sidecar_with_the_submitters_live_keys(
        cluster, api, make_backend, django_capture_on_commit_callbacks, tmp_path):
    from billing.services import submit_quoted_job
    from portal import ssh_keys
    from scheduling.cycle.run import run_scheduling_cycle
    from scheduling.models import Node
    from scheduling.ssh import ssh_token
    from tests.portal.ssh.conftest import make_key

    for node in Node.objects.select_related("pool"):
        api.add_node(node.name, capacity={"nvidia.com/gpu": node.gpus.count()},
                     labels={"gpu-platform/pool": node.pool.name, "nvidia.com/gpu.product": node.pool.gpu_model,
                             "nvidia.com/gpu.memory": str(node.pool.gpu_memory_mib),
                             "nvidia.com/gpu.count": str(node.gpus.count())})
    _, laptop = make_key(tmp_path, "laptop")
    _, old = make_key(tmp_path, "old")
    ssh_keys.add_key(cluster.alice, "laptop", laptop)
    revoked = ssh_keys.add_key(cluster.alice, "old", old)
    ssh_keys.revoke_key(cluster.admin, revoked.pk)
    _, bobs = make_key(tmp_path, "bob")
    ssh_keys.add_key(cluster.bob, "bob", bobs)

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=SPEC)
    with django_capture_on_commit_callbacks(execute=True):
        run_scheduling_cycle(make_backend())
    (pod,) = api.list("pods", NS)
    assert [c["name"] for c in pod["spec"]["containers"]] == ["main", "ssh"]
    secret = api.get("secrets", NS, m.ssh_secret_name(job.pk))
    keys = base64.b64decode(secret["data"]["authorized_keys"]).decode().splitlines()
    assert keys == [" ".join(laptop.split()[:2])]   # alice's live key only: not the revoked one, not bob's
    assert base64.b64decode(secret["data"]["token"]).decode() == ssh_token(job.pk)
