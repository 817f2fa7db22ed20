"""Pure translation between the backend contract and Kubernetes objects (plain JSON dicts).

Nodes -> NodeInventory, Pods -> ReplicaStatus, ReplicaLaunch -> Pod (+ reservation pods, headless
Service, MPI hostfile ConfigMap; a notebook: its home PersistentVolumeClaim and a Service; an inference
service: its server's arguments, probes and models volume, and one Service for all its replicas), workspace ->
Namespace + ResourceQuota. No API calls here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import posixpath
import re
from datetime import datetime
from decimal import Decimal

from kubernetes.utils import parse_quantity

from scheduling.backends import ssh_endpoint
from scheduling.backends.base import (
    FAILED,
    JUPYTER,
    MODEL_SERVER,
    PENDING,
    RUNNING,
    SSH_SIDECAR_PORT,
    SUCCEEDED,
    GpuInventory,
    NodeInventory,
    ReplicaKey,
    ReplicaLaunch,
    ReplicaStatus,
)
from scheduling.kinds import stored_launch_type

from .config import KubernetesConfig

P = "gpu-platform/"
MANAGED, KIND, WORKSPACE = P + "managed", P + "kind", P + "workspace"
JOB_ID, JOB, ROLE, REPLICA, RANK = P + "job-id", P + "job", P + "role", P + "replica", P + "rank"
NODE, GPU = P + "node", P + "gpu"
ROLE_NAME, SLICE, GPUS, GPU_UUIDS = P + "role-name", P + "slice", P + "gpus", P + "gpu-uuids"
REPLICA_KIND, RESERVATION_KIND = "replica", "reservation"
# every object the backend makes carries this label: the watch and lists select on it
MANAGED_SELECTOR = f"{MANAGED}=true"

NVIDIA_GPU, AMD_GPU, SHARED_GPU, MIG_PREFIX = "nvidia.com/gpu", "amd.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-"
MPI_HOSTFILE_DIR = "/etc/mpi"
NOTEBOOK_NAME = P + "notebook"
NOTEBOOK_PORT = 8888
NOTEBOOK_HOME = "/home/jovyan"  # Jupyter Docker Stacks' user home: the persistent volume goes there
INFERENCE_NAME = P + "inference"
INFERENCE_BASE_PREFIX = "/serve/"  # an inference service's base URL: /serve/<workspace>/<name>/
INFERENCE_SERVICE_PORT = 80  # the Service's port, whatever port the server listens on (targetPort "http")
GPU_MEM_LIMIT = P + "gpu-mem-limit-mib"
# loading a large model (or downloading it from a registry) takes minutes: 30 before the kubelet gives up
STARTUP_PERIOD_S, STARTUP_FAILURES = 10, 180
HF_PREFIXES = ("hf.co/", "huggingface.co/")


# --- names -------------------------------------------------------------------------------------------
def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:6]


def dns_label(text: str, limit: int = 63) -> str:
    """A DNS-1123 label from any text; a hash suffix keeps names that had to change distinct."""
    clean = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "x"
    if clean == text and len(clean) <= limit:
        return clean
    return f"{clean[: limit - 7].rstrip('-')}-{_short_hash(text)}"


def label_value(text: str) -> str:
    """A valid label value (63 chars of [A-Za-z0-9._-], alphanumeric at both ends)."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    if clean == text and len(clean) <= 63:
        return clean
    return f"{clean[:56].rstrip('-._')}-{_short_hash(text)}".lstrip("-")


def namespace_name(config: KubernetesConfig, workspace: str) -> str:
    if not workspace:
        raise ValueError("workspace slug is empty")
    return dns_label(config.namespace_prefix + workspace)


def pod_name(key: ReplicaKey) -> str:
    job_id, role, index = key
    return dns_label(f"job-{job_id}-{role}-{index}")


def service_name(job_id: object) -> str:
    return dns_label(f"job-{job_id}")


def hostfile_name(job_id: object) -> str:
    return dns_label(f"job-{job_id}-mpi-hostfile")


def rank_hostname(rank: int) -> str:
    return f"rank-{rank}"


def reservation_name(node: str, gpu: int) -> str:
    return dns_label(f"gpu-reservation-{node}-{gpu}", limit=253)


def home_claim_name(notebook: str) -> str:
    """A notebook's home volume's claim: by the notebook's name, so a stopped and started (or a new) notebook
    of that name in the workspace finds its files (the name homes had before they were workspace volumes)."""
    return dns_label(f"home-{notebook}")


def notebook_service_name(job_id: object) -> str:
    return dns_label(f"nb-{job_id}")


def notebook_url(job_id: object, namespace: str, base_url: str) -> str:
    """Where the portal (in the cluster) reaches a notebook's server: its Service's DNS name."""
    return f"http://{notebook_service_name(job_id)}.{namespace}.svc:{NOTEBOOK_PORT}{base_url or '/'}"


def inference_service_name(job_id: object) -> str:
    return dns_label(f"inf-{job_id}")


def inference_url(job_id: object, namespace: str) -> str:
    """Where the portal (in the cluster) reaches an inference service: its Service's DNS name. Servers answer
    at their root (/v1/..., /health), so the proxy forwards what follows the service's base URL."""
    return f"http://{inference_service_name(job_id)}.{namespace}.svc:{INFERENCE_SERVICE_PORT}/"


def is_inference_base_url(base_url: str) -> bool:
    return (base_url or "").startswith(INFERENCE_BASE_PREFIX)


# --- quantities and times ------------------------------------------------------------------------------
def quantity(value: object) -> Decimal:
    try:
        return parse_quantity(value)
    except ValueError:
        raise ValueError(f"bad Kubernetes quantity {value!r}") from None


