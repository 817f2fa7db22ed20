"""A training job's launch type (`JobSpec.type`, `Job.job_type`): how its replicas start and find each other.

One object per type (single, pytorch, mpi) answers what the spec readers, the backends and the demo ask of
a type, so that no module outside this package compares a type's name. A new type is one more object here.
"""

from __future__ import annotations

from dataclasses import dataclass

# The roles of a distributed job: one master (rank 0, MASTER_ADDR) and its workers.
MASTER, WORKER = "master", "worker"


@dataclass(frozen=True)
class LaunchType:
    name: str
    seed_label: str  # its TaskType in the seed's task form (matched ignoring case)
    # Its replicas find each other: a master and workers, each reachable by its rank's hostname
    # (MASTER_ADDR, WORLD_SIZE, RANK; a headless Service on Kubernetes).
    distributed: bool = False
    role_names: tuple[str, ...] = ()  # the names its roles must have (empty: any name)
    one_role: bool = False  # it has exactly one role (of any name)
    # Its replicas read MPI's hostfile (every rank's host and slots), which mpirun launches over.
    mpi_hostfile: bool = False

    def __repr__(self) -> str:
        return f"<launch type {self.name}>"


SINGLE = LaunchType("single", seed_label="other", one_role=True)
PYTORCH = LaunchType("pytorch", seed_label="PyTorch", distributed=True, role_names=(MASTER, WORKER))
MPI = LaunchType("mpi", seed_label="MPI", distributed=True, role_names=(MASTER, WORKER), mpi_hostfile=True)

TYPES = (SINGLE, PYTORCH, MPI)  # in the order a spec's error lists them
_BY_NAME = {t.name: t for t in TYPES}
DEFAULT = SINGLE.name  # a spec without `type`
DISTRIBUTED = PYTORCH.name  # what a job spread over nodes is given where nothing says (the console's advice)
# The seed form's TaskType -> the type's name, in the order the seed form lists them.
SEED_TASK_TYPES = {t.seed_label: t.name for t in (MPI, PYTORCH, SINGLE)}


def names() -> tuple[str, ...]:
    return tuple(_BY_NAME)


def launch_type(name: str) -> LaunchType:
    """The launch type of that name; ValueError for a name no type has (the spec readers refuse those first)."""
    found = find(name)
    if found is None:
        raise ValueError(f"unknown launch type {name!r}; one of {' | '.join(_BY_NAME)}")
    return found


def stored_launch_type(name: str) -> LaunchType:
    """The launch type a stored job names, for a backend launching it: a name no type has (a row not written by
    the spec readers) launches as single, each replica on its own."""
    return find(name) or SINGLE


def find(name: object) -> LaunchType | None:
    """The launch type of that name, or None for anything else (a value a user typed, a field not read)."""
    return _BY_NAME.get(name) if isinstance(name, str) else None
