"""Fixtures for the Kubernetes backend tests: an emulated API server over real HTTP, a kubeconfig
pointing at it, and backends built from that kubeconfig with the real `kubernetes` client."""

from __future__ import annotations

import time

import pytest

from scheduling.backends.kubernetes.backend import KubernetesBackend, KubernetesConfig
from scheduling.backends.kubernetes.retry import RetryPolicy
from tests.scheduling.backends.kubernetes.k8s_emulator import KubeEmulator
from tests.scheduling.backends.kubernetes.k8s_launches import H100_UUIDS


@pytest.fixture
def api():
    with KubeEmulator() as emulator:
        yield emulator


@pytest.fixture
def kubeconfig(api, tmp_path):
    return api.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def make_backend(kubeconfig):
    """Backends that record their backoff waits in `.sleeps` (and only wait with real_sleep=True)."""

    def make(real_sleep: bool = False, **overrides) -> KubernetesBackend:
        settings = {"kubeconfig": str(kubeconfig), "request_timeout_s": 1.0, "watch_idle_s": 0.15,
                    "orphan_grace_s": 0.0, "retry": RetryPolicy(attempts=4, base_s=0.05, cap_s=1.0), **overrides}
        sleeps: list[float] = []

        def sleep(seconds: float) -> None:
            sleeps.append(seconds)
            if real_sleep:
                time.sleep(seconds)

        backend = KubernetesBackend(KubernetesConfig(**settings), sleep=sleep)
        backend.sleeps = sleeps  # type: ignore[attr-defined]
        made.append(backend)
        return backend

    made: list[KubernetesBackend] = []
    yield make
    for backend in made:
        backend.close()


@pytest.fixture
def backend(make_backend):
    return make_backend()


@pytest.fixture
def gpu_node(api):
    """One 8 x H100 node with uuids annotated, in pool "h100"."""
    return api.add_node(
        "gpu-1", capacity={"nvidia.com/gpu": 8},
        labels={"gpu-platform/pool": "h100", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.count": "8"},
        annotations={"gpu-platform/gpu-uuids": ",".join(H100_UUIDS)},
    )
