"""Graceful eviction and checkpoints: a job's `terminationGracePeriod` and `checkpoint`, as the platform uses
them after submit.

- At submit: the checkpoint's volume is the workspace's, and the grace is within the queue's maximum.
- At launch: each replica gets its grace (the backend sends SIGTERM, waits it, then kills) and where its
  checkpoint is (a resumable job's volume is mounted at `checkpoint.path`).
- At eviction: the GPU-hours the eviction lost, the work since the replica's last checkpoint (every
  `checkpoint.every` of simulated time since it started), or since its start without one. A save the job
  makes on SIGTERM is not counted: it is the job's own, and may not finish within the grace.
- While evicted replicas' pods stop (Kubernetes keeps a pod until its process ends or the grace runs out),
  their resources stay held (`Replica.held_until`), so nothing is placed on them meanwhile.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.utils.translation import gettext as _

from scheduling.bulk import update_rows
from scheduling.models import JobState, Replica, Volume
from scheduling.spec.model import (
    DEFAULT_CHECKPOINT_EVERY_S,
    DEFAULT_GRACE_S,
    CheckpointSpec,
    JobSpec,
    SpecError,
    SpecIssue,
)
from scheduling.spec.units import format_duration, mig_compute_milli, parse_duration

GPU_HOURS = Decimal("0.0001")


class GraceTooLong(SpecError):
    """A job asks for a longer grace than its queue allows."""


# --------------------------------------------------------------------------- submit


def check_submit(workspace, spec: JobSpec, queue=None, *, lock: bool = False) -> None:
    """SpecError for a checkpoint volume the workspace lacks (at its line and column), or a grace longer than the
    queue's maximum (both figures)."""
    issues = []
    checkpoint = spec.checkpoint
    if checkpoint is not None and checkpoint.volume is not None:
        volumes = Volume.objects.filter(workspace=workspace, name=checkpoint.volume)
        if not (volumes.select_for_update() if lock else volumes).exists():
            field, line, column = checkpoint.where
            problem = _("workspace '%(workspace)s' has no volume '%(name)s'") % {
                "workspace": workspace.slug,
                "name": checkpoint.volume,
            }
            issues.append(
                SpecIssue(
                    line, column, field, problem if line is not None or not field else f"{field}: {problem}"
                )
            )
    if queue is not None and spec.termination_grace_s > queue.max_termination_grace_s:
        issues.append(
            SpecIssue(
                None,
                None,
                "terminationGracePeriod",
                _(
                    "terminationGracePeriod: %(asked)s is longer than queue %(queue)s allows (at most %(most)s)"
                )
                % {
                    "asked": format_duration(spec.termination_grace_s),
                    "queue": queue.name,
                    "most": format_duration(queue.max_termination_grace_s)
                    if queue.max_termination_grace_s
                    else "0s",
                },
            )
        )
    if issues:
        raise SpecError(issues)


# --------------------------------------------------------------------------- a stored job's fields


def grace_of(spec: dict | None) -> int:
    """A stored (normalised) spec's grace in seconds."""
    text = (spec or {}).get("terminationGracePeriod")
    if text is None:
        return DEFAULT_GRACE_S
    try:
        return parse_duration(text)
    except ValueError:
        return 0 if text in (0, "0", "0s") else DEFAULT_GRACE_S


def checkpoint_of(spec: dict | None) -> CheckpointSpec | None:
    """A stored spec's checkpoint (the older `checkpointPath` as a path without a volume or interval)."""
    spec = spec or {}
    if isinstance(spec.get("checkpointPath"), str):
        return CheckpointSpec(path=spec["checkpointPath"], every_s=None)
    found = spec.get("checkpoint")
    if not isinstance(found, dict) or not isinstance(found.get("path"), str):
        return None
    try:
        every = parse_duration(found.get("every") or "30m")
    except ValueError:
        every = DEFAULT_CHECKPOINT_EVERY_S
    return CheckpointSpec(path=found["path"], volume=found.get("volume") or None, every_s=every)


