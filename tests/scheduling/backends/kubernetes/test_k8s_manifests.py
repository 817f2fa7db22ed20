"""The pure translation layer: names, labels and pod statuses, without a server."""

from __future__ import annotations

import re

import pytest

from scheduling.backends.kubernetes import manifests as m
from scheduling.backends.kubernetes.config import KubernetesConfig


def test_names_are_valid_dns_labels_and_stay_distinct():
    assert m.pod_name((7, "worker", 3)) == "job-7-worker-3"
    odd = [m.pod_name((7, "Worker", 0)), m.pod_name((7, "worker_", 0)), m.pod_name((7, "w" * 80, 0))]
    assert all(re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", n) for n in odd)
    assert len({m.pod_name((7, "worker", 0)), *odd}) == 4  # changed names carry a hash of the original
    assert m.namespace_name(KubernetesConfig(), "vision-lab") == "gpu-ws-vision-lab"
    with pytest.raises(ValueError, match="workspace slug is empty"):
        m.namespace_name(KubernetesConfig(), "")


def test_label_values_are_sanitised():
    assert m.label_value("train-resnet.v2") == "train-resnet.v2"
    cleaned = m.label_value("Train ResNet (v2)!")
    assert re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", cleaned) and cleaned.startswith("Train-ResNet")
    assert len(m.label_value("x" * 100)) <= 63


def pod(phase: str, **status) -> dict:
    return {"metadata": {"name": "job-1-main-0", "namespace": "ns", "labels": {
        m.KIND: m.REPLICA_KIND, m.JOB_ID: "1", m.ROLE: "main", m.REPLICA: "0"},
        "annotations": {m.ROLE_NAME: "Main Role"}}, "spec": {"nodeName": "n1"}, "status": {"phase": phase, **status}}


def test_status_keeps_the_exact_role_name_and_maps_phases():
    running = m.replica_status(pod("Running", startTime="2026-01-01T00:00:00Z"))
    assert running.key == (1, "Main Role", 0) and running.phase == "Running" and running.node == "n1"
    assert running.started_at == 1767225600.0 and running.finished_at is None
    lost = m.replica_status(pod("Unknown"))
    assert lost.phase == "Running" and "stopped reporting" in lost.message
    evicted = m.replica_status(pod("Failed", reason="Evicted", message="The node was low on resource: memory."))
    assert evicted.phase == "Failed" and "Evicted" in evicted.message and "memory" in evicted.message


def test_bad_quantities_name_the_value():
    with pytest.raises(ValueError, match="bad Kubernetes quantity 'lots'"):
        m.quantity("lots")


def test_pods_carry_the_scheduler_name_when_one_is_set():
    from tests.scheduling.backends.kubernetes.k8s_launches import launch

    assert "schedulerName" not in m.replica_pod(launch(), "ns", "nvidia", KubernetesConfig())["spec"]
    named = KubernetesConfig.from_env({"K8S_SCHEDULER_NAME": "gpu-platform"})
    assert m.replica_pod(launch(), "ns", "nvidia", named)["spec"]["schedulerName"] == "gpu-platform"
    assert m.reservation_pod("gpu-1", 0, "GPU-a", "nvidia", named)["spec"]["schedulerName"] == "gpu-platform"
    with pytest.raises(ValueError, match="K8S_SCHEDULER_NAME"):
        KubernetesConfig.from_env({"K8S_SCHEDULER_NAME": "Not A Name"})


def test_lease_settings_from_the_environment():
    config = KubernetesConfig.from_env({"K8S_LEASE_NAME": "sched", "K8S_LEASE_NAMESPACE": "ops",
                                        "K8S_LEASE_DURATION_S": "20", "K8S_IN_CLUSTER": "0"})
    assert (config.lease_name, config.lease_namespace_or_own(), config.lease_duration_s) == ("sched", "ops", 20.0)
    assert KubernetesConfig(in_cluster=False).lease_namespace_or_own() == "default"
    with pytest.raises(ValueError, match="K8S_LEASE_DURATION_S"):
        KubernetesConfig.from_env({"K8S_LEASE_DURATION_S": "0.5"})