def epoch(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


# --- nodes -> inventory ----------------------------------------------------------------------------------
def _count(resources: dict, name: str) -> int:
    return int(quantity(resources.get(name, "0")))


def _mib(text: str | None) -> int:
    """GPU memory label: MiB as a number (nvidia.com/gpu.memory), or a quantity such as 64G / 64Gi."""
    if not text:
        return 0
    if text.isdigit():
        return int(text)
    unit = text[-1:] if text[-1:] in "GMT" else ""
    if unit:  # node labellers write G for GiB
        return int(Decimal(text[:-1]) * {"M": 1, "G": 1024, "T": 1024 * 1024}[unit])
    return int(quantity(text) / (1024 * 1024))


def _model(labels: dict) -> str:
    product = labels.get("nvidia.com/gpu.product") or labels.get("amd.com/gpu.product-name") or ""
    return re.sub(r"^(NVIDIA|AMD)[-_ ]", "", product)


def _marked(marker: str, labels: dict, taints: list[dict]) -> bool:
    key, _, value = marker.partition("=")
    for taint in taints:
        if taint.get("key") == key and (not value or taint.get("value", "") == value):
            return True
    have = labels.get(key)
    return have is not None and (have == value if value else have.lower() != "false")


def _mig_order(profile: str) -> tuple[int, str]:
    return (-int(profile.split("g.", 1)[0]) if profile[0].isdigit() else 0, profile)


def node_inventory(node: dict, config: KubernetesConfig) -> NodeInventory:
    meta, spec, status = node.get("metadata", {}), node.get("spec", {}) or {}, node.get("status", {}) or {}
    name = meta["name"]
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    resources = status.get("allocatable") or status.get("capacity") or {}
    nvidia, amd, shared = _count(resources, NVIDIA_GPU), _count(resources, AMD_GPU), _count(resources, SHARED_GPU)
    mig = {k[len(MIG_PREFIX):]: _count(resources, k) for k in resources if k.startswith(MIG_PREFIX)}
    mig = {profile: n for profile, n in mig.items() if n > 0}
    vendor = "amd" if amd and not nvidia else "nvidia"
    replicas = int(labels.get("nvidia.com/gpu.replicas", "0") or 0)
    # physical GPUs: GPU feature discovery labels them; else what the device plugins advertise
    count = int(labels.get("nvidia.com/gpu.count", "0") or 0) if vendor == "nvidia" else 0
    if not count:
        count = amd if vendor == "amd" else max(nvidia, math.ceil(shared / replicas) if replicas > 1 else shared)
        count = count or (1 if mig else 0)
    timeslice = (replicas if replicas > 1 else (shared // count if count else 0)) if shared else 0
    uuids = [u.strip() for u in annotations.get(config.gpu_uuids_annotation, "").split(",") if u.strip()]
    memory = _mib(labels.get("nvidia.com/gpu.memory") or labels.get("amd.com/gpu.vram"))
    # MIG instances are spread over the GPUs evenly (the device plugin reports only totals per profile)
    per_gpu: list[list[str]] = [[] for _ in range(count)]
    for profile in sorted(mig, key=_mig_order):
        for i in range(mig[profile]):
            per_gpu[i % count].append(profile)
    gpus = tuple(
        GpuInventory(index=i, uuid=uuids[i] if i < len(uuids) else f"{name}-gpu-{i}", memory_mib=memory,
                     mig_profiles=tuple(sorted(per_gpu[i], key=_mig_order)))
        for i in range(count)
    )
    taints = spec.get("taints") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return NodeInventory(
        name=name, pool=labels.get(config.pool_label) or config.default_pool, vendor=vendor,
        gpu_model=_model(labels), gpus=gpus,
        cpu_milli=int(quantity(resources.get("cpu", "0")) * 1000),
        memory_mib=int(quantity(resources.get("memory", "0")) / (1024 * 1024)),
        ready=ready, cordoned=bool(spec.get("unschedulable")),
        spot=any(_marked(m, labels, taints) for m in config.spot_markers),
        timeslice_replicas=timeslice, labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
    )


# --- workspace -> namespace + quota -----------------------------------------------------------------------
QUOTA_NAME = "gpu-quota"


def namespace_manifest(name: str, workspace: str | None) -> dict:
    labels = {MANAGED: "true"}
    if workspace:
        labels[WORKSPACE] = label_value(workspace)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def quota_manifest(workspace: str, gpu_quota_milli: int) -> dict:
    """Whole GPUs only (extended resources count in units): the quota rounded up, so the mirror never
    refuses what the scheduler allowed; the exact value rides along as an annotation."""
    if gpu_quota_milli < 0:
        raise ValueError(f"workspace {workspace!r}: gpu_quota_milli must be >= 0, got {gpu_quota_milli}")
    gpus = str(math.ceil(gpu_quota_milli / 1000))
    return {
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": QUOTA_NAME, "labels": {MANAGED: "true", WORKSPACE: label_value(workspace)},
                     "annotations": {P + "gpu-quota-milli": str(gpu_quota_milli)}},
        "spec": {"hard": {f"requests.{NVIDIA_GPU}": gpus, f"requests.{AMD_GPU}": gpus}},
    }


# --- workspace secrets and registry credentials ------------------------------------------------------------
SECRET_NAME = P + "secret"
REGISTRY = P + "registry"
DOCKER_CONFIG_KEY = ".dockerconfigjson"


def secret_object_name(secret: str) -> str:
    """The Kubernetes Secret that holds one workspace secret (key: the secret's name)."""
    return dns_label(f"secret-{secret}")


def pull_secret_name(server: str) -> str:
    return dns_label(f"registry-{server}")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret_manifest(secret: str, value: str, namespace: str, workspace: str) -> dict:
    """A workspace secret in the workspace's namespace: pods read it by reference, never by value."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": secret_object_name(secret), "namespace": namespace,
                         "labels": {MANAGED: "true", WORKSPACE: label_value(workspace),
                                    SECRET_NAME: label_value(secret)}},
            "data": {secret: _b64(value)}}


def pull_secret_manifest(server: str, config: str, namespace: str, workspace: str) -> dict:
    """A registry credential as an imagePullSecret (kubernetes.io/dockerconfigjson)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": pull_secret_name(server), "namespace": namespace,
                         "labels": {MANAGED: "true", WORKSPACE: label_value(workspace), REGISTRY: label_value(server)}},
            "data": {DOCKER_CONFIG_KEY: _b64(config)}}


def replica_secret_objects(replica: ReplicaLaunch, namespace: str, config: KubernetesConfig | None = None) -> list[dict]:
    """The Secrets a replica's pod refers to: each secret it reads, its registry's credential, its SSH sidecar's."""
    names = sorted({name for _var, name in replica.secret_env} | {name for name, _path in replica.secret_mounts})
    objects = [secret_manifest(name, replica.secret_values[name], namespace, replica.workspace)
               for name in names if name in replica.secret_values]
    if replica.pull_secret and replica.pull_config:
        objects.append(pull_secret_manifest(replica.pull_secret, replica.pull_config, namespace, replica.workspace))
    if has_ssh_sidecar(replica, config or KubernetesConfig()):
        objects.append(ssh_secret(replica, namespace))
    return objects


def _secret_refs(container: dict, spec: dict, replica: ReplicaLaunch, taken: set[str]) -> None:
    """Env entries by secretKeyRef, secret volumes, the imagePullSecret: names, never values. A variable the
    platform sets itself (`taken`) is not overridden by a secret."""
    for var, name in replica.secret_env:
        if var not in taken:
            container["env"].append({"name": var, "valueFrom": {"secretKeyRef": {
                "name": secret_object_name(name), "key": name}}})
    for i, (name, path) in enumerate(replica.secret_mounts):
        volume = f"secret-{i}"
        container.setdefault("volumeMounts", []).append({"name": volume, "mountPath": path, "readOnly": True})
        spec.setdefault("volumes", []).append({"name": volume, "secret": {
            "secretName": secret_object_name(name), "items": [{"key": name, "path": name}],
            "defaultMode": 0o400}})
    if replica.pull_secret:
        spec["imagePullSecrets"] = [{"name": pull_secret_name(replica.pull_secret)}]


