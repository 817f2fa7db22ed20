"""What the SSH gateway needs of the scheduler: a job's replica by the name users give it, where its SSH server
answers, and the replica's SSH token (the password the gateway signs in with; derived from the platform's secret,
never stored, never shown)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.utils.crypto import salted_hmac

from scheduling import kinds
from scheduling.backends.base import SshEndpoint
from scheduling.models import Job, JobState, Replica


def ssh_token(job_id: int) -> str:
    return salted_hmac("scheduling.ssh.token", str(job_id)).hexdigest()


def has_ssh(job: Job) -> bool:
    """Whether the job's replicas run an SSH server: its kind says (notebooks and training do)."""
    return kinds.kind_of(job).runs_ssh_server(job)


# The users' live public keys, by user id: a layer above (the portal's SSH keys) registers its reader at start-up.
KeyReader = Callable[[set[int]], dict[int, list[str]]]
_key_reader: KeyReader | None = None


def use_key_reader(reader: KeyReader | None) -> None:
    global _key_reader
    _key_reader = reader


def launch_keys(jobs: Iterable[Job]) -> dict[int, tuple[str, ...]]:
    """Per job with SSH, its submitter's live public keys (one query for the batch): what a Kubernetes pod's SSH
    sidecar is given at launch."""
    owners = {job.pk: job.submitted_by_id for job in jobs if job.submitted_by_id and has_ssh(job)}
    if not owners or _key_reader is None:
        return {}
    keys = _key_reader(set(owners.values()))
    return {job_id: tuple(keys.get(user_id, ())) for job_id, user_id in owners.items()}


@dataclass(frozen=True)
class SshTarget:
    job: Job
    replica: Replica
    endpoint: SshEndpoint | None  # None: the replica has no SSH server (yet)
    token: str

    @property
    def replica_name(self) -> str:
        return f"{self.replica.role}-{self.replica.index}"


def running_job(workspace_id: int, name: str) -> Job | None:
    """The workspace's running job of that name (the newest, should names repeat)."""
    return (Job.objects.filter(workspace_id=workspace_id, name=name, state=JobState.RUNNING)
            .order_by("-id").first())


def replica_of(job: Job, ref: str | None) -> Replica | None:
    """The running replica `ref` names: "role-index" (worker-1), an index (1: the second of all, by role and
    index), or None: the first."""
    running = list(job.replicas.filter(state=JobState.RUNNING).order_by("role", "index"))
    if not ref:
        return running[0] if running else None
    for replica in running:
        if f"{replica.role}-{replica.index}" == ref:
            return replica
    if ref.isdigit() and int(ref) < len(running):
        return running[int(ref)]
    return None


def ssh_target(job: Job, ref: str | None, backend) -> SshTarget | None:
    replica = replica_of(job, ref)
    if replica is None:
        return None
    endpoint = backend.ssh_endpoint((job.pk, replica.role, replica.index), workspace=job.workspace.slug)
    return SshTarget(job=job, replica=replica, endpoint=endpoint, token=ssh_token(job.pk))
