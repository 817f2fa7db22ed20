"""The scheduling cycle against a backend: reconcile, snapshot, decide, apply.

Database first, backend after commit: a worker killed in between leaves the database ahead of
the backend, and the next cycle's reconcile closes the gap (launches replicas recorded as
Scheduled that the backend lacks, evicts pods the database no longer holds). So no replica is
bound twice or lost.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from scheduling import core
from scheduling.backends.base import FAILED, RUNNING, SUCCEEDED, ClusterBackend, ReplicaLaunch, ReplicaStatus
from scheduling.inventory import sync_inventory, sync_workspaces
from scheduling.models import ACTIVE_STATES, Gpu, Job, JobState, Node, Replica
from scheduling.services import record_event
from scheduling.snapshot import build_snapshot

log = logging.getLogger(__name__)


@dataclass
class CycleReport:
    binds: int = 0
    evicts: int = 0
    started: int = 0
    finished: int = 0
    requeued: int = 0
    relaunched: int = 0
    orphans_removed: int = 0
    pending: int = 0
    inventory_changes: int = 0
    seconds: float = 0.0


def _at(epoch: float | None, default: datetime) -> datetime:
    return datetime.fromtimestamp(epoch, tz=default.tzinfo) if epoch else default


def gpu_uuids(node_ids) -> dict[int, dict[int, str]]:
    by_node: dict[int, dict[int, str]] = defaultdict(dict)
    for node_id, index, uuid in Gpu.objects.filter(node_id__in=node_ids).values_list("node_id", "index", "uuid"):
        by_node[node_id][index] = uuid
    return by_node


def launch_for(replica: Replica, uuids_by_node: dict[int, dict[int, str]] | None = None) -> ReplicaLaunch:
    job = replica.job
    role = next(r for r in job.roles if r["name"] == replica.role)
    uuids = (uuids_by_node or gpu_uuids([replica.node_id]))[replica.node_id]
    world = sum(r["max_replicas"] for r in job.roles)
    rank = sum(r["max_replicas"] for r in job.roles[: job.roles.index(role)]) + replica.index
    return ReplicaLaunch(
        job_id=job.pk, role=replica.role, index=replica.index, workspace=job.workspace.slug, job_name=job.name,
        job_type=job.job_type, image=role["image"], command=tuple(role["command"]),
        env=tuple(sorted(role["env"].items())), node=replica.node.name, gpus=tuple(replica.gpu_indices),
        gpu_uuids=tuple(uuids.get(i, "") for i in replica.gpu_indices), slice=replica.slice,
        cpu_milli=role["cpu_milli"], mem_mib=role["mem_mib"], expected_duration_s=job.expected_duration_s,
        world_size=world, rank=rank, labels={"replica-uid": str(replica.uid)},
    )


# --------------------------------------------------------------------------- reconcile


def _finish_job(job: Job, state: str, now: datetime, reason: str, backend: ClusterBackend, report: CycleReport):
    for other in job.replicas.filter(state__in=ACTIVE_STATES):
        other.state, other.ended, other.end_reason = JobState.CANCELLED, now, f"job {state.lower()}"
        other.save(update_fields=["state", "ended", "end_reason"])
        transaction.on_commit(lambda k=(job.pk, other.role, other.index): backend.evict(k, "job finished"))
    job.state, job.finished, job.pending_reason = state, now, ""
    job.save(update_fields=["state", "finished", "pending_reason"])
    from billing.metering import finalize_job_cost  # billing builds on scheduling, not the reverse

    cost = finalize_job_cost(job.pk)  # in this transaction: the event below already carries it
    record_event(job, state.lower(), reason=f"{reason}; final cost {cost.final_cost:.2f} {cost.currency}")
    report.finished += 1


def _update_job_states(job_ids: set[int], now: datetime, backend: ClusterBackend, report: CycleReport,
                       failures: dict[int, str]) -> None:
    for job in Job.objects.filter(pk__in=job_ids).select_related("workspace"):
        if job.is_final:
            continue
        if job.pk in failures:
            _finish_job(job, JobState.FAILED, now, failures[job.pk], backend, report)
            continue
        states = list(job.replicas.values_list("state", flat=True))
        active = [s for s in states if s in ACTIVE_STATES]
        if not active and JobState.SUCCEEDED in states and job.state in (JobState.RUNNING, JobState.SCHEDULED):
            _finish_job(job, JobState.SUCCEEDED, now, "every replica finished", backend, report)
        elif active and all(s == JobState.RUNNING for s in active) and job.state == JobState.SCHEDULED:
            job.state, job.started = JobState.RUNNING, job.started or now
            job.save(update_fields=["state", "started"])
            record_event(job, "running", reason=f"{len(active)} replicas running")
            report.started += 1
        elif not active and job.state in (JobState.RUNNING, JobState.SCHEDULED):
            _requeue(job, "its replicas were lost with their node", "node-lost")
            report.requeued += 1


def _requeue(job: Job, reason: str, kind: str) -> None:
    job.state = JobState.PREEMPTED
    record_event(job, "preempted", reason=reason, data={"reason": kind})
    job.state, job.pending_reason = JobState.PENDING, "requeued: waiting for the next cycle"
    job.save(update_fields=["state", "pending_reason"])
    record_event(job, "requeued", reason="back in its queue")


@transaction.atomic
def reconcile(backend: ClusterBackend, now: datetime, report: CycleReport) -> None:
    statuses: dict[tuple, ReplicaStatus] = {s.key: s for s in backend.statuses()}
    touched: set[int] = set()
    failures: dict[int, str] = {}
    for replica in Replica.objects.filter(state__in=ACTIVE_STATES).select_related("job__workspace", "node"):
        key = (replica.job_id, replica.role, replica.index)
        status = statuses.pop(key, None)
        if status is None:
            if replica.state == JobState.SCHEDULED:
                launch = launch_for(replica)  # decided, never applied: apply now
                transaction.on_commit(lambda launch=launch: backend.launch(launch))
                report.relaunched += 1
            else:
                replica.state, replica.ended, replica.end_reason = JobState.PREEMPTED, now, "node-lost"
                replica.save(update_fields=["state", "ended", "end_reason"])
                touched.add(replica.job_id)
            continue
        if status.phase == RUNNING and replica.state == JobState.SCHEDULED:
            replica.state, replica.started = JobState.RUNNING, _at(status.started_at, now)
            replica.save(update_fields=["state", "started"])
            touched.add(replica.job_id)
        elif status.phase in (SUCCEEDED, FAILED):
            replica.state = JobState.SUCCEEDED if status.phase == SUCCEEDED else JobState.FAILED
            replica.started = replica.started or _at(status.started_at, now)
            replica.ended, replica.end_reason = _at(status.finished_at, now), status.message[:64]
            replica.save(update_fields=["state", "started", "ended", "end_reason"])
            transaction.on_commit(lambda key=key: backend.forget(key))
            touched.add(replica.job_id)
            if status.phase == FAILED:
                failures[replica.job_id] = f"replica {replica.role}-{replica.index} failed: {status.message}"
    for key in statuses:  # the backend runs something the database does not hold
        transaction.on_commit(lambda key=key: backend.evict(key, "not held by the scheduler"))
        report.orphans_removed += 1
    _update_job_states(touched, now, backend, report, failures)


# --------------------------------------------------------------------------- apply


@transaction.atomic
def apply(decisions: core.Decisions, backend: ClusterBackend, now: datetime, report: CycleReport) -> None:
    evicted_jobs: dict[int, list[str]] = defaultdict(list)
    for e in decisions.evicts:
        job_id = int(e.job_id)
        updated = Replica.objects.filter(job_id=job_id, role=e.role, index=e.replica, state__in=ACTIVE_STATES
                                         ).update(state=JobState.PREEMPTED, ended=now, end_reason=e.reason)
        if updated:
            evicted_jobs[job_id].append(e.reason)
            transaction.on_commit(lambda k=(job_id, e.role, e.replica), r=e.reason: backend.evict(k, r))
            report.evicts += 1
    for job in Job.objects.filter(pk__in=evicted_jobs).select_related("workspace"):
        reasons = ", ".join(sorted(set(evicted_jobs[job.pk])))
        if job.replicas.filter(state__in=ACTIVE_STATES).exists():
            record_event(job, "shrunk", reason=f"{len(evicted_jobs[job.pk])} replicas evicted ({reasons})")
        else:
            _requeue(job, f"evicted: {reasons}", reasons)
            report.requeued += 1

    nodes = {n.name: n for n in Node.objects.filter(name__in={b.node for b in decisions.binds})}
    bound: dict[int, list[core.Bind]] = defaultdict(list)
    for b in decisions.binds:
        bound[int(b.job_id)].append(b)
    jobs = {job.pk: job for job in Job.objects.filter(pk__in=bound).select_related("workspace")}
    attempts = {
        (row["job_id"], row["role"], row["index"]): row["last"]
        for row in Replica.objects.filter(job_id__in=bound).values("job_id", "role", "index").annotate(last=Max("attempt"))
    }
    new = [
        Replica(job=jobs[job_id], role=b.role, index=b.replica, state=JobState.SCHEDULED, node=nodes[b.node],
                gpu_indices=list(b.gpus), slice=asdict(b.slice), clock_scale=getattr(backend, "clock_scale", 1.0),
                attempt=attempts.get((job_id, b.role, b.replica), -1) + 1)
        for job_id, binds in bound.items() for b in binds
    ]
    Replica.objects.bulk_create(new)
    report.binds += len(new)
    for job_id, job in jobs.items():
        where = ", ".join(sorted({b.node for b in bound[job_id]}))
        if job.state == JobState.PENDING:
            job.state, job.pending_reason = JobState.SCHEDULED, ""
            job.save(update_fields=["state", "pending_reason"])
            record_event(job, "scheduled", reason=f"{len(bound[job_id])} replicas on {where}")
        else:
            record_event(job, "grown", reason=f"{len(bound[job_id])} more replicas on {where}")
    uuids = gpu_uuids({n.pk for n in nodes.values()})
    launches = [launch_for(r, uuids) for r in new]
    transaction.on_commit(lambda: [backend.launch(launch) for launch in launches])

    _set_pending_reasons(decisions.pending)
    report.pending = len(decisions.pending)


def _set_pending_reasons(reasons: dict[str, str]) -> None:
    current = dict(Job.objects.filter(pk__in=[int(j) for j in reasons], state=JobState.PENDING)
                   .values_list("pk", "pending_reason"))
    for job in Job.objects.filter(pk__in=[pk for pk, old in current.items() if reasons[str(pk)] != old]
                                  ).select_related("workspace"):
        job.pending_reason = reasons[str(job.pk)]
        job.save(update_fields=["pending_reason"])
        record_event(job, "pending", reason=job.pending_reason)


def run_scheduling_cycle(backend: ClusterBackend, now: datetime | None = None) -> CycleReport:
    started = time.perf_counter()
    now = now or timezone.now()
    report = CycleReport()
    report.inventory_changes = sync_inventory(backend)
    sync_workspaces(backend)
    reconcile(backend, now, report)
    decisions = core.run_cycle(build_snapshot(now))
    apply(decisions, backend, now, report)
    report.seconds = time.perf_counter() - started
    if report.binds or report.evicts or report.finished:
        log.info("cycle: %s", report)
    return report