# --- replica -> pods ------------------------------------------------------------------------------------
def slice_kind(replica: ReplicaLaunch) -> str:
    kind = (replica.slice or {}).get("kind", "whole")
    kind = "whole" if kind == "exclusive" else kind
    if kind not in ("whole", "fraction", "mig", "timeslice"):
        raise ValueError(f"replica {replica.key}: slice kind {kind!r} is not whole, fraction, mig or timeslice")
    return kind


def gpu_resources(replica: ReplicaLaunch, vendor: str) -> dict[str, str]:
    """The extended resource the device plugin hands out for this sharing mode (fractions: none, their
    GPU is held by reservation pods and reached through NVIDIA_VISIBLE_DEVICES)."""
    sharing, n = slice_kind(replica), len(replica.gpus)
    if sharing == "whole":
        return {AMD_GPU if vendor == "amd" else NVIDIA_GPU: str(n)} if n else {}
    if sharing == "mig":
        profile = (replica.slice or {}).get("mig_profile") or ""
        if not re.fullmatch(r"\d+g\.\d+gb", profile):
            raise ValueError(f"replica {replica.key}: MIG slice needs a profile such as 3g.40gb, got {profile!r}")
        return {MIG_PREFIX + profile: "1"}
    if sharing == "timeslice":
        return {SHARED_GPU: str(max(n, 1))}
    return {}


def _device(uuid: str, index: int) -> str:
    """What NVIDIA_VISIBLE_DEVICES gets: the GPU's uuid when the node told us one, else its index."""
    return uuid if uuid.startswith(("GPU-", "MIG-")) else str(index)


def fraction_env(replica: ReplicaLaunch, vendor: str) -> list[tuple[str, str]]:
    s = replica.slice or {}
    uuids = list(replica.gpu_uuids) + [""] * (len(replica.gpus) - len(replica.gpu_uuids))
    devices = ",".join(_device(u, i) for u, i in zip(uuids, replica.gpus, strict=False))
    if vendor == "amd":
        return [("ROCR_VISIBLE_DEVICES", devices)]
    env = [("NVIDIA_VISIBLE_DEVICES", devices), ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
           ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", str(max(1, int(s.get("gpu_milli", 1000)) // 10)))]
    if int(s.get("gpu_mem_mib") or 0) > 0:
        env.append(("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                    ",".join(f"{i}={int(s['gpu_mem_mib'])}M" for i in range(len(replica.gpus)))))
    return env


def distributed_env(replica: ReplicaLaunch, namespace: str, config: KubernetesConfig) -> list[tuple[str, str]]:
    svc = service_name(replica.job_id)
    env = [("MASTER_ADDR", f"{rank_hostname(0)}.{svc}.{namespace}.svc"), ("MASTER_PORT", str(config.master_port)),
           ("WORLD_SIZE", str(replica.world_size)), ("RANK", str(replica.rank))]
    if stored_launch_type(replica.job_type).mpi_hostfile:
        env += [("OMPI_MCA_orte_default_hostfile", f"{MPI_HOSTFILE_DIR}/hostfile"),
                ("MPI_HOSTFILE", f"{MPI_HOSTFILE_DIR}/hostfile")]
    return env


def _tolerations(config: KubernetesConfig) -> list[dict]:
    """Bound pods skip the scheduler, but NoExecute taints still evict: tolerate what marks GPU and spot nodes."""
    keys = sorted({m.partition("=")[0] for m in config.spot_markers} | {NVIDIA_GPU, AMD_GPU})
    return [{"key": k, "operator": "Exists"} for k in keys]


def _resources(cpu_milli: int, mem_mib: int, extended: dict[str, str]) -> dict:
    requests = {**({"cpu": f"{cpu_milli}m"} if cpu_milli else {}), **({"memory": f"{mem_mib}Mi"} if mem_mib else {})}
    limits = {**({"memory": f"{mem_mib}Mi"} if mem_mib else {}), **extended}
    return {"requests": {**requests, **extended}, "limits": limits}


def replica_labels(replica: ReplicaLaunch) -> dict[str, str]:
    own = {MANAGED: "true", KIND: REPLICA_KIND, WORKSPACE: label_value(replica.workspace),
           JOB_ID: label_value(str(replica.job_id)), JOB: label_value(replica.job_name or str(replica.job_id)),
           ROLE: label_value(replica.role), REPLICA: str(replica.index), RANK: str(replica.rank)}
    extra = {k: label_value(str(v)) for k, v in (replica.labels or {}).items() if not k.startswith(P)}
    return {**extra, **own}


def replica_pod(replica: ReplicaLaunch, namespace: str, vendor: str, config: KubernetesConfig) -> dict:
    kind = slice_kind(replica)
    env: list[tuple[str, str]] = list(replica.env)
    if kind == "fraction":
        env += fraction_env(replica, vendor)
    job_launch = stored_launch_type(replica.job_type)
    if job_launch.distributed:
        env += distributed_env(replica, namespace, config)
    notebook, inference = replica.shape == JUPYTER, replica.shape == MODEL_SERVER
    if notebook:
        env += notebook_env(replica)
    if inference:
        env += inference_env(replica, vendor, config)
    merged = dict(env)  # ours win over the job's own variables of the same name
    container: dict = {
        "name": "main", "image": replica.image,
        "env": [{"name": k, "value": v} for k, v in merged.items()],
        "resources": _resources(replica.cpu_milli, replica.mem_mib, gpu_resources(replica, vendor)),
    }
    if replica.command:
        container["command"] = list(replica.command)
    spec: dict = {"nodeName": replica.node, "restartPolicy": "Never", "containers": [container],
                  "tolerations": _tolerations(config),
                  # an eviction deletes the pod: SIGTERM, then the job's grace before the kill
                  "terminationGracePeriodSeconds": replica.termination_grace_s}
    if notebook:
        container["ports"] = [{"name": "http", "containerPort": NOTEBOOK_PORT, "protocol": "TCP"}]
        container["readinessProbe"] = {"tcpSocket": {"port": NOTEBOOK_PORT}, "periodSeconds": 5}
        if replica.home is not None:
            container["volumeMounts"] = [{"name": "home", "mountPath": NOTEBOOK_HOME}]
            spec["volumes"] = [{"name": "home", "persistentVolumeClaim": {"claimName": claim_of(replica.home)}}]
    if inference:
        _serve(container, spec, replica, config)
    if config.scheduler_name:  # nodeName bypasses any scheduler; the name tells whose pods these are
        spec["schedulerName"] = config.scheduler_name
    if job_launch.distributed:
        spec.update(hostname=rank_hostname(replica.rank), subdomain=service_name(replica.job_id))
        if job_launch.mpi_hostfile:
            container["volumeMounts"] = [{"name": "mpi-hostfile", "mountPath": MPI_HOSTFILE_DIR, "readOnly": True}]
            spec["volumes"] = [{"name": "mpi-hostfile", "configMap": {"name": hostfile_name(replica.job_id)}}]
    _secret_refs(container, spec, replica, set(merged) - {k for k, _v in replica.env})
    _workspace_mounts(container, spec, replica)
    _bucket_mounts(container, spec, replica)
    if replica.tensorboard_logdir:
        _tensorboard(container, spec, replica, config)
    if has_ssh_sidecar(replica, config):
        _ssh_sidecar(container, spec, replica, config)
    annotations = {ROLE_NAME: replica.role, SLICE: json.dumps(replica.slice or {}, sort_keys=True),
                   GPUS: ",".join(map(str, replica.gpus)), GPU_UUIDS: ",".join(replica.gpu_uuids),
                   P + "vendor": vendor, P + "expected-duration-s": str(replica.expected_duration_s)}
    if replica.bucket_mounts:  # what goes with the job's last pod (backend._remove_job_objects_if_done)
        annotations[BUCKET_MOUNTS] = ",".join(b.name for b in replica.bucket_mounts)
    labels = replica_labels(replica)
    if notebook:
        labels[NOTEBOOK_NAME] = label_value(replica.job_name)
        annotations[P + "base-url"] = replica.base_url
    if inference:
        labels[INFERENCE_NAME] = label_value(replica.job_name)
        annotations.update({P + "base-url": replica.base_url, P + "server": replica.server,
                            P + "model": model_location(replica, config)})
        if gpu_mem_limit(replica):
            annotations[GPU_MEM_LIMIT] = str(gpu_mem_limit(replica))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name(replica.key), "namespace": namespace, "labels": labels,
                         "annotations": annotations},
            "spec": spec}


def notebook_env(replica: ReplicaLaunch) -> list[tuple[str, str]]:
    """Jupyter Docker Stacks' settings: the token the portal's proxy sends, the port, and the base URL the
    portal forwards unchanged (start-notebook.py appends NOTEBOOK_ARGS to the server's command line)."""
    env = [("JUPYTER_PORT", str(NOTEBOOK_PORT)), ("NOTEBOOK_ARGS", f"--ServerApp.base_url={replica.base_url or '/'}")]
    if replica.token:
        env.append(("JUPYTER_TOKEN", replica.token))
    return env


def home_claim(replica: ReplicaLaunch, namespace: str) -> dict:
    """The notebook's home volume's claim, sized as the volume: outlives its pods (stop and start) until the
    volume is deleted."""
    claim = volume_claim(replica.home, namespace, replica.workspace)
    claim["metadata"]["labels"][NOTEBOOK_NAME] = label_value(replica.job_name)
    claim["spec"].pop("storageClassName", None)  # the cluster's default class, as homes always had
    return claim


def notebook_service(replica: ReplicaLaunch, namespace: str) -> dict:
    """A ClusterIP Service in front of the notebook's pod, reached by the portal's proxy."""
    job_id = label_value(str(replica.job_id))
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": notebook_service_name(replica.job_id), "namespace": namespace,
                         "labels": {MANAGED: "true", JOB_ID: job_id, NOTEBOOK_NAME: label_value(replica.job_name)}},
            "spec": {"type": "ClusterIP", "selector": {MANAGED: "true", KIND: REPLICA_KIND, JOB_ID: job_id},
                     "ports": [{"name": "http", "port": NOTEBOOK_PORT, "targetPort": "http", "protocol": "TCP"}]}}


