"""A job's TensorBoard at run time: whether its spec asks for one, which replica it runs beside (the first
role's replica 0), and where it answers (the backend says: a process on the simulated cluster, a container
of the first replica's pod on Kubernetes). The portal reaches it on the notebook origin, `<id>-6006`."""

from __future__ import annotations

from scheduling.backends.base import ClusterBackend, Endpoint
from scheduling.models import Job, JobState, Replica

PORT = 6006  # TensorBoard's own port: the notebook origin's host label is `<job id>-6006`
RUNS = (JobState.SCHEDULED, JobState.RUNNING)


def logdir_of(job: Job) -> str | None:
    """The stored spec's `tensorboard.logdir`, None without one."""
    found = (job.spec or {}).get("tensorboard")
    return found.get("logdir") if isinstance(found, dict) and isinstance(found.get("logdir"), str) else None


def is_beside(job: Job, role: str, index: int) -> bool:
    """Whether this replica is the one TensorBoard runs beside: the first role's first."""
    roles = job.roles or []
    return bool(roles) and roles[0].get("name") == role and index == 0


def launch_fields(job: Job, replica: Replica) -> dict[str, str]:
    logdir = logdir_of(job)
    return {"tensorboard_logdir": logdir} if logdir and is_beside(job, replica.role, replica.index) else {}


def endpoint_of(job: Job, backend: ClusterBackend) -> Endpoint | None:
    """Where the job's TensorBoard answers now (None: the job asks for none, does not run, or it is not
    listening yet)."""
    if logdir_of(job) is None or job.state not in RUNS:
        return None
    return backend.tensorboard_endpoint(job.pk, job.workspace.slug)
