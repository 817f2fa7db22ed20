"""The scheduler's input (Snapshot) and output (Decisions): plain frozen dataclasses.

Units: GPU compute in milli-GPU (1000 = one GPU, steps of 10), GPU memory and host memory in
MiB, CPU in milli-CPU. Everything here is validated on construction so a bad snapshot fails
with a message that names the offending object and field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .mig import MIG_PROFILES
from .reasons import Reason
from .units import MIG_SLICES_PER_GPU, MILLI_PER_GPU, mig_slices_milli

SHARING_MODES = ("exclusive", "fraction", "mig", "timeslice")
VENDORS = ("nvidia", "amd")
EVICT_REASONS = ("reclaim", "preempt", "consolidate", "shrink", "node-lost")
# The rule that justified an eviction (Evict.rule): a reclaimer within its deserved quota, a victim
# queue over its fair share, a higher job priority in the same queue, a consolidation move, a
# ReduceCost job yielding borrowed capacity, or the node going away.
EVICT_RULES = ("reclaim-within-deserved", "fair-share", "priority", "consolidation", "reduce-cost", "node-lost")

def mig_milli(profile: str) -> int:
    """GPU share a MIG instance holds, for quota and fair-share accounting."""
    return mig_slices_milli(MIG_PROFILES[profile][0])


@dataclass(frozen=True)
class Pool:
    """A node pool: nodes of one GPU type configured the same way."""

    name: str
    vendor: str = "nvidia"
    gpu_model: str = ""
    gpu_memory_mib: int = 81920
    placement: str = "default"            # binpack | spread | frag | default
    # Request modes the pool's GPUs serve: {exclusive, fraction} (either or both), {mig} or {timeslice}.
    sharing: frozenset[str] = frozenset({"exclusive", "fraction"})
    timeslice_replicas: int = 4           # slots per GPU when sharing is {timeslice}
    mig_layout: tuple[str, ...] = ()      # instances on every GPU when sharing is {mig}
    spot: bool = False
    # topology levels as node label keys, outermost first (e.g. block, rack): see `Topology`
    topology: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        where = f"pool {self.name!r}"
        if not self.name:
            raise ValueError("pool: name is empty")
        if self.vendor not in VENDORS:
            raise ValueError(f"{where}: vendor {self.vendor!r} is not one of {VENDORS}")
        if self.gpu_memory_mib <= 0:
            raise ValueError(f"{where}: gpu_memory_mib must be positive")
        unknown = set(self.sharing) - set(SHARING_MODES)
        if unknown:
            raise ValueError(f"{where}: unknown sharing modes {sorted(unknown)}")
        if not self.sharing:
            raise ValueError(f"{where}: sharing is empty")
        whole = set(self.sharing) <= {"exclusive", "fraction"}
        if not (whole or set(self.sharing) in ({"mig"}, {"timeslice"})):
            raise ValueError(f"{where}: sharing {sorted(self.sharing)} mixes MIG or time-slicing with other modes")
        if "mig" in self.sharing:
            if not self.mig_layout:
                raise ValueError(f"{where}: MIG pool needs a mig_layout")
            for profile in self.mig_layout:
                if profile not in MIG_PROFILES:
                    raise ValueError(f"{where}: unknown MIG profile {profile!r}")
            slices = sum(MIG_PROFILES[p][0] for p in self.mig_layout)
            if slices > MIG_SLICES_PER_GPU:
                raise ValueError(f"{where}: mig_layout uses {slices} slices, a GPU has 7")
        if "timeslice" in self.sharing:
            if self.timeslice_replicas < 1:
                raise ValueError(f"{where}: timeslice_replicas must be >= 1")
        if len(set(self.topology)) != len(self.topology) or not all(self.topology):
            raise ValueError(f"{where}: topology levels must be distinct, non-empty label keys")

    @property
    def gpu_mode(self) -> str:
        """How the pool's GPUs are carved: whole (exclusive/fraction), mig or timeslice."""
        if "mig" in self.sharing:
            return "mig"
        if "timeslice" in self.sharing:
            return "timeslice"
        return "whole"


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str = ""
    memory_mib: int = 0                   # 0 = the pool's gpu_memory_mib


@dataclass(frozen=True)
class Node:
    name: str
    pool: str
    gpus: tuple[Gpu, ...] = ()
    cpu_milli: int = 64000
    memory_mib: int = 512 * 1024
    ready: bool = True
    cordoned: bool = False
    labels: tuple[tuple[str, str], ...] = ()   # (key, value), sorted: what the topology levels read

    @classmethod
    def with_gpus(cls, name: str, pool: str, count: int, **kwargs) -> Node:
        """A node with `count` GPUs indexed 0..count-1 (uuid derived from the node name)."""
        gpus = tuple(Gpu(i, f"{name}-gpu{i}") for i in range(count))
        return cls(name=name, pool=pool, gpus=gpus, **kwargs)