# --- inference services -------------------------------------------------------------------------------
SERVERS = ("vllm", "triton", "custom")


def _check_server(replica: ReplicaLaunch) -> None:
    if replica.server not in SERVERS:
        raise ValueError(f"replica {replica.key}: server {replica.server!r} is not vllm, triton or custom")
    if not 0 < replica.port < 65536:
        raise ValueError(f"replica {replica.key}: port {replica.port} is not a port")
    if not replica.health_path.startswith("/"):
        raise ValueError(f"replica {replica.key}: health path {replica.health_path!r} does not start with /")
    if replica.server in ("vllm", "triton") and not (replica.model_path or replica.model_registry):
        raise ValueError(f"replica {replica.key}: a {replica.server} server needs a model path or registry")


def model_workspace_mount(replica: ReplicaLaunch):
    """The workspace volume or dataset version (scheduling.storage.Mount) the model path lies on, when the spec
    mounts one there (`volumes: [{dataset: llama@3, mountPath: /data/llama}]`, `model: {path: /data/llama}`);
    None: the path is on the platform's models volume."""
    path = replica.model_path
    for mount in replica.mounts:
        root = mount.mount_path.rstrip("/")
        if path == root or path.startswith(root + "/"):
            return mount
    return None


def model_mount_path(replica: ReplicaLaunch, config: KubernetesConfig) -> str:
    """Where the server reads a model_path: on a workspace volume or dataset the spec mounts, the path as it is;
    else on the models volume, mounted at config.models_mount, where a path outside that directory is read as
    relative to the volume (/llama-3-8b -> /models/llama-3-8b)."""
    path, mount = replica.model_path, config.models_mount.rstrip("/")
    if ".." in path.split("/"):
        raise ValueError(f"replica {replica.key}: model path {path!r} must not contain '..'")
    if model_workspace_mount(replica) is not None:
        return path
    if path == mount or path.startswith(mount + "/"):
        return path
    return f"{mount}/{path.lstrip('/')}".rstrip("/")


def model_location(replica: ReplicaLaunch, config: KubernetesConfig) -> str:
    """What the server is told to load: the model's path in the container, or its registry reference
    (a Hugging Face reference as the id vLLM downloads: hf.co/org/model -> org/model)."""
    if replica.model_path:
        return model_mount_path(replica, config)
    ref = replica.model_registry
    for prefix in HF_PREFIXES:
        if replica.server == "vllm" and ref.startswith(prefix):
            return ref[len(prefix):]
    return ref


def gpu_mem_limit(replica: ReplicaLaunch) -> int:
    """A fraction's burstable GPU memory limit in MiB (0: none, or not a fraction)."""
    if slice_kind(replica) != "fraction" or replica.gpu_mem_limit_mib <= 0:
        return 0
    return max(replica.gpu_mem_limit_mib, int((replica.slice or {}).get("gpu_mem_mib") or 0))