def launch_fields(job) -> dict[str, Any]:
    """What a replica's launch carries of these: its grace, and where and how often it saves its work."""
    checkpoint = checkpoint_of(job.spec)
    fields: dict[str, Any] = {"termination_grace_s": grace_of(job.spec)}
    if checkpoint is not None:
        fields.update(
            checkpoint_path=checkpoint.path,
            checkpoint_every_s=checkpoint.every_s or 0,
            resumable=checkpoint.resumable,
        )
    return fields


# --------------------------------------------------------------------------- eviction


def gpu_share(slice_: dict | None, gpu_indices: list | tuple) -> Decimal:
    """GPUs a replica's slice amounts to (what its lost time is counted in)."""
    s = slice_ or {}
    count = max(1, len(gpu_indices or ()))
    kind = s.get("kind") or "whole"
    if kind == "whole":
        return Decimal(len(gpu_indices or ()))
    if kind == "mig" and s.get("mig_profile"):
        try:
            return Decimal(mig_compute_milli(str(s["mig_profile"]))) / 1000 * count
        except (ValueError, KeyError):
            return Decimal(count)
    return Decimal(int(s.get("gpu_milli") or 1000)) / 1000 * count


def lost_seconds(started: datetime | None, now: datetime, clock_scale: float, every_s: int | None) -> float:
    """Simulated seconds of work an eviction at `now` loses: since the last checkpoint (every `every_s` since
    the replica started), or since the start without checkpoints."""
    if started is None or now <= started:
        return 0.0
    worked = (now - started).total_seconds() * (clock_scale or 1.0)
    return worked % every_s if every_s else worked


def lost_gpu_hours(replica_row: dict, now: datetime, every_s: int | None) -> Decimal:
    """`replica_row`: started, clock_scale, slice and gpu_indices of the evicted replica."""
    seconds = lost_seconds(replica_row["started"], now, replica_row["clock_scale"], every_s)
    hours = Decimal(str(seconds)) / 3600 * gpu_share(replica_row["slice"], replica_row["gpu_indices"])
    return hours.quantize(GPU_HOURS, rounding=ROUND_HALF_UP)


EVICTION_RATE_WINDOW = timedelta(days=7)


def queue_eviction_rate(queue: str, now: datetime) -> tuple[int, Decimal] | None:
    """The evictions of `queue`'s replicas in the 7 days before `now` and the GPU-hours its replicas ran in them
    (work hours, as losses are counted); None when they ran none (no history to go by). One query."""
    since = now - EVICTION_RATE_WINDOW
    rows = (
        Replica.objects.filter(job__queue__name=queue, started__isnull=False, started__lt=now)
        .exclude(ended__lte=since)
        .values_list("started", "ended", "clock_scale", "slice", "gpu_indices", "state")
    )
    evictions, gpu_hours = 0, Decimal(0)
    for started, ended, clock_scale, slice_, gpu_indices, state in rows:
        end = min(ended or now, now)
        seconds = (end - max(started, since)).total_seconds() * (clock_scale or 1.0)
        if seconds > 0:
            gpu_hours += Decimal(str(seconds)) / 3600 * gpu_share(slice_, gpu_indices)
        if state == JobState.PREEMPTED and ended is not None and since < ended <= now:
            evictions += 1
    return (evictions, gpu_hours) if gpu_hours > 0 else None


def every_of(job) -> int | None:
    """The interval at which the platform counts a job's checkpoints (None: it does not know of any)."""
    return checkpoint_every(job.spec)


def checkpoint_every(spec: dict | None) -> int | None:
    """`every_of` for a stored spec."""
    checkpoint = checkpoint_of(spec)
    return checkpoint.every_s if checkpoint is not None and checkpoint.resumable else None


