"""Workspace secrets on Kubernetes: Secrets in the workspace's namespace, the pod referring to them by
secretKeyRef, secret volumes and imagePullSecrets, never holding a value; a replaced value rewrites the Secret."""

from __future__ import annotations

import base64
import json

from scheduling.backends.kubernetes import manifests as m
from scheduling.backends.kubernetes.config import KubernetesConfig
from tests.scheduling.backends.kubernetes.k8s_launches import launch

NS = "gpu-ws-vision-lab"
TOKEN, KAGGLE, PULL = "hf_s3cr3t-Value-0123456789", '{"username": "a", "key": "k4ggle-key-987"}', "pull-pass-77"
CONFIG = json.dumps({"auths": {"registry.example.com": {"username": "robot", "password": PULL}}})


def with_secrets(job_id: int = 7, **extra):
    return launch(job_id, "main", 0, image="registry.example.com/team/train:1",
                  secret_env=(("HF_TOKEN", "hf-token"),), secret_mounts=(("kaggle", "/etc/kaggle"),),
                  secret_values={"hf-token": TOKEN, "kaggle": KAGGLE}, pull_secret="registry.example.com",
                  pull_config=CONFIG, **extra)


def test_the_pod_refers_to_secrets_by_name_and_holds_no_value():
    pod = m.replica_pod(with_secrets(), NS, "nvidia", KubernetesConfig())
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["HF_TOKEN"] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "secret-hf-token",
                                                                                   "key": "hf-token"}}}
    assert env["EPOCHS"] == {"name": "EPOCHS", "value": "3"}
    assert container["volumeMounts"] == [{"name": "secret-0", "mountPath": "/etc/kaggle", "readOnly": True}]
    assert pod["spec"]["volumes"] == [{"name": "secret-0", "secret": {
        "secretName": "secret-kaggle", "items": [{"key": "kaggle", "path": "kaggle"}], "defaultMode": 0o400}}]
    assert pod["spec"]["imagePullSecrets"] == [{"name": m.pull_secret_name("registry.example.com")}]
    text = json.dumps(pod)
    for value in (TOKEN, "k4ggle-key-987", PULL, base64.b64encode(TOKEN.encode()).decode()):
        assert value not in text


def test_a_platform_variable_is_not_overridden_by_a_secret():
    replica = launch(3, "worker", 0, job_type="pytorch", secret_env=(("RANK", "hf-token"),),
                     secret_values={"hf-token": TOKEN})
    env = {e["name"]: e for e in m.replica_pod(replica, NS, "nvidia", KubernetesConfig())["spec"]["containers"][0]["env"]}
    assert env["RANK"] == {"name": "RANK", "value": "0"}


def test_mpi_and_secret_volumes_are_both_mounted():
    replica = launch(4, "worker", 0, job_type="mpi", secret_mounts=(("kaggle", "/etc/kaggle"),),
                     secret_values={"kaggle": KAGGLE})
    pod = m.replica_pod(replica, NS, "nvidia", KubernetesConfig())
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["mpi-hostfile", "secret-0"]


def test_launch_writes_the_secrets_in_the_workspaces_namespace(api, backend, gpu_node):
    backend.launch(with_secrets())
    token = api.get("secrets", NS, "secret-hf-token")
    assert token["type"] == "Opaque" and base64.b64decode(token["data"]["hf-token"]).decode() == TOKEN
    assert base64.b64decode(api.get("secrets", NS, "secret-kaggle")["data"]["kaggle"]).decode() == KAGGLE
    pull = api.get("secrets", NS, m.pull_secret_name("registry.example.com"))
    assert pull["type"] == "kubernetes.io/dockerconfigjson"
    assert json.loads(base64.b64decode(pull["data"][".dockerconfigjson"])) == json.loads(CONFIG)
    pod = api.get("pods", NS, "job-7-main-0")
    assert TOKEN not in json.dumps(pod) and pod["spec"]["imagePullSecrets"]
    assert api.list("secrets", "gpu-ws-nlp-group") == []


def test_a_replaced_value_rewrites_the_secret_and_an_unchanged_one_is_not_written_again(api, backend, gpu_node):
    backend.launch(with_secrets(7))
    posts = api.count("POST", "/secrets$")
    backend.launch(with_secrets(8))  # same values: nothing to write
    assert api.count("POST", "/secrets$") == posts and api.count("PUT", "/secrets/") == 0
    backend.launch(launch(9, "main", 0, secret_env=(("HF_TOKEN", "hf-token"),),
                          secret_values={"hf-token": "a-new-value-42"}))
    assert base64.b64decode(api.get("secrets", NS, "secret-hf-token")["data"]["hf-token"]).decode() == "a-new-value-42"


def test_a_replica_without_secrets_makes_no_secret_and_no_pull_secret(api, backend, gpu_node):
    backend.launch(launch(5, "main", 0))
    assert api.list("secrets", NS) == []
    assert "imagePullSecrets" not in api.get("pods", NS, "job-5-main-0")["spec"]


def test_deleting_a_workspace_secret_removes_the_namespaces_copy(api, backend, gpu_node, tenants,
                                                                django_capture_on_commit_callbacks):
    from scheduling import secrets

    backend.launch(with_secrets())
    assert api.get("secrets", NS, "secret-hf-token") is not None
    secrets.set_secret(tenants.alice, tenants.vision, "hf-token", TOKEN)
    secrets.set_registry(tenants.alice, tenants.vision, "registry.example.com", "robot", PULL)
    with django_capture_on_commit_callbacks(execute=True):
        secrets.delete_secret(tenants.alice, tenants.vision, "hf-token", backend=backend)
        secrets.delete_registry(tenants.alice, tenants.vision, "registry.example.com", backend=backend)
    assert api.get("secrets", NS, "secret-hf-token") is None
    assert api.get("secrets", NS, m.pull_secret_name("registry.example.com")) is None
    assert api.get("secrets", NS, "secret-kaggle") is not None  # the others stay
    backend.launch(with_secrets(8))  # a launch that still names it writes it again (its digest was forgotten)
    assert api.get("secrets", NS, "secret-hf-token") is not None