def inference_env(replica: ReplicaLaunch, vendor: str, config: KubernetesConfig) -> list[tuple[str, str]]:
    """What every server is told (a custom image reads these); vLLM takes its API key from VLLM_API_KEY, which
    keeps the key off its command line. A fraction with a burstable limit is capped at the limit (MPS), its
    request staying what the scheduler reserved."""
    _check_server(replica)
    env = [("INFERENCE_SERVER", replica.server), ("INFERENCE_PORT", str(replica.port)),
           ("INFERENCE_BASE_URL", replica.base_url), ("INFERENCE_HEALTH_PATH", replica.health_path),
           ("INFERENCE_MODEL_NAME", replica.model_name or replica.job_name)]
    if replica.model_path or replica.model_registry:
        env.append(("INFERENCE_MODEL", model_location(replica, config)))
    if replica.token:
        env.append(("INFERENCE_API_KEY", replica.token))
        if replica.server == "vllm":
            env.append(("VLLM_API_KEY", replica.token))
    limit = gpu_mem_limit(replica)
    if limit:
        env += [("GPU_MEM_REQUEST_MIB", str(int((replica.slice or {}).get("gpu_mem_mib") or 0))),
                ("GPU_MEM_LIMIT_MIB", str(limit))]
        if vendor != "amd":
            env.append(("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", ",".join(f"{i}={limit}M" for i in range(len(replica.gpus)))))
    return env


def server_args(replica: ReplicaLaunch, config: KubernetesConfig) -> tuple[list[str], list[str]]:
    """(command, args): vLLM keeps its image's entrypoint (the OpenAI server) and gets its flags; Triton
    runs tritonserver on the model repository; a custom server runs its image's (or the spec's) command."""
    command = list(replica.command)
    if replica.server == "vllm":
        return command, ["--model", model_location(replica, config),
                         "--served-model-name", replica.model_name or replica.job_name, "--port", str(replica.port),
                         "--gpu-memory-utilization", f"{gpu_memory_utilization(replica):.2f}"]
    if replica.server == "triton":
        return command or ["tritonserver"], [f"--model-repository={model_location(replica, config)}",
                                             f"--http-port={replica.port}"]
    return command, []


VLLM_MEMORY_UTILIZATION = 0.9   # vLLM's own default, for a replica that has its GPUs (or MIG instances) alone


def gpu_memory_utilization(replica: ReplicaLaunch) -> float:
    """The part of the card's memory vLLM may take (its --gpu-memory-utilization): 0.9 of the card on whole GPUs
    or a MIG instance (whose memory is its own); on a fraction or a time-slice slot, which share the card with
    other replicas, 0.9 of the slice's share of it (gpu_milli / 1000), rounded down, so half a GPU never claims
    90 % of the card."""
    slice_ = replica.slice or {}
    if slice_kind(replica) not in ("fraction", "timeslice"):
        return VLLM_MEMORY_UTILIZATION
    share = int(slice_.get("gpu_milli") or 1000) / 1000
    return max(0.01, math.floor(VLLM_MEMORY_UTILIZATION * share * 100) / 100)


def _probe(replica: ReplicaLaunch, period_s: int, failures: int) -> dict:
    return {"httpGet": {"path": replica.health_path, "port": "http"}, "periodSeconds": period_s,
            "timeoutSeconds": 5, "failureThreshold": failures}


def _serve(container: dict, spec: dict, replica: ReplicaLaunch, config: KubernetesConfig) -> None:
    """The server's port and probes (the Service sends traffic only to ready pods), its command line, and the
    models volume read-only when the model is a path on it."""
    command, args = server_args(replica, config)
    container.pop("command", None)
    if command:
        container["command"] = command
    if args:
        container["args"] = args
    container["ports"] = [{"name": "http", "containerPort": replica.port, "protocol": "TCP"}]
    container["startupProbe"] = _probe(replica, STARTUP_PERIOD_S, STARTUP_FAILURES)
    container["readinessProbe"] = _probe(replica, 5, 3)
    if replica.model_path and model_workspace_mount(replica) is None:   # else the workspace's own mount has it
        container["volumeMounts"] = [{"name": "models", "mountPath": config.models_mount, "readOnly": True}]
        spec["volumes"] = [{"name": "models",
                            "persistentVolumeClaim": {"claimName": config.models_claim, "readOnly": True}}]


def inference_service(replica: ReplicaLaunch, namespace: str) -> dict:
    """One ClusterIP Service for all the service's replicas: Kubernetes sends to the ready ones only."""
    job_id = label_value(str(replica.job_id))
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": inference_service_name(replica.job_id), "namespace": namespace,
                         "labels": {MANAGED: "true", JOB_ID: job_id, INFERENCE_NAME: label_value(replica.job_name)},
                         "annotations": {P + "base-url": replica.base_url}},
            "spec": {"type": "ClusterIP", "selector": {MANAGED: "true", KIND: REPLICA_KIND, JOB_ID: job_id},
                     "ports": [{"name": "http", "port": INFERENCE_SERVICE_PORT, "targetPort": "http",
                                "protocol": "TCP"}]}}


def reservation_pod(node: str, gpu: int, uuid: str, vendor: str, config: KubernetesConfig) -> dict:
    """Holds one shared GPU as a whole so that other schedulers and quotas see it used (as Run:ai does)."""
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": reservation_name(node, gpu), "namespace": config.reservation_namespace,
                     "labels": {MANAGED: "true", KIND: RESERVATION_KIND, NODE: label_value(node), GPU: str(gpu)},
                     "annotations": {P + "node-name": node, P + "gpu-uuid": uuid}},
        "spec": {"nodeName": node, "restartPolicy": "Always", "terminationGracePeriodSeconds": 0,
                 "tolerations": _tolerations(config),
                 "containers": [{"name": "reserve", "image": config.reservation_image,
                                 "resources": _resources(1, 8, {AMD_GPU if vendor == "amd" else NVIDIA_GPU: "1"})}]},
    }
    if config.scheduler_name:
        pod["spec"]["schedulerName"] = config.scheduler_name
    return pod