def held_until(now: datetime, grace_s: int, clock_scale: float) -> datetime:
    """The latest its pod may still run after SIGTERM: the grace, in the backend's time."""
    return now + timedelta(seconds=grace_s / (clock_scale or 1.0))


def record_losses(
    evicted: dict[int, tuple], jobs: dict, now: datetime, *, pods_linger: bool = False
) -> dict[int, Decimal]:
    """The evicted replicas (pk -> key) each with the GPU-hours its eviction lost and, where the backend's pods
    stop in their own time (`pods_linger`, Kubernetes), until when its resources stay held. Returns the lost
    GPU-hours by job. `jobs`: the evicted replicas' jobs by id."""
    rows = Replica.objects.filter(pk__in=evicted).values(
        "pk", "job_id", "started", "clock_scale", "slice", "gpu_indices"
    )
    changed, by_job = [], {}
    for row in rows:
        job = jobs.get(row["job_id"])
        lost = lost_gpu_hours(row, now, every_of(job) if job is not None else None)
        replica = Replica(pk=row["pk"], lost_gpu_hours=lost)
        replica.held_until = (
            held_until(now, grace_of(job.spec if job is not None else None), row["clock_scale"])
            if pods_linger
            else None
        )
        changed.append(replica)
        by_job[row["job_id"]] = by_job.get(row["job_id"], Decimal(0)) + lost
    update_rows(changed, ["lost_gpu_hours", "held_until"])
    return by_job


def release_gone(backend, now: datetime) -> int:
    """Evicted replicas whose pods are gone (or whose grace ran out) hold nothing any more. Returns how many."""
    rows = list(
        Replica.objects.filter(held_until__isnull=False).values_list(
            "pk", "job_id", "role", "index", "held_until"
        )
    )
    if not rows:
        return 0
    stopping = backend.stopping() if hasattr(backend, "stopping") else set()
    gone = [
        pk for pk, job_id, role, index, until in rows if until <= now or (job_id, role, index) not in stopping
    ]
    Replica.objects.filter(pk__in=gone).update(held_until=None)
    return len(gone)


def binds_after_stops(binds, freed: set[tuple[str, int]]) -> tuple:
    """The cycle's binds less every job with a replica on a GPU an eviction of this cycle frees: its pod stops
    in its own time (the grace), and the job is placed once it is gone (`Replica.held_until`)."""
    waiting = {b.job_id for b in binds if any((b.node, gpu) in freed for gpu in b.gpus)}
    return tuple(b for b in binds if b.job_id not in waiting)


# --------------------------------------------------------------------------- what the pages and the API show


def checkpoint_fields(job) -> dict[str, Any] | None:
    """The API's `checkpoint`: {path, volume, every_s, resumable}, None for a job without one."""
    checkpoint = checkpoint_of(job.spec)
    if checkpoint is None:
        return None
    return {
        "path": checkpoint.path,
        "volume": checkpoint.volume,
        "every_s": checkpoint.every_s,
        "resumable": checkpoint.resumable,
    }


def lost_of(replicas) -> Decimal:
    """The GPU-hours lost to a job's evictions, over its replicas (`job.replicas.all()`, prefetched or not)."""
    return sum((r.lost_gpu_hours for r in replicas), Decimal(0)).quantize(GPU_HOURS)


def job_summary(job) -> dict[str, Any]:
    """The job page's "Graceful stop and checkpoints" card: the grace, the checkpoint, and each eviction's loss."""
    replicas = list(job.replicas.all())
    return {
        "grace": format_duration(grace_of(job.spec)) if grace_of(job.spec) else "0s",
        "checkpoint": checkpoint_fields(job),
        "every": format_duration(every)
        if (every := (checkpoint_of(job.spec) or CheckpointSpec("")).every_s)
        else "",
        "lost_gpu_hours": lost_of(replicas),
        "evictions": [r for r in replicas if r.state == "Preempted"],
    }