@dataclass(frozen=True)
class Queue:
    """One node of the queue tree. GPU amounts in milli-GPU; limit None = unlimited."""

    name: str
    parent: str | None = None
    deserved_milli: int = 0
    over_quota_weight: float = 1.0
    limit_milli: int | None = None
    priority: int = 0

    def __post_init__(self) -> None:
        where = f"queue {self.name!r}"
        if not self.name:
            raise ValueError("queue: name is empty")
        if self.deserved_milli < 0:
            raise ValueError(f"{where}: deserved_milli must be >= 0")
        if self.over_quota_weight < 0:
            raise ValueError(f"{where}: over_quota_weight must be >= 0")
        if self.limit_milli is not None and self.limit_milli < 0:
            raise ValueError(f"{where}: limit_milli must be >= 0")


@dataclass(frozen=True)
class Request:
    """What one replica asks for.

    exclusive: `num_gpus` whole GPUs on one node (0 = a CPU-only replica). fraction: `gpu_milli` (10..990) and
    `gpu_mem_mib` of one GPU. mig: one instance of `mig_profile`. timeslice: `num_gpus` slots on
    distinct GPUs of one node (no memory isolation, so gpu_mem_mib is ignored).
    vendor "any" means the job also runs on AMD (AMDSupport).
    """

    mode: str = "exclusive"
    num_gpus: int = 1
    gpu_milli: int = MILLI_PER_GPU
    gpu_mem_mib: int = 0
    mig_profile: str = ""
    cpu_milli: int = 0
    mem_mib: int = 0
    vendor: str = "nvidia"
    gpu_model: str = ""
    pool: str = ""

    def validate(self, job_id: str, role: str) -> None:
        def bad(message: str) -> ValueError:
            return ValueError(f"job {job_id!r} role {role!r}: {message}")

        if self.mode not in SHARING_MODES:
            raise bad(f"mode {self.mode!r} is not one of {SHARING_MODES}")
        if self.vendor not in (*VENDORS, "any"):
            raise bad(f"vendor {self.vendor!r} is not nvidia, amd or any")
        if self.cpu_milli < 0 or self.mem_mib < 0:
            raise bad("cpu_milli and mem_mib must be >= 0")
        if self.gpu_mem_mib < 0:
            raise bad("gpu_mem_mib must be >= 0")
        if self.mode == "exclusive":
            if self.num_gpus < 0:
                raise bad("exclusive needs num_gpus >= 0 (0 = CPU only)")
        elif self.mode == "fraction":
            if not (10 <= self.gpu_milli <= 990 and self.gpu_milli % 10 == 0):
                raise bad(f"fraction gpu_milli must be 10..990 in steps of 10, got {self.gpu_milli}")
        elif self.mode == "mig":
            if self.mig_profile not in MIG_PROFILES:
                raise bad(f"unknown MIG profile {self.mig_profile!r}")
        else:
            if self.num_gpus < 1:
                raise bad("timeslice needs num_gpus >= 1")

    def shape(self) -> tuple:
        """Everything placement depends on; identical shapes succeed or fail together."""
        return (self.mode, self.num_gpus, self.gpu_milli, self.gpu_mem_mib, self.mig_profile,
                self.cpu_milli, self.mem_mib, self.vendor, self.gpu_model, self.pool)


@dataclass(frozen=True)
class Role:
    name: str
    request: Request
    min_replicas: int = 1
    max_replicas: int = 1


NODE_LEVEL = "node"                       # the level every pool has below its declared ones: one node


def level_name(key: str) -> str:
    """What a job calls a pool's level: the label key's last part ("topology.kubernetes.io/rack": rack)."""
    return key.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Topology:
    """Where a job's gang goes: within one domain of `level` (a pool level's name, see `level_name`, its
    label key, or `NODE_LEVEL`), which it must (`required`: it waits otherwise) or should (it spills into
    the fewest domains otherwise)."""

    level: str
    required: bool = False

    def __post_init__(self) -> None:
        if not self.level:
            raise ValueError("topology: level is empty")


@dataclass(frozen=True)
class Job:
    id: str
    queue: str
    roles: tuple[Role, ...]
    priority: int = 0
    preemptible: bool = True
    reduce_cost: bool = False
    created: float = 0.0
    topology: Topology | None = None
    # A job with a deadline: the latest time (epoch seconds) it can start and still finish by it. Before
    # then it takes only capacity strict work does not need; from then on it is strict (`deadline`:
    # its phase decides, `preemptible` is not read). None: no deadline.
    latest_start: float | None = None

    def __post_init__(self) -> None:
        # messages are built only when something is wrong: a snapshot holds many thousands of jobs
        if not self.id:
            raise ValueError("job: id is empty")
        if not self.roles:
            raise ValueError(f"job {self.id!r}: has no roles")
        if len(self.roles) > 1 and len({r.name for r in self.roles}) != len(self.roles):
            raise ValueError(f"job {self.id!r}: duplicate role names {[r.name for r in self.roles]}")
        minimum = 0
        for role in self.roles:
            if not (0 <= role.min_replicas <= role.max_replicas and role.max_replicas >= 1):
                raise ValueError(f"job {self.id!r} role {role.name!r}: need 0 <= min_replicas <= max_replicas "
                                 "and max_replicas >= 1")
            role.request.validate(self.id, role.name)
            minimum += role.min_replicas
        if minimum < 1:
            raise ValueError(f"job {self.id!r}: min replicas sum to 0")