def headless_service(replica: ReplicaLaunch, namespace: str, config: KubernetesConfig) -> dict:
    """Gives every rank a DNS name rank-<r>.job-<id>.<namespace>.svc, rank 0 being MASTER_ADDR."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": service_name(replica.job_id), "namespace": namespace,
                     "labels": {MANAGED: "true", JOB_ID: label_value(str(replica.job_id))}},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": {MANAGED: "true", KIND: REPLICA_KIND, JOB_ID: label_value(str(replica.job_id))},
                 "ports": [{"name": "master", "port": config.master_port, "targetPort": config.master_port}]},
    }


def mpi_hostfile(replica: ReplicaLaunch, namespace: str) -> dict:
    svc, slots = service_name(replica.job_id), max(1, len(replica.gpus))
    lines = "".join(f"{rank_hostname(r)}.{svc}.{namespace}.svc slots={slots}\n" for r in range(replica.world_size))
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": hostfile_name(replica.job_id), "namespace": namespace,
                         "labels": {MANAGED: "true", JOB_ID: label_value(str(replica.job_id))}},
            "data": {"hostfile": lines}}


# --- pods -> statuses -------------------------------------------------------------------------------------
def is_replica(pod: dict) -> bool:
    """One of our replica pods, with the labels its key is read from (a hand-made look-alike is ignored)."""
    labels = pod.get("metadata", {}).get("labels") or {}
    return labels.get(KIND) == REPLICA_KIND and labels.get(JOB_ID, "").isdigit() and labels.get(REPLICA, "").isdigit()


def is_reservation(pod: dict) -> bool:
    labels = pod.get("metadata", {}).get("labels") or {}
    return labels.get(KIND) == RESERVATION_KIND and labels.get(GPU, "").isdigit()


def replica_key(pod: dict) -> ReplicaKey:
    meta = pod["metadata"]
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    return int(labels[JOB_ID]), annotations.get(ROLE_NAME, labels.get(ROLE, "")), int(labels[REPLICA])


def held_gpus(pod: dict) -> list[tuple[str, int]]:
    """(node, GPU index) a fraction pod shares, whose reservation it needs."""
    annotations = pod["metadata"].get("annotations") or {}
    if json.loads(annotations.get(SLICE) or "{}").get("kind") != "fraction":
        return []
    node = (pod.get("spec") or {}).get("nodeName", "")
    return [(node, int(g)) for g in annotations.get(GPUS, "").split(",") if g]


def gpu_uuid_of(pod: dict, gpu: int) -> str:
    """The uuid a replica pod was given for one of its GPUs ("" when unknown)."""
    annotations = pod["metadata"].get("annotations") or {}
    pairs = zip(annotations.get(GPUS, "").split(","), annotations.get(GPU_UUIDS, "").split(","), strict=False)
    return next((uuid for index, uuid in pairs if index == str(gpu)), "")


def reservation_of(pod: dict) -> tuple[str, int]:
    meta = pod["metadata"]
    return ((meta.get("annotations") or {}).get(P + "node-name") or (pod.get("spec") or {}).get("nodeName", ""),
            int((meta.get("labels") or {})[GPU]))


_PHASES = {"Pending": PENDING, "Running": RUNNING, "Succeeded": SUCCEEDED, "Failed": FAILED}


def replica_status(pod: dict) -> ReplicaStatus:
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    containers = status.get("containerStatuses") or []
    state = (containers[0].get("state") or {}) if containers else {}
    running, terminated, waiting = state.get("running"), state.get("terminated"), state.get("waiting")
    notes = [status.get("reason", ""), status.get("message", "")]
    if waiting and waiting.get("reason") not in (None, "ContainerCreating", "PodInitializing"):
        notes.append(f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": "))
    if terminated and phase == "Failed":
        notes.append(f"exit code {terminated.get('exitCode')} ({terminated.get('reason', '')})")
    if phase == "Unknown":
        notes.append("the node stopped reporting this pod")
    started = (running or terminated or {}).get("startedAt") or status.get("startTime")
    finished = terminated.get("finishedAt") if terminated and phase in ("Succeeded", "Failed") else None
    job_id, role, index = replica_key(pod)
    return ReplicaStatus(
        job_id=job_id, role=role, index=index, phase=_PHASES.get(phase, RUNNING),
        node=(pod.get("spec") or {}).get("nodeName", ""), message="; ".join(n for n in notes if n),
        started_at=epoch(started), finished_at=epoch(finished),
        exit_code=terminated.get("exitCode") if terminated and phase == "Failed" else None,
        oom=bool(terminated and phase == "Failed" and terminated.get("reason") == "OOMKilled"),
    )


# -- workspace volumes and datasets (scheduling.storage) ---------------------------------------------


def volume_claim_name(volume: str) -> str:
    """A workspace volume's claim in the workspace's namespace: by name, so every job that mounts it shares it."""
    return dns_label(f"vol-{volume}")


def dataset_claim_name(owner: str, dataset: str, version: int) -> str:
    return dns_label(f"ds-{owner}-{dataset}-v{version}")


def workspace_volume_claim_name(name: str, home_of: str = "") -> str:
    """A workspace volume's claim; a notebook's home volume keeps the claim its notebook always had."""
    return home_claim_name(home_of) if home_of else volume_claim_name(name)


def claim_of(mount) -> str:
    if mount.of_dataset:
        return dataset_claim_name(mount.workspace, mount.name, mount.version)
    return workspace_volume_claim_name(mount.name, mount.home_of)


def volume_claim(mount, namespace: str, workspace: str, restore_size: str = "") -> dict:
    """A mount's claim: a volume's as sized and classed; a dataset version's a read-only claim restored from
    the VolumeSnapshot of the same name in this namespace, at least as large as the snapshot's restoreSize."""
    name = claim_of(mount)
    metadata = {"name": name, "namespace": namespace, "labels": {MANAGED: "true", WORKSPACE: label_value(workspace)}}
    if mount.of_dataset:
        size = restore_size or f"{max(1, mount.size_gib)}Gi"
        spec: dict = {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": size}},
                      "dataSource": {"apiGroup": SNAPSHOT_GROUP, "kind": "VolumeSnapshot", "name": name}}
    else:
        spec = {"accessModes": [mount.access_mode],
                "resources": {"requests": {"storage": f"{max(1, mount.size_gib)}Gi"}}}
        if mount.storage_class:
            spec["storageClassName"] = mount.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def volume_claims(replica: ReplicaLaunch, namespace: str) -> list[dict]:
    """The claims of the replica's mounts (volume_claim; its notebook home's apart: home_claim)."""
    return [volume_claim(mount, namespace, replica.workspace) for mount in replica.mounts]


# -- dataset versions as VolumeSnapshots -----------------------------------------------------------------
SNAPSHOT_GROUP, SNAPSHOT_VERSION = "snapshot.storage.k8s.io", "v1"
DATASET = P + "dataset"


def _snapshot_labels(workspace: str, dataset: str, number: int) -> dict:
    return {MANAGED: "true", WORKSPACE: label_value(workspace), DATASET: label_value(f"{dataset}-v{number}")}


