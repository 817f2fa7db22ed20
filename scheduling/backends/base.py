"""The contract between the scheduling cycle and a cluster backend.

The cycle reads the inventory and what the backend runs, decides with the core, then asks the
backend to launch and evict replicas. Every call is idempotent so that a cycle interrupted
between deciding and applying can simply be run again: the next cycle reconciles the database
with `statuses()`.
No Django import here: backends get plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

ReplicaKey = tuple[int, str, int]  # (job id, role, replica index)

# Phases a backend reports for a replica it knows.
PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
PHASES = (PENDING, RUNNING, SUCCEEDED, FAILED)

# The processes a replica may run, each of which every backend knows how to launch; a workload kind
# (scheduling.kinds) names its own. batch: runs to completion; jupyter: a notebook server with its token,
# base URL and home volume; model-server: an inference server with its port, health path and model.
BATCH, JUPYTER, MODEL_SERVER = "batch", "jupyter", "model-server"
SHAPES = (BATCH, JUPYTER, MODEL_SERVER)


@dataclass(frozen=True)
class GpuInventory:
    index: int
    uuid: str
    memory_mib: int
    mig_profiles: tuple[str, ...] = ()  # MIG instances configured on this GPU


@dataclass(frozen=True)
class NodeInventory:
    name: str
    pool: str  # the node pool label
    vendor: str  # nvidia | amd
    gpu_model: str  # e.g. H100-80GB (nvidia.com/gpu.product)
    gpus: tuple[GpuInventory, ...]
    cpu_milli: int
    memory_mib: int
    ready: bool = True
    cordoned: bool = False
    spot: bool = False
    timeslice_replicas: int = 0  # >0: nvidia.com/gpu.shared replicas per GPU
    labels: tuple[tuple[str, str], ...] = ()  # the node's labels as the cluster has them, sorted


@dataclass(frozen=True)
class BucketMount:
    """A bucket a replica gets mounted through a CSI driver (its pool's `bucket_csi_driver`), as the job's stored
    request froze it at submit (scheduling.buckets); the two credentials by secret name, their values in
    ReplicaLaunch.secret_values."""

    driver: str  # s3.csi.aws.com (Mountpoint for Amazon S3) | ru.yandex.s3.csi (csi-s3)
    name: str  # the workspace's name for the bucket
    bucket: str
    endpoint: str
    region: str
    prefix: str
    access_key_id_secret: str
    secret_access_key_secret: str
    mount_path: str


@dataclass(frozen=True)
class ReplicaLaunch:
    """Everything a backend needs to start one replica where the scheduler put it."""

    job_id: int
    role: str
    index: int
    workspace: str  # slug: the namespace on Kubernetes
    job_name: str
    job_type: str  # single | pytorch | mpi
    image: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    node: str
    gpus: tuple[int, ...]  # GPU indices on the node
    gpu_uuids: tuple[str, ...]
    slice: dict  # {"kind": whole|fraction|mig|timeslice, "gpu_milli", "gpu_mem_mib", "mig_profile", ...}
    cpu_milli: int
    mem_mib: int
    expected_duration_s: int
    world_size: int = 1  # replicas of the whole job (for MASTER_ADDR / WORLD_SIZE / RANK)
    rank: int = 0
    labels: dict = field(default_factory=dict)
    # What the spec's kind adds (its launch_fields, scheduling.kinds): its name, the process it runs
    # (`shape`, one of SHAPES); a notebook serves HTTP under base_url, asks for `token` on every request
    # and keeps its home volume across restarts: `home`, the workspace volume (scheduling.storage.Mount) the
    # backend mounts at the image's home path.
    kind: str = ""  # the kind's name, as labels and logs show it
    shape: str = BATCH
    token: str = ""  # the secret the replica's server asks for; the portal's proxy sends it, never a browser
    base_url: str = ""  # the path prefix its server answers under, e.g. /nb/vision-lab/scratch/
    home_mib: int = 0  # 0: no persistent home volume
    home: object = None  # scheduling.storage.Mount of the home volume (None: no home)
    # An inference replica (scheduling.kinds.inference): its server (vllm | triton | custom)
    # listens on `port` under `base_url` (/serve/<workspace>/<name>/), answers 200 on health_path once
    # ready, and serves the model at model_path (a path on the models volume) or model_registry (a
    # registry reference) under the name model_name; `token` is the API key the portal's proxy sends.
    server: str = ""
    port: int = 0
    health_path: str = ""
    model_path: str = ""
    model_registry: str = ""
    model_name: str = ""
    gpu_mem_limit_mib: int = 0  # a fraction's burstable memory limit (0: none)
    # The workspace's secrets it reads: (variable, secret name) and (secret name, directory holding a file named
    # after the secret), with the values of those secrets by name, which a backend puts where the replica reads
    # them (a Kubernetes Secret, the process's environment) and never in a log, a label or a pod spec.
    secret_env: tuple[tuple[str, str], ...] = ()
    secret_mounts: tuple[tuple[str, str], ...] = ()
    secret_values: dict = field(default_factory=dict, repr=False, compare=False)
    # The registry credential that pulls the image: its server ("" none) and .dockerconfigjson.
    pull_secret: str = ""
    pull_config: str = field(default="", repr=False, compare=False)
    # The workspace volumes and dataset versions the replica mounts, resolved (scheduling.storage.Mount)
    mounts: tuple = ()
    # The buckets it gets mounted (Kubernetes, on a pool with a bucket CSI driver): BucketMount
    bucket_mounts: tuple = ()
    attempt: int = 0  # this replica's placement, from 0 (the simulated cluster's SIM_EXIT_CODE list picks by it)
    # Graceful eviction (scheduling.lifecycle.checkpoints): SIGTERM, then `termination_grace_s` (the job's
    # simulated seconds) before the kill; where it saves its work (`checkpoint_path`, in the replica: a
    # resumable job's volume is mounted there) and how often (seconds of simulated time, 0: unknown).
    termination_grace_s: int = 30
    checkpoint_path: str = ""
    checkpoint_every_s: int = 0
    resumable: bool = False
    # TensorBoard beside this replica (the first role's first, when the spec asks): the path in the replica
    # it reads ("" none)
    tensorboard_logdir: str = ""
    # SSH (its kind's `ssh`): the replica runs an SSH server that the gateway signs in to with `ssh_token`, the
    # job's (scheduling.ssh); on Kubernetes a sidecar that also takes `ssh_keys`, the submitter's public keys at launch
    ssh: bool = False
    ssh_keys: tuple[str, ...] = ()
    ssh_token: str = field(default="", repr=False, compare=False)

    @property
    def key(self) -> ReplicaKey:
        return (self.job_id, self.role, self.index)


@dataclass(frozen=True)
class Endpoint:
    """Where the platform reaches a replica's HTTP server: `url` ends with its base path and a slash
    (http://10.0.0.5:8888/nb/vision-lab/scratch/); `token` goes in `Authorization: token <token>`."""

    url: str
    token: str = ""
    replica: str = ""              # an inference replica's role-index-attempt, for metering its answers
    revision: int | None = None    # the service revision that replica serves


@dataclass(frozen=True)
class SshEndpoint:
    """Where the SSH gateway reaches a replica's SSH server (the simulated process's own, or the Kubernetes
    pod's sidecar by the pod's IP); the gateway signs in with the replica's SSH token as the password."""

    host: str
    port: int


SSH_SIDECAR_PORT = 2222  # the pod's SSH sidecar listens there


@dataclass(frozen=True)
class ReplicaStatus:
    job_id: int
    role: str
    index: int
    phase: str  # one of PHASES
    node: str
    message: str = ""
    started_at: float | None = None  # epoch seconds
    finished_at: float | None = None
    exit_code: int | None = None  # a Failed replica's, when the backend knows it
    oom: bool = False  # killed for going over its memory limit (Kubernetes: OOMKilled)

    @property
    def key(self) -> ReplicaKey:
        return (self.job_id, self.role, self.index)


class ClusterBackend(Protocol):
    name: str

    def inventory(self) -> list[NodeInventory]:
        """Every node the cluster has now, with its GPUs, readiness and cordon."""

    def sync_workspace(self, workspace: str, gpu_quota_milli: int | None) -> None:
        """Make sure the workspace's place in the cluster exists (Kubernetes: a namespace with a
        ResourceQuota mirroring the quota; nothing for the simulated cluster)."""

    def launch(self, replica: ReplicaLaunch) -> None:
        """Start the replica on its node. Launching one that already exists does nothing."""

    def evict(self, key: ReplicaKey, reason: str) -> None:
        """Stop the replica. Evicting one that does not exist does nothing."""

    def statuses(self) -> list[ReplicaStatus]:
        """Every replica the backend knows of, with its phase."""

    def forget(self, key: ReplicaKey) -> None:
        """Drop a finished replica the database has recorded (frees what it held)."""

    def logs(self, key: ReplicaKey, tail_lines: int = 200) -> str:
        """The replica's log, last lines. Readable until evict or forget removes the replica, finished ones
        included: the cycle reads it just before either and keeps it (scheduling.logs)."""

    def endpoint(self, key: ReplicaKey, *, workspace: str, base_url: str) -> Endpoint | None:
        """Where a serving replica (a notebook) of `workspace` answers HTTP under `base_url`; None when it does
        not (yet). Called per proxied request: no cluster API call. The caller adds the token."""

    def tensorboard_endpoint(self, job_id: int, workspace: str = "") -> Endpoint | None:
        """Where the job's TensorBoard answers HTTP; None when it has none or it is not listening (yet). A
        backend without TensorBoard returns None. No cluster API call."""

    def ssh_endpoint(self, key: ReplicaKey, *, workspace: str) -> SshEndpoint | None:
        """Where the replica's SSH server answers (notebooks and training replicas); None when it has none (yet).
        No cluster API call."""

    def delete_home(self, workspace: str, name: str) -> None:
        """Delete a notebook's home volume's own object (the simulated folder, the Kubernetes claim) once its
        owner deleted the volume (scheduling.storage). Idempotent."""
