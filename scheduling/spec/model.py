"""The validated job spec and its errors (data; an error's message is in the language active when it was
found, its field and position are not translated).

Units are the ones the scheduler and billing use: milli-GPU (1000 = one GPU), MiB of memory,
milli-CPU, seconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from django.utils.translation import gettext as _

from scheduling.core.units import MILLI_PER_CPU, MILLI_PER_GPU
from scheduling.errors import DomainError
from scheduling.kinds import launch_types
from scheduling.kinds.registry import DEFAULT as DEFAULT_KIND
from scheduling.spec.workloads import InferenceSpec, NotebookSpec

JOB_TYPES = launch_types.names()  # single | pytorch | mpi: each one's object is in scheduling.kinds
SHARING_MODES = ("exclusive", "fraction", "mig", "timeslice")
VENDORS = ("nvidia", "amd", "any")
DEFAULT_CPU_MILLI = MILLI_PER_CPU
DEFAULT_MEM_MIB = 4096
DEFAULT_DURATION_S = 3600


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a spec. line/column are 1-based; None when the input had no positions."""

    line: int | None
    column: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        if self.line is None:
            return self.message
        return _("line %(line)s, col %(column)s: %(message)s") % {
            "line": self.line, "column": self.column, "message": self.message}

    def to_dict(self) -> dict[str, int | str | None]:
        return asdict(self)


class SpecError(DomainError):
    """Every problem found in a spec, in document order (with lines and columns, unlike other DomainErrors)."""

    title = "The spec is not valid"

    def __init__(self, errors: list[SpecIssue]):
        self.errors = sorted(errors, key=_issue_order)
        ValueError.__init__(self, "\n".join(str(e) for e in self.errors))

    def to_dicts(self) -> list[dict[str, int | str | None]]:
        return [e.to_dict() for e in self.errors]


class SpecNeverRuns(SpecError):
    """A well-formed spec the cluster could never run (no pool offers its model, a gang bigger than every
    pool or domain that could hold it, more GPUs than its queue's limit): 422, with the figures."""

    status = 422
    title = "The job could never run on this cluster"


def _issue_order(issue: SpecIssue) -> tuple[int, int]:
    big = 1 << 30
    return (issue.line if issue.line is not None else big, issue.column or 0)


@dataclass(frozen=True)
class VolumeMount:
    """A volume of the job's workspace (`volume`) or a dataset version (`dataset`, `[workspace/]name@vN`)
    mounted at `mount_path`. `where` is the entry's field and position in the document, kept to name them
    when the workspace is checked after reading (not part of the spec's value)."""

    mount_path: str
    volume: str | None = None
    dataset: str | None = None
    read_only: bool = False
    where: tuple[str | None, int | None, int | None] = field(default=(None, None, None), compare=False, repr=False)


@dataclass(frozen=True)
class BucketUse:
    """A bucket the workspace registered (scheduling/buckets.py), named by a role's `buckets`; its replicas get
    its address and credentials as environment, and on a pool with a bucket CSI driver the bucket mounted at
    `mount_path`. `where` as VolumeMount's."""

    name: str
    where: tuple[str | None, int | None, int | None] = field(default=(None, None, None), compare=False, repr=False)
    mount_path: str = ""   # where a pool with a bucket CSI driver mounts it ("": /buckets/<name>)