def volume_snapshot(volume: str, owner: str, dataset: str, number: int, namespace: str,
                    snapshot_class: str | None) -> dict:
    """A dataset version: a VolumeSnapshot of the volume's claim in the owner's namespace, named as the claims
    restored from it (dataset_claim_name)."""
    spec: dict = {"source": {"persistentVolumeClaimName": volume_claim_name(volume)}}
    if snapshot_class:
        spec["volumeSnapshotClassName"] = snapshot_class
    return {"apiVersion": f"{SNAPSHOT_GROUP}/{SNAPSHOT_VERSION}", "kind": "VolumeSnapshot",
            "metadata": {"name": dataset_claim_name(owner, dataset, number), "namespace": namespace,
                         "labels": _snapshot_labels(owner, dataset, number)},
            "spec": spec}


def snapshot_copy_content_name(namespace: str, snapshot: str) -> str:
    """The cluster-scoped VolumeSnapshotContent behind a grantee's copy of a dataset version."""
    return dns_label(f"{namespace}-{snapshot}", limit=253)


def snapshot_copy(original_content: dict, namespace: str, snapshot: str, grantee: str, owner: str, dataset: str,
                  number: int) -> tuple[dict, dict]:
    """(VolumeSnapshotContent, VolumeSnapshot): the owner's snapshot seen from a grantee's namespace. A
    snapshot is namespaced and a claim restores only from one in its own namespace (cross-namespace data sources
    are alpha), so the grantee gets a pre-provisioned content naming the same snapshot handle, bound to a
    VolumeSnapshot of its own. Retain: deleting the copy never deletes the storage's snapshot, which the
    owner's VolumeSnapshot holds."""
    original = original_content.get("spec") or {}
    handle = (original_content.get("status") or {}).get("snapshotHandle")
    if not handle:
        raise ValueError(f"VolumeSnapshotContent {original_content.get('metadata', {}).get('name')} has no "
                         "snapshotHandle yet")
    content_name = snapshot_copy_content_name(namespace, snapshot)
    labels = _snapshot_labels(grantee, dataset, number)
    labels[P + "owner"] = label_value(owner)
    content_spec: dict = {"deletionPolicy": "Retain", "driver": original["driver"],
                          "source": {"snapshotHandle": handle},
                          "volumeSnapshotRef": {"name": snapshot, "namespace": namespace}}
    if original.get("volumeSnapshotClassName"):
        content_spec["volumeSnapshotClassName"] = original["volumeSnapshotClassName"]
    content = {"apiVersion": f"{SNAPSHOT_GROUP}/{SNAPSHOT_VERSION}", "kind": "VolumeSnapshotContent",
               "metadata": {"name": content_name, "labels": labels}, "spec": content_spec}
    copy = {"apiVersion": f"{SNAPSHOT_GROUP}/{SNAPSHOT_VERSION}", "kind": "VolumeSnapshot",
            "metadata": {"name": snapshot, "namespace": namespace, "labels": labels},
            "spec": {"source": {"volumeSnapshotContentName": content_name}}}
    return content, copy


def _workspace_mounts(container: dict, spec: dict, replica: ReplicaLaunch) -> None:
    for i, mount in enumerate(replica.mounts):
        volume = f"mount-{i}"
        container.setdefault("volumeMounts", []).append(
            {"name": volume, "mountPath": mount.mount_path, "readOnly": bool(mount.read_only)})
        spec.setdefault("volumes", []).append(
            {"name": volume, "persistentVolumeClaim": {"claimName": claim_of(mount), "readOnly": bool(mount.read_only)}})


# -- TensorBoard beside the first replica: a container of its pod reading the same logdir --------------
TENSORBOARD_PORT = 6006
TENSORBOARD_LOGS = "tensorboard-logs"


