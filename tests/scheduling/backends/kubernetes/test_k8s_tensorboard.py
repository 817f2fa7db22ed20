"""TensorBoard on Kubernetes: a container in the first replica's pod reading the job's logdir, through the
workspace volume that holds it (read-only) or an emptyDir both containers share; other replicas get none;
its endpoint is the pod's IP on port 6006."""

from __future__ import annotations

from k8s_launches import launch

from scheduling.backends.kubernetes import manifests as m
from scheduling.backends.kubernetes.config import KubernetesConfig
from scheduling.storage import Mount

RUNS = Mount("volume", "vision-lab", "runs", 0, "/ckpt", False, 10, "", "ReadWriteOnce")


def containers(pod: dict) -> dict[str, dict]:
    return {c["name"]: c for c in pod["spec"]["containers"]}


def test_the_first_replicas_pod_gets_a_tensorboard_reading_the_volume_that_holds_the_logdir():
    pod = m.replica_pod(launch(mounts=(RUNS,), tensorboard_logdir="/ckpt/tb"), "gpu-ws-vision-lab", "nvidia",
                        KubernetesConfig(tensorboard_image="tb:1"))
    main, board = containers(pod)["main"], containers(pod)["tensorboard"]
    assert board["image"] == "tb:1" and board["command"] == ["tensorboard"]
    assert board["args"] == ["--logdir", "/ckpt/tb", "--host", "0.0.0.0", "--port", "6006"]
    assert board["ports"] == [{"name": "tensorboard", "containerPort": 6006, "protocol": "TCP"}]
    assert board["volumeMounts"] == [{"name": "mount-0", "mountPath": "/ckpt", "readOnly": True}]
    assert {"name": "mount-0", "mountPath": "/ckpt", "readOnly": False} in main["volumeMounts"]
    assert "nvidia.com/gpu" not in board["resources"]["limits"]


def test_without_a_volume_both_containers_share_an_empty_dir():
    pod = m.replica_pod(launch(tensorboard_logdir="/logs/tb"), "ns", "nvidia", KubernetesConfig())
    main, board = containers(pod)["main"], containers(pod)["tensorboard"]
    assert {"name": "tensorboard-logs", "mountPath": "/logs/tb"} in main["volumeMounts"]
    assert board["volumeMounts"] == [{"name": "tensorboard-logs", "mountPath": "/logs/tb", "readOnly": True}]
    assert {"name": "tensorboard-logs", "emptyDir": {}} in pod["spec"]["volumes"]


def test_other_replicas_get_none():
    pod = m.replica_pod(launch(index=1), "ns", "nvidia", KubernetesConfig())
    assert list(containers(pod)) == ["main"]