@dataclass(frozen=True)
class RoleSpec:
    """One role (set of identical replicas) of a job; resources are per replica.

    GPU request per replica = num_gpus devices x gpu_milli of each:
      exclusive: num_gpus whole GPUs (gpu_milli 1000; num_gpus 0 = CPU-only role)
      fraction:  num_gpus 1, gpu_milli 10..990 of one GPU, gpu_mem_mib the memory reserved on it
      mig:       num_gpus 1, one MIG instance mig_profile; gpu_milli its compute share (g/7),
                 gpu_mem_mib its memory
      timeslice: num_gpus 1, one time-sliced slot of one GPU; gpu_milli 1000 is nominal,
                 the pool's replicas-per-GPU decide the real share; no memory isolation
    """

    name: str
    image: str
    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # The workspace's secrets it reads, by name (never their values): (variable, secret), and (secret, directory)
    # where a file named after the secret holds its value.
    secret_env: tuple[tuple[str, str], ...] = ()
    secret_mounts: tuple[tuple[str, str], ...] = ()
    min_replicas: int = 1
    max_replicas: int = 1
    sharing: str = "exclusive"
    num_gpus: int = 1
    gpu_milli: int = MILLI_PER_GPU
    gpu_mem_mib: int | None = None
    mig_profile: str | None = None
    cpu_milli: int = DEFAULT_CPU_MILLI
    mem_mib: int = DEFAULT_MEM_MIB
    vendor: str = "nvidia"
    gpu_model: str | None = None
    node_pool: str | None = None
    volumes: tuple[VolumeMount, ...] = ()
    buckets: tuple[BucketUse, ...] = ()

    @property
    def milli_per_replica(self) -> int:
        return self.num_gpus * self.gpu_milli

    @property
    def secret_names(self) -> set[str]:
        return {name for _var, name in self.secret_env} | {name for name, _path in self.secret_mounts}


TOPOLOGY_KINDS = ("required", "preferred")


@dataclass(frozen=True)
class TopologySpec:
    """`topology: {required: rack}` or `{preferred: rack}`: keep the gang within one domain of a pool's
    topology level (named by its label key or the key's last part; `node` is one node). Required: the job
    waits until one domain holds it; preferred: it spills into the fewest domains otherwise."""

    level: str
    required: bool

    def to_dict(self) -> dict[str, str]:
        return {"required" if self.required else "preferred": self.level}


# -- schedules: `schedule:` makes a schedule of the job (read by spec/schedule.py) --------------------

FORBID, REPLACE, ALLOW = "Forbid", "Replace", "Allow"
DEFAULT_KEEP_LAST = 10


@dataclass(frozen=True)
class ScheduleSpec:
    """When runs are made (`cron` read in `time_zone`; None: the platform's zone, fixed when the schedule is
    made), what a run does while the previous one is unfinished (`concurrency`), how many finished runs the
    schedule lists (`keep_last`), and whether it starts suspended."""

    cron: str
    time_zone: str | None = None
    concurrency: str = FORBID
    keep_last: int = DEFAULT_KEEP_LAST
    suspend: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cron": self.cron}
        if self.time_zone is not None:
            out["timeZone"] = self.time_zone
        out.update(concurrency=self.concurrency, keepLast=self.keep_last, suspend=self.suspend)
        return out


AFTER_CONDITIONS = ("succeeded", "failed", "finished")


@dataclass(frozen=True)
class AfterSpec:
    """`after: [{job: prepare-data, condition: succeeded}]`: wait for a job of the workspace, named by its name (the
    latest of that name when submitted) or its id, to end so. `where` as VolumeMount's."""

    job: str
    condition: str = "succeeded"
    where: tuple[str | None, int | None, int | None] = field(default=(None, None, None), compare=False, repr=False)

    def to_dict(self) -> dict[str, str]:
        return {"job": self.job, "condition": self.condition}


@dataclass(frozen=True)
class ArraySpec:
    """`array: {indices: "0-99", parallelism: 10}`: the role once per index (ARRAY_INDEX in its environment),
    at most `parallelism` at a time. `indices` is normalised ("0-2,5")."""

    indices: str
    parallelism: int
    count: int

    def to_dict(self) -> dict[str, str | int]:
        return {"indices": self.indices, "parallelism": self.parallelism}


# What a retry may be asked for (`retry.on`): a non-zero exit (OOM included), an OOM alone, a lost node, the
# max runtime. Evictions are never retried against the limit: they requeue.
RETRY_ON = ("failed", "oom", "nodeLost", "maxRuntime")
DEFAULT_RETRY_BACKOFF_S = 30
DEFAULT_RETRY_MAX_BACKOFF_S = 600


