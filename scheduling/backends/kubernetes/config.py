"""Settings of the Kubernetes backend, from the environment with working defaults."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .retry import RetryPolicy

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_SPOT_MARKERS = (
    "cloud.google.com/gke-spot=true",
    "cloud.google.com/gke-preemptible=true",
    "eks.amazonaws.com/capacityType=SPOT",
    "karpenter.sh/capacity-type=spot",
    "kubernetes.azure.com/scalesetpriority=spot",
    "gpu-platform/spot",
)


@dataclass(frozen=True)
class KubernetesConfig:
    kubeconfig: str | None = None  # a kubeconfig file; None: in-cluster when run in a pod, else ~/.kube/config
    context: str | None = None  # kubeconfig context; None: its current-context
    in_cluster: bool | None = None  # True: the pod's service account; None: decide as above
    namespace_prefix: str = "gpu-ws-"  # workspace "vision-lab" -> namespace "gpu-ws-vision-lab"
    pool_label: str = "gpu-platform/pool"  # node label naming the node pool
    default_pool: str = "default"  # pool of nodes without that label
    gpu_uuids_annotation: str = "gpu-platform/gpu-uuids"  # node annotation "GPU-aaa,GPU-bbb" (index order)
    # labels or taints ("key" or "key=value") that mark a spot / preemptible node
    spot_markers: tuple[str, ...] = DEFAULT_SPOT_MARKERS
    reservation_namespace: str = "gpu-platform-reservation"
    reservation_image: str = "registry.k8s.io/pause:3.9"
    tensorboard_image: str = "tensorflow/tensorflow:2.17.0"  # runs `tensorboard` beside a job's first replica
    # the SSH sidecar of the pods of kinds with SSH (notebooks, training), which the SSH gateway reaches: whether
    # pods get one, and its image, the platform's own (it runs the platform's replica SSH server)
    ssh_sidecar: bool = True
    ssh_image: str = "registry.example.com/gpu-platform:0.2.0"
    master_port: int = 29500  # PyTorch MASTER_PORT, also the headless Service's port
    request_timeout_s: float = 10.0  # connect and read timeout of one API call
    watch_timeout_s: int = 60  # server-side end of one watch request
    watch_idle_s: float = 0.2  # statuses() stops draining the watch after this long without an event
    orphan_grace_s: float = 60.0  # a reservation without fractions is deleted once older than this
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # the pod's service account (token, ca.crt, namespace), read when in_cluster
    service_account_dir: str = SERVICE_ACCOUNT_DIR
    scheduler_name: str | None = None  # spec.schedulerName of the pods made; None: the cluster's default-scheduler
    lease_name: str = "gpu-platform-scheduler"  # the Lease the cycle holds (leader election between workers)
    lease_namespace: str | None = None  # None: the pod's own namespace in a cluster, else "default"
    lease_duration_s: float = 15.0  # a dead holder's Lease is taken over after this long
    # inference servers read a model.path from this PersistentVolumeClaim (in each workspace's namespace),
    # mounted read-only at models_mount
    models_claim: str = "models"
    models_mount: str = "/models"
    # the VolumeSnapshotClass of dataset versions' snapshots; None: the cluster's default class for the driver
    snapshot_class: str | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*)?", self.namespace_prefix) or len(self.namespace_prefix) > 40:
            raise ValueError(f"K8S_NAMESPACE_PREFIX {self.namespace_prefix!r}: lowercase letters, digits and '-', "
                             "at most 40 characters")
        if not self.pool_label:
            raise ValueError("K8S_POOL_LABEL is empty")
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", self.reservation_namespace):
            raise ValueError(f"K8S_RESERVATION_NAMESPACE {self.reservation_namespace!r} is not a DNS label")
        if not 0 < self.master_port < 65536:
            raise ValueError(f"K8S_MASTER_PORT {self.master_port} is not a port")
        if self.request_timeout_s <= 0 or self.watch_timeout_s <= 0 or self.watch_idle_s <= 0:
            raise ValueError("K8S timeouts must be > 0")
        if self.orphan_grace_s < 0:
            raise ValueError("K8S_ORPHAN_GRACE_S must be >= 0")
        if self.lease_duration_s < 1:
            raise ValueError("K8S_LEASE_DURATION_S must be >= 1")
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", self.lease_name):
            raise ValueError(f"K8S_LEASE_NAME {self.lease_name!r} is not a DNS name")
        if self.scheduler_name is not None and not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?",
                                                                 self.scheduler_name):
            raise ValueError(f"K8S_SCHEDULER_NAME {self.scheduler_name!r} is not a DNS name")
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", self.models_claim):
            raise ValueError(f"K8S_MODELS_CLAIM {self.models_claim!r} is not a DNS name")
        if not re.fullmatch(r"/[A-Za-z0-9._/-]*", self.models_mount) or ".." in self.models_mount.split("/") \
                or self.models_mount.rstrip("/") == "":
            raise ValueError(f"K8S_MODELS_MOUNT {self.models_mount!r} is not an absolute path below /")
        if self.snapshot_class is not None and not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?",
                                                                 self.snapshot_class):
            raise ValueError(f"K8S_VOLUME_SNAPSHOT_CLASS {self.snapshot_class!r} is not a DNS name")

    def uses_service_account(self, env: Mapping[str, str] | None = None) -> bool:
        """In-cluster unless told otherwise: no kubeconfig given and the API server's Service in the env."""
        if self.in_cluster is not None:
            return self.in_cluster
        env = os.environ if env is None else env
        return not self.kubeconfig and bool(env.get("KUBERNETES_SERVICE_HOST"))

    def lease_namespace_or_own(self) -> str:
        if self.lease_namespace:
            return self.lease_namespace
        if self.uses_service_account():
            try:
                with open(os.path.join(self.service_account_dir, "namespace")) as f:
                    return f.read().strip() or "default"
            except OSError:
                pass
        return "default"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KubernetesConfig:
        """K8S_KUBECONFIG (or KUBECONFIG), K8S_CONTEXT, K8S_IN_CLUSTER, K8S_NAMESPACE_PREFIX, K8S_POOL_LABEL,
        K8S_DEFAULT_POOL, K8S_GPU_UUIDS_ANNOTATION, K8S_SPOT_MARKERS (comma list), K8S_RESERVATION_NAMESPACE,
        K8S_RESERVATION_IMAGE, K8S_TENSORBOARD_IMAGE, K8S_SSH_SIDECAR, K8S_SSH_IMAGE,
        K8S_MASTER_PORT, K8S_REQUEST_TIMEOUT_S, K8S_WATCH_TIMEOUT_S,
        K8S_WATCH_IDLE_S, K8S_ORPHAN_GRACE_S, K8S_RETRY_ATTEMPTS, K8S_RETRY_BASE_S, K8S_RETRY_CAP_S,
        K8S_SERVICE_ACCOUNT_DIR,
        K8S_SCHEDULER_NAME, K8S_LEASE_NAME, K8S_LEASE_NAMESPACE, K8S_LEASE_DURATION_S, K8S_MODELS_CLAIM,
        K8S_MODELS_MOUNT, K8S_VOLUME_SNAPSHOT_CLASS."""
        env = os.environ if env is None else env
        d = cls()

        def get(name: str, default: object) -> str:
            return env.get(name, "").strip() or str(default)

        def number(name: str, default: float, kind: type) -> float:
            text = get(name, default)
            try:
                return kind(text)
            except ValueError:
                raise ValueError(f"{name}={text!r} is not a {kind.__name__}") from None

        in_cluster = env.get("K8S_IN_CLUSTER", "").strip().lower()
        markers = env.get("K8S_SPOT_MARKERS")
        return cls(
            kubeconfig=env.get("K8S_KUBECONFIG") or env.get("KUBECONFIG") or None,
            context=env.get("K8S_CONTEXT") or None,
            in_cluster={"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}.get(in_cluster),
            namespace_prefix=get("K8S_NAMESPACE_PREFIX", d.namespace_prefix),
            pool_label=get("K8S_POOL_LABEL", d.pool_label),
            default_pool=get("K8S_DEFAULT_POOL", d.default_pool),
            gpu_uuids_annotation=get("K8S_GPU_UUIDS_ANNOTATION", d.gpu_uuids_annotation),
            spot_markers=tuple(m.strip() for m in markers.split(",") if m.strip()) if markers is not None
            else d.spot_markers,
            reservation_namespace=get("K8S_RESERVATION_NAMESPACE", d.reservation_namespace),
            reservation_image=get("K8S_RESERVATION_IMAGE", d.reservation_image),
            tensorboard_image=get("K8S_TENSORBOARD_IMAGE", d.tensorboard_image),
            ssh_sidecar=env.get("K8S_SSH_SIDECAR", "1").strip().lower() not in ("0", "false", "no"),
            ssh_image=get("K8S_SSH_IMAGE", d.ssh_image),
            master_port=int(number("K8S_MASTER_PORT", d.master_port, int)),
            request_timeout_s=number("K8S_REQUEST_TIMEOUT_S", d.request_timeout_s, float),
            watch_timeout_s=int(number("K8S_WATCH_TIMEOUT_S", d.watch_timeout_s, int)),
            watch_idle_s=number("K8S_WATCH_IDLE_S", d.watch_idle_s, float),
            orphan_grace_s=number("K8S_ORPHAN_GRACE_S", d.orphan_grace_s, float),
            retry=RetryPolicy(attempts=int(number("K8S_RETRY_ATTEMPTS", d.retry.attempts, int)),
                              base_s=number("K8S_RETRY_BASE_S", d.retry.base_s, float),
                              cap_s=number("K8S_RETRY_CAP_S", d.retry.cap_s, float)),
            service_account_dir=get("K8S_SERVICE_ACCOUNT_DIR", d.service_account_dir),
            scheduler_name=env.get("K8S_SCHEDULER_NAME", "").strip() or None,
            lease_name=get("K8S_LEASE_NAME", d.lease_name),
            lease_namespace=env.get("K8S_LEASE_NAMESPACE", "").strip() or None,
            lease_duration_s=number("K8S_LEASE_DURATION_S", d.lease_duration_s, float),
            models_claim=get("K8S_MODELS_CLAIM", d.models_claim),
            models_mount=get("K8S_MODELS_MOUNT", d.models_mount),
            snapshot_class=env.get("K8S_VOLUME_SNAPSHOT_CLASS", "").strip() or None,
        )