def _tensorboard(container: dict, spec: dict, replica: ReplicaLaunch, config: KubernetesConfig) -> None:
    """The logdir is read where the job writes it: through the workspace volume that holds it (read-only), else
    an emptyDir both containers mount there."""
    logdir = posixpath.normpath(replica.tensorboard_logdir)
    held = [m for m in container.get("volumeMounts", [])
            if logdir == m["mountPath"].rstrip("/") or logdir.startswith(m["mountPath"].rstrip("/") + "/")]
    if held:
        mount = max(held, key=lambda m: len(m["mountPath"]))
        reads = [{"name": mount["name"], "mountPath": mount["mountPath"], "readOnly": True}]
    else:
        container.setdefault("volumeMounts", []).append({"name": TENSORBOARD_LOGS, "mountPath": logdir})
        spec.setdefault("volumes", []).append({"name": TENSORBOARD_LOGS, "emptyDir": {}})
        reads = [{"name": TENSORBOARD_LOGS, "mountPath": logdir, "readOnly": True}]
    spec["containers"].append({
        "name": "tensorboard", "image": config.tensorboard_image,
        "command": ["tensorboard"], "args": ["--logdir", logdir, "--host", "0.0.0.0", "--port", str(TENSORBOARD_PORT)],
        "ports": [{"name": "tensorboard", "containerPort": TENSORBOARD_PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": TENSORBOARD_PORT}, "periodSeconds": 5},
        "resources": _resources(250, 1024, {}), "volumeMounts": reads,
    })


# -- the SSH sidecar (a kind with `ssh`): the gateway reaches it by the pod's IP --------------------------------
SSH_CONTAINER = "ssh"
SSH_KEYS_DIR = "/etc/gpu-platform-ssh"
SSH_BIN_DIR = "/tmp/gpu-platform-ssh/bin"  # where it writes sim-smi, first on the shell's PATH


def has_ssh_sidecar(replica: ReplicaLaunch, config: KubernetesConfig) -> bool:
    return replica.ssh and config.ssh_sidecar


def ssh_secret_name(job_id: object) -> str:
    return dns_label(f"ssh-{job_id}")


def ssh_secret(replica: ReplicaLaunch, namespace: str) -> dict:
    """The job's SSH token (the gateway's password) and its submitter's public keys at launch, for the sidecar;
    rewritten at each launch, deleted with the job's last pod."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": ssh_secret_name(replica.job_id), "namespace": namespace,
                         "labels": {MANAGED: "true", WORKSPACE: label_value(replica.workspace),
                                    JOB_ID: label_value(str(replica.job_id))}},
            "data": {"token": _b64(replica.ssh_token),
                     "authorized_keys": _b64("".join(f"{key}\n" for key in replica.ssh_keys))}}


def ssh_workdir(replica: ReplicaLaunch, container: dict) -> str:
    """Where the shell starts: a notebook's home, else the first workspace volume mounted writable, else /tmp."""
    if replica.home is not None:
        return NOTEBOOK_HOME
    writable = [m["mountPath"] for m in container.get("volumeMounts", [])
                if m["name"].startswith("mount-") and not m.get("readOnly")]
    return writable[0] if writable else "/tmp"


def _ssh_sidecar(container: dict, spec: dict, replica: ReplicaLaunch, config: KubernetesConfig) -> None:
    """The platform's replica SSH server (scheduling/backends/ssh_endpoint.py) in a container of its own: the
    job's environment (its secrets by reference) and volumes, the token and the keys from the job's SSH Secret.
    The chart's network policy lets only the gateway reach its port."""
    env = [dict(e) for e in container["env"]]
    env += [{"name": ssh_endpoint.TOKEN_ENV, "valueFrom": {"secretKeyRef": {
                "name": ssh_secret_name(replica.job_id), "key": "token"}}},
            {"name": ssh_endpoint.JOB_ENV, "value": ",".join(sorted(e["name"] for e in container["env"]))},
            {"name": ssh_endpoint.WORKDIR_ENV, "value": ssh_workdir(replica, container)}]
    mounts = [dict(m) for m in container.get("volumeMounts", [])]
    mounts.append({"name": "ssh-keys", "mountPath": SSH_KEYS_DIR, "readOnly": True})
    spec.setdefault("volumes", []).append({"name": "ssh-keys", "secret": {
        "secretName": ssh_secret_name(replica.job_id), "items": [{"key": "authorized_keys", "path": "authorized_keys"}],
        "defaultMode": 0o400}})
    spec["containers"].append({
        "name": SSH_CONTAINER, "image": config.ssh_image,
        "command": ["python", "-m", "scheduling.backends.ssh_endpoint", "--host", "0.0.0.0",
                    "--port", str(SSH_SIDECAR_PORT), "--bin", SSH_BIN_DIR,
                    "--authorized-keys", f"{SSH_KEYS_DIR}/authorized_keys"],
        "env": env, "ports": [{"name": "ssh", "containerPort": SSH_SIDECAR_PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": SSH_SIDECAR_PORT}, "periodSeconds": 5},
        "resources": _resources(100, 512, {}), "volumeMounts": mounts,
    })


# -- buckets mounted through a CSI driver (scheduling.buckets; the pool's bucket_csi_driver) -------------
MOUNTPOINT_S3, CSI_S3 = "s3.csi.aws.com", "ru.yandex.s3.csi"
BUCKET_DRIVERS = (MOUNTPOINT_S3, CSI_S3)
BUCKET_MOUNTS = P + "bucket-mounts"
# a PersistentVolume must state a capacity; an object store has none, and neither driver reads it
BUCKET_CAPACITY = "1Ti"
# csi-s3's GeeseFS: files writable by the job's user whatever its uid (the bucket has no owners)
GEESEFS_OPTIONS = "--memory-limit 1000 --dir-mode 0777 --file-mode 0666"


def bucket_claim_name(job_id: object, bucket: str) -> str:
    """A job's claim (and csi-s3's Secret) of one bucket, in the workspace's namespace."""
    return dns_label(f"job-{job_id}-bucket-{bucket}")


def bucket_volume_name(namespace: str, job_id: object, bucket: str) -> str:
    """The job's PersistentVolume of the bucket (cluster-scoped: the namespace keeps it apart)."""
    return dns_label(f"{namespace}-job-{job_id}-bucket-{bucket}", limit=253)


def bucket_objects(replica: ReplicaLaunch, namespace: str) -> list[dict]:
    """Per bucket mount: (csi-s3: a Secret with the credentials and address,) a static PersistentVolume of the
    driver and the claim bound to it. Mountpoint for Amazon S3 takes the bucket as volumeAttributes.bucketName
    and the prefix, region and endpoint as mount options, its credentials from the driver's own (IAM);
    csi-s3 takes "bucket/prefix" as the volume handle and its credentials from the Secret the node-publish
    step reads."""
    objects = []
    for bucket in replica.bucket_mounts:
        if bucket.driver not in BUCKET_DRIVERS:
            raise ValueError(f"replica {replica.key}: bucket CSI driver {bucket.driver!r} is not "
                             f"{' or '.join(BUCKET_DRIVERS)}")
        claim = bucket_claim_name(replica.job_id, bucket.name)
        volume = bucket_volume_name(namespace, replica.job_id, bucket.name)
        labels = {MANAGED: "true", WORKSPACE: label_value(replica.workspace), JOB_ID: label_value(str(replica.job_id))}
        prefix = bucket.prefix.strip("/")
        pv_spec: dict = {"capacity": {"storage": BUCKET_CAPACITY}, "accessModes": ["ReadWriteMany"],
                         "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                         "claimRef": {"namespace": namespace, "name": claim}}
        if bucket.driver == MOUNTPOINT_S3:
            options = [f"region {bucket.region}", f"endpoint-url {bucket.endpoint}", "allow-delete", "allow-other"]
            if prefix:
                options.append(f"prefix {prefix}/")
            pv_spec["mountOptions"] = options
            pv_spec["csi"] = {"driver": MOUNTPOINT_S3, "volumeHandle": volume,
                              "volumeAttributes": {"bucketName": bucket.bucket}}
        else:
            ref = {"name": claim, "namespace": namespace}
            objects.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                            "metadata": {"name": claim, "namespace": namespace, "labels": labels},
                            "data": {"accessKeyID": _b64(replica.secret_values.get(bucket.access_key_id_secret, "")),
                                     "secretAccessKey": _b64(replica.secret_values.get(
                                         bucket.secret_access_key_secret, "")),
                                     "endpoint": _b64(bucket.endpoint), "region": _b64(bucket.region)}})
            pv_spec["csi"] = {"driver": CSI_S3, "volumeHandle": f"{bucket.bucket}/{prefix}" if prefix else bucket.bucket,
                              "volumeAttributes": {"capacity": BUCKET_CAPACITY, "mounter": "geesefs",
                                                   "options": GEESEFS_OPTIONS},
                              "controllerPublishSecretRef": ref, "nodePublishSecretRef": ref, "nodeStageSecretRef": ref}
        objects.append({"apiVersion": "v1", "kind": "PersistentVolume",
                        "metadata": {"name": volume, "labels": labels}, "spec": pv_spec})
        objects.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                        "metadata": {"name": claim, "namespace": namespace, "labels": labels},
                        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": volume,
                                 "resources": {"requests": {"storage": BUCKET_CAPACITY}}}})
    return objects


def _bucket_mounts(container: dict, spec: dict, replica: ReplicaLaunch) -> None:
    for i, bucket in enumerate(replica.bucket_mounts):
        volume = f"bucket-{i}"
        container.setdefault("volumeMounts", []).append({"name": volume, "mountPath": bucket.mount_path})
        spec.setdefault("volumes", []).append(
            {"name": volume, "persistentVolumeClaim": {"claimName": bucket_claim_name(replica.job_id, bucket.name)}})