@dataclass(frozen=True)
class RetrySpec:
    """`retry: {limit, backoff, maxBackoff, on, onExitCodes}`: run again up to `limit` more times after a
    failure of a listed class, waiting `backoff` doubled per attempt (at most `maxBackoff`); `on_exit_codes`
    narrows `failed` and `oom` to those exit codes."""

    limit: int
    backoff_s: int = DEFAULT_RETRY_BACKOFF_S
    max_backoff_s: int = DEFAULT_RETRY_MAX_BACKOFF_S
    on: tuple[str, ...] = ("failed",)
    on_exit_codes: tuple[int, ...] = ()


DEFAULT_GRACE_S = 30
DEFAULT_CHECKPOINT_EVERY_S = 30 * 60


@dataclass(frozen=True)
class TensorBoardSpec:
    """`tensorboard: {logdir}`: TensorBoard runs beside the job's first replica, reading `logdir` (a path in it)."""

    logdir: str


@dataclass(frozen=True)
class CheckpointSpec:
    """`checkpoint: {path, volume, every}`: where the job saves its work and how often. With a `volume` (of the
    job's workspace, mounted at `path`) the job is resumable: a new attempt starts from the last checkpoint.
    Without one (the older `checkpointPath`), `path` is a location the job writes to itself."""

    path: str
    volume: str | None = None
    every_s: int | None = DEFAULT_CHECKPOINT_EVERY_S  # None: unknown (the bare `checkpointPath`)
    # where `volume` is written: (field, line, column), for the workspace check's error
    where: tuple[str | None, int | None, int | None] = field(default=(None, None, None), compare=False)

    @property
    def resumable(self) -> bool:
        return self.volume is not None


@dataclass(frozen=True)
class DeadlineSpec:
    """`completeBy` (an ISO 8601 instant with its offset, kept as written) or `completeWithin` (seconds from
    submission): when the job should be done."""

    at: str | None = None
    within_s: int | None = None


@dataclass(frozen=True)
class JobSpec:
    name: str
    type: str
    roles: tuple[RoleSpec, ...]
    queue: str | None = None  # None: the workspace's default queue
    priority: int = 0
    preemptible: bool = False
    reduce_cost: bool = False
    expected_duration_s: int = DEFAULT_DURATION_S
    checkpoint: CheckpointSpec | None = None  # `checkpoint` (or the older `checkpointPath`): resumable work
    tensorboard: TensorBoardSpec | None = None  # `tensorboard: {logdir}`: TensorBoard beside the first replica
    termination_grace_s: int = DEFAULT_GRACE_S  # `terminationGracePeriod`: SIGTERM, this long, then killed
    kind: str = DEFAULT_KIND  # a name in the kinds' registry (scheduling.kinds): training, notebook, inference
    notebook: NotebookSpec | None = None
    inference: InferenceSpec | None = None
    topology: TopologySpec | None = None
    schedule: ScheduleSpec | None = None  # a schedule's runs are made from the spec without it

    after: tuple[AfterSpec, ...] = ()
    array: ArraySpec | None = None
    # the job's life (spec/lifecycle.py): its runtime limit, its retries, its clean-up
    max_runtime_s: int | None = None
    retry: RetrySpec | None = None
    ttl_after_finished_s: int | None = None
    deadline: DeadlineSpec | None = None  # `completeBy` or `completeWithin` (spec/deadline.py)

    @property
    def checkpoint_path(self) -> str | None:
        return self.checkpoint.path if self.checkpoint is not None else None

    @property
    def min_replicas(self) -> int:
        return sum(r.min_replicas for r in self.roles)

    @property
    def max_replicas(self) -> int:
        return sum(r.max_replicas for r in self.roles)

    @property
    def min_gpu_milli(self) -> int:
        """GPU share the gang (every role at its minimum) needs to start."""
        return sum(r.min_replicas * r.milli_per_replica for r in self.roles)

    @property
    def max_gpu_milli(self) -> int:
        return sum(r.max_replicas * r.milli_per_replica for r in self.roles)

    def role(self, name: str) -> RoleSpec:
        for r in self.roles:
            if r.name == name:
                return r
        raise KeyError(name)
