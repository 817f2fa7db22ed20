"""inventory() and the backend's settings: Node objects read over HTTP become NodeInventory."""

from __future__ import annotations

import pytest

from scheduling.backends.kubernetes.config import KubernetesConfig
from tests.scheduling.backends.kubernetes.k8s_launches import H100_UUIDS


def by_name(backend) -> dict:
    return {n.name: n for n in backend.inventory()}


def test_whole_gpu_node_with_labels_and_uuids(backend, gpu_node):
    node = by_name(backend)["gpu-1"]
    assert (node.pool, node.vendor, node.gpu_model) == ("h100", "nvidia", "H100-80GB-HBM3")
    assert [g.index for g in node.gpus] == list(range(8))
    assert [g.uuid for g in node.gpus] == H100_UUIDS
    assert {g.memory_mib for g in node.gpus} == {81559}
    assert (node.cpu_milli, node.memory_mib) == (32000, 256 * 1024)
    assert node.ready and not node.cordoned and not node.spot and node.timeslice_replicas == 0


def test_mig_instances_are_spread_over_the_gpus(api, backend):
    api.add_node("mig-1", capacity={"nvidia.com/gpu": 0, "nvidia.com/mig-3g.40gb": 4, "nvidia.com/mig-1g.10gb": 2},
                 labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "2",
                         "nvidia.com/gpu.memory": "81920"})
    node = by_name(backend)["mig-1"]
    assert len(node.gpus) == 2
    assert [g.mig_profiles for g in node.gpus] == [("3g.40gb", "3g.40gb", "1g.10gb"), ("3g.40gb", "3g.40gb", "1g.10gb")]
    assert node.gpu_model == "A100-SXM4-80GB"


def test_time_sliced_node_reports_replicas_per_gpu(api, backend):
    api.add_node("ts-1", capacity={"nvidia.com/gpu.shared": 16},
                 labels={"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.count": "4"})
    api.add_node("ts-2", capacity={"nvidia.com/gpu.shared": 6})  # no GPU feature discovery labels
    nodes = by_name(backend)
    assert (len(nodes["ts-1"].gpus), nodes["ts-1"].timeslice_replicas) == (4, 4)
    assert (len(nodes["ts-2"].gpus), nodes["ts-2"].timeslice_replicas) == (6, 1)


def test_amd_node_and_derived_uuids(api, backend):
    api.add_node("amd-1", capacity={"amd.com/gpu": 4},
                 labels={"amd.com/gpu.product-name": "AMD-Instinct-MI250X", "amd.com/gpu.vram": "64G",
                         "gpu-platform/pool": "mi250"})
    node = by_name(backend)["amd-1"]
    assert (node.vendor, node.gpu_model, node.pool) == ("amd", "Instinct-MI250X", "mi250")
    assert [g.uuid for g in node.gpus] == [f"amd-1-gpu-{i}" for i in range(4)]
    assert {g.memory_mib for g in node.gpus} == {64 * 1024}


def test_spot_markers_from_taints_and_labels(api, make_backend):
    api.add_node("gke-spot", capacity={"nvidia.com/gpu": 1},
                 taints=[{"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoSchedule"}])
    api.add_node("eks-spot", capacity={"nvidia.com/gpu": 1}, labels={"eks.amazonaws.com/capacityType": "SPOT"})
    api.add_node("eks-ondemand", capacity={"nvidia.com/gpu": 1}, labels={"eks.amazonaws.com/capacityType": "ON_DEMAND"})
    api.add_node("own-taint", capacity={"nvidia.com/gpu": 1},
                 taints=[{"key": "example.com/preemptible", "effect": "NoSchedule"}])
    default = by_name(make_backend())
    assert {n for n, v in default.items() if v.spot} == {"gke-spot", "eks-spot"}
    custom = by_name(make_backend(spot_markers=("example.com/preemptible",)))
    assert {n for n, v in custom.items() if v.spot} == {"own-taint"}


def test_cordoned_not_ready_and_cpu_only_nodes(api, backend):
    api.add_node("cordoned", capacity={"nvidia.com/gpu": 2}, unschedulable=True)
    api.add_node("down", capacity={"nvidia.com/gpu": 2}, ready=False)
    api.add_node("cpu-only", capacity={"cpu": "15500m", "memory": "65842412Ki"})
    nodes = by_name(backend)
    assert nodes["cordoned"].cordoned and nodes["cordoned"].ready
    assert not nodes["down"].ready and not nodes["down"].cordoned
    assert nodes["cpu-only"].gpus == () and nodes["cpu-only"].cpu_milli == 15500
    assert nodes["cpu-only"].memory_mib == 65842412 // 1024
    assert nodes["cpu-only"].pool == "default"


def test_pool_label_is_configurable(api, make_backend):
    api.add_node("n1", capacity={"nvidia.com/gpu": 1}, labels={"team.example/pool": "research"})
    assert by_name(make_backend(pool_label="team.example/pool"))["n1"].pool == "research"
    assert by_name(make_backend())["n1"].pool == "default"


def test_config_from_env_reads_every_setting():
    cfg = KubernetesConfig.from_env({
        "KUBECONFIG": "/etc/kube/config", "K8S_CONTEXT": "prod", "K8S_NAMESPACE_PREFIX": "team-",
        "K8S_POOL_LABEL": "example.com/pool", "K8S_SPOT_MARKERS": "a=b, c", "K8S_RESERVATION_NAMESPACE": "res",
        "K8S_MASTER_PORT": "23456", "K8S_RETRY_ATTEMPTS": "3", "K8S_RETRY_CAP_S": "9", "K8S_IN_CLUSTER": "false",
    })
    assert (cfg.kubeconfig, cfg.context, cfg.namespace_prefix, cfg.pool_label) == (
        "/etc/kube/config", "prod", "team-", "example.com/pool")
    assert cfg.spot_markers == ("a=b", "c") and cfg.reservation_namespace == "res" and cfg.master_port == 23456
    assert (cfg.retry.attempts, cfg.retry.cap_s, cfg.in_cluster) == (3, 9.0, False)
    assert KubernetesConfig.from_env({}).namespace_prefix == "gpu-ws-"


@pytest.mark.parametrize("env, message", [
    ({"K8S_NAMESPACE_PREFIX": "Team_"}, "K8S_NAMESPACE_PREFIX"),
    ({"K8S_MASTER_PORT": "http"}, "K8S_MASTER_PORT"),
    ({"K8S_RETRY_ATTEMPTS": "0"}, "attempts"),
])
def test_bad_settings_name_the_variable(env, message):
    with pytest.raises(ValueError, match=message):
        KubernetesConfig.from_env(env)


def test_from_settings_gives_one_backend_per_process_and_settings(kubeconfig, monkeypatch, gpu_node):
    from scheduling.backends.kubernetes.backend import KubernetesBackend

    monkeypatch.setenv("K8S_KUBECONFIG", str(kubeconfig))
    first = KubernetesBackend.from_settings()
    assert KubernetesBackend.from_settings() is first  # the cache and the watch position survive cycles
    assert [n.name for n in first.inventory()] == ["gpu-1"]
    monkeypatch.setenv("K8S_NAMESPACE_PREFIX", "other-")
    assert KubernetesBackend.from_settings() is not first