@dataclass(frozen=True)
class Slice:
    """What a replica holds on each of its GPUs.

    kind "whole": the full GPUs; "fraction": gpu_milli + gpu_mem_mib of one GPU; "mig": instance
    number `mig_instance` (index into the pool's mig_layout) of profile `mig_profile`;
    "timeslice": slot `timeslice_slot` of each listed GPU.
    """

    kind: str
    gpu_milli: int = MILLI_PER_GPU
    gpu_mem_mib: int = 0
    mig_profile: str = ""
    mig_instance: int = -1
    timeslice_slot: int = -1


@dataclass(frozen=True)
class RunningReplica:
    job_id: str
    role: str
    index: int
    node: str
    gpus: tuple[int, ...]
    slice: Slice


@dataclass(frozen=True)
class HeldReplica:
    """An evicted replica still terminating: its node, GPUs and slice, and the CPU and memory it asked for."""

    job_id: str
    role: str
    index: int
    node: str
    gpus: tuple[int, ...]
    slice: Slice
    cpu_milli: int = 0
    mem_mib: int = 0


@dataclass(frozen=True)
class Snapshot:
    pools: tuple[Pool, ...]
    nodes: tuple[Node, ...]
    queues: tuple[Queue, ...]
    jobs: tuple[Job, ...]
    running: tuple[RunningReplica, ...] = ()
    now: float = 0.0                      # epoch seconds
    off_peak: bool = False                # is `now` inside an off-peak window
    next_off_peak: str = ""               # when the next window opens, for reasons ("00:00 UTC")
    # ReduceCost jobs whose off-peak window is not the one above (their workspace pays in another
    # currency, whose price table has its own window): (job id, off-peak now, next window opens)
    job_off_peak: tuple[tuple[str, bool, str], ...] = ()
    # Time-based fair share: each queue's own past usage (decayed GPU-time over what the cluster
    # could give in the window, 0..1), and how much it moves over-quota weights (0 = off).
    queue_usage: tuple[tuple[str, float], ...] = ()
    usage_k: float = 0.0
    # Jobs that wait for others to end (a dependency, `after`): never placed, no part of any queue's demand,
    # and given no pending reason (their reason names what they wait for)
    blocked: frozenset[str] = frozenset()
    # Evicted replicas whose pods are still stopping (SIGTERM, then their job's grace): what they hold is
    # taken until they are gone, so nothing is placed on it meanwhile. They belong to no job's count.
    held: tuple[HeldReplica, ...] = ()
    # Backfill reservations (Slurm's backfill): a whole-GPU gang pending for longer than this many seconds
    # since its submission gets nodes held for it, which later jobs may not take (`actions.reserve`).
    # None: no reservations (the core's default; the product passes its BACKFILL_PATIENCE).
    backfill_patience_s: float | None = None


ReplicaKey = tuple[str, str, int]         # (job id, role, replica index)


@dataclass(frozen=True)
class Bind:
    job_id: str
    role: str
    replica: int
    node: str
    gpus: tuple[int, ...]
    slice: Slice


@dataclass(frozen=True)
class EvictCause:
    """Why a replica was evicted: the job and queue it made room for, the queue of the tree whose
    share was weighed (`level`, "" when no share was) and the rule applied (one of EVICT_RULES)."""

    by_job: str = ""
    by_queue: str = ""
    level: str = ""
    rule: str = ""


@dataclass(frozen=True)
class Evict:
    """One replica to evict. `reason` is the action's word (EVICT_REASONS); the other fields are
    its EvictCause, spelled out so events and pages can name who took the GPUs and by which rule."""

    job_id: str
    role: str
    replica: int
    node: str
    reason: str
    by_job: str = ""
    by_queue: str = ""
    level: str = ""
    rule: str = ""


@dataclass(frozen=True)
class Decisions:
    """Evictions happen before binds. Both lists are sorted by replica key."""

    evicts: tuple[Evict, ...] = ()
    binds: tuple[Bind, ...] = ()
    pending: dict[str, str] = field(default_factory=dict)   # job id -> readable reason
    pending_codes: dict[str, Reason] = field(default_factory=dict)   # job id -> its code and params
    # deadline jobs still pending at or after their latest start: they can no longer be sure to finish
    # by their deadline (sorted ids)
    late: tuple[str, ...] = ()

    @property
    def changes(self) -> int:
        return len(self.evicts) + len(self.binds)
